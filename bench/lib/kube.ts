// The bench harness's own Kubernetes client wiring (the driver and the kubelet simulator, not
// the watchers being measured): a KubeConfig whose API requests share keep-alive connections.
//
// client-node 2.0 gives every API request a new undici Agent (applySecurityAuthentication calls
// its private createDispatcher, which has no cache), so every request opens a new TCP connection
// with a full TLS handshake. Left as it is, the harness would spend the two cores on handshakes
// while creating 22,000 pods and playing kubelet, and slow the system under test with them.
// bench/README.md proposes the same change for src/kube/client.ts.
import type { AgentOptions } from 'node:https';
import { isDeepStrictEqual } from 'node:util';
import { KubeConfig, type Cluster, type RequestContext } from '@kubernetes/client-node';

type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;
type CreateDispatcher = (cluster: Cluster | null, agentOptions: AgentOptions) => Dispatcher | undefined;

/** One dispatcher for as long as the TLS settings (CA, client certificate, key, proxy) stay the same. */
export function reuseConnections(kubeConfig: KubeConfig): KubeConfig {
  const target = kubeConfig as unknown as { createDispatcher: CreateDispatcher };
  const create = target.createDispatcher.bind(kubeConfig);
  let current: { options: unknown; dispatcher: Dispatcher | undefined } | undefined;
  target.createDispatcher = (cluster, agentOptions) => {
    const options = kubeConfig.createDispatcherOptions(cluster, agentOptions);
    if (!current || !isDeepStrictEqual(current.options, options)) {
      const previous = current?.dispatcher;
      current = { options, dispatcher: create(cluster, agentOptions) };
      previous?.close().catch(() => undefined);
    }
    return current.dispatcher;
  };
  return kubeConfig;
}

export function pooledKubeConfig(path: string): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(path);
  return reuseConnections(kubeConfig);
}
