// The reconciler plans from the watch's copy of the pod, which may lag: before saying a sidecar
// ignores SIGTERM (read from the absence of a change), it reads the pod as it is now.
import t from 'tap';
import type { V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import type { Plan } from '../../src/policy/index.ts';
import { NodeLookup } from '../../src/watcher/nodes.ts';
import { AFTER_POD_CHANGED_MS, Reconciler } from '../../src/watcher/reconciler.ts';
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
    executor: { execute: async (_pod, plan) => (plans.push(plan), execution) },
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
