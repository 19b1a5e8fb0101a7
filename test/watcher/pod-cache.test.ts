// The watcher's pod cache (src/watcher/pod-cache.ts): one list-then-watch per namespace (or one for
// all) of the managed pods in flight, each pod kept as the stop plan reads it; what it tells its
// handler (a pod changed, a pod gone with its last state, a namespace's watch working again); and
// what it answers (hasSynced, get, keys, pods). The API server is test/support/fake-kube.ts's
// FakePodListWatch; timers are Node's mock.
import { mock } from 'node:test';
import t, { type Test } from 'tap';
import { KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { IN_FLIGHT_FIELD_SELECTOR, MANAGED, MANAGED_LABEL } from '../../src/policy/index.ts';
import { PodCache } from '../../src/watcher/pod-cache.ts';
import { FakePodListWatch, podPage } from '../support/fake-kube.ts';
import { capturingLogger } from '../support/logger.ts';

const pod = (namespace: string, name: string, resourceVersion = '1'): V1Pod => ({
  metadata: { name, namespace, resourceVersion, labels: { [MANAGED_LABEL]: MANAGED }, managedFields: [{ manager: 'kubelet' }] },
  spec: { containers: [{ name: 'main', image: 'busybox' }] },
});

const settle = () => new Promise((resolve) => setImmediate(resolve));

/** A PodCache on a FakePodListWatch and mock timers, with what it told its handler. */
function cacheOn(t: Test, namespaces: string[]) {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.teardown(() => mock.timers.reset());
  const listWatch = new FakePodListWatch();
  const told: string[] = [];
  const gone: V1Pod[] = [];
  const { logger, lines } = capturingLogger();
  const cache = new PodCache({ kubeConfig: new KubeConfig(), namespaces, logger, listWatch }, {
    changed: (key) => told.push(`changed ${key}`),
    gone: (last) => (told.push(`gone ${last.metadata?.namespace}/${last.metadata?.name}`), gone.push(last)),
    recovered: (namespace) => told.push(`recovered ${namespace}`),
  });
  t.teardown(() => cache.stop());
  return { cache, listWatch, told, gone, lines };
}

const collection = (namespace: string) => `/api/v1/namespaces/${namespace}/pods`;

t.test('one list-then-watch per namespace, of the managed pods in flight; synced once every namespace is listed', async (t) => {
  const { cache, listWatch, told, lines } = cacheOn(t, ['a', 'b']);
  let answerB: (page: ReturnType<typeof podPage>) => void = () => {};
  listWatch.answerList(podPage([pod('a', 'p')], '1'), new Promise((resolve) => (answerB = resolve)));
  cache.start();
  await settle();
  t.same(listWatch.lists.map((list) => list.path), [collection('a'), collection('b')]);
  t.match(listWatch.lists[0]?.query, { labelSelector: `${MANAGED_LABEL}=${MANAGED}`, fieldSelector: IN_FLIGHT_FIELD_SELECTOR });
  t.notOk(cache.hasSynced(), 'b not listed yet');
  t.same(cache.keys(), ['a/p']);
  answerB(podPage([pod('b', 'q'), pod('b', 'r')], '4'));
  await settle();
  t.ok(cache.hasSynced());
  t.same(cache.keys(), ['a/p', 'b/q', 'b/r']);
  t.same(told, ['changed a/p', 'changed b/q', 'changed b/r']);
  t.match(listWatch.watchOf(collection('b'))?.query, { labelSelector: `${MANAGED_LABEL}=${MANAGED}`, fieldSelector: IN_FLIGHT_FIELD_SELECTOR, resourceVersion: '4' });
  t.match(lines.filter((line) => line.message === 'managed pods listed').map((line) => line.fields), [{ namespace: 'a', pods: 1 }, { namespace: 'b', pods: 2 }]);
});

t.test('no namespace named: one watch of every namespace', async (t) => {
  const { cache, listWatch } = cacheOn(t, []);
  listWatch.answerList(podPage([pod('x', 'p'), pod('y', 'p')], '1'));
  cache.start();
  await settle();
  t.same(listWatch.lists.map((list) => list.path), ['/api/v1/pods']);
  t.ok(cache.hasSynced());
  t.same(cache.keys(), ['x/p', 'y/p']);
});

t.test('get, keys and pods: each pod as the stop plan reads it, from whichever namespace holds it', async (t) => {
  const { cache, listWatch } = cacheOn(t, ['a', 'b']);
  listWatch.answerList(podPage([pod('a', 'p')], '1'), podPage([pod('b', 'q')], '1'));
  cache.start();
  await settle();
  t.equal(cache.get('b/q')?.metadata?.name, 'q');
  t.equal(cache.get('a/q'), undefined, 'another namespace, the same name: not there');
  t.notOk(cache.get('a/p')?.metadata && 'managedFields' in cache.get('a/p')!.metadata!, 'what the plan does not read is not kept');
  t.same(cache.pods().map((kept) => kept.metadata?.name), ['p', 'q']);
});

t.test('a pod changed is told by key; a pod gone, with its last state; both from the watch', async (t) => {
  const { cache, listWatch, told, gone } = cacheOn(t, ['a']);
  listWatch.answerList(podPage([pod('a', 'p')], '1'));
  cache.start();
  await settle();
  told.length = 0;
  const watch = listWatch.watchOf(collection('a'))!;
  watch.send('MODIFIED', pod('a', 'p', '2'));
  watch.send('ADDED', pod('a', 'new', '3'));
  watch.send('DELETED', pod('a', 'p', '4'));
  t.same(told, ['changed a/p', 'changed a/new', 'gone a/p']);
  t.equal(gone[0]?.metadata?.resourceVersion, '4', 'its last state');
  t.notOk('managedFields' in gone[0]!.metadata!, 'as kept');
  t.equal(cache.get('a/p'), undefined, 'no longer in the cache');
  t.same(cache.keys(), ['a/new']);
});

t.test("a namespace's watch that fails is logged, and told recovered once it works again", async (t) => {
  const { cache, listWatch, told, lines } = cacheOn(t, []);
  listWatch.answerList(new Error('connection refused'), podPage([], '1'));
  cache.start();
  await settle();
  t.notOk(cache.hasSynced());
  t.match(lines.find((line) => line.message === 'pod watch failed, retrying'), { level: 'warn', fields: { namespace: '*', err: { message: 'connection refused' } } });
  mock.timers.tick(500);
  await settle();
  t.ok(cache.hasSynced());
  t.same(told, ['recovered *']);
});

t.test('stop() ends every watch', async (t) => {
  const { cache, listWatch } = cacheOn(t, ['a', 'b']);
  listWatch.answerList(podPage([], '1'), podPage([], '1'));
  cache.start();
  await settle();
  cache.stop();
  t.same(listWatch.watches.map((watch) => watch.aborted), [true, true]);
});
