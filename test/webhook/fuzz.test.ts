// Fuzzing the HTTP layer: mutated and random AdmissionReviews, posted as raw bodies. Whatever
// comes in, the answer is a well-formed AdmissionReview (200, 400 or 413), a patch applies to
// the object it came with, and the app keeps answering.
// FUZZ_CASES=100000 runs longer; FUZZ_SEED replays a run (the seed is printed).
import { readdirSync, readFileSync } from 'node:fs';
import t from 'tap';
import { MANAGED, MANAGED_LABEL } from '../../src/policy/index.ts';
import type { AdmissionReview } from '../../src/webhook/admission.ts';
import { Random, fuzzCase, type FuzzCase } from './random.ts';
import { applyPatch, loadReview, patchOf, post, testApp } from './support.ts';

const CASES = Number(process.env.FUZZ_CASES ?? 3000);
const SEED = Number(process.env.FUZZ_SEED ?? 0x5eed);
const BODY_LIMIT = 1024 * 1024;
// A safety net, not a timing assertion: on a loaded 2-core machine 3,000 cases can take a while.
t.setTimeout(Math.max(300_000, CASES * 100));

const fixtureDir = new URL('../fixtures/admission/', import.meta.url);
const fixtures = readdirSync(fixtureDir).filter((name) => name.endsWith('.json')).map((name) => readFileSync(new URL(name, fixtureDir), 'utf8'));

/** What is wrong with an answer, or an empty list. */
function problemsOf(fuzz: FuzzCase, statusCode: number, contentType: string | undefined, body: string): string[] {
  if (![200, 400, 413].includes(statusCode)) return [`HTTP ${statusCode}`];
  if (!/^application\/json/.test(contentType ?? '')) return [`content type ${contentType}`];
  let review: AdmissionReview;
  try {
    review = JSON.parse(body) as AdmissionReview;
  } catch {
    return ['the answer is not JSON'];
  }
  const response = review.response;
  const problems: string[] = [];
  if (review.apiVersion !== 'admission.k8s.io/v1' || review.kind !== 'AdmissionReview') problems.push('not an admission.k8s.io/v1 AdmissionReview');
  if (typeof response?.uid !== 'string') problems.push('response.uid is not a string');
  if (typeof response?.allowed !== 'boolean') problems.push('response.allowed is not a boolean');
  if (statusCode !== 200 && (response?.allowed !== false || response.status?.code !== statusCode)) problems.push('an error answer that is not a refusal with the HTTP code');
  if (response?.warnings?.some((warning) => typeof warning !== 'string' || /[\r\n]/.test(warning))) problems.push('a warning that is not a single line');
  if (statusCode === 200) {
    const sent = JSON.parse(fuzz.body) as { request: { uid: string; object: unknown } };
    if (response?.uid !== sent.request.uid) problems.push('the uid is not echoed');
    if (response?.patch !== undefined) {
      try {
        const patched = applyPatch(sent.request.object, patchOf(review));
        if (patched.metadata.labels[MANAGED_LABEL] !== MANAGED) problems.push('the patch does not set the label');
      } catch (error) {
        problems.push(`the patch does not apply: ${String(error)}`);
      }
    }
  }
  return problems;
}

t.test(`${CASES} fuzzed requests`, async (t) => {
  t.comment(`seed ${SEED} (replay with FUZZ_SEED=${SEED} FUZZ_CASES=${CASES})`);
  const random = new Random(SEED);
  const app = testApp({ bodyLimit: BODY_LIMIT, enforcement: random.chance(0.5) ? 'deny' : 'warn' });
  const failures: string[] = [];
  const statuses = new Map<number, number>();
  for (let index = 0; index < CASES; index++) {
    const fuzz = fuzzCase(random, JSON.parse(random.pick(fixtures)));
    const endpoint = random.chance(0.5) ? 'validate' : 'mutate';
    const response = await app.inject({ method: 'POST', url: `/${endpoint}`, headers: fuzz.contentType ? { 'content-type': fuzz.contentType } : {}, payload: fuzz.body });
    statuses.set(response.statusCode, (statuses.get(response.statusCode) ?? 0) + 1);
    const problems = problemsOf(fuzz, response.statusCode, response.headers['content-type'], response.body);
    if (problems.length > 0 && failures.length < 20) failures.push(`case ${index} (${endpoint}; ${fuzz.mutations.join(', ')}): ${problems.join('; ')}`);
  }
  t.same(failures, [], 'every answer is a well-formed AdmissionReview');
  t.comment(`HTTP statuses: ${JSON.stringify(Object.fromEntries(statuses))}`);
  t.ok(statuses.get(200) && statuses.get(400) && statuses.get(413), 'the cases reach the handlers, the 400s and the 413s');

  const review = loadReview('pod-manageable');
  t.match((await post(app, 'mutate', review)).review.response, { uid: review.request.uid, patchType: 'JSONPatch' }, 'the app still answers');
  t.equal((await app.inject('/healthz')).statusCode, 200);
});
