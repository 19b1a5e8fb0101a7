// The whole system on a real node: a control plane with kube-scheduler, a real node (kubelet,
// containerd, runc, CNI), and `sidecar-terminator serve` registered with the API server as a local
// process, as stack.ts does with the kubelet simulator. Test files start with canRunRealNode(t).
import { type V1Container, type V1ContainerStatus, type V1EnvVar, type V1Pod } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from './control-plane.ts';
import { startRealNode, type RealNode, type RealNodeOptions } from './real-node.ts';
import type { ServeProcess } from './serve-process.ts';
import { waitFor } from './wait.ts';
import { apiClients, dryRunMarkedPod, serveStarter, type Clients } from './stack.ts';

/** The image of images/test-container, which every real node imports. */
export const TEST_IMAGE = 'sidecar-terminator.local/test-container:1';

/** A container of the test image: its arguments (main or sidecar, then flags), its env, the rest of `extra`. */
export const testContainer = (name: string, args: readonly string[], env: V1EnvVar[] = [], extra: Partial<V1Container> = {}): V1Container =>
  ({ name, image: TEST_IMAGE, args: [...args], ...(env.length > 0 ? { env } : {}), ...extra });

export interface RealCluster extends Clients {
  cp: ControlPlane;
  node: RealNode;
}

export interface RealStack extends RealCluster {
  serve: ServeProcess;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface RealClusterOptions {
  node?: RealNodeOptions;
  /** Pods reach the API server through the `kubernetes` Service (kube-proxy runs on the node). */
  reachableFromPods?: boolean;
  /** More kube-apiserver flags (a feature gate turned off, as an older release has it). */
  apiServerArgs?: string[];
}

/** A control plane and one real node; both stop at `t`'s teardown. */
export async function startRealCluster(t: Teardown, options: RealClusterOptions = {}): Promise<RealCluster> {
  const cp = await startControlPlane({ scheduler: true, reachableFromPods: options.reachableFromPods ?? false, ...(options.apiServerArgs ? { apiServerArgs: options.apiServerArgs } : {}) });
  t.teardown(() => cp.stop());
  const node = await startRealNode(cp, { kubeProxy: options.reachableFromPods ?? false, ...options.node });
  // Teardowns run in reverse: the node goes before the control plane.
  t.teardown(() => node.stop());
  return { cp, node, ...apiClients(cp.kubeConfig) };
}

/** A real cluster and serve (webhook and watcher) registered with it, its webhooks in effect (see serveStarter). */
export async function startRealStack(
  t: Teardown,
  options: RealClusterOptions & { serveArgs?: string[]; beforeServe?: (cluster: RealCluster) => Promise<void> } = {},
): Promise<RealStack> {
  const cluster = await startRealCluster(t, options);
  // What serve must find when it starts (a CRD that decides --kill-mechanism auto).
  await options.beforeServe?.(cluster);
  const serve = await (await serveStarter(t, cluster.cp, options.serveArgs))();
  return { ...cluster, serve };
}

/** A container's status as kubelet reports it, once it satisfies `check`. */
export async function containerStatus(
  clients: Pick<Clients, 'core'>,
  namespace: string,
  pod: string,
  container: string,
  check: (status: V1ContainerStatus, pod: V1Pod) => boolean,
  timeoutMs = 120_000,
): Promise<V1ContainerStatus> {
  return waitFor(
    `container ${container} of pod ${namespace}/${pod}`,
    async () => {
      const current = await clients.core.readNamespacedPod({ name: pod, namespace });
      const status = [...(current.status?.containerStatuses ?? []), ...(current.status?.ephemeralContainerStatuses ?? [])].find((s) => s.name === container);
      return status && check(status, current) ? status : undefined;
    },
    { timeoutMs },
  );
}

/** A container's log, as `kubectl logs` shows it (through the API server and the node's kubelet). */
export async function containerLog(cp: ControlPlane, namespace: string, pod: string, container: string, previous = false): Promise<string> {
  const result = await cp.kubectl(['logs', pod, '-c', container, ...(previous ? ['--previous'] : [])], { namespace });
  if (result.code !== 0) throw new Error(`kubectl logs ${pod} -c ${container} failed: ${result.stderr}`);
  return result.stdout;
}

/**
 * A refusal of the webhook's Service that kube-proxy does not route yet: its nftables rule for a
 * Service with no endpoints refuses the connection.
 */
const NOT_ROUTED_YET = /failed calling webhook .*dial tcp [\d.]+:\d+: connect: connection refused/;

/**
 * Asserts that the API server admits a pod through the webhook installed in the cluster, waiting
 * until it does: a server dry run of a pod with a marked sidecar, which the mutating webhook
 * labels. Pods that are Ready are not yet a Service the API server reaches: their endpoints get
 * to kube-proxy, which routes its calls, a moment after `rollout status` or `helm install --wait`
 * returns. A call before that is refused (failurePolicy Fail) or admits the pod unlabelled
 * (Ignore); any other refusal fails.
 */
export async function assertAdmittedThroughService(t: { ok(value: unknown, message: string): unknown }, cp: Pick<ControlPlane, 'kubectl'>, namespace: string, timeoutMs = 60_000): Promise<void> {
  const started = Date.now();
  const tries: string[] = [];
  const admitted = await waitFor('the API server to admit a pod through the webhook\'s Service', async () => {
    const { result, labelled } = await dryRunMarkedPod(cp, namespace);
    if (labelled) return true;
    tries.push(result.code === 0 ? 'admitted unlabelled: the webhook was not called' : result.stderr.trim());
    return undefined;
  }, { timeoutMs, intervalMs: 500 }).catch(() => false);
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  t.ok(admitted, `the API server called the webhook through its Service and took its patch (${admitted ? 'after' : 'not within'} ${seconds} s${tries.length ? `; ${tries.length} tries before: ${[...new Set(tries)].join(' | ')}` : ''})`);
  t.ok(tries.every((tried) => tried.startsWith('admitted unlabelled') || NOT_ROUTED_YET.test(tried)), 'nothing refused it but a Service not routed yet');
}
