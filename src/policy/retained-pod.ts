// What the watcher keeps of each managed pod it caches: the fields the stop plan (decide.ts,
// stop-plan.ts, signal-container.ts) and the watcher's writes read, and nothing else. A Job pod
// is mostly env values, resources, volumes, probes and managedFields that no decision reads;
// kept whole, 2,000 of them hold about 90 MiB of heap in the watcher. The containers and the
// conditions stay complete lists, in order: writes address them by position.
import type { V1Container, V1ContainerStatus, V1EphemeralContainer, V1Pod } from '@kubernetes/client-node';
import { isMarkerName } from './markers.ts';
import { POD_ANNOTATIONS } from './names.ts';

export function retainedPod(pod: V1Pod): V1Pod {
  const { metadata, spec, status } = pod;
  return {
    ...(metadata && {
      metadata: { ...pick(metadata, ['name', 'namespace', 'uid', 'resourceVersion', 'labels', 'deletionTimestamp']), ...sidecarAnnotations(metadata.annotations) },
    }),
    ...(spec && {
      spec: {
        ...pick(spec, ['restartPolicy', 'nodeName', 'shareProcessNamespace', 'terminationGracePeriodSeconds', 'securityContext']),
        containers: (spec.containers ?? []).map(retainedContainer),
        // Their names only: a signal container's name must not collide with them.
        ...(spec.initContainers && { initContainers: spec.initContainers.map((c) => ({ name: c.name })) }),
        ...(spec.ephemeralContainers && { ephemeralContainers: spec.ephemeralContainers.map(retainedEphemeralContainer) }),
      },
    }),
    ...(status && {
      status: {
        ...pick(status, ['phase', 'conditions']),
        ...(status.containerStatuses && { containerStatuses: status.containerStatuses.map(retainedStatus) }),
        ...(status.ephemeralContainerStatuses && { ephemeralContainerStatuses: status.ephemeralContainerStatuses.map(retainedStatus) }),
      },
    }),
  };
}

/**
 * The annotations that name sidecars and say how to stop them (POD_ANNOTATIONS), and no other; an
 * empty map where the pod has only others: a write that adds an annotation must know whether the
 * pod has the map at all (a JSON patch adds a key only to a map that exists).
 */
function sidecarAnnotations(annotations: Record<string, string> | undefined): { annotations?: Record<string, string> } {
  if (!annotations || Object.keys(annotations).length === 0) return {};
  const kept = Object.entries(annotations).filter(
    ([key]) => key === POD_ANNOTATIONS.sidecars || key === POD_ANNOTATIONS.ignoreExitCode || key.startsWith(POD_ANNOTATIONS.stopPrefix) || key.startsWith(POD_ANNOTATIONS.gracePeriodPrefix),
  );
  return { annotations: Object.fromEntries(kept) };
}

/**
 * Name, image, security context (the signal container's user), its own restart policy and rules
 * (whether the kubelet restarts it, restarts.ts), the sidecar markers alone of its env, in order,
 * and whether it sets a command (a quick-exit image put in its place runs it).
 */
function retainedContainer(container: V1Container): V1Container {
  const markers = (container.env ?? []).filter((env) => isMarkerName(env.name));
  return {
    ...pick(container, ['name', 'image', 'securityContext', 'restartPolicy', 'restartPolicyRules']),
    ...(markers.length > 0 && { env: markers }),
    ...(container.command && { command: [] }),
  };
}

function retainedEphemeralContainer(container: V1EphemeralContainer): V1EphemeralContainer {
  return pick(container, ['name', 'image', 'targetContainerName']);
}

function retainedStatus(status: V1ContainerStatus): V1ContainerStatus {
  return pick(status, ['name', 'state', 'restartCount', 'user', 'containerID']) as V1ContainerStatus;
}

/** The listed keys that `object` has, nothing else. */
function pick<T extends object, K extends keyof T>(object: T, keys: readonly K[]): Pick<T, K> {
  const picked = {} as Pick<T, K>;
  for (const key of keys) if (object[key] !== undefined) picked[key] = object[key];
  return picked;
}
