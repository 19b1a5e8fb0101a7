// The story of a pod, from objects written here: the states and their reasons where the end-to-end
// tests cannot easily stage them (OnFailure retries, image pulls, Kruise's request phases), and
// the small pure helpers.
import type { CoreV1Event, V1Container, V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import t from 'tap';
import { selectorMatches } from '../../src/status/cluster.ts';
import { age } from '../../src/status/render.ts';
import { podStory, type PodFacts } from '../../src/status/story.ts';
import { INJECTED_POLICY_ANNOTATION, MANAGED, MANAGED_LABEL, POD_ANNOTATIONS, TERMINATED_CONDITION, recordCondition } from '../../src/policy/index.ts';
import { containerOf, parseFieldPath } from '../../src/lint/field-path.ts';
import { FINISHED, QUICK_EXIT, STARTED, containerStatus, imageSidecar, jobPod, killSidecar, main, normalNode, virtualNode } from '../support/pods.ts';

const T0 = STARTED;
const T1 = FINISHED;
const now = new Date('2026-01-01T00:05:00Z');

/** A pod of the Job `job`, its main container and `sidecar`, with these statuses. */
function pod(options: { restartPolicy?: string; sidecar?: V1Container; statuses: V1ContainerStatus[]; labels?: Record<string, string> }): V1Pod {
  const ownerReferences = [{ apiVersion: 'batch/v1', kind: 'Job', name: 'job', uid: 'j1' }];
  const p = jobPod([main(), options.sidecar ?? killSidecar('proxy')], {}, {
    spec: { restartPolicy: options.restartPolicy ?? 'Never' },
    metadata: { ownerReferences, ...(options.labels ? { labels: options.labels } : {}) },
  });
  p.status!.containerStatuses = options.statuses;
  return p;
}

const event = (type: string, reason: string, message: string, time = T1, extra: Partial<CoreV1Event> = {}): CoreV1Event =>
  ({ metadata: {}, involvedObject: {}, type, reason, message, lastTimestamp: new Date(time), ...extra });

function facts(p: V1Pod, extra: Partial<PodFacts> = {}): PodFacts {
  return { pod: p, node: { value: normalNode }, events: { value: [] }, crr: { value: undefined }, now, ...extra };
}

t.test('OnFailure: a failed main container is restarted, so the pod waits for main', async (t) => {
  const story = podStory(facts(pod({ restartPolicy: 'OnFailure', statuses: [containerStatus('main', 1, { restartCount: 1 }), containerStatus('proxy', 'running')] })));
  t.match(story, { state: 'waiting for main', since: T0 });
  t.match(story.waitingFor, /the main container to finish: main \(exited 1 \(?.*1 restart\)/);
  t.match(story.waitingFor, /; main will be restarted \(restartPolicy OnFailure\)$/);
  t.match(story.trigger, /OnFailure: the sidecars are stopped once every main container has exited 0/);
});

t.test('a main its own restart rule brings back: the pod waits for main, and the rule is named', async (t) => {
  const restartOn42 = main('main', 'busybox:1.36', { restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [42] } }] });
  const exited = (code: number) => {
    const p = jobPod([restartOn42, killSidecar('proxy')], {}, { metadata: { ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'job', uid: 'j1' }] } });
    p.status!.containerStatuses = [containerStatus('main', code), containerStatus('proxy', 'running')];
    return podStory(facts(p));
  };
  const story = exited(42);
  t.match(story, { state: 'waiting for main', code: 'main-restarting', since: T0 });
  t.match(story.waitingFor, /^the main container to finish: main \(exited 42 at [^)]*\); main will be restarted \(rule 1: exit code 42 In \[42\]\)$/);
  t.match(story.trigger, /^restartPolicy Never: .*; main sets its own restartPolicy, which decides instead, with its restartPolicyRules, whether the kubelet restarts it/);
  t.match(exited(1), { state: 'stopping', code: 'mains-done' }, 'an exit no rule restarts: the sidecars are stopped');
});

t.test("each of the policy's reasons to wait or ignore gives its state", async (t) => {
  const pending = pod({ statuses: [] });
  pending.status = { phase: 'Pending' };
  t.match(podStory(facts(pending)), { state: 'waiting for main', waitingFor: 'the pod to start (Pending)' });
  t.match(podStory(facts(pod({ statuses: [containerStatus('main', 'running'), containerStatus('proxy', 'running')] }))), { state: 'waiting for main', waitingFor: /^the main container to finish: main \(running since / });
  t.match(podStory(facts(pod({ statuses: [containerStatus('main', 0), containerStatus('proxy', 0)] }))), { state: 'stopped', since: T1 });
  t.match(podStory(facts(pod({ restartPolicy: 'Always', statuses: [containerStatus('main', 'running'), containerStatus('proxy', 'running')] }))), { state: 'failed', waitingFor: /the watcher ignores this pod \(restartPolicy is neither Never nor OnFailure\)/, advice: ['Set restartPolicy: Never or OnFailure.'] });
});

t.test("a pod a stopped sidecar's exit code failed: stopped, with the watcher's event as the advice", async (t) => {
  const p = pod({ statuses: [containerStatus('main', 0), containerStatus('proxy', 143)] });
  p.status!.phase = 'Failed';
  const message = "the pod failed although its main containers succeeded: sidecar proxy exited 143 after it was stopped; the Job's podFailurePolicy.rules[0] (FailJob) matched that exit code";
  const failed = event('Warning', 'SidecarExitFailedPod', message, T1, { action: 'sidecar-exit-failed-pod' });
  t.match(podStory(facts(p, { events: { value: [failed] } })), { state: 'stopped', code: 'sidecar-exit-failed-pod', advice: [`The pod failed by a stopped sidecar's exit code: ${message}`] });
  const stopped = podStory(facts(p));
  t.match(stopped, { state: 'stopped', code: 'sidecars-stopped' }, 'without the event: stopped');
  t.same(stopped.advice, [], 'and nothing to advise');
});

t.test('a stopped pod has its result: the stop record the watcher wrote, else read from the pod and its ContainerRecreateRequest', async (t) => {
  const p = pod({ statuses: [containerStatus('main', 0), containerStatus('proxy', 0)] });
  const read = podStory(facts(p, { crr: { value: { name: 'sidecar-termination-uid', containers: ['proxy'] } } }));
  t.match(read.result, { mains: [{ name: 'main', exitCode: 0 }], sidecars: [{ name: 'proxy', exitCode: 0, stoppedBy: ['crr'] }] });
  const recorded = { phase: 'Succeeded', mains: [{ name: 'main', exitCode: 0 }], sidecars: [{ name: 'proxy', exitCode: 0, stoppedBy: ['signal' as const], secondsAfterMains: 1 }] };
  p.status!.conditions = [{ type: TERMINATED_CONDITION, ...recordCondition(recorded), lastTransitionTime: new Date(T1) }];
  const story = podStory(facts(p));
  t.same(story.result, recorded, 'the record on the pod');
  t.ok(story.actions.some((a) => a.what === 'condition SidecarTerminated=True: stop record: main exited 0; proxy stopped by signal, exited 0 1s after the main containers'), 'told in words among what happened');
  t.notOk(podStory(facts(pod({ statuses: [containerStatus('main', 'running'), containerStatus('proxy', 'running')] }))).result, 'none while the sidecars run');
});

t.test("the mechanism is read from the objects and the event's code and related object, never from its words", async (t) => {
  const p = pod({ statuses: [containerStatus('main', 0), containerStatus('proxy', 'running')] });
  const crr = { kind: 'ContainerRecreateRequest', apiVersion: 'apps.kruise.io/v1alpha1', name: 'sidecar-termination-uid-1', namespace: 'default' };
  const announced = event('Normal', 'SidecarTerminator', 'stopping sidecars: proxy (ContainerRecreateRequest)', T1, { action: 'stop-requested', related: crr });
  const unreadable = { crr: { missing: 'list containerrecreaterequests.apps.kruise.io in namespace default' } };
  t.match(podStory(facts(p, { ...unreadable, events: { value: [announced] } })), { state: 'stopping', mechanism: 'crr', lastEvent: { code: 'stop-requested' } }, 'the request out of sight: the event names it');
  const words = event('Normal', 'SidecarTerminator', 'stopping sidecars: proxy (ContainerRecreateRequest)');
  t.match(podStory(facts(p, { ...unreadable, events: { value: [words] } })), { state: 'stopping', mechanism: 'kill' }, 'the same words without code or related object say nothing');
  t.notOk(podStory(facts(p, { events: { value: [words] } })).lastEvent?.code, 'an event without a code has none');

  const signalled = pod({ statuses: [containerStatus('main', 0), containerStatus('proxy', 'running')] });
  signalled.spec!.ephemeralContainers = [{ name: 'stop-proxy', image: 'st:1', targetContainerName: 'proxy' }];
  t.match(podStory(facts(signalled)), { state: 'stopping', mechanism: 'signal', code: 'mains-done' }, 'the signal container on the pod');
});

t.test('a virtual node: image replaced, waiting for kubelet; an unpullable quick-exit image is named', async (t) => {
  const replaced = podStory(facts(pod({ sidecar: { ...imageSidecar('proxy'), image: QUICK_EXIT }, statuses: [containerStatus('main', 0), containerStatus('proxy', 'running')] }), { node: { value: virtualNode } }));
  t.match(replaced, { state: 'stopping', nodeKind: 'virtual', mechanism: 'image' });
  t.match(replaced.waitingFor, /kubelet to restart proxy with its quick-exit image/);
  t.match(replaced.actions, [{ what: /sidecar proxy runs its quick-exit image/ }]);

  const pulling = podStory(facts(pod({ sidecar: { ...imageSidecar('proxy'), image: QUICK_EXIT }, statuses: [containerStatus('main', 0), containerStatus('proxy', { waiting: 'ImagePullBackOff' })] }), { node: { value: virtualNode } }));
  t.match(pulling.advice, [/The quick-exit image registry\.example\.com\/quick-exit:1\.0 of proxy cannot be pulled \(ImagePullBackOff\)/]);
  for (const reason of ['ErrImagePull', 'InvalidImageName', 'ErrImageNeverPull']) {
    const failing = podStory(facts(pod({ sidecar: { ...imageSidecar('proxy'), image: QUICK_EXIT }, statuses: [containerStatus('main', 0), containerStatus('proxy', { waiting: reason })] }), { node: { value: virtualNode } }));
    t.match(failing.advice, [new RegExp(`cannot be pulled \\(${reason}\\)`)], `${reason}: every reason the watcher reads as a failed pull`);
  }
});

t.test('crr: the request and its phase; nothing recorded yet is said so', async (t) => {
  const p = pod({ statuses: [containerStatus('main', 0), containerStatus('proxy', 'running')] });
  const crr = { value: { name: 'sidecar-termination-uid-1', containers: ['proxy'], createdAt: T1, phase: 'Recreating' } };
  const story = podStory(facts(p, { crr }));
  t.match(story, { state: 'stopping', mechanism: 'crr' });
  t.match(story.waitingFor, /kruise-daemon on node-a to stop proxy \(ContainerRecreateRequest sidecar-termination-uid-1, phase Recreating\)/);
  t.match(story.actions, [{ time: T1, what: 'ContainerRecreateRequest sidecar-termination-uid-1 for proxy, phase Recreating' }]);

  const silent = podStory(facts(p));
  t.match(silent, { state: 'stopping', mechanism: 'kill', waitingFor: 'the watcher to stop proxy: no action recorded yet' });
  t.match(silent.advice, [/The watcher has recorded nothing for this pod/]);
});

t.test("a Warning as the last event: failed, with the fix its code calls for, whatever its words", async (t) => {
  const p = pod({ statuses: [containerStatus('main', 0), containerStatus('proxy', 'running')] });
  const told = event('Normal', 'SidecarTerminator', 'stopping sidecars: proxy (SIGTERM)', T1, { action: 'stop-requested' });
  const failedWith = (code: string | undefined, message: string) =>
    podStory(facts(p, { events: { value: [told, event('Warning', 'SidecarTerminationFailed', message, '2026-01-01T00:02:00Z', code ? { action: code } : {})] } }));
  const ignored = failedWith('signal-ignored', 'sidecar proxy still runs 30s after SIGTERM; ending it from outside: its image is replaced by the quick-exit image q:1');
  t.match(ignored, { state: 'stopping', since: T1, code: 'signal-ignored', waitingFor: /^the kubelet to end the sidecar from outside: sidecar proxy still runs 30s/ }, 'ended from outside: stopping, not failed');
  t.match(ignored.advice, [/run it under an init that forwards signals/]);
  t.match(failedWith('sigterm-unhandled', 'reworded').advice, [/give it a SIGTERM handler/]);
  t.match(failedWith('crr-not-done', 'sidecar proxy still runs 90s after the main containers finished: its ContainerRecreateRequest did not stop it'), { state: 'stopping', code: 'crr-not-done', waitingFor: /^the kubelet to end the sidecar from outside/ }, 'a request no daemon acted on, ended from outside: stopping');
  t.match(failedWith('stop-failed', 'reworded').advice, [/The watcher retries; its logs say more/]);

  const uncoded = failedWith(undefined, 'sidecar proxy still runs 30s after SIGTERM: its PID 1 ignores SIGTERM');
  t.match(uncoded, { state: 'failed' }, 'a Warning fails the pod whatever its code');
  t.notOk(uncoded.code, 'no code to report');
  t.notOk(uncoded.advice.some((advice) => /init that forwards signals/.test(advice)), 'the words alone call for no fix');
});

t.test("the entries of the injected-sidecar policy the pod's annotation names, managed or not", async (t) => {
  const istio = main('istio-proxy', 'docker.io/istio/proxyv2:1.24.0');
  const annotated = pod({ sidecar: istio, labels: { [MANAGED_LABEL]: MANAGED }, statuses: [containerStatus('main', 'running'), containerStatus('istio-proxy', 'running')] });
  annotated.metadata!.annotations = { [POD_ANNOTATIONS.sidecars]: 'istio-proxy', [INJECTED_POLICY_ANNOTATION]: 'istio' };
  const story = podStory(facts(annotated));
  t.same(story.injectedSidecarPolicy, ['istio']);
  t.match(story.containers, [{ name: 'main', role: 'main' }, { name: 'istio-proxy', role: 'sidecar' }], 'the sidecar it named');
  const unmanaged = structuredClone(annotated);
  delete unmanaged.metadata!.labels;
  t.same(podStory(facts(unmanaged)).injectedSidecarPolicy, ['istio'], 'told for a pod not managed too');
  t.notOk('injectedSidecarPolicy' in podStory(facts(pod({ statuses: [] }))), 'absent without the annotation');
});

t.test('unreadable nodes and events: unknown node kind, and the missing permissions listed', async (t) => {
  const story = podStory(facts(pod({ statuses: [containerStatus('main', 'running'), containerStatus('proxy', 'running')] }), { node: { missing: 'get nodes' }, events: { missing: 'list events in namespace default' } }));
  t.match(story, { nodeKind: 'unknown', state: 'waiting for main', limits: ['get nodes', 'list events in namespace default'] });
});

t.test('helpers: ages, label selectors, field paths', async (t) => {
  const at = (seconds: number) => age(new Date(now.getTime() - seconds * 1000).toISOString(), now);
  t.same([at(5), at(119), at(200), at(600), at(3 * 3600 + 60), at(100 * 3600)], ['5s', '119s', '3m20s', '10m', '3h', '4d']);
  const selector = { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', 'sidecar-terminator'] }] };
  t.equal(selectorMatches(selector, { 'kubernetes.io/metadata.name': 'default' }), true);
  t.equal(selectorMatches(selector, { 'kubernetes.io/metadata.name': 'sidecar-terminator' }), false);
  t.equal(selectorMatches({ matchLabels: { team: 'a' }, matchExpressions: [{ key: 'x', operator: 'Exists' }] }, { team: 'a' }), false);
  t.equal(selectorMatches(undefined, {}), true);
  t.same(parseFieldPath('spec.containers[1].env[KRUISE_X].valueFrom'), [{ key: 'spec' }, { key: 'containers' }, { index: 1 }, { key: 'env' }, { name: 'KRUISE_X' }, { key: 'valueFrom' }]);
  t.equal(containerOf({ spec: { initContainers: [{ name: 'init' }] } }, parseFieldPath('spec.initContainers[0].env[X]')), 'init');
  t.equal(containerOf({ spec: {} }, parseFieldPath('spec.restartPolicy')), undefined);
});

t.test('a pod whose sidecars moved to native sidecars: not managed, the kubelet stops them, nothing to do', async (t) => {
  const migrated = pod({ labels: {}, statuses: [containerStatus('main', 'running')] });
  migrated.metadata!.annotations = { 'sidecar-terminator.io/native-sidecars-migrated': 'proxy' };
  migrated.spec!.initContainers = [{ ...migrated.spec!.containers[1]!, restartPolicy: 'Always' }];
  migrated.spec!.containers = [migrated.spec!.containers[0]!];
  const story = podStory(facts(migrated));
  t.match(story, { state: 'not managed', advice: [] });
  t.same(story.notManaged, ['its sidecars proxy were moved to native sidecars (init containers with restartPolicy: Always) when it was created: the kubelet stops them once the main containers are done']);
  delete migrated.spec!.initContainers[0]!.restartPolicy;
  const stripped = podStory(facts(migrated));
  t.match(stripped, { state: 'failed', notManaged: [/^its sidecars proxy were moved to native sidecars when it was created, but lost restartPolicy: Always afterwards/], advice: [/A mutating webhook that rewrote the init containers .* set --native-sidecars=none .* then replace the pod \(kubectl delete job -n default job/] }, 'a migrated sidecar stripped by a later webhook: it never finishes, and why');
});
