// The watcher's decision for one pod on its node: is the job's work done, and which sidecars to
// stop by which mechanism now (docs/ARCHITECTURE.md, the path of a marker, step 4). Pure: the
// caller executes the actions in order.
import { classifyContainers, type ContainerRole, type SidecarMarkers } from './markers.ts';
import { nodeKindOf, type NodeKind } from './nodes.ts';
import { arrayOf, isRecord, restartPolicyOf, type ContainerStatus, type NodeLike, type PodLike } from './types.ts';

export type StopMechanism = 'kill' | 'image';

export type Action =
  /** Stop the container by the configured kill mechanism (CRR or signal). */
  | { type: 'kill'; container: string }
  /** Replace the container's image in place with its quick-exit image. */
  | { type: 'replaceImage'; container: string; image: string }
  /** Patch the pod status to a terminal phase with condition SidecarTerminated=True. */
  | { type: 'markTerminal'; phase: 'Succeeded' | 'Failed' }
  /** Nothing can stop this sidecar here: report it. */
  | { type: 'cannotStop'; container: string; reason: string };

export type Decision =
  /** Not a pod to act on, now or later. */
  | { outcome: 'ignore'; reason: string }
  /** Not yet: the main containers are working, or sidecars are already stopping. */
  | { outcome: 'wait'; reason: string }
  /** Every sidecar has stopped for good: nothing is left to do for this pod. */
  | { outcome: 'finished' }
  /** Execute these actions now, in order. */
  | { outcome: 'act'; actions: Action[] };

/** How a sidecar is stopped on a node of this kind; undefined when it cannot be stopped there. */
export function stopMechanism(markers: SidecarMarkers, kind: NodeKind): StopMechanism | undefined {
  // Kruise's priority rule: on a normal node the kill mechanism wins over the quick-exit image.
  if (kind === 'normal' && markers.whenJobExit) return 'kill';
  return markers.quickExitImage !== undefined ? 'image' : undefined;
}

export function decide(pod: PodLike, node: NodeLike | undefined): Decision {
  const spec = pod.spec ?? {};
  const restartPolicy = restartPolicyOf(spec);
  if (restartPolicy !== 'Never' && restartPolicy !== 'OnFailure') {
    return { outcome: 'ignore', reason: 'restartPolicy is neither Never nor OnFailure' };
  }
  if (pod.metadata?.deletionTimestamp) return { outcome: 'ignore', reason: 'the pod is being deleted' };
  const phase = pod.status?.phase;
  if (phase === undefined || phase === 'Pending') return { outcome: 'ignore', reason: 'the pod has not started' };

  const roles = classifyContainers(spec);
  const mains = roles.filter((role) => role.role === 'main');
  const sidecars = roles.filter((role) => role.role === 'sidecar');
  if (sidecars.length === 0) return { outcome: 'ignore', reason: 'the pod has no sidecar' };
  if (mains.length === 0) return { outcome: 'ignore', reason: 'the pod has no main container' };

  const terminalPhase = phase === 'Succeeded' || phase === 'Failed';
  const exitCodes = exitCodesByName(pod);
  // A terminated sidecar stays down unless kubelet will restart it (OnFailure, non-zero exit).
  const isSettled = (role: ContainerRole) => {
    const code = exitCodes.get(role.name);
    return code !== undefined && (terminalPhase || restartPolicy === 'Never' || code === 0);
  };
  if (sidecars.every(isSettled)) return { outcome: 'finished' };

  const mainCodes = mains.map((main) => exitCodes.get(main.name));
  if (mainCodes.some((code) => code === undefined)) {
    return { outcome: 'wait', reason: 'main containers are still running' };
  }
  if (restartPolicy === 'OnFailure' && mainCodes.some((code) => code !== 0)) {
    return { outcome: 'wait', reason: 'a main container failed and will be restarted (OnFailure)' };
  }

  const kind = nodeKindOf(node);
  const running = sidecars.filter((sidecar) => !exitCodes.has(sidecar.name));
  if (running.length === 0) return { outcome: 'wait', reason: 'sidecars are restarting' };

  const now: Action[] = [];
  const afterTerminalPhase: Action[] = [];
  let othersStillRunning = false;
  for (const sidecar of running) {
    const mechanism = stopMechanism(sidecar.markers, kind);
    if (mechanism === undefined) {
      now.push({ type: 'cannotStop', container: sidecar.name, reason: VIRTUAL_NODE_WITHOUT_IMAGE });
    } else if (mechanism === 'image') {
      othersStillRunning = true;
      const image = sidecar.markers.quickExitImage!;
      // Already replaced: kubelet is restarting it with the quick-exit image.
      if (sidecar.image !== image) now.push({ type: 'replaceImage', container: sidecar.name, image });
    } else if (sidecar.markers.ignoreExitCode) {
      afterTerminalPhase.push({ type: 'kill', container: sidecar.name });
    } else {
      othersStillRunning = true;
      now.push({ type: 'kill', container: sidecar.name });
    }
  }

  // Ignore-exit-code sidecars go last: once every other sidecar has stopped, the pod is moved to
  // its terminal phase first, so their exit code cannot change it (kubelet keeps a terminal phase).
  if (afterTerminalPhase.length > 0 && !othersStillRunning) {
    const phaseAction: Action[] = terminalPhase
      ? []
      : [{ type: 'markTerminal', phase: mainCodes.every((code) => code === 0) ? 'Succeeded' : 'Failed' }];
    return { outcome: 'act', actions: [...now, ...phaseAction, ...afterTerminalPhase] };
  }
  if (now.length === 0) return { outcome: 'wait', reason: 'sidecars are stopping' };
  return { outcome: 'act', actions: now };
}

const VIRTUAL_NODE_WITHOUT_IMAGE =
  'the pod runs on a virtual-kubelet node, which cannot kill a container, and the sidecar declares no quick-exit image (KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE)';

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
