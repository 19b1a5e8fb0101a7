// How the add-on reaches the API server and which namespace it lives in.
import { readFileSync } from 'node:fs';
import type { AgentOptions } from 'node:https';
import { isDeepStrictEqual } from 'node:util';
import { ApiException, HttpMethod, KubeConfig, RequestContext, createConfiguration, type Cluster, type ConfigurationOptions, type DispatcherOptions } from '@kubernetes/client-node';

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
  return reuseConnections(cacheCredentials(kubeConfig));
}

/**
 * How long the CA, client certificate and key read from files serve before they are read again:
 * the period client-node (as client-go) reads the service account's token file at.
 */
export const CREDENTIALS_REFRESH_MS = 60_000;

/** What client-node's private applyHTTPSOptions fills: the TLS options (ca, cert, key...) and headers. */
type HttpsOptions = { headers?: Record<string, string> } & Record<string, unknown>;
type ApplyHttpsOptions = (opts: HttpsOptions) => void;

/**
 * client-node reads the kubeconfig's CA, client certificate and key files again for every request
 * (applyHTTPSOptions: an open, fstat, read and close of each). This reads them once per
 * `refreshMs`, and again at once when the current cluster or user changes; a file rotated on
 * disk (a projected service account's CA, a renewed client certificate) is read within that
 * period, and reuseConnections then starts a new pool with it. Each request gets its own copy of
 * the headers, to which the token is added.
 */
export function cacheCredentials(kubeConfig: KubeConfig, refreshMs = CREDENTIALS_REFRESH_MS, now: () => number = () => performance.now()): KubeConfig {
  const target = kubeConfig as unknown as { applyHTTPSOptions?: ApplyHttpsOptions };
  // A private method: if a client-node release renames it, requests work as before, reading the files each time.
  if (typeof target.applyHTTPSOptions !== 'function') return kubeConfig;
  const read = target.applyHTTPSOptions.bind(kubeConfig);
  let cached: { at: number; cluster: Cluster | null; user: unknown; options: HttpsOptions } | undefined;
  target.applyHTTPSOptions = (opts) => {
    const cluster = kubeConfig.getCurrentCluster();
    const user = kubeConfig.getCurrentUser();
    if (!cached || cached.cluster !== cluster || cached.user !== user || now() - cached.at >= refreshMs) {
      const options: HttpsOptions = {};
      read(options);
      cached = { at: now(), cluster, user, options };
    }
    const { headers, ...tls } = cached.options;
    Object.assign(opts, tls);
    if (headers) opts.headers = { ...opts.headers, ...headers };
  };
  return kubeConfig;
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

export type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;
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
  const latest = latestDispatcher();
  target.createDispatcher = (cluster, agentOptions) => latest(kubeConfig.createDispatcherOptions(cluster, agentOptions), () => create(cluster, agentOptions));
  return kubeConfig;
}

/**
 * How long a dispatcher replaced by new TLS settings stays open: a request handed it just before
 * (its authentication applied, not yet sent) still goes out on it rather than fail as closed.
 */
export const REPLACED_DISPATCHER_CLOSE_MS = 10_000;

/**
 * One dispatcher while the options it is built from stay the same; when they change, a new one is
 * built and the previous one closed after `closeAfterMs` (its requests under way end first). The
 * options' CA, certificate and key (read again once a minute, cacheCredentials) are compared by
 * content: the same Buffers at once, new ones byte by byte.
 */
export function latestDispatcher(closeAfterMs = REPLACED_DISPATCHER_CLOSE_MS): (options: DispatcherOptions, build: () => Dispatcher | undefined) => Dispatcher | undefined {
  let current: { options: DispatcherOptions; dispatcher: Dispatcher | undefined } | undefined;
  return (options, build) => {
    if (!current || !isDeepStrictEqual(current.options, options)) {
      const previous = current?.dispatcher;
      current = { options, dispatcher: build() };
      if (previous) setTimeout(() => void previous.close().catch(() => undefined), closeAfterMs).unref();
    }
    return current.dispatcher;
  };
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

/** What requestJson sends besides its method and path. */
export interface JsonRequest {
  query?: Record<string, string | number | boolean | undefined>;
  /** Sent as JSON; a PATCH's is a JSON patch unless `options` sets another Content-Type. */
  body?: unknown;
  /** client-node's per-call options (setHeaderOptions): their middleware's `pre` is applied. */
  options?: ConfigurationOptions;
}

/**
 * One request to the API server (a path under the current cluster's server), its body and answer
 * plain JSON. The generated API classes also turn every field, both ways, into its model class
 * (ObjectSerializer, field by field), which for a list of 2,000 pods costs more than the request
 * itself, and for a single pod read or written is a third of the request's CPU; watches deliver
 * plain JSON in any case. Authenticated, pooled and bounded as their requests are
 * (applySecurityAuthentication, then the options' middleware, in their order); an answer other
 * than 2xx is an ApiException, as theirs.
 */
export async function requestJson<T>(kubeConfig: KubeConfig, method: 'GET' | 'POST' | 'PATCH', path: string, request: JsonRequest = {}): Promise<T> {
  const server = kubeConfig.getCurrentCluster()?.server;
  if (!server) throw new Error('the kubeconfig names no current cluster');
  const url = new URL(server + path);
  for (const [name, value] of Object.entries(request.query ?? {})) if (value !== undefined && value !== '') url.searchParams.set(name, String(value));
  let context = new RequestContext(url.toString(), HttpMethod[method]);
  context.setHeaderParam('Accept', 'application/json');
  context.setHeaderParam('User-Agent', USER_AGENT);
  if (request.body !== undefined) {
    context.setHeaderParam('Content-Type', method === 'PATCH' ? 'application/json-patch+json' : 'application/json');
    context.setBody(JSON.stringify(request.body));
  }
  await kubeConfig.applySecurityAuthentication(context);
  for (const middleware of request.options?.middleware ?? []) context = await middleware.pre(context).toPromise();
  const { status, body, headers } = await send(context);
  if (status < 200 || status > 299) throw new ApiException(status, `${method} ${path}: HTTP ${status}`, body, headers);
  return JSON.parse(body) as T;
}

/** What the API server's audit log names the plain requests' client. */
const USER_AGENT = 'sidecar-terminator';

/**
 * Sends the request on the pooled dispatcher that applySecurityAuthentication chose, with
 * undici's request(), which costs the client a fraction of the CPU and garbage of fetch(): the
 * HTTP client was half of a watcher's CPU per request in its profile. It asks for no compression:
 * the answers are parsed whole anyway, and inflating costs more CPU than the bytes cost time on a
 * cluster's network. client-node gives no dispatcher only to an HTTPS server trusted by the
 * system's roots with no client certificate: such requests go through its transport (undici's
 * fetch).
 */
async function send(context: RequestContext): Promise<{ status: number; body: string; headers: Record<string, string> }> {
  const dispatcher = context.getDispatcher();
  if (!dispatcher) {
    const response = await transport.send(context).toPromise();
    return { status: response.httpStatusCode, body: await response.body.text(), headers: response.headers };
  }
  const url = new URL(context.getUrl());
  const signal = context.getSignal();
  const response = await dispatcher.request({
    origin: url.origin,
    path: url.pathname + url.search,
    method: context.getHttpMethod(),
    headers: context.getHeaders(),
    body: context.getBody() as string | undefined,
    ...(signal ? { signal } : {}),
  });
  const headers = Object.fromEntries(Object.entries(response.headers).map(([name, value]) => [name, Array.isArray(value) ? value.join(', ') : (value ?? '')]));
  return { status: response.statusCode, body: await response.body.text(), headers };
}

/** A GET of `path`, answered as the API server's JSON, parsed and nothing more (requestJson). */
export function getJson<T>(kubeConfig: KubeConfig, path: string, query: Record<string, string | number | undefined>): Promise<T> {
  return requestJson<T>(kubeConfig, 'GET', path, { query });
}
