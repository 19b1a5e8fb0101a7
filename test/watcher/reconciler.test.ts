// The reconciler plans from the watch's copy of the pod, which may lag: before saying a sidecar
// ignores SIGTERM (read from the absence of a change), it reads the pod as it is now.
import t from 'tap';
import type { V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import type { Plan } from '../../src/policy/index.ts';
import { NodeLookup } from '../../src/watcher/nodes.ts';
import { Reconciler } from '../../src/watcher/reconciler.ts';
import { jobPod, killSidecar, main, normalNode, status } from './pods.ts';

/** A pod whose sidecar proxy was signalled long ago (its grace period is over), proxy in `state`. */
function signalled(state: 'running' | number, uid = 'uid-1'): V1Pod {
  const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: state }, { terminationGracePeriodSeconds: 1, ephemeralContainers: [{ name: 'stop-proxy', image: 'st:1', targetContainerName: 'proxy' }] });
  pod.metadata!.uid = uid;
  pod.status!.ephemeralContainerStatuses = [status('stop-proxy', 0)];
  return pod;
}

function reconcilerWith(cached: V1Pod, current: V1Pod | { code: number }) {
  const plans: Plan[] = [];
  const reads: string[] = [];
  const reconciler = new Reconciler({
    findPod: () => cached,
    nodes: new NodeLookup({ readNode: async () => normalNode }),
    core: {
      readNamespacedPod: async ({ name }: { name: string }) => {
        reads.push(name);
        if ('code' in current) throw Object.assign(new Error('gone'), { code: current.code });
        return current;
      },
    },
    settings: { killMechanism: 'signal', signal: { image: 'st:1', command: ['true'] }, quickExitImageAllowlist: [] },
    executor: { execute: async (_pod, plan) => (plans.push(plan), {}) },
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
  t.match(plans[0]?.steps, [{ type: 'warn', count: { result: 'ignored' } }]);
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
  t.same(plans[0]?.steps.map((s) => s.type), ['addSignalContainers']);
});
