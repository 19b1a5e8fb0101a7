// Which kill mechanism stops a pod's sidecars on a normal node. The cluster decides what can be
// used (Kruise's ContainerRecreateRequest where it is served and a kruise-daemon serves the node,
// else a signal container); the pod's history decides what must be kept: a pod whose stop has
// begun finishes with the mechanism it began with, so a switch never stops a sidecar twice. A pod
// with a signal container keeps the signal mechanism; one whose ContainerRecreateRequest was made
// keeps that while the API is served (when it goes, the requests go with it, and the pod is
// signalled).
import type { V1Pod } from '@kubernetes/client-node';
import { rolesOf, type ContainerRole } from './markers.ts';
import { existingSignalContainer } from './signal-container.ts';

export type KillMechanism = 'crr' | 'signal';

/** The nodes a kruise-daemon serves, or why they cannot be told. */
export type KruiseDaemonNodes = { nodes: ReadonlySet<string> } | { unknown: string };

/** What the cluster offers now for stopping a sidecar by a kill. */
export type ClusterKillMechanism =
  | {
      mechanism: 'crr';
      crrVersion: string;
      /**
       * With auto, the nodes a ready kruise-daemon serves (pods on the others are signalled), or
       * why they cannot be told. Absent, or unknown: every node (--kill-mechanism crr).
       */
      daemons?: KruiseDaemonNodes;
    }
  | { mechanism: 'signal' };

/**
 * What the watcher made for a pod that the pod's own status cannot show, kept while the pod is in
 * the watch and read by the plan (stop-plan.ts): the kill mechanism its sidecars were told to stop
 * with, and the sidecars in the ContainerRecreateRequest it created or found (not requested again).
 */
export interface StopHistory {
  startedWith?: KillMechanism;
  crr?: readonly string[];
}

/** Whether a ContainerRecreateRequest for a pod on this node is acted on: a kruise-daemon serves it, or it cannot be told. */
function daemonServes(cluster: ClusterKillMechanism & { mechanism: 'crr' }, nodeName: string | undefined): boolean {
  return cluster.daemons === undefined || 'unknown' in cluster.daemons || nodeName === undefined || cluster.daemons.nodes.has(nodeName);
}

/**
 * Whether a signal container was sent to one of the pod's sidecars that SIGTERM stops (the ones
 * the kill mechanism decides for; one with an HTTP stop method gets a signal container with either
 * mechanism): its stop began with the signal mechanism.
 */
function signalled(pod: V1Pod, roles: readonly ContainerRole[]): boolean {
  return roles.some((role) => role.role === 'sidecar' && role.markers.stop.kind === 'signal' && existingSignalContainer(pod, role.name) !== undefined);
}

/**
 * The mechanism for a pod: the one its stop began with (`startedWith`, what this watcher
 * requested; a signal container in its spec, whoever sent it), else the cluster's now for the
 * pod's node: signal where no kruise-daemon serves it.
 */
export function killMechanismFor(pod: V1Pod, startedWith: KillMechanism | undefined, cluster: ClusterKillMechanism, roles: readonly ContainerRole[] = rolesOf(pod)): KillMechanism {
  if (startedWith === 'crr' && cluster.mechanism === 'crr') return 'crr';
  // A ContainerRecreateRequest made while the API was served is gone with it: signalled now, not twice.
  if (startedWith === 'signal' || signalled(pod, roles)) return 'signal';
  return cluster.mechanism === 'crr' && daemonServes(cluster, pod.spec?.nodeName) ? 'crr' : 'signal';
}
