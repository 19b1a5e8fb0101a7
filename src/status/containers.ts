// Each container as status tells it: its role, its markers, its state, and for a sidecar what
// stops it on its node; and the trigger rule the pod's restart policies make.
import type { CoreV1Event, V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { CRR, markerEntries, setsOwnRestartPolicy, stopRoute, type ContainerRole } from '../policy/index.ts';
import { eventCode, iso, optional } from './readings.ts';
import type { ContainerStory, CrrView, PodStory, StopMeans } from './story-types.ts';

/** What stops a sidecar on its node: the route, and for a kill the mechanism the objects show, `kill` while none does. */
export function stopMeansOf(role: ContainerRole, nodeKind: PodStory['nodeKind'], pod: V1Pod, events: CoreV1Event[], crr: CrrView | undefined): StopMeans {
  const route = stopRoute(role.markers, nodeKind === 'virtual' ? 'virtual' : 'normal');
  if (route === undefined) return 'none';
  if (route === 'image') return 'image';
  if (crr?.containers.includes(role.name)) return 'crr';
  if (pod.spec?.ephemeralContainers?.some((c) => c.targetContainerName === role.name)) return 'signal';
  // The request itself may be out of sight (no permission to list them): the event that announced it names it as its related object.
  if (events.some((e) => eventCode(e) === 'stop-requested' && e.related?.kind === CRR.kind)) return 'crr';
  return 'kill';
}

export function containerStory(role: ContainerRole, pod: V1Pod, means: StopMeans | undefined): ContainerStory {
  const raw = pod.spec?.containers?.[role.index];
  const markers = raw
    ? markerEntries(raw).map((entry) => `${entry.name}=${entry.fromValueFrom ? '(valueFrom)' : JSON.stringify(entry.value ?? '')}`)
    : [];
  return { name: role.name, role: role.role, markers, status: containerStatus(pod, role.name), ...optional('mechanism', means) };
}

export function containerStatus(pod: V1Pod, name: string): string {
  const status = pod.status?.containerStatuses?.find((s) => s.name === name);
  if (!status?.state) return 'not started';
  const restarts = status.restartCount ? `, ${status.restartCount} restart${status.restartCount === 1 ? '' : 's'}` : '';
  const { running, terminated, waiting } = status.state;
  if (terminated) return `exited ${terminated.exitCode}${terminated.reason && terminated.reason !== 'Completed' ? ` (${terminated.reason})` : ''} at ${iso(terminated.finishedAt)}${restarts}`;
  if (running) return `running since ${iso(running.startedAt)}${restarts}`;
  return `waiting (${waiting?.reason ?? 'unknown'}${waiting?.message ? `: ${waiting.message}` : ''})${restarts}`;
}

export function triggerRule(restartPolicy: string, ownPolicies: string[]): string {
  const one = ownPolicies.length === 1;
  const own = ownPolicies.length === 0
    ? ''
    : `; ${ownPolicies.join(', ')} ${one ? 'sets its' : 'set their'} own restartPolicy, which decides instead, with ${one ? 'its' : 'their'} restartPolicyRules, whether the kubelet restarts ${one ? 'it' : 'them'}: the sidecars keep running for a restart`;
  if (restartPolicy === 'Never') return `restartPolicy Never: the sidecars are stopped once every main container has exited, whatever its exit code${own}`;
  if (restartPolicy === 'OnFailure') return `restartPolicy OnFailure: the sidecars are stopped once every main container has exited 0 (a main container that fails is restarted, and the sidecars keep running for it)${own}`;
  return `restartPolicy ${restartPolicy}: no trigger applies (only Never and OnFailure pods have their sidecars stopped)`;
}

/** The main containers that set their own restartPolicy (Kubernetes 1.35+), which the kubelet reads in place of the pod's. */
export function ownRestartPolicies(spec: V1PodSpec, roles: ContainerRole[]): string[] {
  return roles.filter((role) => role.role === 'main' && setsOwnRestartPolicy(spec.containers[role.index] ?? {})).map((role) => role.name);
}
