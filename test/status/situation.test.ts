// Where src/status/situation.ts places a managed pod, called directly: situationOf from the
// policy's decision and the watcher's last event, the state each situation is shown as, and
// sinceOf, when the situation began.
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import t from 'tap';
import { DONE, MANAGED, classifyContainers, exitCodesByName } from '../../src/policy/index.ts';
import { sinceOf, situationOf, stateOf, type Situation } from '../../src/status/situation.ts';
import type { PodReading } from '../../src/status/story-types.ts';
import { FINISHED, STARTED, containerStatus, imageSidecar, jobPod, killSidecar, main, normalNode, virtualNode, type State } from '../support/pods.ts';

/** What situationOf reads of a pod: no stop means, which it does not read. */
function reading(pod: V1Pod, events: CoreV1Event[] = [], nodeKind: PodReading['nodeKind'] = 'normal'): PodReading {
  const node = nodeKind === 'virtual' ? virtualNode : nodeKind === 'normal' ? normalNode : undefined;
  const roles = classifyContainers(pod.spec!);
  return { pod, spec: pod.spec!, ...(node ? { node } : {}), nodeKind, events, roles, exitCodes: exitCodesByName(pod), stopMeans: new Map() };
}

/** The main container and a kill sidecar in these states. */
const pod = (mainState: State, proxyState: State, options: Parameters<typeof jobPod>[2] = {}) => jobPod([main(), killSidecar('proxy')], { main: mainState, proxy: proxyState }, options);

const event = (type: string, action: string | undefined, message = `${action ?? 'no code'} happened`, time = FINISHED): CoreV1Event =>
  ({ metadata: {}, involvedObject: {}, type, reason: 'SidecarTerminator', message, lastTimestamp: new Date(time), ...(action ? { action } : {}) });

t.test('main containers still running: waiting for main, with the decision that says so', async (t) => {
  t.match(situationOf(reading(pod('running', 'running')), MANAGED), { kind: 'waiting for main', code: 'mains-running', decision: { outcome: 'wait', code: 'mains-running' } });
});

t.test('a pod not started yet waits for main although the policy ignores it for now', async (t) => {
  t.match(situationOf(reading(pod('waiting', 'waiting', { phase: 'Pending' })), MANAGED), { kind: 'waiting for main', code: 'pod-not-started', decision: { outcome: 'ignore' } });
});

t.test('a pod the policy leaves alone for good is ignored', async (t) => {
  const always = pod('running', 'running', { spec: { restartPolicy: 'Always' } });
  t.same(situationOf(reading(always), MANAGED), { kind: 'ignored', code: 'restart-policy-always' });
});

t.test('main containers done and the sidecar running: stopping, whatever the earlier events', async (t) => {
  const done = pod(0, 'running');
  t.same(situationOf(reading(done), MANAGED), { kind: 'stopping', code: 'mains-done' });
  const warnedThenNormal = [event('Warning', 'stop-failed', 'x', STARTED), event('Normal', 'stop-requested')];
  t.same(situationOf(reading(done, warnedThenNormal), MANAGED), { kind: 'stopping', code: 'mains-done' }, 'only the last event counts');
  t.same(situationOf(reading(done, [], 'unknown'), MANAGED), { kind: 'stopping', code: 'mains-done' }, 'an unknown node is judged a normal one');
});

t.test("a sidecar already given its quick-exit image: stopping, with the policy's wait code", async (t) => {
  const replaced = jobPod([main(), imageSidecar('logs', 'quick:1', { image: 'quick:1' })], { main: 0, logs: 'running' });
  t.same(situationOf(reading(replaced), MANAGED), { kind: 'stopping', code: 'sidecars-stopping' });
});

t.test('the last event a Warning: ending from outside by its code, else warned, with or without a code', async (t) => {
  const done = pod(0, 'running');
  const ignored = event('Warning', 'signal-ignored');
  t.same(situationOf(reading(done, [ignored]), MANAGED), { kind: 'ending from outside', code: 'signal-ignored', event: ignored });
  const failed = event('Warning', 'stop-failed');
  t.same(situationOf(reading(done, [failed]), MANAGED), { kind: 'warned', code: 'stop-failed', event: failed });
  const uncoded = event('Warning', undefined);
  t.same(situationOf(reading(done, [uncoded]), MANAGED), { kind: 'warned', event: uncoded }, "an earlier version's event, without a code");
});

t.test('a kill sidecar on a virtual node cannot be stopped; the last warning is kept beside it', async (t) => {
  const done = pod(0, 'running');
  t.same(situationOf(reading(done, [], 'virtual'), MANAGED), { kind: 'cannot stop', code: 'virtual-node-without-image', containers: ['proxy'] });
  t.same(situationOf(reading(done, [event('Warning', 'virtual-node-without-image')], 'virtual'), MANAGED), {
    kind: 'cannot stop',
    code: 'virtual-node-without-image',
    containers: ['proxy'],
    warning: 'virtual-node-without-image',
  });
});

t.test("stopped: every sidecar down, or the label says the watcher is done; the event of a sidecar's exit failing the pod is kept", async (t) => {
  t.same(situationOf(reading(pod(0, 0)), MANAGED), { kind: 'stopped', code: 'sidecars-stopped' });
  t.same(situationOf(reading(pod('running', 'running')), DONE), { kind: 'stopped', code: 'sidecars-stopped' }, 'the label, whatever the containers');
  const failedBy = event('Warning', 'sidecar-exit-failed-pod');
  t.same(situationOf(reading(pod(0, 143), [event('Normal', 'stop-requested'), failedBy]), MANAGED), { kind: 'stopped', code: 'sidecar-exit-failed-pod', failedBy });
});

t.test('stateOf: each situation as the state status shows', async (t) => {
  const warning = event('Warning', 'stop-failed');
  const states: Array<[Situation, string]> = [
    [{ kind: 'stopped', code: 'sidecars-stopped' }, 'stopped'],
    [{ kind: 'ignored', code: 'no-sidecar' }, 'failed'],
    [{ kind: 'waiting for main', code: 'mains-running', decision: { outcome: 'wait', code: 'mains-running' } }, 'waiting for main'],
    [{ kind: 'cannot stop', code: 'virtual-node-without-image', containers: ['proxy'] }, 'failed'],
    [{ kind: 'warned', event: warning }, 'failed'],
    [{ kind: 'ending from outside', code: 'signal-ignored', event: warning }, 'stopping'],
    [{ kind: 'stopping', code: 'mains-done' }, 'stopping'],
  ];
  for (const [situation, state] of states) t.equal(stateOf(situation), state, situation.kind);
});

t.test('sinceOf: the last sidecar exit, the pod start, the last main exit, else the first event', async (t) => {
  const exitedAt = (name: string, code: number, time: string) => containerStatus(name, code, { state: { terminated: { exitCode: code, finishedAt: new Date(time) } } });
  const two = jobPod([main('a'), main('b'), killSidecar('p'), killSidecar('q')], {});
  two.status!.containerStatuses = [exitedAt('a', 0, '2026-01-01T00:00:30Z'), exitedAt('b', 0, '2026-01-01T00:00:20Z'), exitedAt('p', 0, '2026-01-01T00:00:50Z'), exitedAt('q', 0, '2026-01-01T00:00:40Z')];
  const read = reading(two);
  t.equal(sinceOf({ kind: 'stopped', code: 'sidecars-stopped' }, read), '2026-01-01T00:00:50Z', 'the last sidecar');
  t.equal(sinceOf({ kind: 'stopping', code: 'mains-done' }, read), '2026-01-01T00:00:30Z', 'the last main container');
  t.equal(sinceOf({ kind: 'waiting for main', code: 'mains-running', decision: { outcome: 'wait', code: 'mains-running' } }, read), STARTED, 'the pod start');
  t.equal(sinceOf({ kind: 'ignored', code: 'restart-policy-always' }, read), undefined);
  const noMainExit = reading(pod('running', 'running'), [event('Normal', 'stop-requested', 'm', '2026-01-01T00:02:00Z'), event('Normal', 'stop-requested', 'm', '2026-01-01T00:03:00Z')]);
  t.equal(sinceOf({ kind: 'stopping', code: 'mains-done' }, noMainExit), '2026-01-01T00:02:00Z', 'the first event');
});
