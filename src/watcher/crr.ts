// The crr kill mechanism: an OpenKruise ContainerRecreateRequest, the one kruise-daemon executes
// (it stops the containers through the container runtime). Its shape is exactly the one Kruise's
// SidecarTerminator controller creates, so kruise-daemon, Kruise's CRR webhook (which adds its
// crr.apps.kruise.io/* labels and each container's statusContext) and tools that list CRRs treat
// ours the same as Kruise's.
import type { CustomObjectsApi, V1Pod } from '@kubernetes/client-node';
import { isApiError } from '../kube/api-errors.ts';
import { CRR, crrName } from '../policy/index.ts';

/**
 * The ContainerRecreateRequest Kruise writes, with its keys in the order of Kruise's Go types
 * (TypeMeta, ObjectMeta, spec; metav1.NewControllerRef for the owner). Fields Go writes as zero
 * values (creationTimestamp: null, status.phase: "") are left out: the API server drops them.
 */
export function containerRecreateRequest(pod: V1Pod, version: string, containers: string[]) {
  const { name, namespace, uid } = pod.metadata!;
  return {
    kind: CRR.kind,
    apiVersion: `${CRR.group}/${version}`,
    metadata: {
      name: crrName(uid!),
      namespace,
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name, uid, controller: true, blockOwnerDeletion: true }],
    },
    spec: {
      podName: name,
      containers: containers.map((container) => ({ name: container })),
      strategy: { failurePolicy: 'Ignore', forceRecreate: true },
    },
  };
}

/** Creates the pod's ContainerRecreateRequest; 'exists' when an earlier reconcile (or Kruise's controller) did. */
export async function createCrr(custom: CustomObjectsApi, version: string, pod: V1Pod, containers: string[]): Promise<'created' | 'exists'> {
  const body = containerRecreateRequest(pod, version, containers);
  try {
    await custom.createNamespacedCustomObject({ group: CRR.group, version, namespace: pod.metadata!.namespace!, plural: CRR.plural, body });
    return 'created';
  } catch (error) {
    if (isApiError(error, 409)) return 'exists';
    throw error;
  }
}
