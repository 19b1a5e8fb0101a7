// The words src/status/narrate.ts gives each situation of a managed pod, called directly: what is
// awaited (the main containers, or what stops each running sidecar by its means) and the advice
// (by the warning's code, the sidecars' means, the events recorded, the Job).
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import t from 'tap';
import { classifyContainers, exitCodesByName } from '../../src/policy/index.ts';
import { narrate } from '../../src/status/narrate.ts';
import type { Situation } from '../../src/status/situation.ts';
import type { PodReading, StopMeans } from '../../src/status/story-types.ts';
import { imageSidecar, jobPod, killSidecar, main, type State } from '../support/pods.ts';

const told = { namespace: 'team', pod: 'job-abc', job: 'nightly', trigger: 'the trigger rule' };
const recorded: CoreV1Event[] = [{ metadata: {}, involvedObject: {}, type: 'Normal', reason: 'SidecarTerminator', message: 'stop requested', action: 'stop-requested' }];

/** A reading of `pod` whose sidecars are stopped by these means. */
function reading(pod: V1Pod, stopMeans: Record<string, StopMeans>, extra: Partial<PodReading> = {}): PodReading {
  const roles = classifyContainers(pod.spec!);
  return { pod, spec: pod.spec!, nodeKind: 'normal', events: recorded, roles, exitCodes: exitCodesByName(pod), stopMeans: new Map(Object.entries(stopMeans)), ...extra };
}

/** A main container done and a sidecar `proxy` (by default a kill sidecar) in this state. */
const sidecarPod = (state: State = 'running', sidecar = killSidecar('proxy')) => jobPod([main(), sidecar], { main: 0, [sidecar.name]: state });
const stopping = { kind: 'stopping', code: 'mains-done' } as const;

t.test("stopped: nothing awaited; the failing event's message is the advice when there is one", async (t) => {
  const read = reading(sidecarPod(0), { proxy: 'kill' });
  t.same(narrate({ kind: 'stopped', code: 'sidecars-stopped' }, read, told), { advice: [] });
  const failedBy = { ...recorded[0]!, type: 'Warning', message: 'sidecar proxy exited 143' };
  t.same(narrate({ kind: 'stopped', code: 'sidecar-exit-failed-pod', failedBy }, read, told), { advice: ["The pod failed by a stopped sidecar's exit code: sidecar proxy exited 143"] });
});

t.test("ignored: the code's meaning; advice only for a restartPolicy to change", async (t) => {
  const read = reading(sidecarPod(), { proxy: 'kill' });
  t.same(narrate({ kind: 'ignored', code: 'restart-policy-always' }, read, told), {
    waitingFor: 'nothing: the watcher ignores this pod (restartPolicy is neither Never nor OnFailure)',
    advice: ['Set restartPolicy: Never or OnFailure.'],
  });
  t.same(narrate({ kind: 'ignored', code: 'pod-deleting' }, read, told).advice, []);
});

t.test('waiting for main: the main containers not done, each with its status; the logs command of the first', async (t) => {
  const pod = jobPod([main('prepare'), main('work'), killSidecar('proxy')], { prepare: 0, work: 'running', proxy: 'running' });
  const { waitingFor, advice } = narrate({ kind: 'waiting for main', code: 'mains-running', decision: { outcome: 'wait', code: 'mains-running' } }, reading(pod, { proxy: 'kill' }), told);
  t.match(waitingFor, /^the main container to finish: work \(running since 2026-01-01T00:00:00Z\)$/, 'a main that exited for good is not awaited');
  t.same(advice, ['Nothing to do for the sidecars: they are stopped once the main containers are done (the trigger rule). To see what a main container is doing: kubectl logs -n team job-abc -c prepare']);
  const pending = jobPod([main('a'), main('b'), killSidecar('proxy')], {}, { phase: 'Pending' });
  t.equal(narrate({ kind: 'waiting for main', code: 'pod-not-started', decision: { outcome: 'ignore', code: 'pod-not-started' } }, reading(pending, {}), told).waitingFor, 'the pod to start (Pending)');
  const both = jobPod([main('a'), main('b'), killSidecar('proxy')], { a: 'running' });
  t.match(narrate({ kind: 'waiting for main', code: 'mains-running', decision: { outcome: 'wait', code: 'mains-running' } }, reading(both, {}), told).waitingFor, /^the main containers to finish: a \(running since [^)]*\), b \(not started\)$/);
});

t.test('stopping: what each running sidecar waits for, by its means', async (t) => {
  const wait = (state: State, means: StopMeans, sidecar = killSidecar('proxy'), extra: Partial<PodReading> = {}) => narrate(stopping, reading(sidecarPod(state, sidecar), { [sidecar.name]: means }, extra), told).waitingFor;
  t.equal(wait('running', 'image', imageSidecar('logs', 'quick:1')), 'the watcher to replace the image of logs with quick:1');
  t.equal(
    wait('running', 'image', imageSidecar('logs', 'quick:1', { image: 'quick:1' })),
    'kubelet to restart logs with its quick-exit image quick:1, which should exit 0 at once (running since 2026-01-01T00:00:00Z)',
  );
  t.equal(wait('running', 'crr', undefined, { crr: { name: 'crr-1', containers: ['proxy'], phase: 'Recreating' } }), 'kruise-daemon on node-a to stop proxy (ContainerRecreateRequest crr-1, phase Recreating)');
  t.match(wait('running', 'signal'), /^proxy to exit after the SIGTERM its ephemeral container sent/);
  t.equal(wait('running', 'kill'), "the watcher's stop of proxy to take effect");
  t.equal(wait('running', 'kill', undefined, { events: [] }), 'the watcher to stop proxy: no action recorded yet');
  t.equal(wait(0, 'kill'), 'the sidecars to exit', 'no sidecar left running');
});

t.test('stopping: advice by the means of the running sidecars, and when the watcher recorded nothing', async (t) => {
  const advice = (pod: V1Pod, means: StopMeans, extra: Partial<PodReading> = {}) => narrate(stopping, reading(pod, { proxy: means, logs: means }, extra), told).advice;
  t.same(advice(sidecarPod(), 'kill'), ["Usually nothing: the sidecars are stopping. If this lasts, read the events and the watcher's logs."]);
  t.same(advice(sidecarPod(), 'crr'), ['Check that kruise-daemon runs on node-a, and the request: kubectl get containerrecreaterequests -n team -o yaml']);
  const unpullable = sidecarPod({ waiting: 'ImagePullBackOff' }, imageSidecar('logs', 'quick:1', { image: 'quick:1' }));
  t.same(advice(unpullable, 'image'), ['The quick-exit image quick:1 of logs cannot be pulled (ImagePullBackOff): fix the reference in KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE.']);
  t.match(advice(sidecarPod(), 'kill', { events: [] }), [/^The watcher has recorded nothing for this pod/]);
});

t.test('warnings: the advice their code calls for, beside the awaited event', async (t) => {
  const read = reading(sidecarPod(), { proxy: 'signal' });
  const event = { ...recorded[0]!, type: 'Warning', message: 'proxy still runs' };
  const outside = narrate({ kind: 'ending from outside', code: 'signal-ignored', event }, read, told);
  t.equal(outside.waitingFor, 'the kubelet to end the sidecar from outside: proxy still runs');
  t.match(outside.advice, [/give it a SIGTERM handler/]);
  const warned = narrate({ kind: 'warned', code: 'stop-failed', event }, read, told);
  t.equal(warned.waitingFor, 'the watcher, after it reported a problem: proxy still runs');
  t.same(warned.advice, ['The watcher retries; its logs say more.']);
});

t.test("cannot stop: each sidecar named; the Job's replacement advised only for a Job's pod", async (t) => {
  const read = reading(sidecarPod(), { proxy: 'none' });
  const situation: Situation = { kind: 'cannot stop', code: 'virtual-node-without-image', containers: ['proxy', 'logs'] };
  const ofJob = narrate(situation, read, told);
  t.equal(ofJob.waitingFor, 'nothing: sidecar proxy cannot be stopped on this node; sidecar logs cannot be stopped on this node');
  t.match(ofJob.advice, [/^Give each sidecar a quick-exit image/, /kubectl delete job -n team nightly/]);
  t.equal(ofJob.advice.length, 2);
  const bare = narrate(situation, read, { ...told, job: undefined });
  t.match(bare.advice, [/^Give each sidecar a quick-exit image/]);
  t.equal(bare.advice.length, 1);
});
