// The injected-sidecar policy at admission: /mutate and /native-sidecars write the annotations its
// entries add before judging the pod, so a pod whose proxy another webhook injected is labelled as
// if its author had named the proxy; through the handler, through fastify, and in the worker.
import t, { type Test } from 'tap';
import { Registry } from 'prom-client';
import { INJECTED_POLICY_ANNOTATION, MANAGED, MANAGED_LABEL, POD_ANNOTATIONS, SKIPPED_ANNOTATION, type InjectedSidecarPolicy } from '../../src/policy/index.ts';
import { ADMISSION_API_VERSION, type AdmissionRequest, type AdmissionSettings, type InjectedSidecarSettings } from '../../src/webhook/admission.ts';
import { mutate, mutateNativeSidecars } from '../../src/webhook/mutating-handlers.ts';
import { NAMESPACE_READ_TIMEOUT_MS, type AppOptions } from '../../src/webhook/app.ts';
import { OFFLOAD_BODY_BYTES } from '../../src/webhook/offload.ts';
import { injectedSidecarPolicy } from '../support/injected-sidecar-policy.ts';
import { sumSamples } from '../support/metrics.ts';
import { podReview } from '../support/reviews.ts';
import { OWNERS, applyPatch, patchOf, post, testApp } from './support.ts';

const ISTIO = injectedSidecarPolicy(`
entries:
  - name: istio
    container: istio-proxy
    stop: istio-proxy
    gracePeriodSeconds: 30
`);

const MESH_ONLY = injectedSidecarPolicy(`
entries:
  - name: istio
    container: istio-proxy
    namespaceSelector: {matchLabels: {istio-injection: enabled}}
`);

const SETTINGS: AdmissionSettings = { enforcement: 'deny', quickExitImageAllowlist: [] };

/** A Job's pod into which another webhook injected istio-proxy, in `namespace`. */
function injectedPod(namespace = 'batch', metadata: Record<string, unknown> = {}, containers: unknown[] = [{ name: 'main', image: 'busybox:1.36' }]) {
  const review = podReview({ containers: [...containers, { name: 'istio-proxy', image: 'docker.io/istio/proxyv2:1.24.0' }] }, { ownerReferences: [OWNERS.Job], ...metadata }, { namespace });
  return review as { request: AdmissionRequest & { object: any } };
}

/** What the policy adds to the pod of injectedPod, with the label. */
const ISTIO_ANNOTATIONS = {
  [POD_ANNOTATIONS.sidecars]: 'istio-proxy',
  [`${POD_ANNOTATIONS.stopPrefix}istio-proxy`]: 'istio-proxy',
  [`${POD_ANNOTATIONS.gracePeriodPrefix}istio-proxy`]: '30',
  [INJECTED_POLICY_ANNOTATION]: 'istio',
};

/** The pod as the API server stores it after /mutate's answer (the request's object when there is no patch). */
function mutated(request: AdmissionRequest & { object: any }, settings: AdmissionSettings): any {
  const { response } = mutate(request, settings);
  return response.patch ? applyPatch(request.object, patchOf({ apiVersion: ADMISSION_API_VERSION, kind: 'AdmissionReview', response: { uid: '', ...response } })) : request.object;
}

const withPolicy = (policy: InjectedSidecarPolicy, namespaceLabels?: InjectedSidecarSettings['namespaceLabels']): AdmissionSettings => ({
  ...SETTINGS,
  injectedSidecars: { policy, ...(namespaceLabels ? { namespaceLabels } : {}) },
});

t.test('the handler writes the policy\'s annotations and labels the pod in one patch', async (t) => {
  const { request } = injectedPod();
  const patched = mutated(request, withPolicy(ISTIO));
  t.same(patched.metadata.annotations, ISTIO_ANNOTATIONS, 'the annotations a Job\'s author would write, and the entry applied');
  t.same(patched.metadata.labels, { [MANAGED_LABEL]: MANAGED }, 'managed, as if its author had named the sidecar');
  t.same(patched.spec, request.object.spec, 'the spec is left as it is');

  t.same(mutate(request, SETTINGS).response, { allowed: true }, 'without the policy the same pod has no sidecar: no patch');
  t.same(mutate(request, withPolicy({ entries: [] })).response, { allowed: true }, 'nor with a policy without entries');
});

t.test('through fastify: the policy read at each request, and a reinvocation on the mutated pod gets no patch and no warning', async (t) => {
  let policy = ISTIO;
  const app = testApp({ injectedSidecarsNow: () => ({ policy }) });
  t.teardown(() => app.close());
  for (const endpoint of ['mutate', 'native-sidecars'] as const) {
    const review = injectedPod();
    const first = (await post(app, endpoint, review)).review;
    const mutated = applyPatch(review.request.object, patchOf(first));
    t.same(mutated.metadata.annotations, ISTIO_ANNOTATIONS, `${endpoint}: the policy's annotations`);
    t.same(mutated.metadata.labels, { [MANAGED_LABEL]: MANAGED }, `${endpoint}: the label`);

    review.request.object = mutated;
    const again = (await post(app, endpoint, review)).review.response;
    t.same(again, { uid: review.request.uid, allowed: true }, `${endpoint}: reinvoked on the mutated pod: no patch, no warning`);
  }

  policy = { entries: [] };
  const review = injectedPod();
  t.same((await post(app, 'mutate', review)).review.response, { uid: review.request.uid, allowed: true }, 'a policy changed to no entries applies at the next request');
});

t.test("the pod's own markers win: the policy leaves its sidecar and its stop annotation as they are", async (t) => {
  const ownStop = `${POD_ANNOTATIONS.stopPrefix}istio-proxy`;
  const named = injectedPod('batch', { annotations: { [POD_ANNOTATIONS.sidecars]: 'istio-proxy', [ownStop]: 'signal' } });
  const patched = mutated(named.request, withPolicy(ISTIO));
  t.equal(patched.metadata.annotations[ownStop], 'signal', 'its own stop method stays');
  t.notOk(INJECTED_POLICY_ANNOTATION in patched.metadata.annotations, 'no entry applied: the pod named the sidecar itself');
  t.same(patched.metadata.labels, { [MANAGED_LABEL]: MANAGED }, 'labelled for its own annotation');

  const marked = injectedPod('batch', {}, [{ name: 'main', image: 'busybox:1.36' }]);
  marked.request.object.spec.containers[1].env = [{ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT', value: 'true' }];
  const markedPod = mutated(marked.request, withPolicy(ISTIO));
  t.equal(markedPod.metadata.annotations, undefined, 'a sidecar marked by its env gets no annotation from the policy');
  t.same(markedPod.metadata.labels, { [MANAGED_LABEL]: MANAGED });
});

t.test('a pod left with no main container, or a bare pod the entry does not list, is not touched', async (t) => {
  const alone = podReview({ containers: [{ name: 'istio-proxy', image: 'docker.io/istio/proxyv2:1.24.0' }] }, { ownerReferences: [OWNERS.Job] }, { namespace: 'batch' }) as { request: AdmissionRequest };
  t.same(mutate(alone.request, withPolicy(ISTIO)).response, { allowed: true }, 'the proxy is its only container');
  const bare = injectedPod();
  delete bare.request.object.metadata.ownerReferences;
  t.same(mutate(bare.request, withPolicy(ISTIO)).response, { allowed: true }, 'no controller: the entry lists Jobs only');
});

t.test("a namespaceSelector applies in the namespaces whose labels match it, and nowhere while they are unknown", async (t) => {
  const namespaceLabels = new Map<string, Record<string, string>>([
    ['mesh', { 'istio-injection': 'enabled' }],
    ['plain', {}],
  ]);
  const annotationsIn = (namespace: string, labels?: InjectedSidecarSettings['namespaceLabels']) => {
    const { request } = injectedPod(namespace);
    return mutated(request, withPolicy(MESH_ONLY, labels)).metadata.annotations;
  };
  t.equal(annotationsIn('mesh', namespaceLabels)?.[INJECTED_POLICY_ANNOTATION], 'istio', 'a labelled namespace');
  t.equal(annotationsIn('plain', namespaceLabels), undefined, 'a namespace without the label');
  t.equal(annotationsIn('new', namespaceLabels), undefined, 'a namespace not seen yet');
  t.equal(annotationsIn('mesh'), undefined, 'labels unknown (not listed yet)');

  const wanted = (namespace: string, labels?: InjectedSidecarSettings['namespaceLabels'], policy = MESH_ONLY) => mutate(injectedPod(namespace).request, withPolicy(policy, labels)).namespaceLabelsWanted;
  t.same(wanted('new', namespaceLabels), { namespace: 'new', entries: ['istio'] }, 'a namespace not seen yet: the answer wants its labels');
  t.same(wanted('mesh'), { namespace: 'mesh', entries: ['istio'] }, 'labels unknown: the same');
  t.equal(wanted('plain', namespaceLabels), undefined, 'a namespace seen: its labels decided');
  t.equal(wanted('new', namespaceLabels, ISTIO), undefined, 'no entry selects namespaces');
});

/** An app applying MESH_ONLY, none of whose namespaces' labels it has seen, reading them with `read`; its log lines and metrics. */
function missingNamespaces(t: Test, read?: AppOptions['readNamespaceLabels']) {
  const lines: Array<Record<string, unknown>> = [];
  const metrics = new Registry();
  const app = testApp({
    injectedSidecarsNow: () => ({ policy: MESH_ONLY, namespaceLabels: new Map() }),
    ...(read ? { readNamespaceLabels: read } : {}),
    metrics,
    logger: { level: 'info', stream: { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) } },
  });
  t.teardown(() => app.close());
  const misses = async () => sumSamples(await metrics.metrics(), 'sidecar_terminator_injected_sidecars_namespace_misses_total');
  return { app, lines, misses };
}

t.test('a namespace not seen yet is read from the API server, and the entries its labels select apply', async (t) => {
  const reads: Array<{ namespace: string; timeoutMs: number }> = [];
  const { app, lines, misses } = missingNamespaces(t, async (namespace, timeoutMs) => {
    reads.push({ namespace, timeoutMs });
    return { 'istio-injection': 'enabled' };
  });
  for (const [what, metadata] of [
    ['on the event loop', {}],
    ['in the worker thread', { annotations: { padding: 'x'.repeat(OFFLOAD_BODY_BYTES) } }],
  ] as const) {
    const review = injectedPod('new', metadata);
    const patched = applyPatch(review.request.object, patchOf((await post(app, 'mutate', review)).review));
    t.equal(patched.metadata.annotations[INJECTED_POLICY_ANNOTATION], 'istio', `${what}: the entry applied`);
    t.same(patched.metadata.labels, { [MANAGED_LABEL]: MANAGED }, `${what}: managed`);
  }
  t.same(reads.map(({ namespace }) => namespace), ['new', 'new'], 'read once per admission');
  t.ok(reads.every(({ timeoutMs }) => timeoutMs > 0 && timeoutMs <= NAMESPACE_READ_TIMEOUT_MS), `within ${NAMESPACE_READ_TIMEOUT_MS} ms`);
  t.equal(await misses(), 0, 'no miss');
  t.same(lines.filter((line) => line.level === 40), [], 'no warning');
});

t.test('a namespace that cannot be read: the pod gets nothing from the entries that select namespaces, a warning bound to the request says so, and it is counted', async (t) => {
  const { app, lines, misses } = missingNamespaces(t, async () => {
    throw new Error('namespaces "new" is forbidden');
  });
  const review = injectedPod('new');
  const answer = (await post(app, 'mutate', review)).review.response;
  t.same(answer, { uid: review.request.uid, allowed: true }, 'no entry applied: nothing to patch');
  t.equal(await misses(), 1, 'counted');
  t.match(lines.find((line) => line.level === 40), {
    reqId: String,
    uid: review.request.uid,
    namespace: 'new',
    entries: ['istio'],
    error: 'namespaces "new" is forbidden',
    msg: /cannot read the labels of the pod's namespace: the entries of the injected-sidecar policy that select namespaces were not applied/,
  });

  const unread = missingNamespaces(t);
  t.same((await post(unread.app, 'mutate', injectedPod('new'))).review.response?.patch, undefined, 'no reader: the same');
  t.equal(await unread.misses(), 1);
});

t.test('a large pod judged in the worker thread gets the same annotations, the namespaces\' labels going with the settings', async (t) => {
  const namespaceLabels = new Map([['mesh', { 'istio-injection': 'enabled' }]]);
  const app = testApp({ injectedSidecarsNow: () => ({ policy: MESH_ONLY, namespaceLabels }) });
  t.teardown(() => app.close());
  const review = injectedPod('mesh', { annotations: { padding: 'x'.repeat(OFFLOAD_BODY_BYTES) } });
  t.ok(JSON.stringify(review).length > OFFLOAD_BODY_BYTES, 'large enough for the worker');
  const answer = (await post(app, 'mutate', review)).review;
  const patched = applyPatch(review.request.object, patchOf(answer));
  t.equal(patched.metadata.annotations[INJECTED_POLICY_ANNOTATION], 'istio');
  t.same(patched.metadata.labels, { [MANAGED_LABEL]: MANAGED });
});

t.test('with --native-sidecars, a pod with a sidecar the policy named stays for the watcher, its own marked sidecar with it, and the warning names the entry', async (t) => {
  const ownSidecar = { name: 'cloud-sql-proxy', image: 'gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.14.0', env: [{ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT', value: 'true' }] };
  const review = injectedPod('batch', {}, [{ name: 'main', image: 'busybox:1.36' }, ownSidecar]);
  const answer = mutateNativeSidecars(review.request, { ...withPolicy(ISTIO), nativeSidecars: true, oldKubelets: [] });
  const reasons = [
    "metadata.annotations[sidecar-terminator.io/injected-sidecar-policy]: sidecar istio-proxy is named by entry istio of the injected-sidecar policy: another webhook injects it, and it stays where that webhook puts it, and so do the pod's other sidecars (they move all or none)",
    'spec.containers[2]: sidecar istio-proxy is stopped by its HTTP shutdown request; a native sidecar gets SIGTERM instead',
  ];
  t.equal(answer.migration, 'kept');
  t.same(answer.response.warnings, reasons.map((reason) => `not moved to native sidecars (the watcher stops the sidecars): ${reason}`));
  const pod = applyPatch(review.request.object, patchOf({ apiVersion: ADMISSION_API_VERSION, kind: 'AdmissionReview', response: { uid: '', ...answer.response } }));
  t.same(pod.spec, review.request.object.spec, 'nothing moved');
  t.same(pod.metadata.annotations, { ...ISTIO_ANNOTATIONS, [SKIPPED_ANNOTATION]: reasons.join('; ') }, "the policy's annotations, and why the pod stays");
  t.same(pod.metadata.labels, { [MANAGED_LABEL]: MANAGED }, 'managed: the watcher stops both');
});
