// Node lookups: a node found is kept a while; a node that does not exist is reported as missing
// and looked up again next time; a lookup that fails throws (the queue retries) and is not kept.
import t from 'tap';
import type { V1Node } from '@kubernetes/client-node';
import { NODE_CACHE_SIZE, NodeLookup } from '../../src/watcher/node-lookup.ts';
import { apiError, fakeCoreV1Api } from '../support/fake-kube.ts';

t.test('a node that does not exist is missing, and is looked up again', async (t) => {
  const core = fakeCoreV1Api().answer('readNode', apiError(404), apiError(404), { metadata: { name: 'n', labels: { type: 'virtual-kubelet' } } });
  const nodes = new NodeLookup(core.api);
  t.equal(await nodes.get('n'), 'missing');
  t.equal(await nodes.get('n'), 'missing');
  t.match(await nodes.get('n'), { metadata: { labels: { type: 'virtual-kubelet' } } }, 'registered again: its kind is read');
  t.equal(core.requests('readNode').length, 3, 'nothing cached while missing');
});

t.test('a lookup that fails throws and is not kept; a node found is kept', async (t) => {
  const core = fakeCoreV1Api().answer('readNode', apiError(503), { metadata: { name: 'n' } });
  const nodes = new NodeLookup(core.api);
  await t.rejects(nodes.get('n'), { code: 503 }, 'the error reaches the queue, which retries');
  t.same(await nodes.get('n'), { metadata: { name: 'n' } });
  t.same(await nodes.get('n'), { metadata: { name: 'n' } });
  t.equal(core.requests('readNode').length, 2, 'the second read came from the cache');
  t.equal(await nodes.get(undefined), undefined, 'an unscheduled pod has no node');
});

/** A node as the API server returns it: labels and taints, and the rest of a real Node's bulk (about 20 KB). */
function fullNode(name: string): V1Node {
  return {
    metadata: { name, uid: `uid-${name}`, labels: { 'kubernetes.io/hostname': name, type: 'virtual-kubelet' }, annotations: { 'node.alpha.kubernetes.io/ttl': '0', big: 'x'.repeat(8000) }, managedFields: [{ manager: 'kubelet', fieldsV1: { big: 'y'.repeat(4000) } }] },
    spec: { podCIDR: '10.0.0.0/24', taints: [{ key: 'virtual-kubelet.io/provider', value: 'eci', effect: 'NoSchedule' }] },
    status: { images: Array.from({ length: 40 }, (_, i) => ({ names: [`registry.example.com/image-${i}@sha256:${'0'.repeat(64)}`], sizeBytes: 1 })) },
  };
}

t.test('only labels and taints are kept, for a bounded number of nodes: 5,000 node names leave NODE_CACHE_SIZE', async (t) => {
  const core = fakeCoreV1Api().handle('readNode', ({ name }) => fullNode(name));
  const nodes = new NodeLookup(core.api);
  const first = await nodes.get('node-0');
  t.same(first, { metadata: { name: 'node-0', labels: { 'kubernetes.io/hostname': 'node-0', type: 'virtual-kubelet' } }, spec: { taints: [{ key: 'virtual-kubelet.io/provider', value: 'eci', effect: 'NoSchedule' }] } }, 'what the node kind is read from, and nothing else');
  for (let i = 1; i < 5000; i++) await nodes.get(`node-${i}`);
  t.equal(nodes.size, NODE_CACHE_SIZE, `${nodes.size} nodes kept after 5,000 node names`);
  t.comment(`kept: ${nodes.size} nodes of about ${JSON.stringify(first).length} bytes each as JSON, against ${JSON.stringify(fullNode('node-0')).length} for a whole Node`);
  const readsBefore = core.calls.length;
  await nodes.get('node-4999');
  t.equal(core.calls.length - readsBefore, 0, 'a recent node comes from the cache');
  await nodes.get('node-0');
  t.equal(core.calls.length - readsBefore, 1, 'the least recently used went first, and is read again');
});

t.test('a node in use stays while others come and go', async (t) => {
  const core = fakeCoreV1Api().handle('readNode', ({ name }) => fullNode(name));
  const nodes = new NodeLookup(core.api, 3);
  await nodes.get('busy');
  for (let i = 0; i < 10; i++) {
    await nodes.get(`spot-${i}`);
    await nodes.get('busy');
  }
  t.equal(nodes.size, 3);
  t.equal(core.calls.length, 11, 'the busy node was read once, each spot node once');
});
