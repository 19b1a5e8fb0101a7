// The reconciler plans from the watch's copy of the pod, which may lag: before saying a sidecar
// ignores SIGTERM (read from the absence of a change), it reads the pod as it is now. It computes
// the pod's container roles once, and turns a refusal into a report on the pod and a Refused error.
import t from 'tap';
import type { V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import type { Plan } from '../../src/policy/index.ts';
import { NodeLookup } from '../../src/watcher/node-lookup.ts';
import { PodMemories } from '../../src/watcher/pod-memory.ts';
import { AFTER_POD_CHANGED_MS, Reconciler } from '../../src/watcher/reconciler.ts';
import { Refused, isRefusal } from '../../src/watcher/retries.ts';
import { Registry } from 'prom-client';
import { WatcherMetrics } from '../../src/watcher/watcher-metrics.ts';
import { fakeCoreV1Api, fakeCustomObjectsApi } from '../support/fake-kube.ts';
import { containerStatus, jobPod, killSidecar, main, normalNode } from '../support/pods.ts';

/** A pod whose sidecar proxy was signalled long ago (its grace period is over), proxy in `state`. */
function signalled(state: 'running' | number, uid = 'uid-1'): V1Pod {
  const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: state }, { spec: { terminationGracePeriodSeconds: 1, ephemeralContainers: [{ name: 'stop-proxy', image: 'st:1', targetContainerName: 'proxy' }] } });
  pod.metadata!.uid = uid;
  pod.status!.ephemeralContainerStatuses = [containerStatus('stop-proxy', 0)];
  return pod;
}

function reconcilerWith(cached: V1Pod | undefined, current: V1Pod | { code: number }, execution: 'done' | 'pod-changed' = 'done') {
  const plans: Plan[] = [];
  const reads: string[] = [];
  const reconciler = new Reconciler({
    pods: { get: () => cached },
    nodes: new NodeLookup({ readNode: async () => normalNode }),
    core: {
      readNamespacedPod: async ({ name }: { name: string }) => {
        reads.push(name);
        if ('code' in current) throw Object.assign(new Error('gone'), { code: current.code });
        return current;
      },
    },
    settings: { killMechanism: 'signal', signal: { image: 'st:1', command: ['true'] }, quickExitImageAllowlist: [], quickExitImage: 'quick-exit:1' },
    executor: { execute: async (_pod, plan) => (plans.push(plan), execution), reportRefused: async () => {} },
    logger: pino({ level: 'silent' }),
  });
  return { reconciler, plans, reads };
}

t.test('the watch says the sidecar still runs, the API server says it stopped: no warning', async (t) => {
  const { reconciler, plans, reads } = reconcilerWith(signalled('running'), signalled(0));
  await reconciler.reconcile('default/job-abc');
  t.same(reads, ['job-abc'], 'read once, as it is now');
  t.same(plans[0]?.steps.map((s) => s.type), ['finish'], 'planned from the pod as it is: stopped');
});

t.test('it does still run: the warning stands', async (t) => {
  const { reconciler, plans } = reconcilerWith(signalled('running'), signalled('running'));
  await reconciler.reconcile('default/job-abc');
  t.match(plans[0]?.steps, [{ type: 'warn', code: 'signal-ignored' }]);
});

t.test('gone or replaced meanwhile: nothing is said about it', async (t) => {
  for (const current of [{ code: 404 }, signalled('running', 'uid-2')]) {
    const { reconciler, plans } = reconcilerWith(signalled('running'), current);
    t.same(await reconciler.reconcile('default/job-abc'), {});
    t.same(plans, []);
  }
});

t.test('other plans are made from the watch alone', async (t) => {
  const { reconciler, plans, reads } = reconcilerWith(jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' }), { code: 500 });
  await reconciler.reconcile('default/job-abc');
  t.same(reads, []);
  t.same(plans[0]?.steps.map((s) => s.type), ['add-signal-containers']);
});

t.test("the result: the plan's look-again delay, or a short one when the pod changed under a write", async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' });
  t.same(await reconcilerWith(pod, pod).reconciler.reconcile('default/job-abc'), {}, 'signal containers sent: nothing to look at until the pod changes');
  t.same(await reconcilerWith(pod, pod, 'pod-changed').reconciler.reconcile('default/job-abc'), { requeueAfterMs: AFTER_POD_CHANGED_MS });
  const graceRunning = signalled('running');
  graceRunning.spec!.terminationGracePeriodSeconds = 3600;
  graceRunning.status!.ephemeralContainerStatuses = [containerStatus('stop-proxy', 'running', { state: { running: { startedAt: new Date() } } })];
  const { requeueAfterMs } = await reconcilerWith(graceRunning, graceRunning).reconciler.reconcile('default/job-abc');
  t.ok(requeueAfterMs !== undefined && requeueAfterMs > 3_600_000 && requeueAfterMs <= 3_616_000, `the plan's delay: the grace period of the signal container started now, and a margin (${requeueAfterMs} ms)`);
  const gone = reconcilerWith(undefined, pod);
  t.same(await gone.reconciler.reconcile('default/job-abc'), {}, 'not in the cache (it left the watch): done');
  t.same(gone.plans, [], 'and nothing planned or executed');
});

t.test("a reconcile computes the pod's container roles once, and hands them to every decision about it", async (t) => {
  const markers = await import('../../src/policy/markers.ts');
  let computed = 0;
  const counted = (spec: Parameters<typeof markers.classifyContainers>[0], annotations?: Record<string, unknown>) => (computed++, markers.classifyContainers(spec, annotations));
  // Every module the reconciler and the executor load reads its markers from this copy, which counts.
  const mocks = { '../../src/policy/markers.ts': { ...markers, classifyContainers: counted, rolesOf: (pod: V1Pod) => counted(pod.spec ?? {}, markers.podAnnotations(pod)) } };
  const { Reconciler: Counted } = await t.mockImport<typeof import('../../src/watcher/reconciler.ts')>('../../src/watcher/reconciler.ts', mocks);
  const { Executor } = await t.mockImport<typeof import('../../src/watcher/executor.ts')>('../../src/watcher/executor.ts', mocks);
  const pod = jobPod([main(), killSidecar('proxy'), killSidecar('sql')], { main: 0, proxy: 'running', sql: 'running' });
  // The main container finished just now: the request is not overdue.
  for (const status of pod.status!.containerStatuses!) {
    if (status.state?.terminated) status.state.terminated.finishedAt = new Date();
    if (status.state?.running) status.state.running.startedAt = new Date();
  }
  const core = fakeCoreV1Api().handle('createNamespacedEvent', ({ body }) => body);
  const custom = fakeCustomObjectsApi().handle('createNamespacedCustomObject', ({ body }) => body as object);
  const executor = new Executor({
    core: core.api,
    custom: custom.api,
    crrVersion: 'v1beta1',
    metrics: new WatcherMetrics(new Registry()),
  });
  const reconciler = new Counted({
    pods: { get: () => pod },
    nodes: new NodeLookup({ readNode: async () => normalNode }),
    core: { readNamespacedPod: async () => pod },
    settings: { killMechanism: 'signal', signal: { image: 'st:1', command: ['true'] }, quickExitImageAllowlist: [], quickExitImage: '' },
    cluster: () => ({ mechanism: 'crr', crrVersion: 'v1beta1' }),
    executor,
    logger: pino({ level: 'silent' }),
  });
  await reconciler.reconcile('default/job-abc');
  t.match(custom.requests('createNamespacedCustomObject').map((request) => request.body as unknown), [{ kind: 'ContainerRecreateRequest', spec: { containers: [{ name: 'proxy' }, { name: 'sql' }] } }], 'stopped with the kill mechanism policy chose from the cluster: one ContainerRecreateRequest');
  t.equal(computed, 1, 'the roles were computed once');
});

t.test('a refusal is reported on the pod by the reconciler, and reaches the queue as a Refused error', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' });
  const forbidden = Object.assign(new Error('forbidden'), { code: 403 });
  const reported: unknown[] = [];
  const memories = new PodMemories();
  const reconcilerFailingWith = (error: Error) =>
    new Reconciler({
      pods: { get: () => pod },
      nodes: new NodeLookup({ readNode: async () => normalNode }),
      core: { readNamespacedPod: async () => pod },
      settings: { killMechanism: 'signal', signal: { image: 'st:1', command: ['true'] }, quickExitImageAllowlist: [], quickExitImage: '' },
      memories,
      executor: {
        execute: async () => {
          throw error;
        },
        reportRefused: async (refusedPod, refusal, memory) => void reported.push([refusedPod, refusal, memory]),
      },
      logger: pino({ level: 'silent' }),
    });
  const thrown = await reconcilerFailingWith(forbidden).reconcile('default/job-abc').catch((error: unknown) => error);
  t.ok(thrown instanceof Refused && thrown.cause === forbidden, 'a Refused error, with the refusal as its cause');
  t.ok(isRefusal(thrown), 'which the queue retries as a refusal (retryDelay)');
  t.same(reported, [[pod, forbidden, memories.of(pod)]], "reported once, with the pod's memory (its events: one Warning per pod and refusal)");
  const unavailable = Object.assign(new Error('unavailable'), { code: 503 });
  t.equal(await reconcilerFailingWith(unavailable).reconcile('default/job-abc').catch((error: unknown) => error), unavailable, 'anything else is thrown as it is');
  t.equal(reported.length, 1, 'and not reported');
});
