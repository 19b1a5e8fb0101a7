// How a sidecar asks to be stopped, beside OpenKruise's markers: SIGTERM (the default), or an HTTP
// shutdown request to a loopback port of its pod, such as a proxy's own `/quitquitquit`. Read
// from the container's SIDECAR_TERMINATOR_STOP or the pod's `stop.sidecar-terminator.io/<container>`
// annotation; known proxies by name, never guessed from an image. And how long it is given to
// exit before it is ended from outside: SIDECAR_TERMINATOR_GRACE_PERIOD_SECONDS or the pod's
// `grace-period-seconds.sidecar-terminator.io/<container>`, else terminationGracePeriodSeconds.

/** The shutdown endpoints of known proxies, asked for by name (`istio-proxy`, or `istio-proxy:PORT` for another port). */
export const KNOWN_PROXIES = {
  /** Istio's pilot-agent: drains, stops Envoy and exits 0. */
  'istio-proxy': { method: 'POST', port: 15020, path: '/quitquitquit' },
  /** Envoy's admin interface (its port is the deployment's choice; 9901 in Envoy's examples). */
  envoy: { method: 'POST', port: 9901, path: '/quitquitquit' },
  /** Linkerd's proxy admin server. */
  'linkerd-proxy': { method: 'POST', port: 4191, path: '/shutdown' },
  /** Cloud SQL Auth Proxy v2, started with --quitquitquit (admin port 9091). */
  'cloud-sql-proxy': { method: 'POST', port: 9091, path: '/quitquitquit' },
} as const;

export type KnownProxy = keyof typeof KNOWN_PROXIES;

export const HTTP_METHODS = ['POST', 'PUT', 'GET', 'DELETE'] as const;

/** The hosts a shutdown request may go to: the pod's own loopback, and nothing else. */
export const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '[::1]'] as const;

export type StopMethod =
  /** SIGTERM through the kill mechanism (an ephemeral container, or a ContainerRecreateRequest). */
  | { kind: 'signal' }
  /** An HTTP request sent from an ephemeral container in the pod's network namespace. */
  | { kind: 'http'; method: string; url: string; proxy?: KnownProxy };

export const SIGNAL: StopMethod = { kind: 'signal' };

/** The words of the values a stop method may take, for messages. */
export const STOP_METHOD_SYNTAX = `signal, one of ${Object.keys(KNOWN_PROXIES).join(', ')} (optionally with :PORT), or "METHOD http://localhost:PORT/PATH" (METHOD one of ${HTTP_METHODS.join(', ')}; host localhost, 127.0.0.1 or [::1])`;

const HTTP_FORM = /^([A-Z]+)\s+(?:http:\/\/)?(localhost|127\.0\.0\.1|\[::1\]|[^/\s:]+|\[[^\]]*\])(?::(\d+))?(\/\S*)?$/;

/** A stop method's value read, or what is wrong with it. */
export function parseStopMethod(raw: string): { method: StopMethod } | { error: string } {
  const value = raw.trim();
  if (value === 'signal') return { method: SIGNAL };
  const [name, portText, ...rest] = value.split(':');
  if (Object.hasOwn(KNOWN_PROXIES, name!) && rest.length === 0) {
    const proxy = name as KnownProxy;
    const known = KNOWN_PROXIES[proxy];
    const port = portText === undefined ? known.port : parsePort(portText);
    if (port === undefined) return { error: `the port of ${proxy} must be a number from 1 to 65535` };
    return { method: { kind: 'http', method: known.method, url: `http://localhost:${port}${known.path}`, proxy } };
  }
  const http = HTTP_FORM.exec(value);
  if (!http) return { error: `not a stop method: expected ${STOP_METHOD_SYNTAX}` };
  const [, method, host, portDigits, path = '/'] = http;
  if (!(HTTP_METHODS as readonly string[]).includes(method!)) return { error: `the method must be one of ${HTTP_METHODS.join(', ')}` };
  if (!(LOOPBACK_HOSTS as readonly string[]).includes(host!)) {
    return { error: `the request may only go to the pod's own loopback (localhost, 127.0.0.1 or [::1]), not ${host}` };
  }
  const port = portDigits === undefined ? undefined : parsePort(portDigits);
  if (port === undefined) return { error: 'the port must be given, a number from 1 to 65535' };
  if (!/^\/[!-~]*$/.test(path)) return { error: 'the path must be printable ASCII without spaces' };
  return { method: { kind: 'http', method: method!, url: `http://${host}:${port}${path}` } };
}

function parsePort(text: string): number | undefined {
  if (!/^\d{1,5}$/.test(text)) return undefined;
  const port = Number(text);
  return port >= 1 && port <= 65535 ? port : undefined;
}

/** The longest grace period accepted, a day, as a whole number of seconds. */
export const MAX_GRACE_PERIOD_SECONDS = 86_400;

/** A grace period's value read (whole seconds, as terminationGracePeriodSeconds), or what is wrong with it. */
export function parseGracePeriod(raw: string): { seconds: number } | { error: string } {
  const value = raw.trim();
  if (!/^\d{1,6}$/.test(value) || Number(value) > MAX_GRACE_PERIOD_SECONDS) {
    return { error: `must be a whole number of seconds from 0 to ${MAX_GRACE_PERIOD_SECONDS}, as terminationGracePeriodSeconds` };
  }
  return { seconds: Number(value) };
}

/** How a stop is told in events, the condition and logs: `SIGTERM`, or `POST http://localhost:15020/quitquitquit`. */
export function describeStop(method: StopMethod): string {
  return method.kind === 'signal' ? 'SIGTERM' : `${method.method} ${method.url}`;
}
