// The HTTP layer: every answer on an admission route is a well-formed AdmissionReview with the
// request's uid when it can be read; malformed requests get a 400, oversized ones a 413.
// Health, readiness, metrics and the per-request logs.
import t from 'tap';
import { DEFAULT_OPTIONS, loadReview, post, testApp } from './support.ts';
import { buildApp } from '../../src/webhook/app.ts';

const JSON_TYPE = { 'content-type': 'application/json' };

/** The parts of an error answer every test checks, for one t.match. */
function errorEnvelope(answer: Awaited<ReturnType<typeof post>>) {
  const { apiVersion, kind, response } = answer.review;
  return { statusCode: answer.statusCode, contentType: answer.contentType, apiVersion, kind, uid: response?.uid, allowed: response?.allowed, code: response?.status?.code };
}

const errorAnswer = (status: number, uid: string) => ({
  statusCode: status,
  contentType: /^application\/json/,
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  uid,
  allowed: false,
  code: status,
});

t.test('malformed requests: 400, an AdmissionReview, a message naming the problem', async (t) => {
  const app = testApp();
  const valid = () => loadReview('job-valid');
  const uid = valid().request.uid;
  const cases: Array<[string, unknown, RegExp, string, Record<string, string>?]> = [
    ['wrong content type', JSON.stringify(valid()), /^Content-Type must be application\/json, got "text\/plain"$/, '', { 'content-type': 'text/plain' }],
    ['no content type', JSON.stringify(valid()), /^Content-Type must be application\/json, got none$/, '', {}],
    ['malformed JSON', '{"apiVersion": "admission.k8s.io/v1", "kind": ', /^request body is not valid JSON$/, ''],
    ['empty body', '', /request body is empty/, ''],
    ['not an object', '[1, 2]', /^malformed AdmissionReview: body: Invalid value: must be object, not array$/, ''],
    ['missing request', { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }, /^malformed AdmissionReview: request: Required value$/, ''],
    ['wrong apiVersion', { ...valid(), apiVersion: 'admission.k8s.io/v1beta1' }, /^malformed AdmissionReview: apiVersion: Unsupported value: "admission.k8s.io\/v1beta1": supported value: "admission.k8s.io\/v1"$/, uid],
    ['wrong kind', { ...valid(), kind: 'ConversionReview' }, /^malformed AdmissionReview: kind: Unsupported value: "ConversionReview"/, uid],
    ['unknown operation', (() => { const r = valid(); r.request.operation = 'PATCH' as never; return r; })(), /request\.operation: Unsupported value: "PATCH": supported values: "CREATE", "UPDATE", "DELETE", "CONNECT"/, uid],
    ['missing uid', (() => { const r: any = valid(); delete r.request.uid; return r; })(), /request\.uid: Required value/, ''],
    ['uid of the wrong type', (() => { const r: any = valid(); r.request.uid = 42; return r; })(), /request\.uid: Invalid value: must be string, not number/, ''],
    ['missing kind', (() => { const r: any = valid(); delete r.request.kind; return r; })(), /request\.kind: Required value/, uid],
    ['CREATE without object', (() => { const r: any = valid(); delete r.request.object; return r; })(), /request\.object: Required value/, uid],
    ['object of the wrong type', (() => { const r: any = valid(); r.request.object = 'pod'; return r; })(), /request\.object: Invalid value: must be object, not string/, uid],
    ['DELETE with an old object of the wrong type', (() => { const r: any = valid(); Object.assign(r.request, { operation: 'DELETE', object: null, oldObject: [] }); return r; })(), /request\.oldObject: Invalid value: must be object or null, not array/, uid],
    ['too deep', `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":${'['.repeat(5000)}${']'.repeat(5000)}}`, /nests deeper than 100 levels/, ''],
  ];
  for (const [name, body, says, expectedUid, headers] of cases) {
    for (const endpoint of ['validate', 'mutate'] as const) {
      const answer = await post(app, endpoint, body, headers ?? JSON_TYPE);
      t.match(errorEnvelope(answer), errorAnswer(400, expectedUid), `${endpoint}: ${name}: the envelope`);
      t.match(answer.review.response?.status?.message, says, `${endpoint}: ${name}: the message`);
    }
  }
});

t.test('the body limit: a multi-MiB pod below it is handled, a larger body gets a 413', async (t) => {
  const app = testApp({ bodyLimit: 8 * 1024 * 1024 });
  const review = loadReview('pod-manageable');
  // Kubernetes admits pods this large (a big inline config, thousands of env vars).
  review.request.object.spec.containers[0].env = Array.from({ length: 40_000 }, (_, i) => ({ name: `SETTING_${i}`, value: 'x'.repeat(120) }));
  const body = JSON.stringify(review);
  t.ok(body.length > 5 * 1024 * 1024 && body.length < 8 * 1024 * 1024, `a ${(body.length / 1024 / 1024).toFixed(1)} MiB body`);
  const accepted = await post(app, 'mutate', body);
  t.equal(accepted.statusCode, 200);
  t.match(accepted.review.response, { uid: review.request.uid, allowed: true, patchType: 'JSONPatch' });

  review.request.object.spec.containers[0].env.push(...Array.from({ length: 30_000 }, (_, i) => ({ name: `MORE_${i}`, value: 'y'.repeat(120) })));
  const tooLarge = await post(app, 'validate', review);
  t.match(errorEnvelope(tooLarge), errorAnswer(413, ''));
  t.match(tooLarge.review.response?.status?.message, /request body is larger than the limit of 8388608 bytes; raise --body-limit/);
});

t.test('the uid is echoed on every decision', async (t) => {
  const app = testApp();
  for (const name of ['job-valid', 'job-marker-value', 'pod-manageable', 'pod-errors', 'configmap']) {
    for (const endpoint of ['validate', 'mutate'] as const) {
      const review = loadReview(name);
      review.request.uid = `uid-${name}-${endpoint}`;
      const answer = await post(app, endpoint, review);
      t.equal(answer.review.response?.uid, review.request.uid, `${endpoint} ${name}`);
    }
  }
});

t.test('the envelope is read as it is: no type coercion', async (t) => {
  const app = testApp();
  const review: any = loadReview('pod-manageable');
  review.request.dryRun = 'true';
  const answer = await post(app, 'mutate', review);
  t.match(errorEnvelope(answer), errorAnswer(400, review.request.uid));
  t.match(answer.review.response?.status?.message, /request\.dryRun: Invalid value: must be boolean, not string/, 'a string is not coerced');
});

t.test('/healthz and /readyz', async (t) => {
  let state: { ready: boolean; reason?: string } = { ready: false, reason: 'no serving certificate yet' };
  const app = testApp({ readiness: () => state });
  t.equal((await app.inject('/healthz')).statusCode, 200, 'healthy while serving');
  const notReady = await app.inject('/readyz');
  t.equal(notReady.statusCode, 503);
  t.match(notReady.body, /no serving certificate yet/);
  state = { ready: true };
  t.equal((await app.inject('/readyz')).statusCode, 200);
});

t.test('/metrics: the admission counters and latency move; default process metrics are there', async (t) => {
  const app = testApp();
  const count = async (endpoint: string, result: string) => {
    const text = (await app.inject('/metrics')).body;
    const line = text.split('\n').find((l) => l.startsWith(`sidecar_terminator_admission_requests_total{endpoint="${endpoint}",result="${result}"}`));
    return Number(line?.split(' ')[1]);
  };
  const before = { allowed: await count('validate', 'allowed'), denied: await count('validate', 'denied'), patched: await count('mutate', 'patched'), error: await count('validate', 'error') };
  t.same(before, { allowed: 0, denied: 0, patched: 0, error: 0 }, 'every series exists from the start');
  await post(app, 'validate', loadReview('job-valid'));
  await post(app, 'validate', loadReview('job-marker-value'));
  await post(app, 'validate', loadReview('job-marker-value'));
  await post(app, 'mutate', loadReview('pod-manageable'));
  await post(app, 'validate', '{', JSON_TYPE);
  t.same(
    { allowed: await count('validate', 'allowed'), denied: await count('validate', 'denied'), patched: await count('mutate', 'patched'), error: await count('validate', 'error') },
    { allowed: 1, denied: 2, patched: 1, error: 1 },
  );
  const metrics = await app.inject('/metrics');
  t.match(metrics.headers['content-type'], /^text\/plain/);
  t.match(metrics.body, /sidecar_terminator_admission_duration_seconds_count\{endpoint="validate"\} 4/);
  t.match(metrics.body, /^process_cpu_user_seconds_total /m);
});

t.test('one structured log line per decision, bound to the request, never the object', async (t) => {
  const lines: Array<Record<string, unknown>> = [];
  const app = testApp({ logger: { level: 'info', stream: { write: (line: string) => lines.push(JSON.parse(line)) } } });
  const review = loadReview('job-marker-value');
  review.request.object.spec.template.spec.containers[0].env.push({ name: 'DATABASE_PASSWORD', value: 'hunter2-secret' });
  await post(app, 'validate', review);
  await post(app, 'mutate', '{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u-7", "operation": "EXPLODE"}}');
  await app.inject('/healthz');
  t.equal(lines.length, 2, 'one line per admission request; probes are quiet');
  t.match(lines[0], {
    uid: review.request.uid,
    namespace: 'batch',
    name: 'marker-value',
    operation: 'CREATE',
    kind: 'Job',
    endpoint: 'validate',
    result: 'denied',
    code: 422,
    msg: 'admission decision',
  });
  t.match(lines[1], { uid: 'u-7', operation: 'EXPLODE', endpoint: 'mutate', result: 'error', status: 400, code: 400 });
  t.notMatch(JSON.stringify(lines), /hunter2-secret/, 'object contents are not logged');
});

t.test('a handler that throws: a 500 AdmissionReview with the uid, the error logged', async (t) => {
  const lines: Array<Record<string, any>> = [];
  const throwing = () => {
    throw new Error('boom');
  };
  const app = buildApp({ ...DEFAULT_OPTIONS, handlers: { validate: throwing }, logger: { level: 'info', stream: { write: (line: string) => lines.push(JSON.parse(line)) } } });
  const review = loadReview('job-valid');
  const answer = await post(app, 'validate', review);
  t.match(errorEnvelope(answer), errorAnswer(500, review.request.uid));
  t.equal(answer.review.response?.status?.message, 'internal error while handling the admission request', 'no internals in the answer');
  t.match(lines, [{ level: 50, err: { message: 'boom' } }, { uid: review.request.uid, result: 'error', status: 500 }]);
});

t.test('draining: answers still come, each closing its connection', async (t) => {
  let draining = false;
  const app = testApp({ draining: () => draining });
  const review = loadReview('job-valid');
  const before = await app.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(review) });
  t.not(before.headers.connection, 'close', 'not draining: the connection is kept');
  draining = true;
  const during = await app.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(review) });
  t.equal(during.statusCode, 200, 'the request is answered');
  t.equal(during.headers.connection, 'close', 'and the client is told to reconnect (to another replica)');
  t.equal((JSON.parse(during.body) as { response: { uid: string } }).response.uid, review.request.uid);
});

t.test('logged fields taken from the body are clipped', async (t) => {
  const lines: Array<Record<string, any>> = [];
  const app = buildApp({ ...DEFAULT_OPTIONS, logger: { level: 'info', stream: { write: (line: string) => lines.push(JSON.parse(line)) } } });
  const review = loadReview('job-valid');
  review.request.name = 'n'.repeat(100_000);
  review.request.uid = 'u'.repeat(100_000);
  const answer = await post(app, 'validate', review);
  t.equal(answer.review.response?.uid, review.request.uid, 'the answer carries the whole uid');
  t.ok(lines.length > 0 && lines.every((line) => JSON.stringify(line).length < 2000), 'every log line stays short');
  t.match(lines.at(-1), { name: /^n{253}\.\.\.$/, uid: /^u{253}\.\.\.$/ });
});
