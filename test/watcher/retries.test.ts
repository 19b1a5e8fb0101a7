// When a failed reconcile is tried again (src/watcher/retries.ts): refusals retrying cannot fix
// slowly, with one Warning event on the pod; anything else with exponential backoff, both jittered.
import t from 'tap';
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import type { Plan } from '../../src/policy/index.ts';
import { Executor } from '../../src/watcher/executor.ts';
import { freshMemory } from '../../src/watcher/pod-memory.ts';
import { WatcherMetrics } from '../../src/watcher/watcher-metrics.ts';
import { DEFAULT_BACKOFF, REFUSED_FIRST_RETRY_MS, REFUSED_RETRY_MS, isRefusal, retryDelay } from '../../src/watcher/retries.ts';
import { apiError as statusError, fakeCoreV1Api, fakeCustomObjectsApi } from '../support/fake-kube.ts';
import { jobPod, killSidecar, main } from '../support/pods.ts';

const apiError = (code: number, message = 'refused') => statusError(code, message);

t.test('refusals retrying cannot fix, and failures that may pass', async (t) => {
  for (const code of [400, 403, 405, 413, 415, 422]) t.ok(isRefusal(apiError(code)), `${code}: a refusal`);
  for (const code of [401, 404, 408, 409, 429, 500, 503, 504]) t.notOk(isRefusal(apiError(code)), `${code}: may pass at the next attempt`);
  t.notOk(isRefusal(new TypeError('fetch failed')), 'a network error');
  t.notOk(isRefusal(Object.assign(new Error('timeout'), { name: 'TimeoutError' })), 'a timeout');
});

t.test('a refusal is retried after 15 s, then less and less often, up to every 5 minutes; other failures back off, up to two minutes', async (t) => {
  const middle = () => 0.5;
  t.same([1, 2, 3, 4, 5, 6, 100].map((attempt) => retryDelay(attempt, apiError(403), middle)), [15_000, 30_000, 60_000, 120_000, 240_000, REFUSED_RETRY_MS, REFUSED_RETRY_MS], '403: from REFUSED_FIRST_RETRY_MS, doubled, up to REFUSED_RETRY_MS');
  t.equal(retryDelay(1, apiError(422), middle), REFUSED_FIRST_RETRY_MS, '422: the same');
  t.same([1, 2, 3, 4, 20].map((attempt) => retryDelay(attempt, apiError(503), middle)), [1, 2, 3, 4, 20].map(DEFAULT_BACKOFF), 'the queue\'s backoff, unchanged in the middle');
  t.equal(retryDelay(30, new TypeError('fetch failed'), middle), 2 * 60_000, 'capped at two minutes');
});

t.test('every delay is jittered by up to a fifth either way, so pods that failed together come back apart', async (t) => {
  for (const error of [apiError(403), apiError(500)]) {
    const base = retryDelay(3, error, () => 0.5);
    t.equal(retryDelay(3, error, () => 0), Math.round(base * 0.8), `${error.code}: the shortest`);
    t.equal(retryDelay(3, error, () => 1), Math.round(base * 1.2), `${error.code}: the longest`);
  }
  const delays = new Set(Array.from({ length: 50 }, () => retryDelay(5, apiError(500))));
  t.ok(delays.size > 40, `Math.random spreads them (${delays.size} distinct of 50)`);
});

t.test('a refusal is reported once on the pod, however often it is tried again; a failed stop request is not reported twice', async (t) => {
  const events: string[] = [];
  const actions: string[] = [];
  const core = fakeCoreV1Api().handle('createNamespacedEvent', ({ body }: { body: CoreV1Event }) => (events.push(body.message ?? ''), actions.push(body.action ?? ''), body));
  let failWith: Error = apiError(403, 'admission webhook "policy.example.com" denied the request: no restarts here');
  const custom = fakeCustomObjectsApi().handle('createNamespacedCustomObject', () => Promise.reject(failWith));
  const executor = new Executor({ core: core.api, custom: custom.api, crrVersion: 'v1alpha1', metrics: new WatcherMetrics(new Registry()) });
  const pod: V1Pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' });
  pod.metadata!.uid = 'uid-1';
  const plan: Plan = { code: 'mains-done', stopping: ['proxy (ContainerRecreateRequest)'], steps: [{ type: 'create-crr', containers: ['proxy'] }] };
  const log = pino({ level: 'silent' });
  // What the watcher keeps of the pod while it is in the watch: the events recorded for it among it.
  const memory = freshMemory();

  for (let attempt = 0; attempt < 3; attempt++) {
    const error = await executor.execute(pod, plan, log, { memory }).then(() => undefined, (thrown: unknown) => thrown);
    t.equal(error, failWith, 'the refusal goes to the queue');
    await executor.reportRefused(pod, error, memory);
  }
  const refusals = events.filter((message) => message.startsWith('the API server refused'));
  t.equal(refusals.length, 1, 'one refusal event for three attempts');
  t.equal(actions[events.indexOf(refusals[0]!)], 'request-refused', 'with its code in the action field');
  t.match(refusals[0], /\(HTTP 403\): admission webhook "policy\.example\.com" denied the request: no restarts here; retrying cannot fix that by itself, so it is tried again after 15s, then less and less often, up to every 5m: check the watcher's RBAC and the admission policies in its way$/);
  t.notOk(events.some((message) => message.startsWith('could not stop the sidecars')), 'and no second event for the same failure');

  failWith = apiError(503, 'the server is shutting down');
  await executor.execute(pod, plan, log, { memory }).catch(() => undefined);
  t.ok(events.some((message) => message === 'could not stop the sidecars: the server is shutting down'), 'a failure that may pass is said as before');
});
