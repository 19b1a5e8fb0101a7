// The sweeper labels running pods the webhook missed. A pod that changed between the list and the
// patch (409) is read again, judged again and patched at once, a few times at most; a sweep that
// fails is tried again after a short backoff, then the interval resumes. Timers are Node's mock.
import { mock } from 'node:test';
import t, { type Test } from 'tap';
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { capturingLogger } from '../support/logger.ts';
import { MANAGED, MANAGED_LABEL } from '../../src/policy/index.ts';
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
