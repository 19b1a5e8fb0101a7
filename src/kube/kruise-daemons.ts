// Which nodes a kruise-daemon serves: the ready pods of OpenKruise's daemon DaemonSet in its
// namespace. A ContainerRecreateRequest for a pod on any other node is never acted on (OpenKruise's
// manager completes it after a minute, "daemon has not responded"), so the watcher sends none there.
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import type { KruiseDaemonNodes } from '../policy/index.ts';
import { isApiError } from './api-errors.ts';

/** The label of kruise-daemon's pods, as OpenKruise's chart and manifests set it. */
export const KRUISE_DAEMON_SELECTOR = 'control-plane=daemon';

/** A daemon pod that is running and ready on its node. */
function serving(pod: V1Pod): boolean {
  return (
    pod.metadata?.deletionTimestamp === undefined &&
    pod.status?.phase === 'Running' &&
    (pod.status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True') &&
    Boolean(pod.spec?.nodeName)
  );
}

/**
 * Reads the ready kruise-daemon pods of `namespace`. A watcher whose RBAC does not reach that
 * namespace (--namespaces gives it namespaced roles) cannot tell: `unknown`, and its caller sends
 * ContainerRecreateRequests to every node as before. Other errors are thrown.
 */
export async function readKruiseDaemonNodes(core: Pick<CoreV1Api, 'listNamespacedPod'>, namespace: string): Promise<KruiseDaemonNodes> {
  try {
    // From the API server's watch cache (resourceVersion 0), not etcd: read every interval, a moment's lag is harmless.
    const list = await core.listNamespacedPod({ namespace, labelSelector: KRUISE_DAEMON_SELECTOR, fieldSelector: 'status.phase=Running', resourceVersion: '0' });
    return { nodes: new Set(list.items.filter(serving).map((pod) => pod.spec!.nodeName!)) };
  } catch (error) {
    if (isApiError(error, 403)) return { unknown: `the watcher may not list pods in namespace ${namespace}` };
    throw error;
  }
}
