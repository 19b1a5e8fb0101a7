// What happened to a pod, in time order: the add-on's events, its ContainerRecreateRequest, its
// signal containers and what they wrote, the sidecars' restarts and exits, the stop record.
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { DONE, MANAGED_LABEL, TERMINATED_CONDITION, describeStopRecord, exitCodesByName, readStopRecord, type ContainerRole } from '../policy/index.ts';
import { eventTime, finishedAt, iso, latest, optional } from './readings.ts';
import type { CrrView, TimelineEntry } from './story-types.ts';

export function timelineOf(pod: V1Pod, events: CoreV1Event[], crr: CrrView | undefined, roles: ContainerRole[]): TimelineEntry[] {
  const entries = [
    ...events.map(eventEntry),
    ...(crr ? [{ ...optional('time', crr.createdAt), what: `ContainerRecreateRequest ${crr.name} for ${crr.containers.join(', ')}${crr.phase ? `, phase ${crr.phase}` : ''}` }] : []),
    ...signalContainerEntries(pod),
    ...sidecarEntries(pod, roles),
    ...stopRecordEntries(pod, roles),
  ];
  return entries.sort((a, b) => (a.time ?? '\uffff').localeCompare(b.time ?? '\uffff'));
}

function eventEntry(event: CoreV1Event): TimelineEntry {
  const count = (event.count ?? 1) > 1 ? ` (${event.count} times)` : '';
  return { ...optional('time', eventTime(event)), what: `event ${event.type} ${event.reason}: ${event.message}${count}` };
}

/** Each signal container: its start, the steps it wrote, its exit. */
function signalContainerEntries(pod: V1Pod): TimelineEntry[] {
  const entries: TimelineEntry[] = [];
  for (const ephemeral of pod.spec?.ephemeralContainers ?? []) {
    const status = pod.status?.ephemeralContainerStatuses?.find((s) => s.name === ephemeral.name)?.state;
    const started = status?.terminated?.startedAt ?? status?.running?.startedAt;
    const outcome = status?.running ? ', running' : status?.waiting ? `, waiting (${status.waiting.reason})` : '';
    entries.push({ ...optional('time', started ? iso(started) : undefined), what: `ephemeral container ${ephemeral.name} targeting ${ephemeral.targetContainerName ?? '(none)'} started${outcome}` });
    const { steps, rest } = timedLines(status?.terminated?.message ?? '');
    for (const step of steps) entries.push({ time: step.time, what: `${ephemeral.name}: ${step.what}` });
    if (status?.terminated) {
      const finished = status.terminated.finishedAt ? iso(status.terminated.finishedAt) : undefined;
      entries.push({ ...optional('time', finished), what: `ephemeral container ${ephemeral.name} exited ${status.terminated.exitCode}${rest ? `: ${rest}` : ''}` });
    }
  }
  return entries;
}

/** The sidecars: a quick-exit image in place, an exit the kubelet restarted, the last exit. */
function sidecarEntries(pod: V1Pod, roles: ContainerRole[]): TimelineEntry[] {
  const entries: TimelineEntry[] = [];
  for (const role of roles) {
    if (role.role === 'sidecar' && role.markers.quickExitImage !== undefined && role.image === role.markers.quickExitImage) {
      entries.push({ what: `sidecar ${role.name} runs its quick-exit image ${role.image} (image replaced in place)` });
    }
    const before = pod.status?.containerStatuses?.find((s) => s.name === role.name)?.lastState?.terminated;
    if (role.role === 'sidecar' && before?.finishedAt) {
      entries.push({ time: iso(before.finishedAt), what: `sidecar ${role.name} exited ${before.exitCode}${before.reason && before.reason !== 'Completed' ? ` (${before.reason})` : ''}, and the kubelet started it again${role.image ? ` with ${role.image}` : ''}` });
    }
  }
  for (const role of roles.filter((r) => r.role === 'sidecar')) {
    const exited = finishedAt(pod, role.name);
    if (exited) entries.push({ time: exited, what: `sidecar ${role.name} exited ${exitCodesByName(pod).get(role.name)}` });
  }
  return entries;
}

/** The SidecarTerminated condition with the stop record, and the label that says the watcher is done. */
function stopRecordEntries(pod: V1Pod, roles: ContainerRole[]): TimelineEntry[] {
  const entries: TimelineEntry[] = [];
  // After the sidecars' exits: the stop record, written once they have ended, often in the same second.
  const condition = pod.status?.conditions?.find((c) => c.type === TERMINATED_CONDITION);
  if (condition) {
    const record = readStopRecord(pod);
    const what = record ? `stop record: ${describeStopRecord(record)}` : condition.message ?? '';
    const set = condition.lastTransitionTime ? iso(condition.lastTransitionTime) : undefined;
    // The record keeps the time the condition was first set (with the phase): it was written after the last sidecar's exit.
    const time = record ? latest([set, ...roles.filter((r) => r.role === 'sidecar').map((r) => finishedAt(pod, r.name))]) : set;
    entries.push({ ...optional('time', time), what: `condition ${TERMINATED_CONDITION}=${condition.status}: ${what}` });
  }
  if (pod.metadata?.labels?.[MANAGED_LABEL] === DONE) entries.push({ what: `label ${MANAGED_LABEL}=${DONE}: the watcher is done with the pod` });
  return entries;
}

/**
 * What a signal container wrote, one step a line, each led by its time (images/stop-sidecar); a
 * message of another form (an earlier signal container's, its log tail) is kept whole as `rest`.
 */
function timedLines(message: string): { steps: TimelineEntry[]; rest: string } {
  const steps: TimelineEntry[] = [];
  const rest: string[] = [];
  for (const line of message.trim().split('\n').filter(Boolean)) {
    const timed = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) (.*)$/.exec(line);
    if (timed) steps.push({ time: timed[1]!, what: timed[2]! });
    else rest.push(line);
  }
  return { steps, rest: rest.join(' ') };
}
