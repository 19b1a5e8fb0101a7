// One AdmissionReview through src/webhook/review.ts, called directly: judge() parses the body,
// checks its envelope, runs the handler given and says what came of it; review() wraps an answer
// with the request's uid; requestContext() reads the fields logged from any body.
import t from 'tap';
import { allowed, denied, patched, type AdmissionHandler, type AdmissionRequest, type AdmissionSettings } from '../../src/webhook/admission.ts';
import { judge, requestContext, review } from '../../src/webhook/review.ts';
import { podReview } from '../support/reviews.ts';

const SETTINGS: AdmissionSettings = { enforcement: 'deny', quickExitImageAllowlist: [] };
const UID = '00000000-0000-4000-8000-0000000000aa';
const body = JSON.stringify(podReview({ containers: [{ name: 'main', image: 'busybox' }] }, { name: 'p1' }, { namespace: 'ns1' }));
/** A handler that must not be reached. */
const unreachable: AdmissionHandler = () => {
  throw new Error('the handler ran');
};

t.test("judge: the handler is given the request and the settings, and its answer's kind is the result", async (t) => {
  const seen: Array<[AdmissionRequest, AdmissionSettings]> = [];
  const judgement = judge(body, (request, settings) => (seen.push([request, settings]), allowed()), SETTINGS);
  t.match(judgement, { status: 200, result: 'allowed', uid: UID, answer: { response: { allowed: true } } });
  t.same(judgement.context, { namespace: 'ns1', name: 'p1', operation: 'CREATE', kind: 'Pod', dryRun: false });
  t.equal(seen.length, 1);
  t.match(seen[0]![0], { uid: UID, namespace: 'ns1', object: { metadata: { name: 'p1' } } });
  t.equal(seen[0]![1], SETTINGS);
  t.equal(judge(body, () => denied('no'), SETTINGS).result, 'denied');
  t.equal(judge(body, () => patched([{ op: 'remove', path: '/x' }]), SETTINGS).result, 'patched');
  t.equal(judge(body, () => patched([]), SETTINGS).result, 'allowed', 'an empty patch is a plain allow');
});

t.test('judge: bytes are read as UTF-8 from their own part of the buffer', async (t) => {
  const padded = Buffer.from(`garbage${body}garbage`);
  const bytes = padded.subarray('garbage'.length, 'garbage'.length + Buffer.byteLength(body));
  t.match(judge(bytes, () => allowed(), SETTINGS), { status: 200, uid: UID });
  const named = JSON.stringify(podReview({ containers: [] }, { name: 'pod-é' }));
  t.equal(judge(new TextEncoder().encode(named), () => allowed(), SETTINGS).context.name, 'pod-é');
});

t.test('judge: a body that is no JSON is refused with 400 before the handler, without a uid', async (t) => {
  for (const [text, message] of [['', /empty/], ['  ', /empty/], ['{"request":', /not valid JSON/]] as const) {
    const judgement = judge(text, unreachable, SETTINGS);
    t.match(judgement, { status: 400, result: 'error', uid: '', context: { dryRun: false } }, JSON.stringify(text));
    t.match(judgement.answer.response, { allowed: false, status: { code: 400, message } });
  }
});

t.test('judge: a body too deep is a 400, one with too many objects a 413', async (t) => {
  t.match(judge(`${'['.repeat(150)}${']'.repeat(150)}`, unreachable, SETTINGS), { status: 400, answer: { response: { status: { code: 400, message: /nests deeper/ } } } });
  t.match(judge(`[${'{},'.repeat(500_001)}{}]`, unreachable, SETTINGS), { status: 413, answer: { response: { status: { code: 413, message: /more than 500000 objects/ } } } });
});

t.test("judge: a malformed envelope is a 400 naming the field, with the uid and context it has", async (t) => {
  const review = JSON.parse(body);
  review.request.dryRun = 'yes';
  const judgement = judge(JSON.stringify(review), unreachable, SETTINGS);
  t.match(judgement, { status: 400, result: 'error', uid: UID, context: { namespace: 'ns1', name: 'p1', kind: 'Pod', dryRun: false } });
  t.match(judgement.answer.response.status?.message, /request\.dryRun/);
});

t.test('judge: a handler that throws is a 500 with a message of its own; what it threw is kept apart for the log', async (t) => {
  const judgement = judge(body, () => {
    throw new Error('secret detail');
  }, SETTINGS);
  t.match(judgement, { status: 500, result: 'error', uid: UID, failure: { message: 'secret detail', stack: /Error: secret detail/ } });
  t.same(judgement.answer.response, { allowed: false, status: { code: 500, message: 'internal error while handling the admission request' } });
  t.notMatch(JSON.stringify(judgement.answer), /secret detail/, 'the answer never carries it');
  const thrownString = judge(body, () => {
    throw 'plain text'; // eslint-disable-line @typescript-eslint/only-throw-error
  }, SETTINGS);
  t.match(thrownString.failure, { message: 'plain text' });
});

t.test('review: the AdmissionReview of an answer, with the uid and only the response', async (t) => {
  const answer = { ...denied('no', { warnings: ['w'] }), migration: 'kept' as const };
  t.same(review('uid-7', answer), {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: { uid: 'uid-7', allowed: false, status: { code: 422, reason: 'Invalid', message: 'no' }, warnings: ['w'] },
  });
});

t.test('requestContext: strings only, each clipped; dryRun only when it is true', async (t) => {
  const long = 'n'.repeat(300);
  t.same(requestContext({ request: { uid: 'u', namespace: long, name: 7, operation: 'CREATE', kind: { kind: 'Pod' }, dryRun: 'true' } }), {
    uid: 'u',
    namespace: `${'n'.repeat(253)}...`,
    name: undefined,
    operation: 'CREATE',
    kind: 'Pod',
    dryRun: false,
  });
  t.match(requestContext({ request: { dryRun: true, kind: 'Pod' } }), { uid: '', dryRun: true, kind: undefined });
  t.same(requestContext(null), { uid: '', namespace: undefined, name: undefined, operation: undefined, kind: undefined, dryRun: false });
});
