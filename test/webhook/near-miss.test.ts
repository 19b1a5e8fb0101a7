// Near-miss markers at admission: the mutating webhooks warn about every pod they are called for
// (the validating webhook is not called for a pod whose markers are all misspelt), the validating
// webhook about what reaches it, in the same words, so the API server shows the warning once.
import t from 'tap';
import { MANAGED, MANAGED_LABEL } from '../../src/policy/index.ts';
import type { OwnerNotice } from '../../src/webhook/admission.ts';
import { OWNERS, createdBy, loadReview, patchOf, post, testApp, type FixtureReview } from './support.ts';

const WHEN_JOB_EXIT = { name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT', value: 'true' };
const WITH_IMAGE_MISSPELT = { name: 'KRUISE_TERMINATE_SIDECAR_WITH_IMAGE', value: 'busybox:1.36' };
const FIX = "write the marker's name exactly as the message gives it (names are case-sensitive), or rename the variable or annotation if it is not meant for the add-on";

/** A review of the pod-manageable fixture with its sidecar's env and its pod's annotations replaced. */
function podReview(env: Array<{ name: string; value: string }>, annotations: Record<string, string> = {}, restartPolicy = 'Never'): FixtureReview {
  const review = loadReview('pod-manageable');
  const pod = review.request.object;
  pod.spec.restartPolicy = restartPolicy;
  pod.spec.containers[1].env = env;
  pod.metadata.annotations = annotations;
  return review;
}

/** The same pod spec as a Job's template (the template's annotations too). */
function jobReview(pod: FixtureReview): FixtureReview {
  const { metadata, spec } = pod.request.object;
  const object = { apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'backup', namespace: 'batch' }, spec: { template: { metadata: { annotations: metadata.annotations }, spec } } };
  return { ...pod, request: { ...pod.request, kind: { group: 'batch', version: 'v1', kind: 'Job' }, object } };
}

const envWarning = (prefix: string, container: number, position: number, seen: string, meant: string) =>
  `${prefix}.containers[${container}].env[${position}].name: "${seen}": not a variable the add-on reads, so it has no effect, but close to ${meant}; ${FIX}`;

t.test('a pod whose only marker is misspelt: both mutating endpoints warn, and it is not labelled', async (t) => {
  const app = testApp({ nativeSidecars: true });
  t.teardown(() => app.close());
  const review = podReview([WITH_IMAGE_MISSPELT]);
  for (const endpoint of ['mutate', 'native-sidecars'] as const) {
    const { statusCode, review: answer } = await post(app, endpoint, review);
    t.equal(statusCode, 200);
    t.same(answer.response, {
      uid: review.request.uid,
      allowed: true,
      warnings: [envWarning('spec', 1, 0, WITH_IMAGE_MISSPELT.name, 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE')],
    }, endpoint);
  }
});

t.test('a marked pod with a misspelt annotation: labelled, warned by /mutate and by /validate in the same words', async (t) => {
  const app = testApp();
  t.teardown(() => app.close());
  const review = podReview([WHEN_JOB_EXIT], { 'sidecar-terminator.io/ignore-exit-codes': 'cloud-sql-proxy' });
  const warning = `metadata.annotations[sidecar-terminator.io/ignore-exit-codes]: not an annotation the add-on reads, so it has no effect, but close to sidecar-terminator.io/ignore-exit-code; ${FIX}`;
  const mutated = (await post(app, 'mutate', review)).review.response!;
  t.same(patchOf({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: mutated }), [{ op: 'add', path: '/metadata/labels', value: { [MANAGED_LABEL]: MANAGED } }], 'the label, as without the warning');
  t.same(mutated.warnings, [warning]);
  const validated = (await post(app, 'validate', review)).review.response!;
  t.equal(validated.allowed, true);
  t.same(validated.warnings, [warning], 'the same text: the API server shows it once');
});

t.test('a Job with a marker and a misspelt one: /validate warns first about the near miss, beside its other findings', async (t) => {
  const app = testApp();
  t.teardown(() => app.close());
  // SIDECAR_TERMINATOR_STOP on a container that is no sidecar: an error that the misspelt marker explains.
  const pod = podReview([{ name: 'SIDECAR_TERMINATOR_STOP', value: 'istio-proxy' }, { name: 'KRUISE_TERMINATE_SIDECARS_WHEN_JOB_EXIT', value: 'true' }]);
  const answer = (await post(app, 'validate', jobReview(pod))).review.response!;
  t.equal(answer.allowed, false, 'the error denies the Job');
  t.match(answer.status?.message, /^1 sidecar configuration error: spec\.template\.spec\.containers\[1\]\.env\[SIDECAR_TERMINATOR_STOP\]: Forbidden: takes effect only on a sidecar/);
  t.same(answer.warnings, [envWarning('spec.template.spec', 1, 1, 'KRUISE_TERMINATE_SIDECARS_WHEN_JOB_EXIT', 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT')], 'the warning comes with the denial');

  const warnApp = testApp({ enforcement: 'warn' });
  t.teardown(() => warnApp.close());
  const warned = (await post(warnApp, 'validate', jobReview(pod))).review.response!;
  t.equal(warned.allowed, true);
  t.match(warned.warnings, [/close to KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT;/, /SIDECAR_TERMINATOR_STOP\]: Forbidden/], 'in warn mode the near miss first, then the error as a warning');
});

t.test('a pod of a Job: warned, and no notice for its owner (a near miss is no error)', async (t) => {
  const notices: OwnerNotice[] = [];
  const app = testApp({ ownerEvents: { record: (notice) => notices.push(notice) } });
  t.teardown(() => app.close());
  const review = createdBy(podReview([WHEN_JOB_EXIT, { name: 'SIDECAR_TERMINATOR_GRACE_PERIOD', value: '10' }]), OWNERS.Job);
  for (const endpoint of ['mutate', 'validate'] as const) {
    const answer = (await post(app, endpoint, review)).review.response!;
    t.same(answer.warnings, [envWarning('spec', 1, 1, 'SIDECAR_TERMINATOR_GRACE_PERIOD', 'SIDECAR_TERMINATOR_GRACE_PERIOD_SECONDS')], endpoint);
  }
  t.same(notices, []);
});

t.test('no warning for a pod that cannot finish, for exact markers, or for an update', async (t) => {
  const app = testApp();
  t.teardown(() => app.close());
  const always = podReview([WITH_IMAGE_MISSPELT], {}, 'Always');
  t.same((await post(app, 'mutate', always)).review.response, { uid: always.request.uid, allowed: true }, 'restartPolicy Always: markers do nothing there');
  const exact = podReview([WHEN_JOB_EXIT], { 'sidecar-terminator.io/sidecars': 'cloud-sql-proxy' });
  t.equal((await post(app, 'mutate', exact)).review.response?.warnings, undefined, 'exact markers');
  t.equal((await post(app, 'validate', exact)).review.response?.warnings, undefined, 'exact markers, /validate');
  const update = podReview([WITH_IMAGE_MISSPELT]);
  update.request.operation = 'UPDATE';
  t.same((await post(app, 'mutate', update)).review.response, { uid: update.request.uid, allowed: true }, 'a pod UPDATE is not admitted by the webhooks');
});

t.test('an unmarked pod, Job or CronJob whose only marker is misspelt: /validate allows it with the warning alone', async (t) => {
  const notices: OwnerNotice[] = [];
  const app = testApp({ ownerEvents: { record: (notice) => notices.push(notice) } });
  t.teardown(() => app.close());
  const pod = podReview([WITH_IMAGE_MISSPELT]);
  const job = jobReview(pod);
  const { metadata, spec } = job.request.object;
  const cronJob = {
    ...job,
    request: { ...job.request, kind: { group: 'batch', version: 'v1', kind: 'CronJob' }, object: { apiVersion: 'batch/v1', kind: 'CronJob', metadata, spec: { schedule: '0 0 * * *', jobTemplate: { spec } } } },
  };
  const warning = (prefix: string) => envWarning(prefix, 1, 0, WITH_IMAGE_MISSPELT.name, 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE');
  for (const [kind, review, prefix] of [
    ['a pod', pod, 'spec'],
    ['a pod of a Job', createdBy(podReview([WITH_IMAGE_MISSPELT]), OWNERS.Job), 'spec'],
    ['a Job', job, 'spec.template.spec'],
    ['a CronJob', cronJob, 'spec.jobTemplate.spec.template.spec'],
  ] as const) {
    const { statusCode, review: answer } = await post(app, 'validate', review);
    t.equal(statusCode, 200, kind);
    t.same(answer.response, { uid: review.request.uid, allowed: true, warnings: [warning(prefix)] }, `${kind}: allowed, the near miss its one warning`);
  }
  const annotated = podReview([], { 'sidecar-terminator.io/sidecar': 'cloud-sql-proxy' });
  t.same((await post(app, 'validate', jobReview(annotated))).review.response?.warnings, [
    `spec.template.metadata.annotations[sidecar-terminator.io/sidecar]: not an annotation the add-on reads, so it has no effect, but close to sidecar-terminator.io/sidecars; ${FIX}`,
  ], 'a Job whose only marker is a misspelt annotation');
  t.same(notices, [], 'no notice for an owner: a near miss is no error');
});
