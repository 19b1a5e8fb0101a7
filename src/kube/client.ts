// How the add-on reaches the API server and which namespace it lives in.
import { readFileSync } from 'node:fs';
import type { AgentOptions } from 'node:https';
import { isDeepStrictEqual } from 'node:util';
import { ApiException, HttpMethod, KubeConfig, RequestContext, createConfiguration, type Cluster } from '@kubernetes/client-node';

const SERVICE_ACCOUNT_NAMESPACE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';
const DEFAULT_NAMESPACE = 'sidecar-terminator';

/** The kubeconfig file given by flag, else $KUBECONFIG, else the pod's service account. */
export function loadKubeConfig(kubeconfigPath: string): KubeConfig {
  const kubeConfig = new KubeConfig();
  if (kubeconfigPath) kubeConfig.loadFromFile(kubeconfigPath);
  // $KUBECONFIG may list several files; loadFromDefault merges them the way kubectl does.
  else if (process.env.KUBECONFIG) kubeConfig.loadFromDefault();
  else if (process.env.KUBERNETES_SERVICE_HOST) kubeConfig.loadFromCluster();
  else throw new Error('no Kubernetes API server configured: pass --kubeconfig, set $KUBECONFIG, or run in a pod');
  return reuseConnections(kubeConfig);
}

/** The --namespace flag, else the pod's own namespace, else sidecar-terminator. */
export function resolveNamespace(flag: string): string {
  if (flag) return flag;
  try {
    return readFileSync(SERVICE_ACCOUNT_NAMESPACE, 'utf8').trim() || DEFAULT_NAMESPACE;
  } catch {
    return DEFAULT_NAMESPACE;
  }
}

type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;
type CreateDispatcher = (cluster: Cluster | null, agentOptions: AgentOptions) => Dispatcher | undefined;

/**
 * client-node 2.0 gives every API request a new undici Agent (applySecurityAuthentication calls
 * its private createDispatcher, which, unlike the agent of watches, is not cached), so every
 * request opens a new TCP connection with a full TLS handshake and a new SecureContext, and
 * leaves it idle until undici's keep-alive timeout. This keeps one dispatcher as long as the TLS
 * settings it would be built with (CA, client certificate and key, proxy) stay the same, so
 * requests share pooled keep-alive connections; a rotated certificate gets a new dispatcher and
 * the old one is closed once its requests are done.
 */
export function reuseConnections(kubeConfig: KubeConfig): KubeConfig {
  const target = kubeConfig as unknown as { createDispatcher?: CreateDispatcher };
  // A private method: if a client-node release renames it, requests work as before, just unpooled.
  if (typeof target.createDispatcher !== 'function') return kubeConfig;
  const create = target.createDispatcher.bind(kubeConfig);
  let current: { options: unknown; dispatcher: Dispatcher | undefined } | undefined;
  target.createDispatcher = (cluster, agentOptions) => {
    // The CA, certificate and key are read again for every request: compared by content (Buffers byte by byte).
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

/**
 * The same client, each of whose requests carries the signal `signalFor()` gives it (a timeout,
 * or the end of a leadership term): when the signal aborts, so does the request, wherever it
 * hangs. Watches keep their own signal (client-node's Watch ignores this one).
 */
export function withRequestSignal(kubeConfig: KubeConfig, signalFor: () => AbortSignal): KubeConfig {
  const bounded = Object.create(kubeConfig) as KubeConfig;
  bounded.applySecurityAuthentication = async (context: RequestContext) => {
    const signal = signalFor();
    signal.throwIfAborted();
    await KubeConfig.prototype.applySecurityAuthentication.call(bounded, context);
    context.setSignal(signal);
  };
  return bounded;
}

/** client-node's own HTTP transport (undici's fetch), the one its generated API classes send with. */
const transport = createConfiguration().httpApi;

/**
 * A GET of `path` (under the current cluster's server), answered as the API server's JSON, parsed
 * and nothing more. The generated API classes also turn every field into its model class
 * (ObjectSerializer, field by field), which for a list of 2,000 pods costs more than the request
 * itself; watches deliver plain JSON in any case. Authenticated, pooled and bounded as their
 * requests are (applySecurityAuthentication); an answer other than 200 is an ApiException.
 */
export async function getJson<T>(kubeConfig: KubeConfig, path: string, query: Record<string, string | number | undefined>): Promise<T> {
  const server = kubeConfig.getCurrentCluster()?.server;
  if (!server) throw new Error('the kubeconfig names no current cluster');
  const url = new URL(server + path);
  for (const [name, value] of Object.entries(query)) if (value !== undefined && value !== '') url.searchParams.set(name, String(value));
  const context = new RequestContext(url.toString(), HttpMethod.GET);
  context.setHeaderParam('Accept', 'application/json');
  await kubeConfig.applySecurityAuthentication(context);
  const response = await transport.send(context).toPromise();
  const body = await response.body.text();
  if (response.httpStatusCode !== 200) throw new ApiException(response.httpStatusCode, `GET ${path}: HTTP ${response.httpStatusCode}`, body, response.headers);
  return JSON.parse(body) as T;
}
