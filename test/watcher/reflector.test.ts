// The pod reflector (src/watcher/reflector.ts): a list, page by page, fills the cache; a watch from
// the list's resourceVersion keeps it; a 410 Gone lists afresh; errors are retried with backoff, a
// watch that failed from the last resourceVersion seen; a watch that ends quietly is resumed at
// once. The API server is test/support/fake-kube.ts's FakePodListWatch; timers are Node's mock.
import { mock } from 'node:test';
import t, { type Test } from 'tap';
import { KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { PodReflector, podKey, type ReflectorOptions } from '../../src/watcher/reflector.ts';
import { FakePodListWatch, podPage, watchRefused } from '../support/fake-kube.ts';

const pod = (name: string, resourceVersion: string, extra: Partial<V1Pod['metadata']> = {}): V1Pod => ({ metadata: { name, namespace: 'default', resourceVersion, ...extra } });

/** Lets every promise settle: the fake answers at once, so one turn of the event loop is enough. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

/** A reflector on a FakePodListWatch and mock timers, with what it told its handlers. */
function reflectorOn(t: Test, options: Partial<ReflectorOptions> = {}) {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.teardown(() => mock.timers.reset());
  const listWatch = new FakePodListWatch();
  const events: string[] = [];
  const errors: unknown[] = [];
  const counts = { synced: 0, recovered: 0 };
  const reflector = new PodReflector({
    kubeConfig: new KubeConfig(),
    labelSelector: 'managed=true',
    listWatch,
    onEvent: (event, pod) => events.push(`${event} ${podKey(pod)}@${pod.metadata?.resourceVersion}`),
    onSynced: () => counts.synced++,
    onError: (error) => errors.push(error),
    onRecovered: () => counts.recovered++,
    ...options,
  });
  t.teardown(() => reflector.stop());
  /** Moves the mock clock on, then lets what fired finish. */
  const advance = async (ms: number) => {
    mock.timers.tick(ms);
    await settle();
  };
  return { reflector, listWatch, events, errors, counts, advance };
}

t.test('a list page by page fills the cache and announces each pod; the watch starts from its resourceVersion', async (t) => {
  const { reflector, listWatch, events, counts } = reflectorOn(t, { fieldSelector: 'status.phase!=Failed', pageSize: 2 });
  listWatch.answerList(podPage([pod('a', '1'), pod('b', '2')], '5', 'next'), podPage([pod('c', '3')], '7'));
  reflector.start();
  await settle();
  t.same(listWatch.lists, [
    { path: '/api/v1/pods', query: { labelSelector: 'managed=true', fieldSelector: 'status.phase!=Failed', limit: 2, continue: undefined } },
    { path: '/api/v1/pods', query: { labelSelector: 'managed=true', fieldSelector: 'status.phase!=Failed', limit: 2, continue: 'next' } },
  ], 'the second page asked with the first one\'s continue token');
  t.same([...reflector.cache.keys()], ['default/a', 'default/b', 'default/c']);
  t.same(events, ['added default/a@1', 'added default/b@2', 'added default/c@3']);
  t.equal(counts.synced, 1, 'synced once the whole list is in');
  t.equal(listWatch.watches.length, 1);
  t.same(listWatch.latest?.path, '/api/v1/pods');
  t.same(listWatch.latest?.query, { labelSelector: 'managed=true', fieldSelector: 'status.phase!=Failed', resourceVersion: '7', allowWatchBookmarks: true, timeoutSeconds: 300 }, "from the last page's resourceVersion, with bookmarks");
});

t.test('one namespace: its own collection; no field selector, none asked', async (t) => {
  const { reflector, listWatch } = reflectorOn(t, { namespace: 'team a' });
  listWatch.answerList(podPage([], '1'));
  reflector.start();
  await settle();
  t.equal(listWatch.lists[0]?.path, '/api/v1/namespaces/team%20a/pods');
  t.equal(listWatch.latest?.path, '/api/v1/namespaces/team%20a/pods');
  t.notOk('fieldSelector' in listWatch.latest!.query, 'the watch names no field selector');
});

t.test('watch events keep the cache; a bookmark moves the resourceVersion only; a watch that ends quietly resumes from the last one at once', async (t) => {
  const { reflector, listWatch, events, errors } = reflectorOn(t);
  listWatch.answerList(podPage([pod('a', '1')], '1'));
  reflector.start();
  await settle();
  const watch = listWatch.latest!;
  watch.send('ADDED', pod('b', '2'));
  watch.send('MODIFIED', pod('a', '3'));
  watch.send('ADDED', pod('a', '4'));
  watch.send('DELETED', pod('b', '5'));
  watch.send('BOOKMARK', { metadata: { resourceVersion: '9' } });
  t.same(events.slice(1), ['added default/b@2', 'modified default/a@3', 'modified default/a@4', 'deleted default/b@5'], 'an ADDED of a pod known is a change');
  t.same([...reflector.cache.entries()], [['default/a', pod('a', '4')]]);
  watch.end();
  await settle();
  t.equal(listWatch.watches.length, 2, 'watching again without waiting');
  t.equal(listWatch.latest?.query.resourceVersion, '9', "from the bookmark's resourceVersion");
  t.equal(listWatch.lists.length, 1, 'not listed again');
  t.same(errors, [], 'no error');
  listWatch.latest!.end(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
  await settle();
  t.equal(listWatch.watches.length, 3, "client-node's timeout on a silent watch: watching again at once");
  t.same(errors, []);
});

t.test('what the cache keeps and the handlers receive is what retain() keeps', async (t) => {
  const { reflector, listWatch, events } = reflectorOn(t, { retain: (kept) => ({ metadata: { ...kept.metadata, annotations: {} } }) });
  listWatch.answerList(podPage([pod('a', '1', { annotations: { big: 'x' } })], '1'));
  reflector.start();
  await settle();
  listWatch.latest!.send('ADDED', pod('b', '2', { annotations: { big: 'y' } }));
  t.same(reflector.cache.get('default/a')?.metadata?.annotations, {});
  t.same(reflector.cache.get('default/b')?.metadata?.annotations, {});
  t.equal(events.length, 2);
});

t.test('410 Gone: listed afresh, the pods gone meanwhile announced as deleted, the others as changed', async (t) => {
  const { reflector, listWatch, events, errors, counts, advance } = reflectorOn(t);
  listWatch.answerList(podPage([pod('a', '1'), pod('b', '2')], '2'), podPage([pod('b', '8'), pod('c', '9')], '9'));
  reflector.start();
  await settle();
  events.length = 0;
  listWatch.latest!.send('ERROR', { kind: 'Status', code: 410, reason: 'Expired' });
  listWatch.latest!.end();
  await advance(499);
  t.equal(listWatch.lists.length, 1, 'not before the first backoff');
  await advance(1);
  t.equal(listWatch.lists.length, 2, 'listed again after 500 ms');
  t.same(events, ['deleted default/a@1', 'modified default/b@8', 'added default/c@9']);
  t.same([...reflector.cache.keys()], ['default/b', 'default/c']);
  t.equal(counts.synced, 2);
  t.same(errors, [], 'an expired resourceVersion is no error');
  t.equal(listWatch.latest?.query.resourceVersion, '9', "watching from the new list's resourceVersion");
});

t.test('a watch refused with 410 when it starts lists afresh too', async (t) => {
  const { reflector, listWatch, errors, advance } = reflectorOn(t);
  listWatch.answerList(podPage([], '1'), podPage([], '20'));
  listWatch.refuseWatch(watchRefused(410));
  reflector.start();
  await settle();
  await advance(500);
  t.equal(listWatch.lists.length, 2);
  t.equal(listWatch.latest?.query.resourceVersion, '20');
  t.same(errors, []);
});

t.test('a list that fails is retried with backoff, doubling up to 30 s; once one succeeds, recovered is told and the backoff starts over', async (t) => {
  const { reflector, listWatch, errors, counts, advance } = reflectorOn(t);
  const failures = Array.from({ length: 8 }, (_, i) => new Error(`down ${i}`));
  listWatch.answerList(...failures, podPage([], '1'));
  reflector.start();
  await settle();
  const delays = [500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000];
  for (const [attempt, delay] of delays.entries()) {
    t.equal(listWatch.lists.length, attempt + 1);
    await advance(delay - 1);
    t.equal(listWatch.lists.length, attempt + 1, `failure ${attempt + 1}: not before ${delay} ms`);
    await advance(1);
  }
  t.equal(listWatch.lists.length, 9, 'listed at last');
  t.same(errors, failures, 'each failure told');
  t.equal(counts.recovered, 1, 'recovered, once');
  t.equal(counts.synced, 1);
  listWatch.latest!.end(new Error('connection reset'));
  await advance(499);
  t.equal(listWatch.watches.length, 1);
  await advance(1);
  t.equal(listWatch.watches.length, 2, 'the next failure waits 500 ms again');
});

t.test('a watch that fails is retried after the backoff from the last resourceVersion seen, without a list; recovered once it is open again', async (t) => {
  const { reflector, listWatch, errors, counts, advance } = reflectorOn(t);
  listWatch.answerList(podPage([pod('a', '1')], '1'));
  reflector.start();
  await settle();
  listWatch.latest!.send('MODIFIED', pod('a', '6'));
  const reset = new Error('connection reset');
  listWatch.refuseWatch(watchRefused(500));
  listWatch.latest!.end(reset);
  await advance(500);
  t.equal(listWatch.watches.length, 2, 'watched again after 500 ms');
  t.equal(listWatch.latest?.query.resourceVersion, '6');
  t.equal(counts.recovered, 0, 'refused again: not recovered');
  await advance(999);
  t.equal(listWatch.watches.length, 2, 'the second failure waits twice as long');
  await advance(1);
  t.equal(listWatch.watches.length, 3);
  t.equal(listWatch.latest?.query.resourceVersion, '6');
  t.equal(listWatch.lists.length, 1, 'never listed again');
  t.match(errors, [reset, { statusCode: 500 }]);
  t.equal(counts.recovered, 1, 'the watch open again: recovered');
});

t.test('stop(): the watch is aborted, and events already received tell no one', async (t) => {
  const { reflector, listWatch, events, errors, advance } = reflectorOn(t);
  listWatch.answerList(podPage([], '1'));
  reflector.start();
  await settle();
  const watch = listWatch.latest!;
  reflector.stop();
  t.ok(watch.aborted, 'aborted');
  watch.send('ADDED', pod('late', '3'));
  t.same(events, [], 'a line delivered after abort() is not announced');
  t.equal(reflector.cache.size, 0);
  await advance(60_000);
  t.equal(listWatch.watches.length, 1, 'not watched again');
  t.same(errors, [], 'the abort is no error');
});

t.test('stop() cancels a pending retry', async (t) => {
  const { reflector, listWatch, advance } = reflectorOn(t);
  listWatch.answerList(new Error('down'));
  reflector.start();
  await settle();
  reflector.stop();
  await advance(60_000);
  t.equal(listWatch.lists.length, 1, 'no list after stop()');
});

t.test('a list answered after stop() leaves the cache alone', async (t) => {
  const { reflector, listWatch, events, counts } = reflectorOn(t);
  let answer: () => void = () => {};
  listWatch.answerList(new Promise((resolve) => (answer = () => resolve(podPage([pod('a', '1')], '1')))));
  reflector.start();
  await settle();
  reflector.stop();
  answer();
  await settle();
  t.equal(reflector.cache.size, 0);
  t.same(events, []);
  t.equal(counts.synced, 0);
  t.equal(listWatch.watches.length, 0, 'no watch');
});
