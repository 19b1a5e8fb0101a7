// What happened to a pod, as src/status/timeline.ts lists it, called directly: the add-on's
// events, the ContainerRecreateRequest, the signal containers and the steps they wrote, the
// sidecars' restarts and exits, the stop record and the done label, in time order.
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import t from 'tap';
import { DONE, MANAGED_LABEL, TERMINATED_CONDITION, classifyContainers, recordCondition } from '../../src/policy/index.ts';
import { timelineOf } from '../../src/status/timeline.ts';
import { containerStatus, imageSidecar, jobPod, killSidecar, main } from '../support/pods.ts';

const at = (seconds: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, seconds));
const iso = (seconds: number) => at(seconds).toISOString().replace('.000Z', 'Z');
const exited = (name: string, exitCode: number, seconds: number) => containerStatus(name, exitCode, { state: { terminated: { exitCode, finishedAt: at(seconds) } } });
const event = (seconds: number, reason: string, extra: Partial<CoreV1Event> = {}): CoreV1Event =>
  ({ metadata: {}, involvedObject: {}, type: 'Normal', reason, message: `${reason} message`, lastTimestamp: at(seconds), ...extra });
const timeline = (pod: V1Pod, events: CoreV1Event[] = [], crr?: Parameters<typeof timelineOf>[2]) => timelineOf(pod, events, crr, classifyContainers(pod.spec!));

t.test('entries from every source are sorted by time, the untimed ones last in the order found', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], {}, { metadata: { labels: { [MANAGED_LABEL]: DONE } } });
  pod.status!.containerStatuses = [exited('main', 0, 10), exited('proxy', 0, 30)];
  pod.status!.conditions = [{ type: TERMINATED_CONDITION, status: 'True', message: 'no record here', lastTransitionTime: at(40) }];
  const entries = timeline(pod, [event(20, 'Late'), event(5, 'Early')], { name: 'crr-1', containers: ['proxy'], createdAt: iso(25), phase: 'Completed' });
  t.same(entries, [
    { time: iso(5), what: 'event Normal Early: Early message' },
    { time: iso(20), what: 'event Normal Late: Late message' },
    { time: iso(25), what: 'ContainerRecreateRequest crr-1 for proxy, phase Completed' },
    { time: iso(30), what: 'sidecar proxy exited 0' },
    { time: iso(40), what: `condition ${TERMINATED_CONDITION}=True: no record here` },
    { what: `label ${MANAGED_LABEL}=${DONE}: the watcher is done with the pod` },
  ]);
});

t.test('an event repeated says how often; a main container exit is not listed', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], {});
  pod.status!.containerStatuses = [exited('main', 0, 10)];
  t.same(timeline(pod, [event(5, 'Stop', { type: 'Warning', count: 3 }), event(6, 'Once', { count: 1 })]), [
    { time: iso(5), what: 'event Warning Stop: Stop message (3 times)' },
    { time: iso(6), what: 'event Normal Once: Once message' },
  ]);
});

t.test('a signal container: its start, each timed step it wrote, its exit with the rest of its message', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], {});
  pod.spec!.ephemeralContainers = [{ name: 'stop-proxy', image: 'stop', targetContainerName: 'proxy' }, { name: 'stop-late', image: 'stop' }];
  const message = `${iso(12)} sent SIGTERM to pid 1\nsomething untimed\n${iso(14)} proxy exited\n`;
  pod.status!.ephemeralContainerStatuses = [
    { name: 'stop-proxy', image: 'stop', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 0, startedAt: at(11), finishedAt: at(15), message } } },
    { name: 'stop-late', image: 'stop', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason: 'ContainerCreating' } } },
  ];
  t.same(timeline(pod), [
    { time: iso(11), what: 'ephemeral container stop-proxy targeting proxy started' },
    { time: iso(12), what: 'stop-proxy: sent SIGTERM to pid 1' },
    { time: iso(14), what: 'stop-proxy: proxy exited' },
    { time: iso(15), what: 'ephemeral container stop-proxy exited 0: something untimed' },
    { what: 'ephemeral container stop-late targeting (none) started, waiting (ContainerCreating)' },
  ]);
});

t.test('a running signal container says so; one without a status has no time', async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], {});
  pod.spec!.ephemeralContainers = [{ name: 'stop-proxy', image: 'stop', targetContainerName: 'proxy' }];
  t.same(timeline(pod), [{ what: 'ephemeral container stop-proxy targeting proxy started' }]);
  pod.status!.ephemeralContainerStatuses = [{ name: 'stop-proxy', image: 'stop', imageID: '', ready: true, restartCount: 0, state: { running: { startedAt: at(11) } } }];
  t.same(timeline(pod), [{ time: iso(11), what: 'ephemeral container stop-proxy targeting proxy started, running' }]);
});

t.test('a sidecar: its quick-exit image in place, an exit the kubelet restarted, its last exit', async (t) => {
  const replaced = imageSidecar('logs', 'quick:1', { image: 'quick:1' });
  const pod = jobPod([main(), replaced], {});
  const logs = exited('logs', 0, 30);
  logs.lastState = { terminated: { exitCode: 143, reason: 'Error', finishedAt: at(20) } };
  pod.status!.containerStatuses = [logs];
  t.same(timeline(pod), [
    { time: iso(20), what: 'sidecar logs exited 143 (Error), and the kubelet started it again with quick:1' },
    { time: iso(30), what: 'sidecar logs exited 0' },
    { what: 'sidecar logs runs its quick-exit image quick:1 (image replaced in place)' },
  ]);
});

t.test("the stop record's entry comes after the last sidecar exit, even when the condition was set before it", async (t) => {
  const pod = jobPod([main(), killSidecar('proxy')], {});
  pod.status!.containerStatuses = [exited('main', 0, 10), exited('proxy', 0, 31)];
  const record = { phase: 'Succeeded', mains: [{ name: 'main', exitCode: 0 }], sidecars: [{ name: 'proxy', exitCode: 0, stoppedBy: ['crr' as const], secondsAfterMains: 21 }] };
  pod.status!.conditions = [{ type: TERMINATED_CONDITION, ...recordCondition(record), lastTransitionTime: at(30) }];
  const entries = timeline(pod);
  t.same(entries.map((entry) => entry.time), [iso(31), iso(31)]);
  t.match(entries[1]!.what, /^condition SidecarTerminated=True: stop record: main exited 0; proxy stopped by crr, exited 0 21s after the main containers$/);
});
