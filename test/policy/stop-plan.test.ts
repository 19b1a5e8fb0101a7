// The stop plan: the decision made concrete for one pod, from its spec and status alone.
import t from 'tap';
import type { V1Pod } from '@kubernetes/client-node';
import { CONDITION_REASONS, EVENT_REASONS, MISSING_NODE_RECHECK_MS, STOP_EXIT_CODES, TERMINATED_CONDITION, planStop, type Plan, type Step, type StopSettings } from '../../src/policy/index.ts';
import { FINISHED, QUICK_EXIT, containerStatus, ignoreExitCodeSidecar, imageSidecar, jobPod, killSidecar, main, normalNode, virtualNode } from '../support/pods.ts';

const signal: StopSettings = { killMechanism: 'signal', signal: { image: 'st:1', command: ['/stop-sidecar'] }, quickExitImageAllowlist: [], quickExitImage: 'quick-exit:1' };
const crr: StopSettings = { ...signal, killMechanism: 'crr' };
const NOW = Date.parse('2026-01-01T00:02:00Z');

const types = (plan: Plan) => plan.steps.map((step) => step.type);
const stepOf = <T extends Step['type']>(plan: Plan, type: T) => plan.steps.find((step): step is Extract<Step, { type: T }> => step.type === type);
const warnings = (plan: Plan) => plan.steps.flatMap((step) => (step.type === 'warn' ? [step] : []));

t.test('the names the status command and users rely on', async (t) => {
  t.equal(EVENT_REASONS.stopping, 'SidecarTerminator', "OpenKruise's reason");
  t.equal(EVENT_REASONS.failed, 'SidecarTerminationFailed');
  t.equal(TERMINATED_CONDITION, 'SidecarTerminated', "OpenKruise's condition type");
});

t.test('signal: one write with a signal container per kill sidecar, and no condition (the event says it, as with OpenKruise)', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy'), killSidecar('sql')], { main: 0, proxy: 'running', sql: 'running' });
  const plan = planStop(pod, normalNode, signal, NOW);
  t.same(types(plan), ['add-signal-containers']);
  t.same(stepOf(plan, 'add-signal-containers')?.containers.map((c) => [c.name, c.targetContainerName, c.image]), [['stop-proxy', 'proxy', 'st:1'], ['stop-sql', 'sql', 'st:1']]);
  t.same(plan.stopping, ['proxy (SIGTERM)', 'sql (SIGTERM)']);
  t.match(stepOf(plan, 'add-signal-containers')?.containers[0], { command: signal.signal.command, terminationMessagePolicy: 'FallbackToLogsOnError' });
});

t.test('a condition saying the sidecars wait is turned True once they are told to stop', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' });
  pod.status!.conditions = [{ type: TERMINATED_CONDITION, status: 'False', reason: CONDITION_REASONS.imageNotPulled }];
  const plan = planStop(pod, normalNode, crr, NOW);
  t.same(types(plan), ['create-crr', 'set-condition']);
  t.match(stepOf(plan, 'set-condition')?.condition, { status: 'True', reason: CONDITION_REASONS.stopping, message: 'stopping sidecars: proxy (ContainerRecreateRequest)' });
});

t.test('crr: one ContainerRecreateRequest for every kill sidecar', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy'), killSidecar('sql')], { main: 0, proxy: 'running', sql: 'running' });
  const plan = planStop(pod, normalNode, crr, NOW);
  t.same(plan.steps[0], { type: 'create-crr', containers: ['proxy', 'sql'] });
  t.same(plan.stopping, ['proxy (ContainerRecreateRequest)', 'sql (ContainerRecreateRequest)']);
});

t.test('containers proxy and stop-proxy, both marked: two signal containers, no name a container has', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy'), killSidecar('stop-proxy')], { main: 0, proxy: 'running', 'stop-proxy': 'running' });
  const sent = stepOf(planStop(pod, normalNode, signal, NOW), 'add-signal-containers')!.containers;
  t.same(sent.map((c) => c.targetContainerName), ['proxy', 'stop-proxy']);
  const names = sent.map((c) => c.name);
  t.equal(new Set(names).size, 2);
  for (const name of names) t.notOk(['main', 'proxy', 'stop-proxy'].includes(name), `${name} is not a container's name`);
});

t.test('a signal container already there is never sent again, whatever its fields', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' }, { spec: { ephemeralContainers: [{ name: 'stop-proxy', image: 'older:0.0.1', targetContainerName: 'proxy' }] } });
  pod.status!.conditions = [{ type: TERMINATED_CONDITION, status: 'True', reason: CONDITION_REASONS.stopping }];
  const plan = planStop(pod, normalNode, signal, NOW);
  t.same(plan.steps, [], 'nothing to write: not started yet, its status will change');
  t.same(plan.stopping, ['proxy (SIGTERM)']);
});

t.test('after the signal: wait out the grace period, then end the sidecar from outside', async (t) => {
  const signalled = (state: Parameters<typeof containerStatus>[1], grace = 30) => {
    const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' }, { spec: { terminationGracePeriodSeconds: grace, ephemeralContainers: [{ name: 'stop-proxy', image: 'st:1', targetContainerName: 'proxy' }] } });
    pod.status!.ephemeralContainerStatuses = [containerStatus('stop-proxy', state)];
    return pod;
  };
  // The signal container exited 0 at 00:01:00; NOW is 00:02:00.
  const within = planStop(signalled(0, 90), normalNode, signal, NOW);
  t.same(warnings(within), []);
  t.equal(within.requeueAfterMs, 31_000, 'looked at again when the grace period ends');
  const after = planStop(signalled(0, 30), normalNode, signal, NOW);
  t.match(warnings(after), [{ message: /sidecar proxy still runs 30s after SIGTERM, which its signal container reported done; ending it from outside: its image is replaced by the quick-exit image quick-exit:1/, code: 'signal-ignored' }]);
  t.same(stepOf(after, 'escalate-image'), { type: 'escalate-image', container: 'proxy', image: 'quick-exit:1' }, 'the quick-exit image in its place: the kubelet kills it');
  t.equal(after.confirmOnCurrentPod, true, 'said of the absence of a change: confirmed on the pod as it is now');
  t.equal(within.confirmOnCurrentPod, undefined);
  // Started at 00:00:00: a signal container runs its grace period and 5 seconds at most.
  const running = planStop(signalled('running', 300), normalNode, signal, NOW);
  t.same(warnings(running), [], 'nothing is said while the signal container runs its grace period');
  t.equal(running.requeueAfterMs, 196_000, 'looked at again once it should have finished');
  const stuck = planStop(signalled('running', 30), normalNode, signal, NOW);
  t.match(warnings(stuck), [{ code: 'signal-ignored', message: /and its signal container has not finished/ }], 'long past it: ended from outside');
});

t.test('what the signal container reports decides: no SIGTERM handler, still running, or failed', async (t) => {
  const reported = (exitCode: number, message = '', sidecar = killSidecar('proxy'), settings = signal) => {
    const pod = jobPod([main(), sidecar], { main: 0, proxy: 'running' }, { spec: { ephemeralContainers: [{ name: 'stop-proxy', image: 'st:1', targetContainerName: 'proxy' }] } });
    pod.status!.ephemeralContainerStatuses = [containerStatus('stop-proxy', exitCode)];
    pod.status!.ephemeralContainerStatuses[0]!.state!.terminated!.message = message;
    return planStop(pod, normalNode, settings, NOW);
  };
  const unhandled = reported(STOP_EXIT_CODES.noHandler);
  t.match(warnings(unhandled), [{ code: 'sigterm-unhandled', message: /its PID 1 has no SIGTERM handler, so the kernel drops SIGTERM .* from inside its PID namespace; ending it from outside/ }]);
  t.same(types(unhandled), ['warn', 'escalate-image'], 'at once, without a grace period of waiting');
  const stillRunning = reported(STOP_EXIT_CODES.stillRunning, '2026-01-01T00:00:40Z the sidecar still runs: PID 1 (envoy) keeps running after SIGTERM\n');
  t.match(warnings(stillRunning), [{ code: 'signal-ignored', message: /still runs 30s after SIGTERM \(the sidecar still runs: PID 1 \(envoy\) keeps running/ }], 'its last words, without their time');

  const withCommand = reported(STOP_EXIT_CODES.noHandler, '', killSidecar('proxy', { command: ['sh', '-c', 'sleep 1d'] }));
  t.same(types(withCommand), ['warn', 'escalate-phase', 'escalate-image'], 'no quick-exit image can run its command: the phase instead, and the image, which never runs, for the kubelet to act at once');
  t.match(stepOf(withCommand, 'escalate-phase'), { phase: 'Succeeded', condition: { status: 'True', reason: CONDITION_REASONS.stopping, message: /sidecar proxy is ended by the kubelet \(no quick-exit image can run in its place \(it sets command\)\)/ } });
  t.same(types(reported(STOP_EXIT_CODES.noHandler, '', killSidecar('proxy'), { ...signal, quickExitImage: '' })), ['warn', 'escalate-phase'], 'none configured: the phase');
  const own = reported(STOP_EXIT_CODES.noHandler, '', killSidecar('proxy', { command: ['envoy'], env: [{ name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT', value: 'true' }, { name: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE', value: QUICK_EXIT }] }));
  t.same(stepOf(own, 'escalate-image'), { type: 'escalate-image', container: 'proxy', image: QUICK_EXIT }, "its own quick-exit image first: its author vouches that it runs the command");
});

t.test('a sidecar being ended by its quick-exit image is left to the kubelet, unless that image does not run', async (t) => {
  const escalated = (state: Parameters<typeof containerStatus>[1]) => {
    const pod = jobPod([main(), killSidecar('proxy', { image: 'quick-exit:1' })], { main: 0, proxy: state }, { spec: { ephemeralContainers: [{ name: 'stop-proxy', image: 'st:1', targetContainerName: 'proxy' }] } });
    pod.status!.ephemeralContainerStatuses = [containerStatus('stop-proxy', STOP_EXIT_CODES.noHandler)];
    return planStop(pod, normalNode, signal, NOW);
  };
  const killing = escalated('running');
  t.same(types(killing), [], 'nothing more to write: the warning was recorded with the image');
  t.equal(killing.requeueAfterMs, 45_000, 'looked at again once the kubelet should have killed it');
  const unpulled = escalated({ waiting: 'ErrImagePull', message: 'not found' });
  t.same(types(unpulled), ['warn', 'escalate-phase'], 'the image cannot run: the phase instead');
  t.match(stepOf(unpulled, 'escalate-phase')?.condition.message, /its quick-exit image quick-exit:1 cannot run \(ErrImagePull\)/);
});

t.test('a signal container that failed is reported with its exit code and output, and the sidecar is ended from outside', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' }, { spec: { terminationGracePeriodSeconds: 1, ephemeralContainers: [{ name: 'stop-proxy', image: 'st:1', targetContainerName: 'proxy' }] } });
  pod.status!.ephemeralContainerStatuses = [containerStatus('stop-proxy', 1)];
  pod.status!.ephemeralContainerStatuses[0]!.state!.terminated!.message = '2026-01-01T00:01:00Z SIGTERM to PID 1 (envoy) failed: operation not permitted (EPERM: this container runs as another user than the sidecar)\n';
  const failed = planStop(pod, normalNode, signal, NOW);
  const [warning] = warnings(failed);
  t.match(warning, { code: 'signal-failed', message: /the signal container stop-proxy did not stop sidecar proxy: it exited with code 1 \(.*EPERM/ });
  t.match(warning?.message, /set runAsUser on the sidecar to the uid it runs as/);
  t.notMatch(warning?.message, /ignores SIGTERM/);
  t.ok(stepOf(failed, 'escalate-image'), 'ended from outside all the same');

  pod.status!.ephemeralContainerStatuses = [containerStatus('stop-proxy', { waiting: 'ImagePullBackOff', message: 'Back-off pulling image "st:1"' })];
  t.match(warnings(planStop(pod, normalNode, signal, NOW)), [{ message: /stop-proxy for sidecar proxy cannot start: ImagePullBackOff/, code: 'signal-not-started', key: 'signal-not-started/proxy/image' }]);
});

t.test('a signal container killed (137) as its sidecar, PID 1 of their namespace, exited: the signal was delivered', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' }, { spec: { terminationGracePeriodSeconds: 90, ephemeralContainers: [{ name: 'stop-proxy', image: 'st:1', targetContainerName: 'proxy' }] } });
  pod.status!.ephemeralContainerStatuses = [containerStatus('stop-proxy', 137)];
  const plan = planStop(pod, normalNode, signal, NOW);
  t.same(warnings(plan), [], 'no failure reported');
  t.equal(plan.requeueAfterMs, 31_000, 'the sidecar gets its grace period, as after an exit 0');
  pod.status!.ephemeralContainerStatuses[0]!.state!.terminated!.reason = 'OOMKilled';
  t.match(warnings(planStop(pod, normalNode, signal, NOW)), [{ message: /exited with code 137/, code: 'signal-failed' }], 'killed for memory, it may not have signalled');
});

t.test('a user that cannot be known under runAsNonRoot: no signal container, a refusal with the field to set, and the sidecar ended from outside', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' }, { spec: { securityContext: { runAsNonRoot: true } } });
  const plan = planStop(pod, normalNode, signal, NOW);
  t.same(types(plan), ['warn', 'escalate-image']);
  t.match(warnings(plan)[0], { code: 'signal-user-unknown', message: /set spec\.containers\[1\]\.securityContext\.runAsUser/ });
});

t.test('shareProcessNamespace: the signal container finds the sidecar by its container ID', async (t) => {
  const pod = jobPod([main(), killSidecar()], { main: 0, proxy: 'running' }, { spec: { shareProcessNamespace: true } });
  const unknown = planStop(pod, normalNode, signal, NOW);
  t.same(unknown.steps, [], 'no container ID reported yet: nothing sent');
  t.equal(unknown.requeueAfterMs, 2000, 'looked at again soon');
  pod.status!.containerStatuses!.find((s) => s.name === 'proxy')!.containerID = 'containerd://0123abcd';
  t.match(stepOf(planStop(pod, normalNode, signal, NOW), 'add-signal-containers')?.containers[0]?.args, ['--grace-period=30', '--container-id=0123abcd']);
  t.ok(planStop(pod, normalNode, crr, NOW).steps.some((s) => s.type === 'create-crr'), 'crr does not care');
});

t.test('HTTP stop methods: the signal container sends the request, whatever the kill mechanism; the grace period is the sidecar\'s own', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy'), killSidecar('sql')], { main: 0, proxy: 'running', sql: 'running' });
  pod.metadata!.annotations = { 'stop.sidecar-terminator.io/proxy': 'istio-proxy', 'grace-period-seconds.sidecar-terminator.io/proxy': '7' };
  for (const settings of [signal, crr]) {
    const plan = planStop(pod, normalNode, settings, NOW);
    t.match(stepOf(plan, 'add-signal-containers')?.containers.map((c) => [c.targetContainerName, c.args]), [['proxy', ['--grace-period=7', '--method=POST', '--url=http://localhost:15020/quitquitquit']]], settings.killMechanism);
    t.ok(plan.stopping.includes('proxy (POST http://localhost:15020/quitquitquit)'));
  }
  t.same(stepOf(planStop(pod, normalNode, crr, NOW), 'create-crr'), { type: 'create-crr', containers: ['sql'] }, 'crr: SIGTERM through Kruise for the other');
});

t.test('a sidecar named by the annotation alone is stopped as a marked one', async (t) => {
  const pod = jobPod([main(), { name: 'istio-proxy', image: 'istio/proxyv2:1.24' }], { main: 0, 'istio-proxy': 'running' });
  t.same(planStop(pod, normalNode, signal, NOW).steps, [], 'unnamed: a main container, still running');
  pod.metadata!.annotations = { 'sidecar-terminator.io/sidecars': 'istio-proxy' };
  t.same(stepOf(planStop(pod, normalNode, signal, NOW), 'add-signal-containers')?.containers.map((c) => c.targetContainerName), ['istio-proxy']);
});

t.test('refusals: a quick-exit image outside the allowlist, a virtual node without one', async (t) => {
  const allowlisted = planStop(jobPod([main(), imageSidecar()], { main: 0, logs: 'running' }), normalNode, { ...signal, quickExitImageAllowlist: ['registry.example.com/other:*'] }, NOW);
  t.match(warnings(allowlisted), [{ message: /not in --quick-exit-image-allowlist/, code: 'quick-exit-image-not-allowed' }]);
  t.notOk(stepOf(allowlisted, 'replace-image'));

  const virtual = planStop(jobPod([main(), killSidecar()], { main: 0, proxy: 'running' }), virtualNode, signal, NOW);
  t.match(warnings(virtual), [{ message: /proxy cannot be stopped: .*virtual-kubelet/, code: 'virtual-node-without-image' }]);
});

t.test('a node that does not exist is not a normal node: nothing is stopped, it is looked at again', async (t) => {
  const plan = planStop(jobPod([main(), killSidecar()], { main: 0, proxy: 'running' }), 'missing', signal, NOW);
  t.same(types(plan), ['warn']);
  t.match(warnings(plan)[0], { code: 'node-missing', message: /the pod's node node-a does not exist/ });
  t.equal(plan.code, 'node-missing');
  t.equal(plan.requeueAfterMs, MISSING_NODE_RECHECK_MS);
  t.same(types(planStop(jobPod([main(), killSidecar()], { main: 0, proxy: 0 }), 'missing', signal, NOW)), ['finish'], 'a pod with nothing left to stop still leaves the watch');
});

t.test('quick-exit image on a normal node: replaced; if it cannot be pulled, the terminal phase after the other sidecars', async (t) => {
  const replace = planStop(jobPod([main(), imageSidecar()], { main: 0, logs: 'running' }), normalNode, signal, NOW);
  t.same(replace.steps[0], { type: 'replace-image', container: 'logs', image: QUICK_EXIT });

  const swapped = (states: Record<string, Parameters<typeof containerStatus>[1]>, extra = [killSidecar('proxy')]) => {
    const pod = jobPod([main(), { ...imageSidecar(), image: QUICK_EXIT }, ...extra], states, { spec: { restartPolicy: 'OnFailure' } });
    pod.status!.conditions = [{ type: TERMINATED_CONDITION, status: 'True', reason: CONDITION_REASONS.stopping }];
    return pod;
  };
  const pullFailed = { waiting: 'ImagePullBackOff', message: `Back-off pulling image "${QUICK_EXIT}"` };
  const othersRunning = planStop(swapped({ main: 0, logs: pullFailed, proxy: 'running' }), normalNode, signal, NOW);
  t.same(types(othersRunning), ['warn', 'add-signal-containers'], 'the other sidecar first');
  t.match(warnings(othersRunning)[0], {
    key: 'image-not-pulled/logs',
    code: 'quick-exit-image-not-pulled',
    message: new RegExp(`sidecar logs is not stopped by its quick-exit image ${QUICK_EXIT}: the node cannot pull it \\(ImagePullBackOff`),
  });
  const othersDone = planStop(swapped({ main: 0, logs: pullFailed, proxy: 0 }), normalNode, signal, NOW);
  t.same(types(othersDone), ['warn', 'mark-terminal']);
  t.match(stepOf(othersDone, 'mark-terminal'), { phase: 'Succeeded', condition: { status: 'True', message: /the quick-exit image of logs cannot be pulled/ } });

  const terminal = swapped({ main: 0, logs: pullFailed }, []);
  terminal.status!.phase = 'Succeeded';
  t.same(types(planStop(terminal, normalNode, signal, NOW)), ['finish'], 'in a terminal phase nothing starts again: the pod is done');
});

t.test('quick-exit image that cannot be pulled on a virtual node: a warning naming the image, and the condition says why it waits', async (t) => {
  const pod = jobPod([main(), { ...imageSidecar(), image: QUICK_EXIT }], { main: 0, logs: { waiting: 'ErrImagePull', message: 'not found' } });
  pod.status!.conditions = [{ type: TERMINATED_CONDITION, status: 'True', reason: CONDITION_REASONS.stopping }];
  const plan = planStop(pod, virtualNode, signal, NOW);
  t.same(types(plan), ['warn', 'set-condition']);
  t.match(warnings(plan)[0], { message: new RegExp(`sidecar logs waits for its quick-exit image ${QUICK_EXIT}, which the node cannot pull \\(ErrImagePull: not found\\)`) });
  t.match(stepOf(plan, 'set-condition')?.condition, { status: 'False', reason: CONDITION_REASONS.imageNotPulled, message: /waits for its quick-exit image/ });
  pod.status!.conditions = [{ type: TERMINATED_CONDITION, status: 'False', reason: CONDITION_REASONS.imageNotPulled }];
  t.same(types(planStop(pod, virtualNode, signal, NOW)), ['warn'], 'the condition is written once');
});

t.test('ignore exit code: the terminal phase with its condition, then the kill; no second condition', async (t) => {
  const plan = planStop(jobPod([main(), ignoreExitCodeSidecar('sql')], { main: 0, sql: 'running' }), normalNode, signal, NOW);
  t.same(types(plan), ['mark-terminal', 'add-signal-containers']);
  t.match(stepOf(plan, 'mark-terminal'), { phase: 'Succeeded', condition: { status: 'True', message: /sidecar exit codes are ignored/ } });
});

t.test('done: every sidecar stopped, the pod leaves the watch; a condition already set is not written again', async (t) => {
  t.same(types(planStop(jobPod([main(), killSidecar()], { main: 0, proxy: 143 }), normalNode, signal, NOW)), ['finish']);
  const told: V1Pod = jobPod([main(), killSidecar()], { main: 0, proxy: 'running' });
  told.status!.conditions = [{ type: TERMINATED_CONDITION, status: 'True', reason: CONDITION_REASONS.stopping }];
  t.same(types(planStop(told, normalNode, crr, NOW)), ['create-crr'], 'the CRR again (it may not exist), not the condition');
  t.same(types(planStop(jobPod([main(), killSidecar()], { main: 'running', proxy: 'running' }), normalNode, signal, NOW)), [], 'main still at work: nothing');
});

t.test('a ContainerRecreateRequest this watcher made (its history) is not requested again, but still announced', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy'), killSidecar('sql')], { main: 0, proxy: 'running', sql: 'running' });
  t.same(stepOf(planStop(pod, normalNode, crr, NOW, { history: {} }), 'create-crr'), { type: 'create-crr', containers: ['proxy', 'sql'] }, 'none made yet: requested');
  const made = planStop(pod, normalNode, crr, NOW, { history: { startedWith: 'crr', crr: ['proxy', 'sql'] } });
  t.same(types(made), [], 'made: nothing requested');
  t.same(made.stopping, ['proxy (ContainerRecreateRequest)', 'sql (ContainerRecreateRequest)'], 'the sidecars it stops are still named');
  t.same(types(planStop(pod, normalNode, crr, NOW, { history: { startedWith: 'crr', crr: ['proxy'] } })), [], 'one request per pod, whatever it holds');
});

t.test('the words of a failure the kubelet gives without a message', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' }, { spec: { ephemeralContainers: [{ name: 'stop-proxy', image: 'st:1', targetContainerName: 'proxy' }] } });
  pod.status!.ephemeralContainerStatuses = [containerStatus('stop-proxy', { waiting: 'CreateContainerError' })];
  t.match(warnings(planStop(pod, normalNode, signal, NOW)), [{ message: /stop-proxy for sidecar proxy cannot start: CreateContainerError; ending it/ }], 'the reason alone');

  const notPulled = jobPod([main(), { ...imageSidecar(), image: QUICK_EXIT }], { main: 0, logs: { waiting: 'ErrImagePull' } });
  t.match(warnings(planStop(notPulled, virtualNode, signal, NOW)), [{ message: /which the node cannot pull \(ErrImagePull\)/ }], 'the reason alone');
});

t.test('a signal container that exited without a finish time is looked at again when its status has one', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' }, { spec: { ephemeralContainers: [{ name: 'stop-proxy', image: 'st:1', targetContainerName: 'proxy' }] } });
  pod.status!.ephemeralContainerStatuses = [containerStatus('stop-proxy', 0)];
  delete pod.status!.ephemeralContainerStatuses[0]!.state!.terminated!.finishedAt;
  const plan = planStop(pod, normalNode, signal, NOW);
  t.same(warnings(plan), [], 'nothing said of a sidecar ignoring SIGTERM');
  t.equal(plan.requeueAfterMs, undefined, 'no timer: the status changing brings the pod back');
});

t.test('two sidecars ended by the phase: one phase step; a pod already in a terminal phase: none', async (t) => {
  const shell = (name: string) => killSidecar(name, { command: ['sh', '-c', 'sleep 1d'] });
  const pod = jobPod([main(), shell('a'), shell('b')], { main: 0, a: 'running', b: 'running' }, {
    spec: { ephemeralContainers: ['a', 'b'].map((name) => ({ name: `stop-${name}`, image: 'st:1', targetContainerName: name })) },
  });
  pod.status!.ephemeralContainerStatuses = ['a', 'b'].map((name) => containerStatus(`stop-${name}`, STOP_EXIT_CODES.noHandler));
  t.same(types(planStop(pod, normalNode, signal, NOW)), ['warn', 'escalate-phase', 'escalate-image', 'warn'], 'the phase once (with the image that has the kubelet act at once), a warning for each');
  pod.status!.phase = 'Succeeded';
  t.same(types(planStop(pod, normalNode, signal, NOW)), [], 'the kubelet kills what still runs of a terminal pod');
});

t.test('a pod without a spec has nothing to stop', async (t) => {
  t.same(planStop({ metadata: { name: 'p', namespace: 'n' }, status: { phase: 'Running' } }, normalNode, signal, NOW).steps, []);
});

t.test('a main that its restart rule brings back: nothing is planned, no phase above all', async (t) => {
  const rule = { restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [42] } }] };
  const pod = jobPod([main('main', 'busybox:1.36', rule), ignoreExitCodeSidecar('sql')], { main: 42, sql: 'running' });
  t.same(planStop(pod, normalNode, signal, NOW), { code: 'main-restarting', stopping: [], steps: [] });
});

t.test('crr: a sidecar still running a grace period and a minute after the mains finished is ended from outside (no kruise-daemon acted on the request)', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' });
  const finished = Date.parse(FINISHED);
  const waiting = planStop(pod, normalNode, crr, finished + 89_000);
  t.same(types(waiting), ['create-crr'], 'within 30s (its grace period) and a minute: the request stands');
  t.equal(waiting.requeueAfterMs, 2_000, 'looked at again when the wait is over, without a change to the pod');
  const overdue = planStop(pod, normalNode, crr, finished + 90_000);
  t.same(types(overdue), ['warn', 'escalate-image'], 'the end from outside; the request not made again (it did nothing, or it is refused)');
  t.match(warnings(overdue), [{ code: 'crr-not-done', message: /^sidecar proxy still runs 90s after the main containers finished: its ContainerRecreateRequest did not stop it \(no kruise-daemon serves node-a, the daemon failed, or the request was refused\); ending it from outside: its image is replaced by the quick-exit image quick-exit:1/ }]);
  t.equal(overdue.confirmOnCurrentPod, true, 'read from the absence of a change: confirmed on the pod as it is now');
  const withGrace = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' }, { spec: { terminationGracePeriodSeconds: 5 } });
  t.same(types(planStop(withGrace, normalNode, crr, finished + 65_000)), ['warn', 'escalate-image'], "the pod's grace period counts");
  const withCommand = jobPod([main(), killSidecar('proxy', { command: ['/proxy'] })], { main: 0, proxy: 'running' });
  const byPhase = planStop(withCommand, normalNode, crr, finished + 90_000);
  t.match(stepOf(byPhase, 'escalate-phase'), { phase: 'Succeeded' }, 'no quick-exit image can run in its place: the phase from the mains');
  const restarted = jobPod([main(), killSidecar('proxy')], { main: 0 });
  restarted.status!.containerStatuses!.push(containerStatus('proxy', 'running', { state: { running: { startedAt: new Date(finished + 60_000) } } }));
  t.same(types(planStop(restarted, normalNode, crr, finished + 90_000)), ['create-crr'], 'a sidecar started after the mains finished: the wait counts from its start');
  const stopped = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 137 });
  t.notOk(warnings(planStop(stopped, normalNode, crr, finished + 600_000)).some((w) => w.code === 'crr-not-done'), 'a sidecar that stopped: nothing to end');
  const noStart = jobPod([main(), killSidecar('proxy')], { main: 0 });
  noStart.status!.containerStatuses!.push(containerStatus('proxy', 'running', { state: { running: {} } }));
  t.same(types(planStop(noStart, normalNode, crr, finished + 600_000)), ['create-crr'], 'no start time on the status yet: no wait can be counted, the request stands');
  const noNodeName = jobPod([main(), killSidecar('proxy')], { main: 0, proxy: 'running' });
  delete noNodeName.spec!.nodeName;
  t.match(warnings(planStop(noNodeName, normalNode, crr, finished + 90_000)), [{ code: 'crr-not-done', message: /no kruise-daemon serves its node,/ }], 'a pod without a node name on its spec: its node, unnamed');
});
