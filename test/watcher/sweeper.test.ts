// The sweeper labels running pods the webhook missed. A pod that changed between the list and the
// patch (409) is read again, judged again and patched at once, a few times at most; a sweep that
// fails is tried again after a short backoff, then the interval resumes. Timers are Node's mock.
import { mock } from 'node:test';
import t, { type Test } from 'tap';
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { capturingLogger } from '../support/logger.ts';
import { MANAGED, MANAGED_LABEL, POD_ANNOTATIONS, injectedSidecarAnnotations } from '../../src/policy/index.ts';
import { injectedSidecarPolicy } from '../support/injected-sidecar-policy.ts';
import { DEFAULT_BACKOFF } from '../../src/watcher/retries.ts';
import { LABEL_ATTEMPTS, Sweeper, sweep } from '../../src/watcher/sweeper.ts';
import { apiError, fakeCoreV1Api } from '../support/fake-kube.ts';
import { jobPod, killSidecar, main, type PodOptions } from '../support/pods.ts';

/** A running pod with a sidecar, not labelled yet: one the webhook would have labelled. */
function unlabelled(name: string, resourceVersion: string, options: PodOptions = {}): V1Pod {
  return jobPod([main(), killSidecar()], { main: 'running', proxy: 'running' }, { ...options, metadata: { name, resourceVersion, labels: {}, ...options.metadata } });
}

/** A CoreV1Api listing `pods`; each patch and read answers with the next of its answers (an HTTP error code, or a pod read). */
function fakeCore(pods: V1Pod[], patches: Array<'ok' | number>, reads: Array<V1Pod | number> = []) {
  const core = fakeCoreV1Api()
    .handle('listPodForAllNamespaces', () => ({ items: pods, metadata: {} }))
    .answer('patchNamespacedPod', ...patches.map((answer) => (answer === 'ok' ? {} : apiError(answer))))
    .answer('readNamespacedPod', ...reads.map((answer) => (typeof answer === 'number' ? apiError(answer) : answer)));
  /** Each patch as name@resourceVersion (the precondition it carried). */
  const patched = () => core.requests('patchNamespacedPod').map(({ name, body }) => `${name}@${(body as PatchBody).metadata.resourceVersion}`);
  const read = () => core.requests('readNamespacedPod').map(({ name }) => name);
  return { core: core.api, patched, read };
}

/** The body of the sweeper's label patch. */
interface PatchBody {
  metadata: { resourceVersion: string; labels: Record<string, string> };
}

const sweepWith = (core: CoreV1Api) => sweep({ core, namespaces: [], excludedNamespaces: [], quickExitImageAllowlist: [] });

t.test('a conflict: the pod is read again and patched at once with its new resourceVersion', async (t) => {
  const { core, patched, read } = fakeCore([unlabelled('a', '1')], [409, 'ok'], [unlabelled('a', '2')]);
  t.same(await sweepWith(core), { labelled: ['default/a'], conflicted: [] });
  t.same(patched(), ['a@1', 'a@2'], 'the precondition kept, with the version judged');
  t.same(read(), ['a']);
});

t.test('a conflict, and the pod read again no longer qualifies: left alone', async (t) => {
  const changes: Record<string, V1Pod> = {
    'labelled meanwhile': unlabelled('a', '2', { metadata: { labels: { [MANAGED_LABEL]: MANAGED } } }),
    'finished meanwhile': unlabelled('a', '2', { phase: 'Succeeded' }),
    'replaced by a pod of the same name': unlabelled('a', '2', { metadata: { uid: 'uid-2' } }),
  };
  for (const [change, current] of Object.entries(changes)) {
    const { core, patched } = fakeCore([unlabelled('a', '1')], [409], [current]);
    t.same(await sweepWith(core), { labelled: [], conflicted: [] }, change);
    t.same(patched(), ['a@1'], `${change}: not patched again`);
  }
});

t.test('a pod gone, at the patch or when read again, ends quietly', async (t) => {
  const atPatch = fakeCore([unlabelled('a', '1')], [404]);
  t.same(await sweepWith(atPatch.core), { labelled: [], conflicted: [] });
  t.same(atPatch.read(), [], 'not read again');
  const atRead = fakeCore([unlabelled('a', '1')], [409], [404]);
  t.same(await sweepWith(atRead.core), { labelled: [], conflicted: [] });
  t.same(atRead.patched(), ['a@1']);
});

t.test(`a pod that conflicts at every attempt is patched ${LABEL_ATTEMPTS} times, then left to the next sweep; the pods after it are labelled`, async (t) => {
  const attempts = Array.from({ length: LABEL_ATTEMPTS }, (_, i) => i + 1);
  const rereads = attempts.slice(1).map((version) => unlabelled('busy', String(version)));
  const { core, patched, read } = fakeCore([unlabelled('busy', '1'), unlabelled('next', '7')], [...attempts.map(() => 409), 'ok'], rereads);
  t.same(await sweepWith(core), { labelled: ['default/next'], conflicted: ['default/busy'] });
  t.same(patched(), [...attempts.map((version) => `busy@${version}`), 'next@7']);
  t.equal(read().length, LABEL_ATTEMPTS - 1);
});

t.test('a read again that fails otherwise fails the sweep, for it to be tried again', async (t) => {
  const { core } = fakeCore([unlabelled('a', '1')], [409], [503]);
  await t.rejects(sweepWith(core), { code: 503 });
});

/** A Sweeper on mock timers whose lists answer with the next of `answers`: an HTTP error code, or an empty list (once the promise given settles). */
function sweeperOn(t: Test, answers: Array<'ok' | number | Promise<void>>, intervalMs = 5 * 60_000) {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.teardown(() => mock.timers.reset());
  const core = fakeCoreV1Api().handle('listPodForAllNamespaces', async () => {
    const answer = answers.shift() ?? 'ok';
    if (typeof answer === 'number') throw apiError(answer);
    await answer;
    return { items: [], metadata: {} };
  });
  const { logger, lines } = capturingLogger();
  const sweeper = new Sweeper({ core: core.api, namespaces: [], excludedNamespaces: [], quickExitImageAllowlist: [], intervalMs, logger });
  t.teardown(() => sweeper.stop());
  /** Moves the mock clock on, then lets the sweep that fired finish. */
  const advance = async (ms: number) => {
    mock.timers.tick(ms);
    await new Promise((resolve) => setImmediate(resolve));
  };
  const retries = () => lines.filter((line) => line.message === 'sweep failed, will retry').map((line) => line.fields as { attempt: number; retryInMs: number });
  return { sweeper, advance, lists: () => core.requests('listPodForAllNamespaces').length, retries };
}

t.test('a sweep that fails twice is tried again after short delays; once one succeeds, the interval resumes', async (t) => {
  const interval = 5 * 60_000;
  const { sweeper, advance, lists, retries } = sweeperOn(t, [503, 503, 'ok'], interval);
  sweeper.start();
  await advance(0);
  t.equal(lists(), 1, 'the first sweep at start');
  for (const attempt of [1, 2]) {
    const retry = retries()[attempt - 1]!;
    t.match(retry, { attempt, err: { code: 503 } }, `failure ${attempt} logged with its delay`);
    t.ok(retry.retryInMs >= DEFAULT_BACKOFF(attempt) * 0.8 && retry.retryInMs <= DEFAULT_BACKOFF(attempt) * 1.2, `the queue's backoff, jittered (${retry.retryInMs} ms)`);
    await advance(retry.retryInMs - 1);
    t.equal(lists(), attempt, 'not before its delay');
    await advance(1);
    t.equal(lists(), attempt + 1, 'tried again after it');
  }
  t.equal(retries().length, 2, 'the third sweep succeeded');
  await advance(interval - 1);
  t.equal(lists(), 3, 'then a whole interval');
  await advance(1);
  t.equal(lists(), 4);
});

t.test('a refusal, and any delay, waits no longer than the interval', async (t) => {
  const { sweeper, advance, lists, retries } = sweeperOn(t, [403, 503, 503, 503], 1000);
  sweeper.start();
  await advance(0);
  t.match(retries(), [{ attempt: 1, retryInMs: 1000 }], 'a refusal: tried again at the interval, as before');
  for (let i = 0; i < 3; i++) await advance(1000);
  t.equal(lists(), 4);
  t.ok(retries().every(({ retryInMs }) => retryInMs <= 1000), 'no delay past the interval');
});

t.test('stop() cancels a pending retry', async (t) => {
  const { sweeper, advance, lists, retries } = sweeperOn(t, [503]);
  sweeper.start();
  await advance(0);
  t.equal(retries().length, 1, 'a retry pending');
  sweeper.stop();
  await advance(60 * 60_000);
  t.equal(lists(), 1, 'no sweep after stop()');
});

t.test('a sweep running at stop() finishes and schedules no other', async (t) => {
  let finish = () => {};
  const { sweeper, advance, lists } = sweeperOn(t, [new Promise<void>((resolve) => (finish = resolve))]);
  sweeper.start();
  await advance(0);
  sweeper.stop();
  finish();
  await advance(0);
  await advance(60 * 60_000);
  t.equal(lists(), 1, 'no sweep after stop()');
});

t.test('the query: running pods of Jobs without the label, page by page; the label set by a merge patch with the resourceVersion judged', async (t) => {
  const core = fakeCoreV1Api()
    .answer('listPodForAllNamespaces', { items: [unlabelled('a', '1')], metadata: { _continue: 'page-2' } }, { items: [unlabelled('b', '4')], metadata: {} })
    .handle('patchNamespacedPod', () => ({}));
  t.same(await sweep({ core: core.api, namespaces: [], excludedNamespaces: [], quickExitImageAllowlist: [], pageSize: 1 }), { labelled: ['default/a', 'default/b'], conflicted: [] });
  const query = { fieldSelector: 'status.phase=Running,spec.restartPolicy!=Always', labelSelector: `!${MANAGED_LABEL}`, limit: 1 };
  t.same(core.requests('listPodForAllNamespaces'), [{ ...query, _continue: undefined }, { ...query, _continue: 'page-2' }], 'the second page from the first one\'s continue token');
  t.same(core.requests('patchNamespacedPod')[0], { name: 'a', namespace: 'default', body: { metadata: { resourceVersion: '1', labels: { [MANAGED_LABEL]: MANAGED } } } });
  t.ok(core.calls.find((call) => call.method === 'patchNamespacedPod')?.options, 'with its Content-Type set');
  const defaults = fakeCoreV1Api().answer('listPodForAllNamespaces', { items: [], metadata: {} });
  await sweep({ core: defaults.api, namespaces: [], excludedNamespaces: [], quickExitImageAllowlist: [] });
  t.match(defaults.requests('listPodForAllNamespaces'), [{ limit: 100 }], '100 pods a page by default');
});

t.test('namespaces named: each listed on its own, never all of them', async (t) => {
  const core = fakeCoreV1Api()
    .handle('listNamespacedPod', ({ namespace }) => ({ items: [unlabelled(`in-${namespace}`, '1', { metadata: { namespace } })], metadata: {} }))
    .handle('patchNamespacedPod', () => ({}));
  const result = await sweep({ core: core.api, namespaces: ['team-a', 'team-b'], excludedNamespaces: [], quickExitImageAllowlist: [] });
  t.same(result.labelled, ['team-a/in-team-a', 'team-b/in-team-b']);
  t.same(core.requests('listNamespacedPod').map((request) => request.namespace), ['team-a', 'team-b']);
  t.same(core.requests('listPodForAllNamespaces'), []);
});

t.test('pods the webhook would not have labelled are left alone: excluded namespace, already labelled, not running, no sidecar', async (t) => {
  const pods = [
    unlabelled('excluded', '1', { metadata: { namespace: 'kube-system' } }),
    unlabelled('labelled', '1', { metadata: { labels: { [MANAGED_LABEL]: 'false' } } }),
    unlabelled('pending', '1', { phase: 'Pending' }),
    jobPod([main()], { main: 'running' }, { metadata: { name: 'no-sidecar', labels: {} } }),
    unlabelled('this-one', '1'),
  ];
  const { core, patched } = fakeCore(pods, ['ok']);
  t.same(await sweep({ core, namespaces: [], excludedNamespaces: ['kube-system'], quickExitImageAllowlist: [] }), { labelled: ['default/this-one'], conflicted: [] });
  t.same(patched(), ['this-one@1']);
});

t.test('--namespace-labels: only the pods of the namespaces carrying every label, read page by page', async (t) => {
  const inNamespace = (namespace: string) => unlabelled(`pod-${namespace}`, '1', { metadata: { namespace } });
  const core = fakeCoreV1Api()
    .answer('listNamespace', { items: [{ metadata: { name: 'opted-in' } }], metadata: { _continue: 'more' } }, { items: [{ metadata: { name: 'also-in' } }, { metadata: {} }], metadata: {} })
    .answer('listPodForAllNamespaces', { items: [inNamespace('opted-in'), inNamespace('never-opted-in'), inNamespace('also-in')], metadata: {} })
    .handle('patchNamespacedPod', () => ({}));
  const result = await sweep({ core: core.api, namespaces: [], excludedNamespaces: [], namespaceLabels: ['team=a', 'sidecars=on'], quickExitImageAllowlist: [] });
  t.same(result.labelled, ['opted-in/pod-opted-in', 'also-in/pod-also-in']);
  t.same(core.requests('listNamespace'), [{ labelSelector: 'team=a,sidecars=on', limit: 500, _continue: undefined }, { labelSelector: 'team=a,sidecars=on', limit: 500, _continue: 'more' }]);
  const unlabelledNamespaces = fakeCoreV1Api().answer('listPodForAllNamespaces', { items: [], metadata: {} });
  await sweep({ core: unlabelledNamespaces.api, namespaces: [], excludedNamespaces: [], namespaceLabels: [], quickExitImageAllowlist: [] });
  t.same(unlabelledNamespaces.requests('listNamespace'), [], 'no label asked: the namespaces are not read');
});

t.test("a pod an injected-sidecar policy would apply to, with no marker of its own, is not labelled: the sweeper writes no annotation", async (t) => {
  const policy = injectedSidecarPolicy('entries: [{name: istio, container: istio-proxy, stop: istio-proxy}]');
  const injected = (name: string, annotations: Record<string, string> = {}) =>
    jobPod([main(), main('istio-proxy', 'docker.io/istio/proxyv2:1.24.0')], { main: 'running', 'istio-proxy': 'running' }, {
      metadata: { name, resourceVersion: '1', labels: {}, annotations, ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'job', uid: 'job-uid', controller: true }] },
    });
  const unmarked = injected('unmarked');
  t.ok(injectedSidecarAnnotations(unmarked, {}, policy), 'the policy applies to it: the webhook would have named istio-proxy a sidecar');
  const { core, patched } = fakeCore([unmarked, injected('marked', { [POD_ANNOTATIONS.sidecars]: 'istio-proxy' })], ['ok']);
  // Handed the policy as the watcher once handed it, the sweeper still judges by the pod's own markers.
  const withPolicy = { core, namespaces: [], excludedNamespaces: [], quickExitImageAllowlist: [], injectedSidecars: () => policy };
  t.same(await sweep(withPolicy), { labelled: ['default/marked'], conflicted: [] }, 'only the pod whose own annotation names the sidecar');
  t.same(patched(), ['marked@1']);
});

t.test('a patch that fails otherwise fails the sweep', async (t) => {
  const { core } = fakeCore([unlabelled('a', '1')], [403]);
  await t.rejects(sweepWith(core), { code: 403 });
});

t.test('the Sweeper logs the pods it labelled and those left to the next sweep; a success resets the backoff', async (t) => {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.teardown(() => mock.timers.reset());
  const attempts = Array.from({ length: LABEL_ATTEMPTS }, (_, i) => unlabelled('busy', String(i + 1)));
  const core = fakeCoreV1Api()
    .answer('listPodForAllNamespaces', { items: [unlabelled('a', '1'), attempts[0]!], metadata: {} }, apiError(503), { items: [], metadata: {} }, apiError(503))
    .answer('patchNamespacedPod', {}, ...attempts.map(() => apiError(409)))
    .answer('readNamespacedPod', ...attempts.slice(1));
  const { logger, lines } = capturingLogger();
  const sweeper = new Sweeper({ core: core.api, namespaces: [], excludedNamespaces: [], quickExitImageAllowlist: [], intervalMs: 60_000, logger });
  t.teardown(() => sweeper.stop());
  const advance = async (ms: number) => {
    mock.timers.tick(ms);
    await new Promise((resolve) => setImmediate(resolve));
  };
  sweeper.start();
  await advance(0);
  t.match(lines.find((line) => line.message === 'sweeper labelled pods the webhook missed')?.fields, { pods: ['default/a'] });
  t.match(lines.find((line) => line.message.startsWith('sweeper: pods changed at every attempt'))?.fields, { pods: ['default/busy'], attempts: LABEL_ATTEMPTS });
  await advance(60_000);
  const failed = () => lines.filter((line) => line.message === 'sweep failed, will retry').map((line) => (line.fields as { attempt: number }).attempt);
  t.same(failed(), [1]);
  await advance(60_000);
  t.equal(core.requests('listPodForAllNamespaces').length, 3, 'the retry succeeded');
  await advance(60_000);
  t.same(failed(), [1, 1], 'the next failure is a first attempt again');
});
