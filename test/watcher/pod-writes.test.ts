// PodWriter (src/watcher/pod-writes.ts): the JSON patches the watcher sends to a pod, each tested
// against the pod's uid and carrying the resourceVersion read, and PodChanged when the API server
// refuses them; read from a fake CoreV1Api's recorded calls.
import t from 'tap';
import type { V1Pod, V1PodCondition } from '@kubernetes/client-node';
import { PHASE_SET_ANNOTATION } from '../../src/policy/index.ts';
import { PodChanged, PodWriter, type Condition } from '../../src/watcher/pod-writes.ts';
import { apiError, fakeCoreV1Api, type RecordedCall } from '../support/fake-kube.ts';
import { jobPod, killSidecar, main } from '../support/pods.ts';

const pod = (): V1Pod => jobPod([main(), killSidecar('proxy'), killSidecar('sql')], { main: 0, proxy: 'running', sql: 'running' }, { metadata: { namespace: 'batch', uid: 'uid-7', resourceVersion: '42' } });
/** The uid test and resourceVersion every write of pod() starts with. */
const SAME_POD = [
  { op: 'test', path: '/metadata/uid', value: 'uid-7' },
  { op: 'add', path: '/metadata/resourceVersion', value: '42' },
];
const stopped: Condition = { type: 'SidecarTerminated', status: 'True', reason: 'SidecarsStopped', message: 'phase set to Succeeded' };

/** A writer whose API answers every patch with `answer`, and the fake that records the calls. */
function writer(answer: (body: unknown) => V1Pod = () => ({ metadata: { name: 'written' } })) {
  const core = fakeCoreV1Api()
    .handle('patchNamespacedPod', ({ body }) => answer(body))
    .handle('patchNamespacedPodStatus', ({ body }) => answer(body))
    .handle('patchNamespacedPodEphemeralcontainers', ({ body }) => answer(body));
  return { core, pods: new PodWriter(core.api) };
}

/** The only call made: its method, target and JSON patch. */
function onlyCall(calls: RecordedCall[]) {
  if (calls.length !== 1) throw new Error(`${calls.length} requests, not one: ${calls.map((call) => call.method).join(', ')}`);
  const { method, request } = calls[0]!;
  const { name, namespace, body } = request as { name: string; namespace: string; body: unknown };
  return { method, name, namespace, body };
}

/** The Content-Type a call's per-request options set, as client-node's middleware sets it. */
function contentType(call: RecordedCall): string | undefined {
  const headers: Record<string, string> = {};
  for (const middleware of (call.options as { middleware?: Array<{ pre: (request: unknown) => unknown }> } | undefined)?.middleware ?? []) {
    middleware.pre({ setHeaderParam: (key: string, value: string) => (headers[key] = value) });
  }
  return headers['Content-Type'];
}

t.test('replaceImage: tests the container at its index, replaces its image, and returns the pod as written', async (t) => {
  const { core, pods } = writer();
  const written = await pods.replaceImage(pod(), 'sql', 'quick-exit:1');
  t.same(written, { metadata: { name: 'written' } });
  t.same(onlyCall(core.calls), {
    method: 'patchNamespacedPod',
    name: 'job-abc',
    namespace: 'batch',
    body: [...SAME_POD, { op: 'test', path: '/spec/containers/2/name', value: 'sql' }, { op: 'replace', path: '/spec/containers/2/image', value: 'quick-exit:1' }],
  });
  t.equal(contentType(core.calls[0]!), 'application/json-patch+json');
});

t.test('replaceImage of a container the pod does not have: an error, and no request', async (t) => {
  const { core, pods } = writer();
  await t.rejects(pods.replaceImage(pod(), 'logs', 'quick-exit:1'), /pod job-abc has no container logs/);
  t.equal(core.calls.length, 0);
});

t.test('addEphemeralContainers: the list itself where the pod has none, else each one at its end', async (t) => {
  const containers = [{ name: 'stop-proxy', image: 'st:1', targetContainerName: 'proxy' }, { name: 'stop-sql', image: 'st:1', targetContainerName: 'sql' }];
  const first = writer();
  await first.pods.addEphemeralContainers(pod(), containers);
  t.same(onlyCall(first.core.calls), { method: 'patchNamespacedPodEphemeralcontainers', name: 'job-abc', namespace: 'batch', body: [...SAME_POD, { op: 'add', path: '/spec/ephemeralContainers', value: containers }] });
  t.equal(contentType(first.core.calls[0]!), 'application/json-patch+json');

  const withOne = pod();
  withOne.spec!.ephemeralContainers = [{ name: 'debugger', image: 'busybox:1.36' }];
  const more = writer();
  await more.pods.addEphemeralContainers(withOne, containers);
  t.same(onlyCall(more.core.calls).body, [...SAME_POD, ...containers.map((value) => ({ op: 'add', path: '/spec/ephemeralContainers/-', value }))]);
});

t.test('setStatus: the conditions list where the pod has none, the condition after the others, or in place of its type', async (t) => {
  const bodyOf = async (conditions: V1PodCondition[] | undefined) => {
    const target = pod();
    target.status!.conditions = conditions;
    const { core, pods } = writer();
    await pods.setStatus(target, stopped);
    const call = onlyCall(core.calls);
    t.equal(call.method, 'patchNamespacedPodStatus');
    t.equal(contentType(core.calls[0]!), 'application/json-patch+json');
    return call.body as Array<{ op: string; path: string; value: Record<string, unknown> }>;
  };
  const none = await bodyOf(undefined);
  t.same(none.slice(0, 2), SAME_POD);
  t.match(none.slice(2), [{ op: 'add', path: '/status/conditions', value: [{ ...stopped, lastTransitionTime: String }] }]);
  t.equal(none.length, 3, 'no phase written without one');
  const others = await bodyOf([{ type: 'Ready', status: 'False' }]);
  t.match(others.slice(2), [{ op: 'add', path: '/status/conditions/-', value: stopped }]);
  const replaced = await bodyOf([{ type: 'Ready', status: 'False' }, { type: 'SidecarTerminated', status: 'False', reason: 'QuickExitImageNotPulled' }]);
  t.match(replaced.slice(2), [{ op: 'replace', path: '/status/conditions/1', value: stopped }]);
});

t.test('setStatus: the transition time moves only when the status does', async (t) => {
  const since = new Date('2026-01-01T00:00:30Z');
  const timeAfter = async (status: string) => {
    const target = pod();
    target.status!.conditions = [{ type: 'SidecarTerminated', status, reason: 'Earlier', lastTransitionTime: since }];
    const { core, pods } = writer();
    await pods.setStatus(target, stopped);
    return (onlyCall(core.calls).body as Array<{ value: { lastTransitionTime?: unknown } }>)[2]!.value.lastTransitionTime;
  };
  t.equal(await timeAfter('True'), since, 'True again: kept');
  const moved = await timeAfter('False');
  t.not(moved, since, 'False to True: a new time');
  t.ok(typeof moved === 'string' && Number.isFinite(Date.parse(moved)), `a time: ${String(moved)}`);
});

t.test('setStatus with a phase: the phase and the phase-set annotation in the same write', async (t) => {
  const { core, pods } = writer();
  await pods.setStatus(pod(), stopped, 'Failed');
  t.match(onlyCall(core.calls).body, [...SAME_POD, { path: '/status/conditions' }, { op: 'add', path: '/status/phase', value: 'Failed' }, { op: 'add', path: '/metadata/annotations', value: { [PHASE_SET_ANNOTATION]: 'Failed' } }]);

  const annotated = pod();
  annotated.metadata!.annotations = { 'example.com/other': 'x' };
  const more = writer();
  await more.pods.setStatus(annotated, stopped, 'Succeeded');
  const escaped = `/metadata/annotations/${PHASE_SET_ANNOTATION.replace('/', '~1')}`;
  t.same((onlyCall(more.core.calls).body as unknown[]).at(-1), { op: 'add', path: escaped, value: 'Succeeded' }, 'one annotation added to the others, its "/" escaped');
});

t.test('a write the pod refuses (gone, changed since it was read, a failed test) is PodChanged, with the cause', async (t) => {
  const failedTest = apiError(422, 'the server rejected our request due to an error in our request', 'Invalid');
  for (const [what, error] of [['gone', apiError(404)], ['changed', apiError(409)], ['a failed test', failedTest]] as const) {
    const { pods } = writer(() => {
      throw error;
    });
    const refused = await pods.replaceImage(pod(), 'proxy', 'quick-exit:1').catch((e: unknown) => e);
    t.ok(refused instanceof PodChanged, what);
    t.match(refused, { name: 'PodChanged', message: 'pod batch/job-abc (uid uid-7) changed or is gone since it was read', cause: error }, what);
  }
});

t.test('other failures are thrown as they are: a 422 of validation, a server error', async (t) => {
  const invalid = apiError(422, 'Pod "job-abc" is invalid', 'Invalid');
  const status = JSON.parse(invalid.body) as Record<string, unknown>;
  status.details = { name: 'job-abc', kind: 'Pod', causes: [{ field: 'spec.containers[1].image', reason: 'FieldValueRequired' }] };
  invalid.body = JSON.stringify(status);
  for (const error of [invalid, apiError(500), new TypeError('fetch failed')]) {
    const { pods } = writer(() => {
      throw error;
    });
    await t.rejects(pods.setStatus(pod(), stopped), error);
    t.notOk(await pods.addEphemeralContainers(pod(), []).catch((e: unknown) => e instanceof PodChanged), `${error.message}: not PodChanged`);
  }
});
