// The escalation ladder (src/policy/escalation.ts), rung by rung: what a signal container sent
// already reports (checkSignal), a ContainerRecreateRequest past its deadline (checkCrr), and how a
// sidecar is ended from outside (endFromOutside), each from a pod, the settings and the time.
import t from 'tap';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { EMPTY_DRAFT, type Draft, type Planning } from '../../src/policy/plan-draft.ts';
import { checkCrr, checkSignal, endFromOutside } from '../../src/policy/escalation.ts';
import { CONDITION_REASONS, ENV_WITH_IMAGE, PHASE_SET, STOP_EXIT_CODES, rolesOf, type Step, type StopSettings } from '../../src/policy/index.ts';
import { MAINS_FINISHED_AT, QUICK_EXIT, STARTED, containerStatus, jobPod, killSidecar, main, type State } from '../support/pods.ts';

const CONFIGURED = 'quick-exit:1';
const SETTINGS: StopSettings = { killMechanism: 'signal', signal: { image: 'st:1', command: ['/stop-sidecar'] }, quickExitImageAllowlist: [], quickExitImage: CONFIGURED };
/** A minute after the main containers finished. */
const NOW = MAINS_FINISHED_AT + 60_000;

/** What a plan of this pod knows, as planStop makes it. */
function planning(pod: V1Pod, settings: Partial<StopSettings> = {}, now = NOW): Planning {
  const roles = rolesOf(pod);
  return { pod, settings: { ...SETTINGS, ...settings }, now, roles: new Map(roles.map((role) => [role.name, role])), mains: roles.filter((role) => role.role === 'main'), history: {} };
}

/** A pod whose main container exited `mainExit` and whose sidecar `proxy` is in state `proxy`. */
function podWith(sidecar: V1Container = killSidecar('proxy'), proxy: State = 'running', mainExit = 0): V1Pod {
  return jobPod([main(), sidecar], { main: mainExit, proxy });
}

const roleOf = (plan: Planning, name = 'proxy') => plan.roles.get(name)!;
const types = (draft: Draft) => draft.steps.map((step) => step.type);
const stepOf = <T extends Step['type']>(draft: Draft, type: T) => draft.steps.find((step): step is Extract<Step, { type: T }> => step.type === type);
const warnings = (draft: Draft) => draft.steps.flatMap((step) => (step.type === 'warn' ? [step] : []));
/** A draft with a step of an earlier rung already in it. */
const EARLIER: Draft = { steps: [{ type: 'create-crr', containers: ['sql'] }], stopping: ['sql (ContainerRecreateRequest)'] };

t.test('endFromOutside: the configured quick-exit image replaces a sidecar that sets no command, after what the draft holds', async (t) => {
  const plan = planning(podWith());
  const ended = endFromOutside(plan, EARLIER, roleOf(plan), 'signal-ignored', 'sidecar proxy still runs');
  t.same(types(ended), ['create-crr', 'warn', 'escalate-image'], 'the earlier step kept, first');
  t.same(ended.stopping, EARLIER.stopping);
  t.same(stepOf(ended, 'escalate-image'), { type: 'escalate-image', container: 'proxy', image: CONFIGURED });
  t.match(warnings(ended)[0], { code: 'signal-ignored', key: 'signal-ignored/proxy/image', message: /^sidecar proxy still runs; ending it from outside: its image is replaced by the quick-exit image quick-exit:1/ });
  t.same(EARLIER.steps.length, 1, 'the draft given is left as it was');
});

t.test("endFromOutside: the sidecar's own quick-exit image comes first, even with a command of its own", async (t) => {
  const own = killSidecar('proxy', { command: ['envoy'], env: [{ name: ENV_WITH_IMAGE, value: QUICK_EXIT }] });
  const plan = planning(podWith(own));
  const ended = endFromOutside(plan, EMPTY_DRAFT, roleOf(plan), 'sigterm-unhandled', 'cause');
  t.same(types(ended), ['warn', 'escalate-image']);
  t.same(stepOf(ended, 'escalate-image')?.image, QUICK_EXIT);
});

t.test('endFromOutside: an own quick-exit image outside the allowlist is not written; the phase ends the sidecar', async (t) => {
  const own = killSidecar('proxy', { env: [{ name: ENV_WITH_IMAGE, value: QUICK_EXIT }] });
  const plan = planning(podWith(own), { quickExitImageAllowlist: ['registry.example.com/other:*'] });
  const ended = endFromOutside(plan, EMPTY_DRAFT, roleOf(plan), 'signal-failed', 'cause');
  t.match(stepOf(ended, 'escalate-phase'), { phase: 'Succeeded' });
  t.notOk(ended.steps.some((step) => step.type === 'escalate-image' && step.image === QUICK_EXIT), 'its own image is never put in its place');
  t.match(warnings(ended)[0]?.message, `its quick-exit image ${QUICK_EXIT} is not in --quick-exit-image-allowlist, so the pod's phase is set`, 'and the warning says why');
  t.notMatch(warnings(ended)[0]?.message, /no quick-exit image is configured/);
  const configured = planning(podWith(), { quickExitImageAllowlist: ['registry.example.com/other:*'] });
  t.same(stepOf(endFromOutside(configured, EMPTY_DRAFT, roleOf(configured), 'signal-failed', 'cause'), 'escalate-image')?.image, CONFIGURED, "the configured image is the operator's own: the allowlist of pods' images does not apply to it");
});

t.test('endFromOutside: a sidecar with a command gets the phase from its main containers, and the configured image that has the kubelet act at once', async (t) => {
  const plan = planning(podWith(killSidecar('proxy', { command: ['sh', '-c', 'sleep 1d'] })));
  const ended = endFromOutside(plan, EMPTY_DRAFT, roleOf(plan), 'signal-ignored', 'cause');
  t.same(types(ended), ['warn', 'escalate-phase', 'escalate-image']);
  const phase = stepOf(ended, 'escalate-phase')!;
  t.same(phase.phase, 'Succeeded');
  t.same([phase.condition.status, phase.condition.reason], ['True', CONDITION_REASONS.stopping]);
  t.ok(phase.condition.message.startsWith(`${PHASE_SET}Succeeded: `), phase.condition.message);
  t.match(phase.condition.message, /sidecar proxy is ended by the kubelet \(no quick-exit image can run in its place \(it sets command\)\)/);
  t.match(warnings(ended)[0], { key: 'signal-ignored/proxy/phase', message: /so the pod's phase is set to Succeeded from its main containers/ });
  t.same(stepOf(ended, 'escalate-image'), { type: 'escalate-image', container: 'proxy', image: CONFIGURED });
});

t.test('endFromOutside: the phase follows the main containers: Failed when one failed', async (t) => {
  const plan = planning(podWith(killSidecar('proxy', { command: ['/proxy'] }), 'running', 2));
  t.match(stepOf(endFromOutside(plan, EMPTY_DRAFT, roleOf(plan), 'signal-ignored', 'cause'), 'escalate-phase'), { phase: 'Failed', condition: { message: /^phase set to Failed: / } });
});

t.test('endFromOutside: without any quick-exit image, the phase alone', async (t) => {
  const plan = planning(podWith(), { quickExitImage: '' });
  const ended = endFromOutside(plan, EMPTY_DRAFT, roleOf(plan), 'crr-not-done', 'cause');
  t.same(types(ended), ['warn', 'escalate-phase'], 'no image to write');
  t.match(stepOf(ended, 'escalate-phase')?.condition.message, /\(no quick-exit image is configured\)/);
});

t.test('endFromOutside: a sidecar already running the quick-exit image is left to the kubelet, until that image cannot run', async (t) => {
  const swapped = (state: State) => planning(podWith(killSidecar('proxy', { image: CONFIGURED }), state));
  const killing = swapped('running');
  const left = endFromOutside(killing, EARLIER, roleOf(killing), 'signal-ignored', 'cause');
  t.same(left.steps, EARLIER.steps, 'nothing more written, nothing said again');
  t.equal(left.requeueAfterMs, 45_000, 'looked at again after its grace period (30 s) and the margin');

  for (const reason of ['ErrImagePull', 'CrashLoopBackOff', 'CreateContainerError']) {
    const failing = swapped({ waiting: reason });
    const ended = endFromOutside(failing, EMPTY_DRAFT, roleOf(failing), 'signal-ignored', 'cause');
    t.same(types(ended), ['warn', 'escalate-phase'], `${reason}: the phase, and no image (it is the one that fails)`);
    t.match(stepOf(ended, 'escalate-phase')?.condition.message, new RegExp(`its quick-exit image quick-exit:1 cannot run \\(${reason}\\)`));
  }
  const pulling = swapped({ waiting: 'ContainerCreating' });
  t.same(types(endFromOutside(pulling, EMPTY_DRAFT, roleOf(pulling), 'signal-ignored', 'cause')), [], 'still being created: waited for');
});

t.test('endFromOutside: a sidecar that runs the configured image yet sets a command is not given it again', async (t) => {
  const plan = planning(podWith(killSidecar('proxy', { image: CONFIGURED, command: ['/proxy'] })));
  t.same(types(endFromOutside(plan, EMPTY_DRAFT, roleOf(plan), 'signal-ignored', 'cause')), ['warn', 'escalate-phase']);
});

t.test('endFromOutside: a pod in a terminal phase, or a draft that sets it already, gets no second phase write', async (t) => {
  const shell = killSidecar('proxy', { command: ['/proxy'] });
  for (const phase of ['Succeeded', 'Failed']) {
    const terminal = planning(jobPod([main(), shell], { main: 0, proxy: 'running' }, { phase }));
    t.equal(endFromOutside(terminal, EARLIER, roleOf(terminal), 'signal-ignored', 'cause'), EARLIER, `${phase}: the kubelet kills what still runs, the draft is unchanged`);
  }
  const plan = planning(podWith(shell));
  const phased = endFromOutside(plan, EMPTY_DRAFT, roleOf(plan), 'signal-ignored', 'cause');
  const again = endFromOutside(plan, phased, roleOf(plan), 'sigterm-unhandled', 'another cause');
  t.same(types(again), [...types(phased), 'warn'], 'a warning for the second cause, no second phase or image');
  t.match(warnings(again).at(-1), { code: 'sigterm-unhandled', key: 'sigterm-unhandled/proxy/phase', message: /^another cause; ending it from outside: the pod's phase is set from its main containers/ });
  const marked: Draft = { steps: [{ type: 'mark-terminal', phase: 'Succeeded', condition: { status: 'True', reason: CONDITION_REASONS.stopping, message: 'm' } }], stopping: [] };
  t.same(types(endFromOutside(plan, marked, roleOf(plan), 'signal-ignored', 'cause')), ['mark-terminal', 'warn'], 'a phase the plan marks already counts too');
});

/** A pod whose sidecar proxy has a signal container stop-proxy in `state` (grace period `grace`, when given). */
function signalled(state: State | undefined, grace?: number, sidecar: V1Container = killSidecar('proxy')): V1Pod {
  const pod = jobPod([main(), sidecar], { main: 0, proxy: 'running' }, grace === undefined ? {} : { spec: { terminationGracePeriodSeconds: grace } });
  pod.status!.ephemeralContainerStatuses = state === undefined ? [] : [containerStatus('stop-proxy', state)];
  return pod;
}

/** checkSignal of the pod's sidecar proxy, at `now`. */
function check(pod: V1Pod, now = NOW, draft: Draft = EMPTY_DRAFT): Draft {
  const plan = planning(pod, {}, now);
  return checkSignal(plan, draft, roleOf(plan), 'stop-proxy');
}

t.test('checkSignal: a signal container without a status yet is looked at again once it should have finished', async (t) => {
  const waiting = check(signalled(undefined, 10));
  t.same(waiting.steps, []);
  t.equal(waiting.requeueAfterMs, 25_000, 'its grace period (10 s) and the margin');
  t.equal(waiting.confirm, undefined);
  t.equal(check(signalled(undefined, 10), NOW, { ...EMPTY_DRAFT, requeueAfterMs: 5_000 }).requeueAfterMs, 5_000, 'a sooner look already planned stays');
});

t.test('checkSignal: reported done, the sidecar is given its grace period from the finish, then ended from outside', async (t) => {
  // The signal container finished with the main containers (pods.ts FINISHED).
  const within = check(signalled(0, 30), MAINS_FINISHED_AT + 29_000);
  t.same(within.steps, []);
  t.equal(within.requeueAfterMs, 2_000, 'one second left, and a second more');
  const over = check(signalled(0, 30), MAINS_FINISHED_AT + 30_000);
  t.same(types(over), ['warn', 'escalate-image']);
  t.match(warnings(over)[0], { code: 'signal-ignored', message: /^sidecar proxy still runs 30s after SIGTERM, which its signal container reported done/ });
  t.equal(over.confirm, true, 'read from the absence of a change: planned again on the pod as it is now');
  t.same(check(signalled(137, 30), MAINS_FINISHED_AT + 29_000).steps, [], 'killed (137) with its sidecar, PID 1 of their namespace: delivered as well');
});

t.test('checkSignal: still running, the signal container is given the grace period and a margin from its start', async (t) => {
  const started = Date.parse(STARTED);
  const running = check(signalled('running', 30), started + 44_000);
  t.same(running.steps, []);
  t.equal(running.requeueAfterMs, 2_000);
  const stuck = check(signalled('running', 30), started + 45_000);
  t.match(warnings(stuck), [{ code: 'signal-ignored', message: /and its signal container has not finished/ }]);
  t.equal(stuck.confirm, true);
});

t.test('checkSignal: what the signal container says decides at once, whatever the time', async (t) => {
  const early = MAINS_FINISHED_AT;
  const said = (exitCode: number, message?: string, reason?: string) => {
    const pod = signalled(exitCode, 300);
    Object.assign(pod.status!.ephemeralContainerStatuses![0]!.state!.terminated!, { message, reason });
    return check(pod, early);
  };
  t.match(warnings(said(STOP_EXIT_CODES.noHandler)), [{ code: 'sigterm-unhandled', key: 'sigterm-unhandled/proxy/image' }]);
  t.match(warnings(said(STOP_EXIT_CODES.stillRunning, 'a first line\n2026-01-01T00:00:40Z PID 1 (envoy) keeps running\n')), [
    { code: 'signal-ignored', message: /^sidecar proxy still runs 300s after SIGTERM \(PID 1 \(envoy\) keeps running\); ending/ },
  ], 'its last line, without the time before it');
  t.equal(said(STOP_EXIT_CODES.stillRunning).confirm, undefined, 'said by the signal container, not read from an absence: nothing to confirm');
  const failed = warnings(said(1, 'kill: EPERM'))[0];
  t.match(failed, { code: 'signal-failed', message: /^the signal container stop-proxy did not stop sidecar proxy: it exited with code 1 \(kill: EPERM\); it runs as another user than the sidecar/ });
  t.notMatch(warnings(said(2, 'usage'))[0]?.message, /another user/, 'the user is named for EPERM only');
  t.match(warnings(said(137, undefined, 'OOMKilled')), [{ code: 'signal-failed', message: /exited with code 137;? / }], 'killed for memory: it may not have signalled');
});

t.test('checkSignal: a signal container that cannot start ends the sidecar from outside; one being created is waited for', async (t) => {
  const notStarted = check(signalled({ waiting: 'ImagePullBackOff', message: 'Back-off pulling image "st:1"' }));
  t.match(warnings(notStarted), [{ code: 'signal-not-started', message: /^the signal container stop-proxy for sidecar proxy cannot start: ImagePullBackOff: Back-off pulling image "st:1"; ending/ }]);
  const creating = check(signalled('waiting', 30));
  t.same(creating.steps, []);
  t.equal(creating.requeueAfterMs, 45_000);
});

t.test('checkSignal: the grace period is the sidecar\'s own before the pod\'s', async (t) => {
  const own = killSidecar('proxy', { env: [{ name: 'SIDECAR_TERMINATOR_GRACE_PERIOD_SECONDS', value: '5' }] });
  t.equal(check(signalled(undefined, 60, own)).requeueAfterMs, 20_000, '5 s and the margin, not 60 s');
});

/** checkCrr of the pod's sidecar proxy, at `now`. */
function crr(pod: V1Pod, now: number, mainsFinished: number | undefined = MAINS_FINISHED_AT, draft: Draft = EMPTY_DRAFT) {
  const plan = planning(pod, { killMechanism: 'crr' }, now);
  return checkCrr(plan, draft, roleOf(plan), mainsFinished);
}

t.test('checkCrr: within the grace period and a minute, the request stands and the pod is looked at again when it runs out', async (t) => {
  const { draft, overdue } = crr(podWith(), MAINS_FINISHED_AT + 80_000, MAINS_FINISHED_AT, EARLIER);
  t.equal(overdue, false);
  t.same(draft.steps, EARLIER.steps);
  t.equal(draft.requeueAfterMs, 11_000);
});

t.test('checkCrr: past it, the sidecar is ended from outside, and the plan confirmed on the pod as it is now', async (t) => {
  const { draft, overdue } = crr(podWith(), MAINS_FINISHED_AT + 90_000);
  t.equal(overdue, true);
  t.same(types(draft), ['warn', 'escalate-image']);
  t.match(warnings(draft)[0], { code: 'crr-not-done', key: 'crr-not-done/proxy/image', message: /^sidecar proxy still runs 90s after the main containers finished: .*no kruise-daemon serves node-a/ });
  t.equal(draft.confirm, true);
});

t.test('checkCrr: the wait counts from the later of the mains finishing and the sidecar starting', async (t) => {
  const pod = podWith();
  pod.status!.containerStatuses!.find((s) => s.name === 'proxy')!.state = { running: { startedAt: new Date(MAINS_FINISHED_AT + 60_000) } };
  t.equal(crr(pod, MAINS_FINISHED_AT + 90_000).overdue, false, 'started a minute after the mains finished');
  t.equal(crr(pod, MAINS_FINISHED_AT + 150_000).overdue, true);
});

t.test('checkCrr: no wait can be counted without both times: nothing changes', async (t) => {
  const late = MAINS_FINISHED_AT + 3_600_000;
  for (const [what, result] of [
    ['the mains have no finish time', checkCrr(planning(podWith(), {}, late), EMPTY_DRAFT, roleOf(planning(podWith())), undefined)],
    ['the sidecar is not running', crr(podWith(killSidecar('proxy'), 137), late)],
    ['the sidecar has no start time', crr(podWith(killSidecar('proxy'), { waiting: 'ContainerCreating' }), late)],
  ] as const) {
    t.same(result, { draft: EMPTY_DRAFT, overdue: false }, what);
  }
});
