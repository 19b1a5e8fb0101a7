// The watcher's wiring (src/watcher/watcher.ts), through its public API with no API server: the pod
// cache's list and watch are test/support/fake-kube.ts's FakePodListWatch, its requests FakeApis,
// and the cluster's kill mechanism a function the test answers. A pod listed is reconciled and
// stopped with the cluster's mechanism; a pod that leaves the watch is read once more for its stop
// record; ready() follows the list; a change of mechanism is said in the log and on the Lease;
// stop() stops taking pods.
import t, { type Test } from 'tap';
import { KubeConfig, type CoreV1Event, type V1EphemeralContainer, type V1Pod } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { CONDITION_REASONS, EVENT_REASONS, KILL_MECHANISM_CHANGED, TERMINATED_CONDITION, crrName, type ClusterKillMechanism } from '../../src/policy/index.ts';
import type { PodListPage } from '../../src/watcher/reflector.ts';
import { Watcher, type WatcherOptions } from '../../src/watcher/watcher.ts';
import { WatcherMetrics } from '../../src/watcher/watcher-metrics.ts';
import { FakePodListWatch, apiError, fakeBatchV1Api, fakeCoreV1Api, fakeCustomObjectsApi, podPage } from '../support/fake-kube.ts';
import { capturingLogger } from '../support/logger.ts';
import { containerStatus, jobPod, killSidecar, main, normalNode } from '../support/pods.ts';
import { waitFor } from '../support/wait.ts';

/** Generous: a loaded machine still gets there; a fast one returns at once. */
const WAIT = { timeoutMs: 30_000, intervalMs: 5 };

const SIGNAL = { image: 'registry.example.com/stop-sidecar:1.0', command: ['/stop-sidecar'] };
const LEASE = { namespace: 'sidecar-terminator', name: 'sidecar-terminator-watcher' };

const signal: ClusterKillMechanism = { mechanism: 'signal' };
const crrOnNodeA: ClusterKillMechanism = { mechanism: 'crr', crrVersion: 'v1beta1', daemons: { nodes: new Set(['node-a']) } };

/** A Job's pod whose main container exited 0 just now (a stop request is not overdue), while its sidecar runs. */
function mainExited(): V1Pod {
  const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' });
  for (const status of pod.status!.containerStatuses!) {
    if (status.state?.terminated) status.state.terminated.finishedAt = new Date();
    if (status.state?.running) status.state.running.startedAt = new Date();
  }
  return pod;
}

/** `pod` once ended: its sidecar stopped 2 s after the main container, by the signal containers sent (if any); phase Succeeded. */
function ended(pod: V1Pod, signalContainers: V1EphemeralContainer[] = []): V1Pod {
  const mainEnd = pod.status!.containerStatuses!.find((status) => status.name === 'main')!.state!.terminated!.finishedAt!;
  const proxy = containerStatus('proxy', 0);
  proxy.state!.terminated!.finishedAt = new Date(mainEnd.getTime() + 2000);
  return {
    ...pod,
    metadata: { ...pod.metadata, resourceVersion: '102' },
    spec: { ...pod.spec!, ephemeralContainers: signalContainers },
    status: {
      ...pod.status,
      phase: 'Succeeded',
      containerStatuses: [pod.status!.containerStatuses![0]!, proxy],
      ephemeralContainerStatuses: signalContainers.map((container) => containerStatus(container.name, 0)),
    },
  };
}

/** Lets what the fakes answered at once run to its end. */
const settle = async () => {
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
};

interface Setup {
  /** What the cluster's kill mechanism reads as, in turn (the last one repeats); a promise is an answer that takes its time. */
  cluster?: Array<ClusterKillMechanism | Promise<ClusterKillMechanism>>;
  /** How often the mechanism is read again; 0: only at start. */
  checkIntervalMs?: number;
  lease?: WatcherOptions['lease'];
}

/**
 * A watcher on fakes: the pods' list and watch, the API clients (nodes are normal nodes, pods are
 * read from `apiPods`, and patches answer with them as they are there, events and
 * ContainerRecreateRequests are created as sent), and the cluster's kill mechanism. Stopped at the
 * end of the test.
 */
function watcherOn(t: Test, { cluster = [signal], checkIntervalMs = 0, lease }: Setup = {}) {
  const listWatch = new FakePodListWatch();
  const apiPods = new Map<string, V1Pod>();
  const core = fakeCoreV1Api()
    .handle('readNamespacedPod', ({ namespace, name }) => {
      const pod = apiPods.get(`${namespace}/${name}`);
      if (!pod) throw apiError(404);
      return pod;
    })
    .handle('readNode', ({ name }) => ({ ...normalNode, metadata: { ...normalNode.metadata, name } }))
    .handle('createNamespacedEvent', ({ body }) => body)
    .handle('patchNamespacedPodEphemeralcontainers', ({ namespace, name }) => apiPods.get(`${namespace}/${name}`) ?? {})
    .handle('patchNamespacedPodStatus', ({ namespace, name }) => apiPods.get(`${namespace}/${name}`) ?? {});
  const custom = fakeCustomObjectsApi().handle('createNamespacedCustomObject', ({ body }) => body as object);
  const batch = fakeBatchV1Api();
  const { logger, lines } = capturingLogger();
  let asked = 0;
  const watcher = new Watcher({
    // No cluster: a request that is not faked fails at once instead of reaching a network.
    kubeConfig: new KubeConfig(),
    namespaces: [],
    killMechanism: 'auto',
    killMechanismCheckIntervalMs: checkIntervalMs,
    kruiseNamespace: 'kruise-system',
    ...(lease ? { lease } : {}),
    signal: SIGNAL,
    concurrency: 2,
    logger,
    metrics: new WatcherMetrics(new Registry()),
    resyncIntervalMs: 0,
    sweepIntervalMs: 0,
    excludedNamespaces: [],
    namespaceLabels: [],
    quickExitImageAllowlist: [],
    quickExitImage: '',
    clients: { core: core.api, custom: custom.api, batch: batch.api },
    listWatch,
    resolveKillMechanism: async () => cluster[Math.min(asked++, cluster.length - 1)]!,
  });
  t.teardown(() => watcher.stop());
  const events = () => core.requests('createNamespacedEvent').map((request) => request.body);
  const said = (message: string) => lines.filter((line) => line.message === message);
  /** What was logged above info: nothing, when every request went as scripted. */
  const warned = () => lines.filter((line) => line.level === 'warn' || line.level === 'error').map((line) => line.message);
  return { watcher, listWatch, apiPods, core, custom, events, said, warned, asked: () => asked };
}

/** The events with this reason. */
const withReason = (events: CoreV1Event[], reason: string) => events.filter((event) => event.reason === reason);

/** A list page the test answers when it chooses. */
function pendingPage() {
  let answer: (page: PodListPage) => void = () => {};
  const page = new Promise<PodListPage>((resolve) => (answer = resolve));
  return { page, answer: (pods: V1Pod[]) => answer(podPage(pods, '10')) };
}

type Operation = { op: string; path: string; value?: unknown };

t.test('a pod listed whose main container exited, with signal: its signal container in one ephemeralcontainers patch, and one SidecarTerminator event', async (t) => {
  const { watcher, listWatch, core, custom, events, said, warned } = watcherOn(t);
  listWatch.answerList(podPage([mainExited()], '10'));
  await watcher.start();
  await waitFor('the signal container sent', () => core.requests('patchNamespacedPodEphemeralcontainers').length > 0, WAIT);
  await waitFor('the stopping event', () => withReason(events(), EVENT_REASONS.stopping).length > 0, WAIT);
  await settle();

  t.same(listWatch.lists.map((list) => list.path), ['/api/v1/pods'], 'every namespace, in one list');
  t.same(core.requests('readNode'), [{ name: 'node-a' }], "the pod's node read, for its kind");
  t.same(core.requests('patchNamespacedPodEphemeralcontainers'), [{
    name: 'job-abc',
    namespace: 'default',
    body: [
      { op: 'test', path: '/metadata/uid', value: 'uid-1' },
      { op: 'add', path: '/metadata/resourceVersion', value: '100' },
      {
        op: 'add',
        path: '/spec/ephemeralContainers',
        value: [{
          name: 'stop-proxy',
          image: SIGNAL.image,
          command: SIGNAL.command,
          args: ['--grace-period=30'],
          targetContainerName: 'proxy',
          terminationMessagePolicy: 'FallbackToLogsOnError',
          securityContext: { runAsUser: 0, capabilities: { drop: ['ALL'], add: ['KILL'] }, allowPrivilegeEscalation: false, seccompProfile: { type: 'RuntimeDefault' } },
        }],
      },
    ],
  }], "one write, for the pod as listed (its uid and resourceVersion), creating its ephemeral containers with proxy's signal container");
  t.same(custom.calls, [], 'no ContainerRecreateRequest');

  const stopping = withReason(events(), EVENT_REASONS.stopping);
  t.equal(stopping.length, 1, 'one event');
  t.match(stopping[0], { type: 'Normal', action: 'stop-requested', message: 'stopping sidecars: proxy (SIGTERM)', involvedObject: { kind: 'Pod', namespace: 'default', name: 'job-abc', uid: 'uid-1' } });
  t.notOk(stopping[0]!.related, 'related to no ContainerRecreateRequest');
  t.match(said('stopping sidecars'), [{ level: 'info', fields: { sidecars: ['proxy (SIGTERM)'], steps: ['add-signal-containers'] } }]);
  t.match(said('watcher starting'), [{ level: 'info', fields: { killMechanism: 'signal', namespaces: [] } }]);
  t.same(warned(), [], 'no request failed or was retried');
});

t.test("the cluster serves ContainerRecreateRequests, with a daemon on the pod's node: one ContainerRecreateRequest instead, which the event names", async (t) => {
  const { watcher, listWatch, core, custom, events, warned } = watcherOn(t, { cluster: [crrOnNodeA] });
  listWatch.answerList(podPage([mainExited()], '10'));
  await watcher.start();
  await waitFor('the ContainerRecreateRequest created', () => custom.requests('createNamespacedCustomObject').length > 0, WAIT);
  await waitFor('the stopping event', () => withReason(events(), EVENT_REASONS.stopping).length > 0, WAIT);
  await settle();

  t.same(custom.requests('createNamespacedCustomObject'), [{
    group: 'apps.kruise.io',
    version: 'v1beta1',
    namespace: 'default',
    plural: 'containerrecreaterequests',
    body: {
      kind: 'ContainerRecreateRequest',
      apiVersion: 'apps.kruise.io/v1beta1',
      metadata: {
        name: crrName('uid-1'),
        namespace: 'default',
        ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'job-abc', uid: 'uid-1', controller: true, blockOwnerDeletion: true }],
      },
      spec: { podName: 'job-abc', containers: [{ name: 'proxy' }], strategy: { failurePolicy: 'Ignore', forceRecreate: true } },
    },
  }], 'one request, of the version the cluster serves, for the sidecar, owned by the pod');
  t.same(core.requests('patchNamespacedPodEphemeralcontainers'), [], 'no signal container');
  const stopping = withReason(events(), EVENT_REASONS.stopping);
  t.equal(stopping.length, 1, 'one event');
  t.match(stopping[0], {
    message: 'stopping sidecars: proxy (ContainerRecreateRequest)',
    related: { apiVersion: 'apps.kruise.io/v1beta1', kind: 'ContainerRecreateRequest', namespace: 'default', name: crrName('uid-1') },
  });
  t.same(warned(), [], 'no request failed or was retried');
});

t.test('a pod told to stop its sidecars that leaves the watch is read once more, and gets its stop record; one that was not told is not read', async (t) => {
  const { watcher, listWatch, apiPods, core, said, warned } = watcherOn(t);
  const stopped = mainExited();
  const running = jobPod([main(), killSidecar('proxy')], { main: 'running', proxy: 'running' }, { metadata: { name: 'job-def', uid: 'uid-2' } });
  listWatch.answerList(podPage([stopped, running], '10'));
  await watcher.start();
  const [patch] = await waitFor('the signal container sent', () => core.requests('patchNamespacedPodEphemeralcontainers').length > 0 && core.requests('patchNamespacedPodEphemeralcontainers'), WAIT);
  await waitFor('the running pod reconciled', () => said('nothing to do').length > 0, WAIT);
  const sent = ((patch!.body as Operation[])[2]!.value as V1EphemeralContainer[]);

  // The pods end: a pod leaving the in-flight field selector is a DELETED event of its watch.
  const end = ended(stopped, sent);
  apiPods.set('default/job-abc', end);
  apiPods.set('default/job-def', { ...running, status: { ...running.status, phase: 'Succeeded' } });
  listWatch.latest!.send('DELETED', end);
  listWatch.latest!.send('DELETED', running);
  await waitFor('the stop record written', () => core.requests('patchNamespacedPodStatus').length > 0, WAIT);
  await waitFor('the end logged', () => said('pod ended').length > 0, WAIT);
  await settle();

  t.same(core.requests('readNamespacedPod'), [{ name: 'job-abc', namespace: 'default' }], 'the pod told to stop read once; the other not at all');
  const writes = core.requests('patchNamespacedPodStatus');
  t.equal(writes.length, 1, 'one status write');
  t.match(writes[0], { name: 'job-abc', namespace: 'default' });
  const [uid, version, condition] = writes[0]!.body as Operation[];
  t.same([uid, version], [
    { op: 'test', path: '/metadata/uid', value: 'uid-1' },
    { op: 'add', path: '/metadata/resourceVersion', value: '102' },
  ], 'written on the pod as read now');
  t.match(condition, { op: 'add', path: '/status/conditions', value: [{ type: TERMINATED_CONDITION, status: 'True', reason: CONDITION_REASONS.stopping }] });
  const record: unknown = JSON.parse((condition!.value as Array<{ message: string }>)[0]!.message);
  t.same(record, {
    phase: 'Succeeded',
    mains: [{ name: 'main', exitCode: 0 }],
    sidecars: [{ name: 'proxy', exitCode: 0, stoppedBy: ['signal'], secondsAfterMains: 2 }],
  }, 'the record: the main container, and the sidecar stopped by its signal container 2 s after it');
  t.match(said('sidecars stopped; the pod left the watch'), [{ fields: { pod: 'default/job-abc', uid: 'uid-1' } }], 'its stop duration observed as it left');
  t.match(said('pod ended'), [{ level: 'info', fields: { pod: 'default/job-abc', uid: 'uid-1', phase: 'Succeeded', sidecars: [{ name: 'proxy', stoppedBy: ['signal'] }] } }]);
  t.same(warned(), [], 'no request failed or was retried');
});

t.test('a pod stopped by a ContainerRecreateRequest that leaves the watch: its record says so', async (t) => {
  const { watcher, listWatch, apiPods, core, custom } = watcherOn(t, { cluster: [crrOnNodeA] });
  const pod = mainExited();
  listWatch.answerList(podPage([pod], '10'));
  await watcher.start();
  await waitFor('the ContainerRecreateRequest created', () => custom.requests('createNamespacedCustomObject').length > 0, WAIT);
  const end = ended(pod);
  apiPods.set('default/job-abc', end);
  listWatch.latest!.send('DELETED', end);
  const [write] = await waitFor('the stop record written', () => core.requests('patchNamespacedPodStatus').length > 0 && core.requests('patchNamespacedPodStatus'), WAIT);
  const condition = (write!.body as Operation[])[2]!.value as Array<{ message: string }>;
  t.match(JSON.parse(condition[0]!.message), { sidecars: [{ name: 'proxy', stoppedBy: ['crr'] }] }, 'the sidecars in its request, as the watcher kept them while the pod was in the watch');
});

t.test('ready() only once the list has synced: not before start, nor while the list fails or is under way', async (t) => {
  const { watcher, listWatch, said } = watcherOn(t);
  const { page, answer } = pendingPage();
  listWatch.answerList(apiError(503), page);
  t.notOk(watcher.ready(), 'not started');
  await watcher.start();
  t.notOk(watcher.ready(), 'started, not listed');
  await waitFor('the failed list logged', () => said('pod watch failed, retrying').length > 0, WAIT);
  await waitFor('the list asked again', () => listWatch.lists.length === 2, WAIT);
  t.notOk(watcher.ready(), 'the list failed, and is asked again');
  answer([mainExited()]);
  await waitFor('ready', () => watcher.ready(), WAIT);
  t.match(said('managed pods listed'), [{ fields: { namespace: '*', pods: 1 } }], 'ready as the list came in');
  t.equal(listWatch.watches.length, 1, 'and the watch starts from it');
});

t.test('a change of kill mechanism is logged, recorded as an event on the Lease, and taken by the pods that come next', async (t) => {
  const { watcher, listWatch, custom, core, events, said, warned } = watcherOn(t, { cluster: [signal, crrOnNodeA], checkIntervalMs: 10, lease: LEASE });
  listWatch.answerList(podPage([], '10'));
  await watcher.start();
  const message = 'kill mechanism signal -> crr: the cluster now serves apps.kruise.io/v1beta1 ContainerRecreateRequest; a pod whose sidecars were told to stop already finishes with the mechanism it began with';
  const [logged] = await waitFor('the change logged', () => said(message).length > 0 && said(message), WAIT);
  t.match(logged, { level: 'info', fields: { previous: 'signal', killMechanism: 'crr' } });
  await waitFor('the event on the Lease', () => withReason(events(), KILL_MECHANISM_CHANGED).length > 0, WAIT);
  const [request] = core.requests('createNamespacedEvent');
  t.equal(request?.namespace, LEASE.namespace, "in the Lease's namespace");
  t.match(request?.body, { type: 'Normal', reason: KILL_MECHANISM_CHANGED, message, involvedObject: { kind: 'Lease', apiVersion: 'coordination.k8s.io/v1', ...LEASE } });

  await waitFor('the watch open', () => listWatch.latest, WAIT);
  listWatch.latest!.send('ADDED', mainExited());
  await waitFor('the ContainerRecreateRequest created', () => custom.requests('createNamespacedCustomObject').length > 0, WAIT);
  t.match(custom.requests('createNamespacedCustomObject'), [{ version: 'v1beta1', body: { spec: { containers: [{ name: 'proxy' }] } } }], 'a pod after the change is stopped with the version now served');
  t.same(core.requests('patchNamespacedPodEphemeralcontainers'), [], 'not by a signal container');
  t.equal(withReason(events(), KILL_MECHANISM_CHANGED).length, 1, 'the mechanism, unchanged since, is announced once');
  t.same(warned(), [], 'no request failed or was retried');
});

t.test('stop(): the watch ends and is not opened again, a reconcile under way is finished first, and the cluster is not asked again', async (t) => {
  const { watcher, listWatch, core, asked } = watcherOn(t, { checkIntervalMs: 10 });
  let release: () => void = () => {};
  core.answer('patchNamespacedPodEphemeralcontainers', new Promise((resolve) => (release = () => resolve({}))));
  listWatch.answerList(podPage([mainExited()], '10'));
  await watcher.start();
  await waitFor('the signal container under way', () => core.requests('patchNamespacedPodEphemeralcontainers').length > 0, WAIT);
  let stopped = false;
  const stopping = watcher.stop().then(() => (stopped = true));
  await settle();
  t.notOk(stopped, 'stop() waits for the reconcile under way');
  t.ok(listWatch.latest?.aborted, 'the watch is ended at once');
  const askedAtStop = asked();
  release();
  await stopping;
  t.ok(stopped);
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.equal(listWatch.lists.length, 1, 'no list again');
  t.equal(listWatch.watches.length, 1, 'no watch again');
  t.equal(asked(), askedAtStop, 'the kill mechanism is not asked again');
});

t.test('stop() while the list is under way: the pods it brings are not taken', async (t) => {
  const { watcher, listWatch, core, events } = watcherOn(t);
  const { page, answer } = pendingPage();
  listWatch.answerList(page);
  await watcher.start();
  await watcher.stop();
  answer([mainExited()]);
  await settle();
  t.same(core.calls, [], 'no node read, no write, no event');
  t.same(events(), []);
  t.equal(listWatch.watches.length, 0, 'no watch opened');
  t.notOk(watcher.ready());
});

t.test('stop() before the kill mechanism is known: nothing is listed', async (t) => {
  let resolve: (mechanism: ClusterKillMechanism) => void = () => {};
  const { watcher, listWatch, said } = watcherOn(t, { cluster: [new Promise((done) => (resolve = done))] });
  const starting = watcher.start();
  await watcher.stop();
  resolve(signal);
  await starting;
  await settle();
  t.same(listWatch.lists, [], 'no list');
  t.same(said('watcher starting'), [], 'and the watcher did not start');
  t.notOk(watcher.ready());
});
