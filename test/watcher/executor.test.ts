// What the watcher keeps of a pod (the events recorded, a ContainerRecreateRequest made, the stop
// told and observed: its PodMemory, which the executor writes as it acts) lives exactly as long as
// the pod is in the watch: a request that completes after the pod has left, or a reconcile that
// starts as it leaves, keeps nothing.
import t from 'tap';
import type { V1Pod, V1PodCondition } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { planStop, type Plan, type StopSettings } from '../../src/policy/index.ts';
import { Executor, type EndReport } from '../../src/watcher/executor.ts';
import { WatcherMetrics } from '../../src/watcher/watcher-metrics.ts';
import { PodMemories } from '../../src/watcher/pod-memory.ts';
import { apiError, fakeBatchV1Api, fakeCoreV1Api, fakeCustomObjectsApi } from '../support/fake-kube.ts';
import { MAINS_FINISHED_AT, ignoreExitCodeSidecar, jobPod, killSidecar, main, normalNode } from '../support/pods.ts';

const log = pino({ level: 'silent' });
const crrPlan: Plan = { code: 'mains-done', stopping: ['proxy (ContainerRecreateRequest)'], steps: [{ type: 'create-crr', containers: ['proxy'] }] };

function podWithUid(uid: string): V1Pod {
  const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' });
  pod.metadata!.uid = uid;
  pod.metadata!.name = `job-${uid}`;
  return pod;
}

const crrSettings: StopSettings = { killMechanism: 'crr', signal: { image: 'st:1', command: ['true'] }, quickExitImageAllowlist: [], quickExitImage: '' };

/** Executions as the reconciler runs them: with the pod's memory, kept while the pod is in the watch and forgotten when it leaves. */
function inWatch(executor: Executor, memories = new PodMemories()) {
  return {
    memories,
    run: (pod: V1Pod, plan: Plan) => executor.execute(pod, plan, log, { memory: memories.of(pod) }),
    leave: (pod: V1Pod) => executor.left(pod, memories.forget(pod)),
  };
}

/** An executor whose ContainerRecreateRequests wait for `release()`; `watched` holds the uids in the watch. */
function executorWith() {
  const watched = new Set<string>();
  const events: string[] = [];
  let release: () => void = () => {};
  let crrs = 0;
  const core = fakeCoreV1Api().handle('createNamespacedEvent', ({ body }) => (events.push(body.message ?? ''), body));
  const custom = fakeCustomObjectsApi().handle('createNamespacedCustomObject', async () => {
    crrs++;
    await new Promise<void>((resolve) => (release = resolve));
    return {};
  });
  const executor = new Executor({ core: core.api, custom: custom.api, crrVersion: 'v1alpha1', metrics: new WatcherMetrics(new Registry()) });
  const watch = inWatch(executor, new PodMemories((pod) => watched.has(pod.metadata?.uid ?? '')));
  return { ...watch, watched, events, release: () => release(), crrs: () => crrs };
}

t.test('a pod in the watch is kept until it leaves: the request is not made twice meanwhile', async (t) => {
  const { memories, run, leave, watched, release, crrs, events } = executorWith();
  const pod = podWithUid('a');
  watched.add('a');
  const first = run(pod, crrPlan);
  await new Promise((resolve) => setImmediate(resolve));
  release();
  await first;
  t.equal(memories.size, 1, 'kept while in the watch');
  // The next reconcile plans from what was kept: the request made is in the pod's history.
  await run(pod, planStop(pod, normalNode, crrSettings, MAINS_FINISHED_AT + 1000, { history: memories.of(pod).history }));
  t.equal(crrs(), 1, 'the ContainerRecreateRequest is not requested again');
  t.equal(events.length, 1, 'nor the event recorded again');
  watched.delete('a');
  leave(pod);
  t.equal(memories.size, 0, 'forgotten once it left');
});

t.test('a request that completes after its pod left keeps nothing of it', async (t) => {
  const { memories, run, leave, watched, release } = executorWith();
  const pod = podWithUid('b');
  watched.add('b');
  const running = run(pod, crrPlan);
  await new Promise((resolve) => setImmediate(resolve));
  // The pod ends while its ContainerRecreateRequest is being created: the watch says it left.
  watched.delete('b');
  leave(pod);
  release();
  await running;
  t.equal(memories.size, 0, 'the completed request did not bring the pod back');
});

t.test('a reconcile that starts after its pod left keeps nothing of it either', async (t) => {
  const { memories, run, release } = executorWith();
  const running = run(podWithUid('c'), crrPlan);
  await new Promise((resolve) => setImmediate(resolve));
  release();
  await running;
  t.equal(memories.size, 0);
});

t.test('1,000 pods through the watch leave nothing behind', async (t) => {
  const { memories, run, leave, watched } = executorWith();
  const warn: Plan = { code: 'mains-done', stopping: [], steps: [{ type: 'warn', code: 'virtual-node-without-image', message: 'sidecar proxy cannot be stopped' }] };
  for (let i = 0; i < 1000; i++) {
    const pod = podWithUid(`p${i}`);
    watched.add(`p${i}`);
    const result = run(pod, warn);
    if (i % 2 === 0) {
      watched.delete(`p${i}`);
      leave(pod);
    }
    await result;
    if (i % 2 === 1) {
      watched.delete(`p${i}`);
      leave(pod);
    }
  }
  t.equal(memories.size, 0);
});

t.test('the stop request does not wait for its event: both go at once', async (t) => {
  let eventCreated: () => void = () => {};
  let crrRequested = false;
  const core = fakeCoreV1Api().handle('createNamespacedEvent', ({ body }) => new Promise((resolve) => (eventCreated = () => resolve(body))));
  const custom = fakeCustomObjectsApi().handle('createNamespacedCustomObject', () => ((crrRequested = true), {}));
  const executor = new Executor({ core: core.api, custom: custom.api, crrVersion: 'v1alpha1', metrics: new WatcherMetrics(new Registry()) });
  const running = executor.execute(podWithUid('d'), crrPlan, log);
  await new Promise((resolve) => setImmediate(resolve));
  t.ok(crrRequested, 'the ContainerRecreateRequest is requested while the event is still being created');
  let settled = false;
  void running.then(() => (settled = true));
  await new Promise((resolve) => setImmediate(resolve));
  t.notOk(settled, 'the reconcile waits for the event all the same');
  eventCreated();
  t.equal(await running, 'done');
});

t.test("a successor announces a stop its predecessor requested but did not announce; the event's name makes it one event", async (t) => {
  const names: string[] = [];
  const core = fakeCoreV1Api().handle('createNamespacedEvent', ({ body }) => {
    if (names.includes(body.metadata.name!)) throw apiError(409, 'AlreadyExists', 'AlreadyExists');
    names.push(body.metadata.name!);
    return body;
  });
  const custom = fakeCustomObjectsApi().handle('createNamespacedCustomObject', () => ({}));
  const executorOf = () => new Executor({ core: core.api, custom: custom.api, crrVersion: 'v1alpha1', metrics: new WatcherMetrics(new Registry()) });
  const pod = podWithUid('e');
  // The requests are made already (a signal container runs): the plan only says which sidecars are stopping.
  const inProgress: Plan = { code: 'mains-done', stopping: ['proxy (SIGTERM)'], steps: [] };
  t.equal(await executorOf().execute(pod, inProgress, log), 'done');
  t.equal(names.length, 1, 'the successor records the event');
  t.equal(await executorOf().execute(pod, inProgress, log), 'done', 'a third watcher finds it recorded (409) and goes on');
  t.equal(names.length, 1, 'still one event');
});

t.test('the event that announces a stop fails while the stop request is in flight (the API server gone): the reconcile fails, the process does not', async (t) => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  t.teardown(() => process.off('unhandledRejection', onUnhandled));
  let release: (error: Error) => void = () => {};
  const core = fakeCoreV1Api().handle('createNamespacedEvent', () => Promise.reject(new TypeError('fetch failed')));
  const custom = fakeCustomObjectsApi().handle('createNamespacedCustomObject', () => new Promise((_resolve, reject) => (release = reject)));
  const executor = new Executor({ core: core.api, custom: custom.api, crrVersion: 'v1alpha1', metrics: new WatcherMetrics(new Registry()) });
  const running = executor.execute(podWithUid('d'), crrPlan, log);
  // The event's failure settles first, while the request waits; then the turns in which an unhandled rejection is reported.
  await new Promise((resolve) => setTimeout(resolve, 20));
  release(new TypeError('fetch failed'));
  await t.rejects(running, { message: 'fetch failed' }, 'the reconcile fails with the request\'s error, to be retried');
  await new Promise((resolve) => setTimeout(resolve, 20));
  t.same(unhandled, [], 'no unhandled rejection');
});

t.test('the event that announces a stop fails and the request succeeds: the reconcile fails, so the event is tried again', async (t) => {
  const core = fakeCoreV1Api().handle('createNamespacedEvent', () => Promise.reject(new TypeError('fetch failed')));
  const custom = fakeCustomObjectsApi().handle('createNamespacedCustomObject', () => ({}));
  const executor = new Executor({ core: core.api, custom: custom.api, crrVersion: 'v1alpha1', metrics: new WatcherMetrics(new Registry()) });
  await t.rejects(executor.execute(podWithUid('e'), crrPlan, log), { message: 'fetch failed' });
});

/** A report of a pod read to its end (not one to read again later). */
function finished(report: EndReport | undefined): Extract<EndReport, { record: unknown }> | undefined {
  if (report && 'requeueAfterMs' in report) throw new Error(`read again in ${report.requeueAfterMs} ms`);
  return report;
}

/** The status patches of a fake API server, applied to `pod` as it would apply them (the conditions only). */
function withStatusPatch(pod: () => V1Pod | 404, set: (pod: V1Pod) => void, patches: unknown[][]) {
  return ({ body }: { body: unknown }): V1Pod => {
    const current = pod();
    if (current === 404) throw apiError(404);
    const operations = body as Array<{ op: string; path: string; value: unknown }>;
    patches.push(operations);
    const next = structuredClone(current);
    next.status ??= {};
    for (const { op, path, value } of operations) {
      if (path === '/status/conditions') next.status.conditions = value as V1PodCondition[];
      else if (path === '/status/conditions/-') next.status.conditions!.push(value as V1PodCondition);
      else if (path.startsWith('/status/conditions/') && op === 'replace') next.status.conditions![Number(path.split('/').at(-1))] = value as V1PodCondition;
    }
    set(next);
    return next;
  };
}

t.test('a pod whose sidecars were told to stop is read once it has left: its stop record is written in its condition, and counted', async (t) => {
  const ended = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 0 }, { phase: 'Succeeded' });
  let current: V1Pod | 404 = ended;
  const patches: unknown[][] = [];
  const core = fakeCoreV1Api()
    .handle('createNamespacedEvent', ({ body }) => body)
    .handle('readNamespacedPod', () => {
      if (current === 404) throw apiError(404);
      return current;
    })
    .handle('patchNamespacedPodStatus', withStatusPatch(() => current, (next) => (current = next), patches)).api;
  const registry = new Registry();
  const metrics = new WatcherMetrics(registry);
  const running = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' });
  const crr: Plan = { code: 'mains-done', stopping: ['proxy (ContainerRecreateRequest)'], steps: [{ type: 'create-crr', containers: ['proxy'] }] };
  const created = fakeCustomObjectsApi().handle('createNamespacedCustomObject', () => ({})).api;
  const withCrr = new Executor({ core, custom: created, crrVersion: 'v1alpha1', metrics });
  const watch = inWatch(withCrr);
  await watch.run(running, crr);
  const forgotten = watch.leave(running);
  t.equal(forgotten.readEnd?.pod, running, 'read at its end');
  t.same(forgotten.readEnd?.crr(), ['proxy'], 'with the sidecars its ContainerRecreateRequest named');
  const report = finished(await withCrr.reportEnded(forgotten.readEnd!));
  t.same(report?.record.sidecars.map((s) => [s.name, s.stoppedBy, s.exitCode]), [['proxy', ['crr'], 0]]);
  t.equal(report?.exitFailed, false);
  const condition = (current).status?.conditions?.find((c) => c.type === 'SidecarTerminated');
  t.match(condition, { status: 'True', reason: 'SidecarsStopped' });
  t.same(JSON.parse(condition!.message!), report!.record, 'the record, as JSON in the message');
  t.equal(patches.length, 1);
  t.same(finished(await withCrr.reportEnded(forgotten.readEnd!)), report, 'read again (a retry): the record already there is not written twice');
  t.equal(patches.length, 1);
  const exposed = await registry.metrics();
  t.match(exposed, /sidecar_terminator_pods_ended_total\{phase="Succeeded"\} 1/);
  t.match(exposed, /sidecar_terminator_sidecars_ended_total\{stopped_by="crr",exit_code="0"\} 1/);
  current = 404;
  t.equal(await withCrr.reportEnded({ pod: running, leftAt: 0, crr: () => [] }), undefined, 'deleted: nothing said');
});

t.test('the stop record is written again over a pod that changed meanwhile (the Job controller\'s finalizer), and not past three conflicts', async (t) => {
  let current: V1Pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 0 }, { phase: 'Succeeded' });
  let conflicts = 0;
  const apply = withStatusPatch(() => current, (next) => (current = next), []);
  const core = fakeCoreV1Api()
    .handle('readNamespacedPod', () => current)
    .handle('patchNamespacedPodStatus', (request) => {
      if (conflicts-- > 0) throw apiError(409);
      return apply(request);
    }).api;
  const executor = new Executor({ core, custom: fakeCustomObjectsApi().api, crrVersion: undefined, metrics: new WatcherMetrics(new Registry()) });
  conflicts = 2;
  t.ok(finished(await executor.reportEnded({ pod: current, leftAt: 0, crr: () => [] }))?.record, 'written at the third attempt');
  current = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 0 }, { phase: 'Succeeded' });
  conflicts = 3;
  await t.rejects(executor.reportEnded({ pod: current, leftAt: 0, crr: () => [] }), { name: 'PodChanged' }, 'the queue retries it later');
});

t.test('a pod moved to its phase while its sidecar still runs: the record waits for the kubelet to kill it, up to its grace period and a minute', async (t) => {
  let current: V1Pod = jobPod([main(), ignoreExitCodeSidecar('proxy')], { main: 0, proxy: 'running' }, { phase: 'Succeeded', spec: { terminationGracePeriodSeconds: 10 } });
  const core = fakeCoreV1Api()
    .handle('readNamespacedPod', () => current)
    .handle('patchNamespacedPodStatus', withStatusPatch(() => current, (next) => (current = next), [])).api;
  const executor = new Executor({ core, custom: fakeCustomObjectsApi().api, crrVersion: undefined, metrics: new WatcherMetrics(new Registry()) });
  // It left the watch 80 s after its main containers finished (a sidecar ended from outside after its grace period).
  const leftAt = MAINS_FINISHED_AT + 80_000;
  const ended = { pod: current, leftAt, crr: () => [] };
  t.same(await executor.reportEnded(ended, leftAt + 1000), { requeueAfterMs: 5000 }, 'looked at again in 5 s');
  t.same(await executor.reportEnded(ended, leftAt + 98_000), { requeueAfterMs: 2000 }, 'no later than its grace period and a minute and a half after it left the watch');
  t.same(finished(await executor.reportEnded(ended, leftAt + 100_000))?.record.sidecars, [{ name: 'proxy', stoppedBy: [] }], 'then written as it is: not exited');
});

t.test("a pod whose stopped sidecar's exit code failed it is read once it has left, and the event names its Job's rule", async (t) => {
  const ended = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 143 }, { phase: 'Failed' });
  ended.metadata!.ownerReferences = [{ apiVersion: 'batch/v1', kind: 'Job', name: 'job', uid: 'job-uid', controller: true }];
  const events: Array<{ reason?: string; action?: string; message?: string; related?: unknown }> = [];
  let current: V1Pod | 404 = ended;
  let job: object | 403 = { metadata: { name: 'job', uid: 'job-uid' }, spec: { podFailurePolicy: { rules: [{ action: 'FailJob', onExitCodes: { operator: 'In', values: [143] } }] } } };
  const core = fakeCoreV1Api()
    .handle('createNamespacedEvent', ({ body }) => (events.push(body), body))
    .handle('readNamespacedPod', () => {
      if (current === 404) throw apiError(404);
      return current;
    })
    .handle('patchNamespacedPodStatus', withStatusPatch(() => current, (next) => (current = next), [])).api;
  const batch = fakeBatchV1Api().handle('readNamespacedJob', () => {
    if (job === 403) throw apiError(403);
    return job;
  }).api;
  const executor = new Executor({ core, batch, custom: fakeCustomObjectsApi().api, crrVersion: undefined, metrics: new WatcherMetrics(new Registry()) });
  const running = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' });
  const signal: Plan = { code: 'mains-done', stopping: ['proxy (SIGTERM)'], steps: [] };
  const watch = inWatch(executor);
  await watch.run(running, signal);
  events.length = 0; // the SidecarTerminator event of the stop
  const forgotten = watch.leave(running);
  t.match(forgotten, { observed: false, readEnd: { pod: running } }, 'its sidecars were being stopped: read at its end');
  const ending = forgotten.readEnd!;
  t.equal(finished(await executor.reportEnded(ending))?.exitFailed, true);
  t.match(events.at(-1), { reason: 'SidecarExitFailedPod', action: 'sidecar-exit-failed-pod', message: /podFailurePolicy\.rules\[0\] \(FailJob\)/, related: { kind: 'Job', name: 'job', uid: 'job-uid' } });
  job = 403;
  t.equal(finished(await executor.reportEnded(ending))?.exitFailed, true, 'its Job unreadable (RBAC): the event all the same');
  t.match(events.at(-1), { message: /unless a rule of its podFailurePolicy judges that exit code/ });
  t.notOk('related' in events.at(-1)!, 'without the Job');
  current = { ...ended, metadata: { ...ended.metadata, uid: 'another' } };
  t.equal(await executor.reportEnded(ending), undefined, 'another pod under its name: nothing said');
  current = 404;
  t.equal(await executor.reportEnded(ending), undefined, 'deleted: nothing said');
  current = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 0 }, { phase: 'Succeeded' });
  t.equal(finished(await executor.reportEnded(ending))?.exitFailed, false, 'succeeded: nothing said');
  t.equal(events.length, 2);
  const untouched = jobPod([main(), killSidecar('proxy')], { main: 'running', proxy: 'running' });
  untouched.metadata!.uid = 'never-stopped';
  await watch.run(untouched, { code: 'mains-running', stopping: [], steps: [] });
  t.same(watch.leave(untouched), { observed: false }, 'a pod it never stopped is not read');
});
