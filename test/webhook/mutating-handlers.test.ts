// POST /mutate: the managed label, as a JSON Patch computed by diffing a labelled copy.
import t from 'tap';
import { MANAGED, MANAGED_LABEL } from '../../src/policy/index.ts';
import { diff, escapePointerSegment } from '../../src/webhook/json-patch.ts';
import { applyPatch, everyFixture, loadReview, patchOf, post, testApp } from './support.ts';

t.test('a manageable pod without labels gets metadata.labels with the managed label', async (t) => {
  const app = testApp();
  const review = loadReview('pod-manageable');
  t.equal(review.request.object.metadata.labels, undefined, 'the fixture has no labels');
  const { statusCode, review: answer } = await post(app, 'mutate', review);
  t.equal(statusCode, 200);
  t.match(answer.response, { uid: review.request.uid, allowed: true, patchType: 'JSONPatch' });
  t.same(patchOf(answer), [{ op: 'add', path: '/metadata/labels', value: { [MANAGED_LABEL]: MANAGED } }]);
  const expected = structuredClone(review.request.object);
  expected.metadata.labels = { [MANAGED_LABEL]: MANAGED };
  t.same(applyPatch(review.request.object, patchOf(answer)), expected, 'the patched pod is the pod plus the label');
});

t.test('existing labels are kept; the key is escaped in the pointer', async (t) => {
  const app = testApp();
  const review = loadReview('pod-with-labels');
  const answer = (await post(app, 'mutate', review)).review;
  t.same(patchOf(answer), [{ op: 'add', path: '/metadata/labels/sidecar-terminator.io~1managed', value: 'true' }]);
  const patched = applyPatch(review.request.object, patchOf(answer));
  t.same(patched.metadata.labels, { ...review.request.object.metadata.labels, [MANAGED_LABEL]: MANAGED });
  t.same(patched.spec, review.request.object.spec, 'nothing else changes');
});

t.test('a dryRun request is answered the same way, by both mutating endpoints', async (t) => {
  const app = testApp({ nativeSidecars: true });
  for (const endpoint of ['mutate', 'native-sidecars'] as const) {
    const review = loadReview('pod-dry-run');
    t.equal(review.request.dryRun, true);
    const dry = (await post(app, endpoint, review)).review.response;
    review.request.dryRun = false;
    t.same(dry, (await post(app, endpoint, review)).review.response, endpoint);
    t.ok(dry?.patch);
  }
});

t.test('no patch at all when nothing changes or the pod is not for the watcher', async (t) => {
  const app = testApp();
  const cases: Array<[string, string]> = [
    ['pod-labelled', 'the label is there already'],
    ['pod-always', 'restartPolicy Always'],
    ['pod-no-sidecar', 'no sidecar'],
    ['pod-errors', 'the configuration has errors'],
    ['pod-update-image-replaced', 'an UPDATE'],
    ['job-valid', 'a Job (its pods are labelled when they are created)'],
  ];
  for (const [name, why] of cases) {
    const review = loadReview(name);
    t.same((await post(app, 'mutate', review)).review.response, { uid: review.request.uid, allowed: true }, why);
  }
});

t.test('warn mode admits a pod with errors, but the watcher does not get it', async (t) => {
  const app = testApp({ enforcement: 'warn' });
  const review = loadReview('pod-errors');
  t.equal((await post(app, 'validate', review)).review.response?.allowed, true);
  t.same((await post(app, 'mutate', review)).review.response, { uid: review.request.uid, allowed: true });
});

t.test('a pod its Job created is labelled despite errors, so it is handled as OpenKruise handles it', async (t) => {
  const app = testApp();
  const review = loadReview('pod-from-job-errors');
  const validated = (await post(app, 'validate', review)).review.response;
  t.equal(validated?.allowed, true, 'admitted');
  t.ok(validated?.warnings?.length, 'with the errors as warnings');
  const answer = (await post(app, 'mutate', review)).review;
  t.same(applyPatch(review.request.object, patchOf(answer)).metadata.labels, { ...review.request.object.metadata.labels, [MANAGED_LABEL]: MANAGED }, 'labelled');
});

t.test('idempotent: a reinvocation on a pod mutated already changes nothing, for every fixture', async (t) => {
  const app = testApp();
  let labelled = 0;
  for (const [name, review] of everyFixture()) {
    const first = (await post(app, 'mutate', review)).review.response!;
    if (!first.patch) continue;
    labelled++;
    const again = structuredClone(review);
    again.request.object = applyPatch(review.request.object, patchOf({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: first }));
    t.same((await post(app, 'mutate', again)).review.response, { uid: review.request.uid, allowed: true }, `${name}: no patch the second time`);
  }
  t.ok(labelled >= 4, `the fixtures include pods that get labelled (${labelled})`);
});

t.test('a reinvocation after a later webhook injected a marked sidecar labels the pod', async (t) => {
  const app = testApp();
  const review = loadReview('pod-no-sidecar');
  t.same((await post(app, 'mutate', review)).review.response, { uid: review.request.uid, allowed: true }, 'first call: no sidecar yet, no label');
  // What an injector ordered after this webhook adds; the API server then calls this webhook again.
  review.request.object.spec.containers.push({ name: 'log-agent', image: 'fluent/fluent-bit:3.1', env: [{ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT', value: 'true' }] });
  const reinvoked = (await post(app, 'mutate', review)).review;
  t.same(applyPatch(review.request.object, patchOf(reinvoked)).metadata.labels, { ...review.request.object.metadata.labels, [MANAGED_LABEL]: MANAGED }, 'labelled on reinvocation');
});

t.test('a label value other than "true" is replaced', async (t) => {
  const app = testApp();
  const review = loadReview('pod-labelled');
  review.request.object.metadata.labels[MANAGED_LABEL] = 'done';
  const answer = (await post(app, 'mutate', review)).review;
  t.same(patchOf(answer), [{ op: 'replace', path: '/metadata/labels/sidecar-terminator.io~1managed', value: 'true' }]);
});

t.test('diff', async (t) => {
  t.same(diff({ a: 1, b: { c: [1, 2] } }, { a: 1, b: { c: [1, 2] } }), [], 'equal documents');
  t.same(diff({ a: 1, b: 2 }, { b: 3, d: 4 }), [
    { op: 'remove', path: '/a' },
    { op: 'replace', path: '/b', value: 3 },
    { op: 'add', path: '/d', value: 4 },
  ]);
  t.same(diff({ list: [1, 2, 3] }, { list: [1, 3] }), [{ op: 'replace', path: '/list', value: [1, 3] }], 'arrays are replaced whole');
  t.same(diff({ m: 'x' }, { m: { labels: {} } }), [{ op: 'replace', path: '/m', value: { labels: {} } }], 'a type change is a replace');
  t.same(diff({ 'a/b': { '~c': 1 } }, { 'a/b': { '~c': 2 } }), [{ op: 'replace', path: '/a~1b/~0c', value: 2 }]);
  t.equal(escapePointerSegment('~/'), '~0~1', '~ first, so ~1 in a key stays itself');
  const original = { z: 1, a: { y: 1, b: 2 } };
  const mutated = { a: { b: 3, y: 1, n: 1 }, z: 1, k: 0 };
  t.same(diff(original, mutated), diff(structuredClone(original), structuredClone(mutated)), 'deterministic');
  t.same(applyPatch(original, diff(original, mutated)), mutated);
});
