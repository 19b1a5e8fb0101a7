// The namespaces' labels the webhook matches the injected-sidecar policy's namespaceSelectors
// against: listed, then kept current by a watch; a failed list or watch is retried, and until the
// first list the labels are unknown.
import t from 'tap';
import { NamespaceLabels } from '../../src/kube/namespace-labels.ts';
import { apiError } from '../support/fake-kube.ts';
import { fakeNamespaces, namespace, namespaceList as list } from './fake-namespaces.ts';
import { capturingLogger } from '../support/logger.ts';
import { waitFor } from '../support/wait.ts';

t.test('unknown until listed; then each namespace by name, kept current by the watch from the list on', async (t) => {
  const { listWatch, watches } = fakeNamespaces(list([namespace('mesh', { 'istio-injection': 'enabled' }), namespace('plain')], '10'));
  const { logger } = capturingLogger();
  const labels = new NamespaceLabels({ listWatch, logger });
  t.teardown(() => labels.stop());
  t.equal(labels.current(), undefined, 'before the first list');
  t.equal(labels.synced(), false);

  await labels.start();
  t.equal(labels.synced(), true);
  t.same(Object.fromEntries(labels.current()!), { mesh: { 'istio-injection': 'enabled' }, plain: {} });
  t.equal(watches.latest?.path, '/api/v1/namespaces');
  t.match(watches.latest?.query, { resourceVersion: '10' }, 'watched from the list');

  watches.latest!.send('ADDED', namespace('new', { team: 'a' }, '11'));
  watches.latest!.send('MODIFIED', namespace('plain', { 'istio-injection': 'enabled' }, '12'));
  watches.latest!.send('DELETED', namespace('mesh', {}, '13'));
  t.same(Object.fromEntries(labels.current()!), { plain: { 'istio-injection': 'enabled' }, new: { team: 'a' } });
});

t.test('a failed list is retried: the labels stay unknown, one warning says what that costs, and a line when it is back', async (t) => {
  const { listWatch, lists } = fakeNamespaces(apiError(403, 'namespaces is forbidden'), apiError(403, 'namespaces is forbidden'), list([namespace('mesh')], '5'));
  const { logger, lines } = capturingLogger();
  const labels = new NamespaceLabels({ listWatch, logger, retryDelayMs: () => 1 });
  t.teardown(() => labels.stop());
  await labels.start();
  t.equal(labels.current(), undefined, 'unknown after a failed list');
  await waitFor('the third list', () => labels.synced(), { timeoutMs: 5000, intervalMs: 5 });
  t.equal(lists(), 3);
  t.same([...labels.current()!.keys()], ['mesh']);
  const warnings = lines.filter((line) => line.level === 'warn');
  t.equal(warnings.length, 1, 'one warning for the failures in a row');
  t.match(warnings[0], { fields: { error: 'namespaces is forbidden' }, message: /cannot list namespaces: the entries of the injected-sidecar policy with a namespaceSelector apply to no pod until they are listed/ });
  t.match(lines.at(-1), { level: 'info', fields: { failures: 2 }, message: 'namespaces listed and watched again' });
});

t.test('a watch that breaks is opened again from where it was, the labels kept meanwhile', async (t) => {
  const { listWatch, watches, lists } = fakeNamespaces(list([namespace('mesh', { a: '1' })], '10'));
  const { logger, lines } = capturingLogger();
  const labels = new NamespaceLabels({ listWatch, logger, retryDelayMs: () => 1 });
  t.teardown(() => labels.stop());
  await labels.start();
  watches.latest!.send('MODIFIED', namespace('mesh', { a: '2' }, '20'));
  watches.latest!.end(new Error('connection reset'));
  t.same(labels.current()?.get('mesh'), { a: '2' }, 'kept while the watch is down');
  await waitFor('a second watch', () => watches.watches.length === 2, { timeoutMs: 5000, intervalMs: 5 });
  t.match(watches.latest?.query, { resourceVersion: '20' }, 'from the last version seen');
  t.equal(lists(), 1, 'no second list');
  t.match(lines.find((line) => line.level === 'warn'), { message: /cannot watch namespaces: .* matched against the labels last seen/ });
});

t.test('stop() ends the watch quietly, and nothing is retried after it', async (t) => {
  const { listWatch, watches } = fakeNamespaces(list([], '1'));
  const { logger, lines } = capturingLogger();
  const labels = new NamespaceLabels({ listWatch, logger, retryDelayMs: () => 1 });
  await labels.start();
  await labels.stop();
  t.ok(watches.latest?.aborted, 'the watch aborted');
  await new Promise((resolve) => setTimeout(resolve, 20));
  t.equal(watches.watches.length, 1, 'no watch opened again');
  t.same(lines.filter((line) => line.level === 'warn'), [], 'no warning');
});

t.test('a namespace the watch has not brought yet is read on its own and kept; one that cannot be read rejects with the API\'s reason', async (t) => {
  const { listWatch, watches, gets, answerGet } = fakeNamespaces(list([namespace('old')], '10'));
  const { logger } = capturingLogger();
  const labels = new NamespaceLabels({ listWatch, logger });
  t.teardown(() => labels.stop());
  await labels.start();

  answerGet(async (name) => namespace(name, { 'istio-injection': 'enabled' }, '11'));
  t.same(await labels.read('new', 1500), { 'istio-injection': 'enabled' });
  t.same(gets, [{ name: 'new', timeoutMs: 1500 }], 'read with the timeout given');
  t.same(labels.current()?.get('new'), { 'istio-injection': 'enabled' }, 'kept with the others');

  watches.latest!.send('ADDED', namespace('raced', { team: 'from-the-watch' }, '12'));
  answerGet(async (name) => namespace(name, { team: 'read' }, '12'));
  t.same(await labels.read('raced', 1500), { team: 'read' }, 'what was read is answered');
  t.same(labels.current()?.get('raced'), { team: 'from-the-watch' }, "the watch's version is kept");

  answerGet(async () => {
    throw apiError(403, 'namespaces "x" is forbidden: User "system:serviceaccount:st:webhook" cannot get resource "namespaces"');
  });
  await t.rejects(labels.read('x', 1500), { message: /^namespaces "x" is forbidden: User/ });
  t.equal(labels.current()?.has('x'), false, 'nothing kept');
});
