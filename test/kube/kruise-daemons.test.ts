// Which nodes a kruise-daemon serves (src/kube/kruise-daemons.ts): the nodes of its ready pods in
// OpenKruise's namespace; a watcher that may not list them cannot tell.
import type { V1Pod } from '@kubernetes/client-node';
import t from 'tap';
import { KRUISE_DAEMON_SELECTOR, readKruiseDaemonNodes } from '../../src/kube/kruise-daemons.ts';

const apiError = (code: number) => Object.assign(new Error(`HTTP ${code}`), { code });
const daemon = (node: string | undefined, overrides: { phase?: string; ready?: string; deleting?: boolean } = {}): V1Pod => ({
  metadata: { name: `kruise-daemon-${node}`, ...(overrides.deleting ? { deletionTimestamp: new Date() } : {}) },
  spec: { containers: [], ...(node ? { nodeName: node } : {}) },
  status: { phase: overrides.phase ?? 'Running', conditions: [{ type: 'Ready', status: overrides.ready ?? 'True' }] },
});

t.test('the nodes of the running, ready daemon pods, listed by their label in the namespace given', async (t) => {
  const asked: unknown[] = [];
  const core = {
    listNamespacedPod: async (request: { namespace: string; labelSelector?: string }) => {
      asked.push(request);
      return {
        items: [
          daemon('node-a'),
          daemon('node-b', { ready: 'False' }),
          daemon('node-c', { phase: 'Pending' }),
          daemon('node-d', { deleting: true }),
          daemon(undefined),
          daemon('node-e'),
        ],
      };
    },
  };
  const read = await readKruiseDaemonNodes(core, 'openkruise');
  t.same(asked, [{ namespace: 'openkruise', labelSelector: KRUISE_DAEMON_SELECTOR, fieldSelector: 'status.phase=Running', resourceVersion: '0' }], 'running pods by their label, from the watch cache');
  t.same('nodes' in read ? [...read.nodes].sort() : read, ['node-a', 'node-e'], 'not one unready, pending, being deleted or unscheduled');
});

t.test('none: an empty set, which is not the same as not knowing', async (t) => {
  const read = await readKruiseDaemonNodes({ listNamespacedPod: async () => ({ items: [] }) }, 'kruise-system');
  t.ok('nodes' in read && read.nodes.size === 0);
});

t.test('forbidden: unknown, with why; any other error is thrown', async (t) => {
  const refused = await readKruiseDaemonNodes({ listNamespacedPod: async () => { throw apiError(403); } }, 'kruise-system');
  t.same(refused, { unknown: 'the watcher may not list pods in namespace kruise-system' });
  await t.rejects(readKruiseDaemonNodes({ listNamespacedPod: async () => { throw apiError(500); } }, 'kruise-system'), { code: 500 });
});
