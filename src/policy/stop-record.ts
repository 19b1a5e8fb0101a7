// The record the watcher leaves on a pod it stopped sidecars of, once the pod has ended: how each
// main container ended, and for each sidecar how it was stopped, its exit code, and how many
// seconds after the main containers it ended. Tools that need a Job's outcome (CI runners,
// workflow engines) read it from the pod's SidecarTerminated condition instead of re-deriving which
// container was a sidecar; `status -o json` prints it too. Pure: built from the pod as the API
// server holds it once it has ended, and what only the watcher knows (the sidecars it asked
// kruise-daemon to stop).
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import { epochMs, mainsFinishedAt } from './decide.ts';
import { classifyContainers, podAnnotations } from './markers.ts';
import { CONDITION_REASONS, TERMINATED_CONDITION } from './names.ts';
import { existingSignalContainer } from './signal-container.ts';
import { PHASE_SET, type SidecarCondition } from './plan-draft.ts';

/**
 * One way a sidecar was acted on. Told to stop: `signal` (SIGTERM from its signal container),
 * `http` (its shutdown request, sent by its signal container and answered), `crr` (a
 * ContainerRecreateRequest: kruise-daemon sends SIGTERM). Ended from outside: `image` (its image
 * replaced by a quick-exit image), `phase` (the pod's phase set; the kubelet kills what still runs).
 */
export type StopWay = 'signal' | 'http' | 'crr' | 'image' | 'phase';

export interface ContainerEnd {
  name: string;
  /** Absent while it has not exited. */
  exitCode?: number;
  /** The kubelet's reason: Completed, Error, OOMKilled. */
  reason?: string;
}

export interface SidecarEnd extends ContainerEnd {
  /** How it was told to stop, then how it was ended from outside; empty: it exited by itself. */
  stoppedBy: StopWay[];
  /** From the last main container's exit to the sidecar's, in whole seconds as the kubelet reports times. */
  secondsAfterMains?: number;
}

export interface StopRecord {
  /** The pod's phase: Succeeded or Failed once it has ended. */
  phase?: string;
  mains: ContainerEnd[];
  sidecars: SidecarEnd[];
  /** The words of the condition the record replaces: why the watcher set the phase, or what a stop waited for. */
  note?: string;
}

/** What the pod alone does not say: the sidecars in its ContainerRecreateRequest, and the quick-exit images that may have replaced a sidecar's. */
export interface StopRecordContext {
  crr: ReadonlySet<string>;
  quickExitImages: readonly string[];
}

const ORDER: readonly StopWay[] = ['crr', 'http', 'signal', 'image', 'phase'];

/** Words of the signal container (images/stop-sidecar) when the shutdown request did not stop the sidecar. */
const HTTP_FALLBACK = /sending SIGTERM instead/;

export function stopRecord(pod: V1Pod, context: StopRecordContext): StopRecord {
  const roles = classifyContainers(pod.spec ?? { containers: [] }, podAnnotations(pod));
  const statuses = pod.status?.containerStatuses ?? [];
  const end = (name: string): ContainerEnd => {
    const terminated = statuses.find((s) => s.name === name)?.state?.terminated;
    return { name, ...(terminated ? { exitCode: terminated.exitCode, ...(terminated.reason ? { reason: terminated.reason } : {}) } : {}) };
  };
  const mainsAt = mainsFinishedAt(pod);
  const earlier = pod.status?.conditions?.find((c) => c.type === TERMINATED_CONDITION)?.message;
  const phaseSet = earlier?.startsWith(PHASE_SET) ?? false;
  const sidecars = roles
    .filter((role) => role.role === 'sidecar')
    .map((role): SidecarEnd => {
      const ways = new Set<StopWay>();
      if (context.crr.has(role.name)) ways.add('crr');
      const signal = existingSignalContainer(pod, role.name);
      const signalState = signal && pod.status?.ephemeralContainerStatuses?.find((s) => s.name === signal.name)?.state;
      if (signalState?.running || signalState?.terminated) {
        ways.add(role.markers.stop.kind === 'http' && !HTTP_FALLBACK.test(signalState.terminated?.message ?? '') ? 'http' : 'signal');
      }
      const status = statuses.find((s) => s.name === role.name);
      // Its image replaced, and run (the kubelet starts nothing in a pod whose phase it has made terminal).
      if (role.image !== undefined && (role.image === role.markers.quickExitImage || context.quickExitImages.includes(role.image)) && ran(status, role.image)) ways.add('image');
      if (phaseSet) ways.add('phase');
      const finished = epochMs(status?.state?.terminated?.finishedAt);
      return {
        ...end(role.name),
        stoppedBy: ORDER.filter((way) => ways.has(way)),
        ...(finished !== undefined && mainsAt !== undefined ? { secondsAfterMains: Math.round((finished - mainsAt) / 1000) } : {}),
      };
    });
  return {
    ...(pod.status?.phase ? { phase: pod.status.phase } : {}),
    mains: roles.filter((role) => role.role === 'main').map((role) => end(role.name)),
    sidecars,
    ...(earlier ? { note: earlier } : {}),
  };
}

/** The SidecarTerminated condition that carries the record, as JSON in its message. */
export function recordCondition(record: StopRecord): SidecarCondition {
  return { status: 'True', reason: CONDITION_REASONS.stopping, message: JSON.stringify(record) };
}

/** The record the watcher left on the pod; undefined before it has, or for a condition of another kind. */
export function readStopRecord(pod: V1Pod): StopRecord | undefined {
  const message = pod.status?.conditions?.find((c) => c.type === TERMINATED_CONDITION)?.message;
  if (!message?.startsWith('{')) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(message);
  } catch {
    return undefined;
  }
  // Anyone who may patch a pod's status can write this condition: only the record's shape is read as one.
  const record = parsed as Partial<Record<keyof StopRecord, unknown>>;
  const ends = (list: unknown, sidecars: boolean) =>
    Array.isArray(list) && list.every((end: Partial<Record<keyof SidecarEnd, unknown>>) => typeof end?.name === 'string' && (!sidecars || (Array.isArray(end.stoppedBy) && end.stoppedBy.every((way) => ORDER.includes(way as StopWay)))));
  return ends(record.mains, false) && ends(record.sidecars, true) ? (parsed as StopRecord) : undefined;
}

/**
 * Whether the container's last run was of this image: it runs, or ran, with it. The kubelet names
 * `busybox:1.36` in full (`docker.io/library/busybox:1.36`).
 */
function ran(status: V1ContainerStatus | undefined, image: string): boolean {
  const started = status?.state?.running !== undefined || status?.state?.terminated?.startedAt !== undefined;
  const short = (reference: string) => reference.replace(/^docker\.io\//, '').replace(/^library\//, '');
  return started && status?.image !== undefined && short(status.image) === short(image);
}

/** The record in the words of `status`: `main exited 0; proxy stopped by crr, exited 0 2s after the main containers`. */
export function describeStopRecord(record: StopRecord): string {
  const exit = (end: ContainerEnd) => (end.exitCode === undefined ? 'has not exited' : `exited ${end.exitCode}${end.reason && end.reason !== 'Completed' ? ` (${end.reason})` : ''}`);
  const mains = record.mains.map((main) => `${main.name} ${exit(main)}`);
  const sidecars = record.sidecars.map((sidecar) => {
    const how = sidecar.stoppedBy.length > 0 ? `stopped by ${sidecar.stoppedBy.join(', then ')}` : 'not stopped by the watcher';
    const when = sidecar.secondsAfterMains === undefined ? '' : sidecar.secondsAfterMains < 0 ? ` ${-sidecar.secondsAfterMains}s before the main containers` : ` ${sidecar.secondsAfterMains}s after the main containers`;
    return `${sidecar.name} ${how}, ${exit(sidecar)}${sidecar.exitCode === undefined ? '' : when}`;
  });
  return [...mains, ...sidecars, ...(record.note ? [record.note] : [])].join('; ');
}
