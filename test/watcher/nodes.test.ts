// Node lookups: a node found is kept a while; a node that does not exist is reported as missing
// and looked up again next time; a lookup that fails throws (the queue retries) and is not kept.
import t from 'tap';
import type { V1Node } from '@kubernetes/client-node';
import { NodeLookup } from '../../src/watcher/nodes.ts';

function fakeApi(answers: Array<V1Node | { code: number }>) {
  const calls: string[] = [];
  return {
    calls,
    readNode: async ({ name }: { name: string }) => {
      calls.push(name);
      const answer = answers.shift();
      if (!answer) throw new Error('no more answers');
      if ('code' in answer) throw Object.assign(new Error(`HTTP ${answer.code}`), { code: answer.code });
      return answer;
    },
  };
}

t.test('a node that does not exist is missing, and is looked up again', async (t) => {
  const api = fakeApi([{ code: 404 }, { code: 404 }, { metadata: { name: 'n', labels: { type: 'virtual-kubelet' } } }]);
  const nodes = new NodeLookup(api);
  t.equal(await nodes.get('n'), 'missing');
  t.equal(await nodes.get('n'), 'missing');
  t.match(await nodes.get('n'), { metadata: { labels: { type: 'virtual-kubelet' } } }, 'registered again: its kind is read');
  t.equal(api.calls.length, 3, 'nothing cached while missing');
});

t.test('a lookup that fails throws and is not kept; a node found is kept', async (t) => {
  const api = fakeApi([{ code: 503 }, { metadata: { name: 'n' } }]);
  const nodes = new NodeLookup(api);
  await t.rejects(nodes.get('n'), { code: 503 }, 'the error reaches the queue, which retries');
  t.same(await nodes.get('n'), { metadata: { name: 'n' } });
  t.same(await nodes.get('n'), { metadata: { name: 'n' } });
  t.equal(api.calls.length, 2, 'the second read came from the cache');
  t.equal(await nodes.get(undefined), undefined, 'an unscheduled pod has no node');
});
