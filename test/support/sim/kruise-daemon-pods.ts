// kruise-daemon's pods, as its DaemonSet makes them: one per simulated normal node, which the
// simulator then runs like any pod (running and ready). The simulator plays kruise-daemon on those
// nodes (container-recreate-requests.ts), and the add-on sends ContainerRecreateRequests only to
// nodes where a ready kruise-daemon pod runs.
import type { CoreV1Api } from '@kubernetes/client-node';
import { isApiError } from '../../../src/kube/api-errors.ts';
import { KRUISE_DAEMON_SELECTOR } from '../../../src/kube/kruise-daemons.ts';
import { waitFor } from '../wait.ts';
import { simAnnotations } from './container-behaviour.ts';

/** OpenKruise's namespace, where its chart puts kruise-daemon's DaemonSet. */
export const KRUISE_NAMESPACE = 'kruise-system';

/**
 * Creates the namespace and a kruise-daemon pod on each node (ones left by another simulator of
 * the same cluster are kept), and waits until they are ready: the add-on reads them at its start.
 */
export async function createKruiseDaemonPods(core: CoreV1Api, nodes: readonly string[]): Promise<void> {
  const ignoreExisting = (error: unknown) => {
    if (!isApiError(error, 409)) throw error;
  };
  await core.createNamespace({ body: { metadata: { name: KRUISE_NAMESPACE } } }).catch(ignoreExisting);
  const [key, value] = KRUISE_DAEMON_SELECTOR.split('=') as [string, string];
  await Promise.all(
    nodes.map((node) =>
      core
        .createNamespacedPod({
          namespace: KRUISE_NAMESPACE,
          body: {
            // A daemon runs until stopped, whatever the simulator's default for main containers.
            metadata: { name: `kruise-daemon-${node}`, labels: { [key]: value }, annotations: { [simAnnotations.exitAfter('daemon')]: 'never' } },
            spec: { nodeName: node, tolerations: [{ operator: 'Exists' }], containers: [{ name: 'daemon', image: 'openkruise/kruise-manager:v1.9.0' }] },
          },
        })
        .catch(ignoreExisting),
    ),
  );
  await waitFor('the simulated kruise-daemon pods to be ready', async () => {
    const pods = await core.listNamespacedPod({ namespace: KRUISE_NAMESPACE, labelSelector: KRUISE_DAEMON_SELECTOR });
    const ready = new Set(pods.items.filter((pod) => pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).map((pod) => pod.spec?.nodeName));
    return nodes.every((node) => ready.has(node));
  });
}
