// POST /native-sidecars: a pod's marked sidecars move to native sidecars, as a JSON Patch computed
// by diffing a migrated copy; the pods that stay are labelled and annotated with why; and
// POST /validate refuses a pod whose native sidecars the API server dropped.
import t from 'tap';
import { MANAGED, MANAGED_LABEL, MIGRATED_ANNOTATION, POD_ANNOTATIONS, SKIPPED_ANNOTATION } from '../../src/policy/index.ts';
import { OWNERS, applyPatch, createdBy, everyFixture, loadReview, patchOf, post, testApp, type FixtureReview } from './support.ts';

const W = 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT';
const migrating = () => testApp({ nativeSidecars: true });

/** The pod after the webhook's patch (the pod as it was when there is none). */
async function mutated(review: FixtureReview, app = migrating(), endpoint: 'native-sidecars' | 'mutate' = 'native-sidecars') {
  const answer = (await post(app, endpoint, review)).review;
  return { response: answer.response!, pod: answer.response?.patch ? applyPatch(review.request.object, patchOf(answer)) : review.request.object };
}

t.test('a pod with a marked sidecar: the sidecar moves to initContainers with restartPolicy Always, the pod is annotated and not labelled', async (t) => {
  const review = loadReview('pod-manageable');
  const [backup, proxy] = review.request.object.spec.containers;
  const { response, pod } = await mutated(review);
  t.match(response, { uid: review.request.uid, allowed: true, patchType: 'JSONPatch' });
  t.notOk(response.warnings, 'no warning');
  t.same(pod.spec.containers, [backup], 'the main container stays');
  t.same(pod.spec.initContainers, [{ ...proxy, restartPolicy: 'Always' }], 'the sidecar, whole, as a native sidecar');
  t.same(pod.metadata.annotations, { [MIGRATED_ANNOTATION]: 'cloud-sql-proxy' }, 'the annotation names what moved');
  t.equal(pod.metadata.labels, undefined, 'not labelled: nothing for the watcher to do');
  t.same(pod.spec.restartPolicy, 'Never');
});

t.test('/native-sidecars is /mutate when migration is off (--native-sidecars none, or a server before 1.29)', async (t) => {
  for (const app of [testApp(), testApp({ nativeSidecars: false })]) {
    const review = loadReview('pod-manageable');
    const { pod } = await mutated(review, app);
    t.same(pod.metadata.labels, { [MANAGED_LABEL]: MANAGED }, 'labelled');
    t.same(pod.spec, review.request.object.spec, 'nothing moved');
  }
  const { pod } = await mutated(loadReview('pod-manageable'), migrating(), 'mutate');
  t.same(pod.metadata.labels, { [MANAGED_LABEL]: MANAGED }, '/mutate never migrates: in labelled mode it serves every namespace');
});

t.test('a pod that cannot move is labelled for the watcher, annotated with why, and the warning says it', async (t) => {
  const review = loadReview('pod-manageable');
  review.request.object.spec.containers[1].startupProbe = { tcpSocket: { port: 5432 } };
  const { response, pod } = await mutated(review);
  t.same(pod.spec, review.request.object.spec, 'nothing moved');
  t.same(pod.metadata.labels, { [MANAGED_LABEL]: MANAGED }, 'labelled');
  t.same(pod.metadata.annotations, {
    [SKIPPED_ANNOTATION]: 'spec.containers[1].startupProbe: as a native sidecar, cloud-sql-proxy would hold back the main containers until this probe succeeds',
  });
  t.same(response.warnings, [
    'not moved to native sidecars (the watcher stops the sidecars): spec.containers[1].startupProbe: as a native sidecar, cloud-sql-proxy would hold back the main containers until this probe succeeds',
  ]);
});

t.test('a pod annotated sidecar-terminator.io/native-sidecars: disabled is only labelled', async (t) => {
  const review = loadReview('pod-manageable');
  review.request.object.metadata.annotations = { 'sidecar-terminator.io/native-sidecars': 'disabled' };
  const { response, pod } = await mutated(review);
  t.same(pod.spec, review.request.object.spec);
  t.same(pod.metadata, { ...review.request.object.metadata, labels: { [MANAGED_LABEL]: MANAGED } });
  t.notOk(response.warnings);
});

t.test('a pod carrying the managed label loses it when its sidecars move; a stale skipped annotation goes', async (t) => {
  const review = loadReview('pod-manageable');
  review.request.object.metadata.labels = { app: 'backup', [MANAGED_LABEL]: MANAGED };
  review.request.object.metadata.annotations = { [SKIPPED_ANNOTATION]: 'copied from another pod' };
  const { pod } = await mutated(review);
  t.same(pod.metadata.labels, { app: 'backup' });
  t.same(pod.metadata.annotations, { [MIGRATED_ANNOTATION]: 'cloud-sql-proxy' });
});

t.test('pods from a Job: migrated alike; with configuration errors, left to the watcher as OpenKruise would handle them', async (t) => {
  const { pod } = await mutated(createdBy(loadReview('pod-manageable'), OWNERS.Job));
  t.equal(pod.metadata.annotations[MIGRATED_ANNOTATION], 'cloud-sql-proxy');
  const errors = await mutated(loadReview('pod-from-job-errors'));
  t.same(errors.pod.metadata.labels[MANAGED_LABEL], MANAGED, 'labelled');
  t.match(errors.pod.metadata.annotations[SKIPPED_ANNOTATION], /the sidecar configuration has errors/);
  t.equal(errors.pod.spec.initContainers, undefined, 'nothing moved');
});

t.test('idempotent: a reinvocation changes nothing, for every fixture', async (t) => {
  const app = migrating();
  let moved = 0;
  for (const [name, review] of everyFixture()) {
    const first = await mutated(review, app);
    if (!first.response.patch) continue;
    if (first.pod.metadata.annotations?.[MIGRATED_ANNOTATION]) moved++;
    const again = structuredClone(review);
    again.request.object = first.pod;
    // Warnings are said again (the API server shows each text once): a kept pod keeps its reasons.
    const { warnings, ...second } = (await post(app, 'native-sidecars', again)).review.response!;
    t.same(second, { uid: review.request.uid, allowed: true }, `${name}: no patch the second time`);
    t.same(warnings, first.response.warnings, `${name}: the same warnings`);
    t.same((await post(app, 'mutate', again)).review.response, { uid: review.request.uid, allowed: true }, `${name}: nor from /mutate after it`);
  }
  t.ok(moved >= 4, `the fixtures include pods that migrate (${moved})`);
});

t.test('a reinvocation after a later webhook injected a marked sidecar moves that one too', async (t) => {
  const app = migrating();
  const review = loadReview('pod-manageable');
  review.request.object = (await mutated(review, app)).pod;
  review.request.object.spec.containers.push({ name: 'log-agent', image: 'fluent/fluent-bit:3.1', env: [{ name: W, value: 'true' }] });
  const { pod } = await mutated(review, app);
  t.same(pod.spec.initContainers.map((c: { name: string; restartPolicy: string }) => [c.name, c.restartPolicy]), [['cloud-sql-proxy', 'Always'], ['log-agent', 'Always']]);
  t.equal(pod.metadata.annotations[MIGRATED_ANNOTATION], 'cloud-sql-proxy,log-agent');
  t.equal(pod.metadata.labels, undefined);
});

t.test('a reinvocation after a later webhook dropped restartPolicy: Always from a native sidecar puts it back, and says so', async (t) => {
  const app = migrating();
  const review = loadReview('pod-manageable');
  const moved = (await mutated(review, app)).pod;
  // What a webhook built on a client library older than native sidecars writes back: the field gone.
  const stripped = structuredClone(moved);
  delete stripped.spec.initContainers[0].restartPolicy;
  review.request.object = stripped;
  const { pod, response } = await mutated(review, app);
  t.same(pod, moved, 'the pod as the first call left it');
  t.same(response.warnings, ['spec.initContainers[0].restartPolicy: Always put back on native sidecar cloud-sql-proxy: a mutating webhook that ran after this one dropped it (a client library older than native sidecars drops the field)']);
  const metrics = await app.inject({ method: 'GET', url: '/metrics' });
  t.match(metrics.body, /sidecar_terminator_native_sidecar_pods_total\{result="restored"\} 1/, 'counted');
  // Stripped, and a marked sidecar injected too: both in one answer.
  const again = structuredClone(stripped);
  again.spec.containers.push({ name: 'log-agent', image: 'fluent/fluent-bit:3.1', env: [{ name: W, value: 'true' }] });
  review.request.object = again;
  const both = (await mutated(review, app)).pod;
  t.same(both.spec.initContainers.map((c: { name: string; restartPolicy: string }) => [c.name, c.restartPolicy]), [['cloud-sql-proxy', 'Always'], ['log-agent', 'Always']]);
  // Stripped, and a sidecar injected that stays where it is (named by the annotation): put back, and the pod labelled for the watcher.
  const injected = structuredClone(stripped);
  injected.spec.containers.push({ name: 'istio-proxy', image: 'istio/proxyv2:1.24.0' });
  injected.metadata.annotations[POD_ANNOTATIONS.sidecars] = 'istio-proxy';
  review.request.object = injected;
  const kept = (await mutated(review, app)).pod;
  t.same(kept.spec.initContainers.map((c: { name: string; restartPolicy: string }) => [c.name, c.restartPolicy]), [['cloud-sql-proxy', 'Always']], 'put back');
  t.equal(kept.metadata.labels?.[MANAGED_LABEL], MANAGED, 'labelled: the lost native sidecar, put back in the same answer, does not count as an error');
});

t.test('a cluster with a node whose kubelet runs no native sidecars: no pod is migrated, and the annotation says why', async (t) => {
  t.match((await mutated(loadReview('pod-manageable'), testApp({ nativeSidecars: true, cluster: () => ({ oldKubelets: 'unread' }) }))).pod.metadata.annotations[SKIPPED_ANNOTATION], /^spec\.containers: the nodes' kubelet versions are not read yet/, 'the nodes not read yet: none moves');
  const app = testApp({ nativeSidecars: true, cluster: () => ({ oldKubelets: [{ node: 'node-old', version: 'v1.28.9' }] }) });
  const { pod, response } = await mutated(loadReview('pod-manageable'), app);
  t.equal(pod.spec.initContainers, undefined, 'nothing moved');
  t.equal(pod.metadata.labels[MANAGED_LABEL], MANAGED, 'left to the watcher');
  t.match(pod.metadata.annotations[SKIPPED_ANNOTATION], /^spec\.containers: the cluster has nodes whose kubelet runs no native sidecars \(before 1\.29\): node-old \(v1\.28\.9\); there a native sidecar would be a plain init container that never finishes/);
  t.match(response.warnings, [/^not moved to native sidecars \(the watcher stops the sidecars\): spec\.containers: the cluster has nodes whose kubelet/]);
});

t.test('/validate: a migrated pod is admitted without warnings about the markers it carries', async (t) => {
  const app = migrating();
  const review = loadReview('pod-manageable');
  review.request.object = (await mutated(review, app)).pod;
  t.same((await post(app, 'validate', review)).review.response, { uid: review.request.uid, allowed: true });
});

t.test('/validate: a pod whose native sidecars the API server dropped is refused, even from a Job', async (t) => {
  const app = migrating();
  const review = loadReview('pod-manageable');
  const pod = (await mutated(review, app)).pod;
  // What the API server makes of it with the SidecarContainers feature gate off.
  delete pod.spec.initContainers[0].restartPolicy;
  for (const request of [{ ...review, request: { ...review.request, object: pod } }, createdBy({ ...review, request: { ...review.request, object: pod } }, OWNERS.Job)]) {
    const response = (await post(app, 'validate', request)).review.response;
    t.match(response, {
      allowed: false,
      status: { code: 422, message: /^1 native sidecar lost: spec.initContainers\[0\].restartPolicy: Required value: cloud-sql-proxy was moved here as a native sidecar .*SidecarContainers feature gate is off/ },
    });
  }
});

t.test('/validate: the refusal names the mutating webhooks for pods that may have dropped it, as last read', async (t) => {
  const cluster: { webhooks?: Array<{ name: string; again: boolean }> } = {};
  const app = testApp({ nativeSidecars: true, cluster: () => ({ podMutatingWebhooks: cluster.webhooks }) });
  const review = loadReview('pod-manageable');
  const pod = (await mutated(review, app)).pod;
  delete pod.spec.initContainers[0].restartPolicy;
  const refusal = async () => (await post(app, 'validate', { ...review, request: { ...review.request, object: pod } })).review.response?.status?.message;
  t.match(await refusal(), /set --native-sidecars=none \(chart value admission\.nativeSidecars\)$/, 'not read yet: no names');
  cluster.webhooks = [{ name: 'zz-agent/strip.agent.example.com', again: true }, { name: 'mesh/inject.mesh.io', again: false }];
  t.match(await refusal(), /; the mutating webhooks for pods called again after the others \(reinvocationPolicy IfNeeded\), one of which dropped it: zz-agent\/strip\.agent\.example\.com$/);
});

t.test('/validate: every dropped native sidecar is named', async (t) => {
  const app = migrating();
  const review = loadReview('pod-manageable');
  review.request.object.spec.containers.push({ name: 'log-agent', image: 'fluent/fluent-bit:3.1', env: [{ name: W, value: 'true' }] });
  const pod = (await mutated(review, app)).pod;
  for (const container of pod.spec.initContainers) delete container.restartPolicy;
  t.match((await post(app, 'validate', { ...review, request: { ...review.request, object: pod } })).review.response, {
    allowed: false,
    status: { code: 422, message: /^2 native sidecars lost: spec\.initContainers\[0\]\.restartPolicy: .*cloud-sql-proxy .*; spec\.initContainers\[1\]\.restartPolicy: .*log-agent / },
  });
});

t.test('/metrics: pods migrated and kept are counted; /native-sidecars has its own admission series', async (t) => {
  const app = migrating();
  const metric = async (prefix: string) => {
    const line = (await app.inject('/metrics')).body.split('\n').find((l) => l.startsWith(prefix));
    return Number(line?.split(' ')[1]);
  };
  const migrations = async () => ({
    migrated: await metric('sidecar_terminator_native_sidecar_pods_total{result="migrated"}'),
    kept: await metric('sidecar_terminator_native_sidecar_pods_total{result="kept"}'),
  });
  t.same(await migrations(), { migrated: 0, kept: 0 }, 'both series exist from the start');
  await post(app, 'native-sidecars', loadReview('pod-manageable'));
  await post(app, 'native-sidecars', loadReview('pod-from-job-errors'));
  await post(app, 'native-sidecars', loadReview('pod-no-sidecar'));
  await post(app, 'mutate', loadReview('pod-manageable'));
  t.same(await migrations(), { migrated: 1, kept: 1 }, 'a pod without sidecars, and /mutate, count nothing');
  t.equal(await metric('sidecar_terminator_admission_requests_total{endpoint="native-sidecars",result="patched"}'), 2);
});
