// The watcher's writes to pods, on a real API server: each reaches the pod it was decided for and
// no other. A pod deleted and created again under the same name between the read (the plan) and
// the write refuses every write, subresources included; a pod changed since the read refuses the
// writes that depend on what was read. The executor turns the refusal into "look again".
import t from 'tap';
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { CONDITION_REASONS, MANAGED_LABEL, PHASE_SET_ANNOTATION, TERMINATED_CONDITION, planStop, retainedPod } from '../../src/policy/index.ts';
import { Executor } from '../../src/watcher/executor.ts';
import { WatcherMetrics } from '../../src/watcher/watcher-metrics.ts';
import { PodChanged, PodWriter } from '../../src/watcher/pod-writes.ts';
import { startControlPlane } from '../support/control-plane.ts';
import { imageSidecar, killSidecar, main, normalNode } from '../support/pods.ts';

const cp = await startControlPlane();
t.teardown(() => cp.stop());
const core = cp.kubeConfig.makeApiClient(CoreV1Api);
const writer = new PodWriter(core);
const strategicMerge = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const namespace = await cp.createNamespace();

const condition = { type: TERMINATED_CONDITION, status: 'True', reason: CONDITION_REASONS.stopping, message: 'stopping sidecars: proxy (SIGTERM)' };
const signalContainer = { name: 'stop-proxy', image: 'st:1', command: ['true'], targetContainerName: 'proxy' };

async function createPod(name: string): Promise<V1Pod> {
  return core.createNamespacedPod({
    namespace,
    body: { metadata: { name, labels: { [MANAGED_LABEL]: 'true' } }, spec: { restartPolicy: 'Never', containers: [main(), killSidecar('proxy'), imageSidecar('logs')] } },
  });
}

/** Deletes the pod at once and creates another under the same name. */
async function replace(pod: V1Pod): Promise<V1Pod> {
  const name = pod.metadata!.name!;
  await core.deleteNamespacedPod({ namespace, name, body: { gracePeriodSeconds: 0 } });
  for (let i = 0; i < 100; i++) {
    try {
      await core.readNamespacedPod({ namespace, name });
      await new Promise((resolve) => setTimeout(resolve, 100));
    } catch {
      break;
    }
  }
  return createPod(name);
}

t.test('every write succeeds on the pod it was read from, each carrying the version the previous one left', async (t) => {
  let pod = await createPod('ok');
  pod = await writer.replaceImage(pod, 'logs', 'registry.example.com/quick-exit:1.0');
  pod = await writer.addEphemeralContainers(pod, [signalContainer]);
  pod = await writer.setStatus(pod, condition);
  pod = await writer.setStatus(pod, { ...condition, status: 'False', reason: CONDITION_REASONS.imageNotPulled, message: 'waiting' });
  pod = await writer.addEphemeralContainers(pod, [{ ...signalContainer, name: 'stop-logs', targetContainerName: 'logs' }]);
  await writer.setStatus(pod, condition, 'Succeeded');
  const stored = await core.readNamespacedPod({ namespace, name: 'ok' });
  t.equal(stored.spec?.containers[2]?.image, 'registry.example.com/quick-exit:1.0');
  t.same(stored.spec?.ephemeralContainers?.map((c) => c.name), ['stop-proxy', 'stop-logs']);
  t.same(stored.status?.conditions?.filter((c) => c.type === TERMINATED_CONDITION).map((c) => [c.status, c.reason]), [['True', CONDITION_REASONS.stopping]], 'one condition of its type, replaced in place');
  t.equal(stored.status?.phase, 'Succeeded');
  t.same(stored.metadata?.annotations, { [PHASE_SET_ANNOTATION]: 'Succeeded' }, 'the phase-set annotation, written with the phase');
});

t.test('the phase-set annotation joins the annotations a pod has, and only a write of the phase writes it', async (t) => {
  await createPod('annotated');
  let pod = await core.patchNamespacedPod({ namespace, name: 'annotated', body: { metadata: { annotations: { 'example.com/team': 'data' } } } }, mergePatch);
  pod = await writer.setStatus(pod, condition);
  t.same(pod.metadata?.annotations, { 'example.com/team': 'data' }, 'a condition alone: no annotation');
  // As the watcher writes it: from the pod its cache keeps, without the other annotations.
  pod = await writer.setStatus(retainedPod(pod), condition, 'Failed');
  t.same(pod.metadata?.annotations, { 'example.com/team': 'data', [PHASE_SET_ANNOTATION]: 'Failed' }, 'from the pod as the cache keeps it, the other annotations kept');
  t.equal(pod.status?.phase, 'Failed');
});

t.test('a pod deleted and created again under the same name between read and write refuses every write', async (t) => {
  const read = await createPod('recreated');
  const successor = await replace(read);
  t.not(successor.metadata?.uid, read.metadata?.uid, 'another pod under the same name');
  const writes: Array<[string, () => Promise<unknown>]> = [
    ['image (spec)', () => writer.replaceImage(read, 'logs', 'registry.example.com/quick-exit:1.0')],
    ['condition and phase (status subresource)', () => writer.setStatus(read, condition, 'Succeeded')],
    ['signal container (ephemeralcontainers subresource)', () => writer.addEphemeralContainers(read, [signalContainer])],
  ];
  for (const [what, write] of writes) await t.rejects(write(), PodChanged, what);
  const stored = await core.readNamespacedPod({ namespace, name: 'recreated' });
  t.equal(stored.metadata?.uid, successor.metadata?.uid);
  t.equal(stored.metadata?.labels?.[MANAGED_LABEL], 'true', 'label untouched');
  t.equal(stored.spec?.containers[2]?.image, 'fluent/fluent-bit:3.1', 'image untouched');
  t.notOk(stored.spec?.ephemeralContainers, 'no ephemeral container');
  t.notOk(stored.status?.conditions?.some((c) => c.type === TERMINATED_CONDITION), 'no condition');
  t.not(stored.status?.phase, 'Succeeded', 'phase untouched');
  await t.rejects(writer.replaceImage({ ...read, metadata: { ...read.metadata, name: 'never-existed' } }, 'logs', 'registry.example.com/quick-exit:1.0'), PodChanged, 'a pod that is gone');
});

t.test('a pod changed since it was read refuses the writes that depend on what was read', async (t) => {
  const read = await createPod('changed');
  // kubectl debug, meanwhile: the list of ephemeral containers read is not the one there.
  await core.patchNamespacedPodEphemeralcontainers({ namespace, name: 'changed', body: { spec: { ephemeralContainers: [{ ...signalContainer, name: 'debugger' }] } } }, strategicMerge);
  await t.rejects(writer.addEphemeralContainers(read, [signalContainer]), PodChanged, 'the ephemeral containers read are not the ones there');
  await t.rejects(writer.replaceImage(read, 'logs', 'registry.example.com/quick-exit:1.0'), PodChanged);
  await t.rejects(writer.setStatus(read, condition), PodChanged);
  const stored = await core.readNamespacedPod({ namespace, name: 'changed' });
  t.notOk(stored.spec?.ephemeralContainers?.some((c) => c.name === 'stop-proxy'), 'nothing added to a list read stale');
});

t.test('the executor, handed a plan for the pod that was replaced, acts on nothing and looks again', async (t) => {
  const read = await createPod('planned');
  const running = await core.patchNamespacedPodStatus(
    { namespace, name: 'planned', body: { status: { phase: 'Running', containerStatuses: ['main', 'proxy', 'logs'].map((name) => ({ name, image: 'x', imageID: '', ready: false, restartCount: 0, state: name === 'main' ? { terminated: { exitCode: 0, finishedAt: new Date().toISOString() } } : { running: { startedAt: new Date().toISOString() } } })) } } },
    mergePatch,
  );
  t.not(running.metadata?.resourceVersion, read.metadata?.resourceVersion);
  const settings = { killMechanism: 'signal' as const, signal: { image: 'st:1', command: ['true'] }, quickExitImageAllowlist: [], quickExitImage: 'quick-exit:1' };
  const plan = planStop(running, normalNode, settings, Date.now());
  t.same(plan.steps.map((s) => s.type), ['add-signal-containers', 'replace-image'], 'a plan that writes twice');
  const successor = await replace(running);
  const executor = new Executor({ core, custom: cp.kubeConfig.makeApiClient(CustomObjectsApi), crrVersion: undefined, metrics: new WatcherMetrics(new Registry()) });
  const result = await executor.execute(running, plan, pino({ level: 'silent' }));
  t.equal(result, 'pod-changed', 'the rest of the plan is dropped: the reconciler looks at the pod again once the watch has the new one');
  const stored = await core.readNamespacedPod({ namespace, name: 'planned' });
  t.equal(stored.metadata?.uid, successor.metadata?.uid);
  t.equal(stored.spec?.containers[2]?.image, 'fluent/fluent-bit:3.1', 'the successor keeps its image');
  t.notOk(stored.spec?.ephemeralContainers, 'and gets no signal container');
});
