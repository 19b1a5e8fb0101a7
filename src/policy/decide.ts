// The watcher's decision for one pod on its node: is the job's work done, and which sidecars to
// stop by which route now. Pure: stop-plan.ts turns the actions into the requests to make.
import type { IgnoreCode, WaitCode } from './codes.ts';
import { IMAGE_PULL_FAILURES } from './image-pull.ts';
import { rolesOf, type ContainerRole, type SidecarMarkers } from './markers.ts';
import { nodeKindOf, type NodeKind } from './nodes.ts';
import { restartOfContainerAt } from './restarts.ts';
import { arrayOf, isRecord, restartPolicyOf, type ContainerState, type ContainerStatus, type NodeLike, type PodLike } from './types.ts';

/** How a sidecar is stopped on its node, by Kruise's rule: killed (the kill mechanism) or its image replaced by a quick-exit image. */
export type StopRoute = 'kill' | 'image';

export type Action =
  /** Stop the container by the configured kill mechanism (CRR or signal). */
  | { type: 'kill'; container: string }
  /** Replace the container's image in place with its quick-exit image. */
  | { type: 'replaceImage'; container: string; image: string }
  /** Patch the pod status to a terminal phase with condition SidecarTerminated=True. */
  | { type: 'markTerminal'; phase: 'Succeeded' | 'Failed' }
  /** Nothing can stop this sidecar here: report it. */
  | { type: 'cannotStop'; container: string; code: 'virtual-node-without-image' }
  /**
   * The quick-exit image that replaced the sidecar's image cannot be pulled (ErrImagePull,
   * ImagePullBackOff...), so the kubelet retries it forever and the sidecar never ends. On a normal
   * node the pod is then moved to its terminal phase (after the other sidecars), which stops the
   * retries; a virtual node gets the report only.
   */
  | { type: 'imageNotPulled'; container: string; image: string; reason: string; message: string | undefined; fallback: 'phase' | 'none' };

export type Decision =
  /** Not a pod to act on, now or later. */
  | { outcome: 'ignore'; code: IgnoreCode }
  /** Not yet: the main containers are working, or sidecars are already stopping. */
  | { outcome: 'wait'; code: WaitCode }
  /** Every sidecar has stopped for good: nothing is left to do for this pod. */
  | { outcome: 'finished' }
  /** Execute these actions now, in order. */
  | { outcome: 'act'; actions: Action[] };

/** How a sidecar is stopped on a node of this kind; undefined when it cannot be stopped there. */
export function stopRoute(markers: SidecarMarkers, kind: NodeKind): StopRoute | undefined {
  // Kruise's priority rule: on a normal node the kill mechanism wins over the quick-exit image.
  if (kind === 'normal' && markers.whenJobExit) return 'kill';
  return markers.quickExitImage !== undefined ? 'image' : undefined;
}

export function decide(pod: PodLike, node: NodeLike | undefined, roles: readonly ContainerRole[] = rolesOf(pod)): Decision {
  const spec = pod.spec ?? {};
  const restartPolicy = restartPolicyOf(spec);
  if (restartPolicy !== 'Never' && restartPolicy !== 'OnFailure') {
    return { outcome: 'ignore', code: 'restart-policy-always' };
  }
  if (pod.metadata?.deletionTimestamp) return { outcome: 'ignore', code: 'pod-deleting' };
  const phase = pod.status?.phase;
  if (phase === undefined || phase === 'Pending') return { outcome: 'ignore', code: 'pod-not-started' };

  const mains = roles.filter((role) => role.role === 'main');
  const sidecars = roles.filter((role) => role.role === 'sidecar');
  if (sidecars.length === 0) return { outcome: 'ignore', code: 'no-sidecar' };
  // No main container (every one is marked): OpenKruise counts the empty set of main containers
  // as done once the kubelet reports every container, and stops them all. So does the watcher.
  if (mains.length === 0 && !everyContainerReported(pod, roles)) return { outcome: 'wait', code: 'containers-not-reported' };

  const terminalPhase = phase === 'Succeeded' || phase === 'Failed';
  const exitCodes = exitCodesByName(pod);
  const restarts = (role: ContainerRole, code: number) => restartOfContainerAt(spec, role.index, code).restarts;
  // A terminated sidecar stays down unless kubelet will restart it (OnFailure and a non-zero exit,
  // or its own restartPolicy or rules); in a terminal phase kubelet starts nothing, so a sidecar
  // that is not running stays down too.
  const isSettled = (role: ContainerRole) => {
    const code = exitCodes.get(role.name);
    if (code === undefined) return terminalPhase && !isRunning(pod, role.name);
    return terminalPhase || !restarts(role, code);
  };
  if (sidecars.every(isSettled)) return { outcome: 'finished' };

  const mainCodes = mains.map((main) => exitCodes.get(main.name));
  if (mainCodes.some((code) => code === undefined)) {
    return { outcome: 'wait', code: 'mains-running' };
  }
  // A main the kubelet restarts is not done: nothing is stopped and no phase is set meanwhile.
  if (mains.some((main, at) => restarts(main, mainCodes[at]!))) {
    return { outcome: 'wait', code: 'main-restarting' };
  }

  const kind = nodeKindOf(node);
  const running = sidecars.filter((sidecar) => !exitCodes.has(sidecar.name));
  if (running.length === 0) return { outcome: 'wait', code: 'sidecars-restarting' };

  const now: Action[] = [];
  const afterTerminalPhase: Action[] = [];
  let othersStillRunning = false;
  let stopsWithTerminalPhase = false;
  for (const sidecar of running) {
    const route = stopRoute(sidecar.markers, kind);
    if (route === undefined) {
      now.push({ type: 'cannotStop', container: sidecar.name, code: 'virtual-node-without-image' });
    } else if (route === 'image') {
      const image = sidecar.markers.quickExitImage!;
      const pullFailure = sidecar.image === image ? imagePullFailure(pod, sidecar.name) : undefined;
      if (pullFailure) {
        // No process is left to stop on a normal node: the terminal phase ends the pull retries.
        const fallback = kind === 'normal' ? 'phase' : 'none';
        now.push({ type: 'imageNotPulled', container: sidecar.name, image, ...pullFailure, fallback });
        if (fallback === 'phase') stopsWithTerminalPhase = true;
        else othersStillRunning = true;
      } else {
        othersStillRunning = true;
        // Already replaced: kubelet is restarting it with the quick-exit image.
        if (sidecar.image !== image) now.push({ type: 'replaceImage', container: sidecar.name, image });
      }
    } else if (sidecar.markers.ignoreExitCode) {
      afterTerminalPhase.push({ type: 'kill', container: sidecar.name });
    } else {
      othersStillRunning = true;
      now.push({ type: 'kill', container: sidecar.name });
    }
  }

  // Ignore-exit-code sidecars go last: once every other sidecar has stopped, the pod is moved to
  // its terminal phase first, so their exit code cannot change it (kubelet keeps a terminal phase).
  // A sidecar whose quick-exit image cannot be pulled waits for the same moment.
  if ((afterTerminalPhase.length > 0 || stopsWithTerminalPhase) && !othersStillRunning) {
    const phaseAction: Action[] = terminalPhase ? [] : [{ type: 'markTerminal', phase: phaseOfMains(mainCodes) }];
    return { outcome: 'act', actions: [...now, ...phaseAction, ...afterTerminalPhase] };
  }
  if (now.length === 0) return { outcome: 'wait', code: 'sidecars-stopping' };
  return { outcome: 'act', actions: now };
}

/** The terminal phase the main containers' exit codes make, as the kubelet would compute it. */
export function phaseOfMains(mainCodes: ReadonlyArray<number | undefined>): 'Succeeded' | 'Failed' {
  return mainCodes.every((code) => code === 0) ? 'Succeeded' : 'Failed';
}


function stateOf(pod: PodLike, name: string): ContainerState | undefined {
  for (const raw of arrayOf(pod.status?.containerStatuses)) {
    if (isRecord(raw) && raw.name === name) return (raw as ContainerStatus).state ?? undefined;
  }
  return undefined;
}

/** Whether the kubelet reports a status for every container of the spec, as Kruise's containersCompleted requires. */
function everyContainerReported(pod: PodLike, roles: readonly ContainerRole[]): boolean {
  const reported = new Set(arrayOf(pod.status?.containerStatuses).flatMap((raw) => (isRecord(raw) ? [raw.name] : [])));
  return roles.every((role) => reported.has(role.name));
}

function isRunning(pod: PodLike, name: string): boolean {
  return isRecord(stateOf(pod, name)?.running);
}

/** Why a container's image cannot be pulled, when its status says so. */
function imagePullFailure(pod: PodLike, name: string): { reason: string; message: string | undefined } | undefined {
  const waiting = stateOf(pod, name)?.waiting;
  if (!isRecord(waiting) || typeof waiting.reason !== 'string' || !IMAGE_PULL_FAILURES.has(waiting.reason)) return undefined;
  return { reason: waiting.reason, message: typeof waiting.message === 'string' ? waiting.message : undefined };
}

/** A time from a pod's status in epoch milliseconds: an RFC 3339 string in JSON, a Date once @kubernetes/client-node has deserialized the pod. */
export function epochMs(time: unknown): number | undefined {
  const ms = time instanceof Date ? time.getTime() : typeof time === 'string' ? Date.parse(time) : NaN;
  return Number.isFinite(ms) ? ms : undefined;
}

/** When the last main container finished, in epoch milliseconds, once every main container has. */
export function mainsFinishedAt(pod: PodLike, roles: readonly ContainerRole[] = rolesOf(pod)): number | undefined {
  const mains = new Set(roles.filter((role) => role.role === 'main').map((role) => role.name));
  const times: number[] = [];
  for (const raw of arrayOf(pod.status?.containerStatuses)) {
    if (!isRecord(raw) || !mains.has(raw.name as string)) continue;
    const time = epochMs((raw as ContainerStatus).state?.terminated?.finishedAt);
    if (time !== undefined) times.push(time);
  }
  return mains.size > 0 && times.length === mains.size ? Math.max(...times) : undefined;
}

/**
 * Since when (epoch milliseconds: the last main container's finish) the pod has been waiting for
 * its sidecars to stop; undefined when it is not: main containers still at work, or nothing left to stop.
 */
export function sidecarsPendingSince(pod: PodLike): number | undefined {
  const roles = rolesOf(pod);
  const decision = decide(pod, undefined, roles);
  const waitsOnSidecars = decision.outcome === 'act' || (decision.outcome === 'wait' && SIDECAR_WAITS.has(decision.code));
  return waitsOnSidecars ? mainsFinishedAt(pod, roles) : undefined;
}

/** The waits on the sidecars, once the main containers are done. */
export const SIDECAR_WAITS: ReadonlySet<WaitCode> = new Set(['sidecars-restarting', 'sidecars-stopping']);

/** Exit codes of the containers that have terminated, by name. */
export function exitCodesByName(pod: PodLike): Map<string, number> {
  const codes = new Map<string, number>();
  for (const raw of arrayOf(pod.status?.containerStatuses)) {
    if (!isRecord(raw)) continue;
    const status = raw as ContainerStatus;
    const terminated = status.state?.terminated;
    if (typeof status.name === 'string' && isRecord(terminated)) {
      codes.set(status.name, typeof terminated.exitCode === 'number' ? terminated.exitCode : -1);
    }
  }
  return codes;
}
