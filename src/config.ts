// Every flag of `sidecar-terminator serve`, with its environment variable, default and help
// text. --help and the flags table of docs/installation.md are generated from this table, so nothing goes undocumented.
import { parseDuration } from './duration.ts';
import { NATIVE_SIDECARS_NAMESPACE_LABEL, NATIVE_SIDECARS_OPT_OUT, POD_IMAGES, publishedImage } from './policy/names.ts';
import { NATIVE_SIDECARS_MODES } from './policy/native-sidecars.ts';

/**
 * How long the API server waits for an answer by default (--webhook-timeout-seconds); the
 * webhook's HTTPS server uses the same limit (webhook/app.ts). An answer takes milliseconds: a
 * replica that is reachable but silent holds each pod creation this long before failurePolicy
 * decides, so it is short.
 */
export const WEBHOOK_TIMEOUT_SECONDS = 3;

export type FlagValue = string | number | boolean | string[];

export interface FlagSpec<T extends FlagValue = FlagValue> {
  name: string;
  /** A one-letter alias (`-o`), for the commands that follow kubectl's. */
  short?: string;
  /** Empty for a flag without an environment variable. */
  env: string;
  help: string;
  default: T;
  parse(raw: string): T;
}

export const text = (name: string, help: string, fallback: string): FlagSpec<string> => ({
  name,
  env: envName(name),
  help,
  default: fallback,
  parse: (raw) => raw,
});

export const bool = (name: string, help: string, fallback = false): FlagSpec<boolean> => ({
  name,
  env: envName(name),
  help,
  default: fallback,
  parse: (raw) => {
    if (/^(true|1|yes)$/i.test(raw) || raw === '') return true;
    if (/^(false|0|no)$/i.test(raw)) return false;
    throw new Error(`--${name}: expected true or false, got ${JSON.stringify(raw)}`);
  },
});

export const oneOf = <const T extends string>(name: string, help: string, values: readonly T[], fallback: T): FlagSpec<T> => ({
  name,
  env: envName(name),
  help: `${help} One of: ${values.join(', ')}.`,
  default: fallback,
  parse: (raw) => {
    if (!values.includes(raw as T)) throw new Error(`--${name}: expected one of ${values.join(', ')}, got ${JSON.stringify(raw)}`);
    return raw as T;
  },
});

export const list = (name: string, help: string): FlagSpec<string[]> => ({
  name,
  env: envName(name),
  help: `${help} Comma-separated.`,
  default: [],
  parse: (raw) => raw.split(',').map((item) => item.trim()).filter((item) => item !== ''),
});

export const duration = (name: string, help: string, fallback: string): FlagSpec<number> => ({
  name,
  env: envName(name),
  help: `${help} A duration such as 90s, 15m, 12h or 30d.`,
  default: parseDuration(fallback) ?? 0,
  parse: (raw) => {
    const ms = parseDuration(raw);
    if (ms === undefined) throw new Error(`--${name}: expected a duration such as 90s, 15m, 12h or 30d, got ${JSON.stringify(raw)}`);
    return ms;
  },
});

/** A namespace name (an RFC 1123 DNS label). */
const namespaceName = (name: string, help: string, fallback: string): FlagSpec<string> => ({
  ...text(name, help, fallback),
  parse: (raw) => {
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(raw)) throw new Error(`--${name}: expected a namespace name (lower-case letters, digits and '-', at most 63), got ${JSON.stringify(raw)}`);
    return raw;
  },
});

const bytes = (name: string, help: string, fallback: number): FlagSpec<number> => ({
  name,
  env: envName(name),
  help: `${help} In bytes; suffixes Ki and Mi are accepted.`,
  default: fallback,
  parse: (raw) => {
    const match = /^(\d+)(Ki|Mi)?$/.exec(raw);
    if (!match) throw new Error(`--${name}: expected a size such as 8Mi, got ${JSON.stringify(raw)}`);
    return Number(match[1]) * (match[2] === 'Mi' ? 1024 * 1024 : match[2] === 'Ki' ? 1024 : 1);
  },
});

export function envName(flag: string): string {
  return `SIDECAR_TERMINATOR_${flag.toUpperCase().replaceAll('-', '_')}`;
}

export const SERVE_FLAGS = {
  kubeconfig: text('kubeconfig', 'Kubeconfig file; empty means in-cluster configuration, or $KUBECONFIG when set.', ''),
  namespace: text('namespace', "The add-on's own namespace, home of the certificate Secret and the leader-election Lease, and never served by the webhooks; empty means the pod's namespace (in-cluster) or sidecar-terminator.", ''),
  logLevel: oneOf('log-level', 'Minimum level of the JSON logs.', ['debug', 'info', 'warn', 'error'] as const, 'info'),
  noWebhook: bool('no-webhook', 'Do not run the admission webhook (run the watcher alone).'),
  noWatcher: bool('no-watcher', 'Do not run the watcher (run the admission webhook alone).'),
  listenAddress: text('listen-address', 'host:port of the HTTPS server for /validate, /mutate, /healthz, /readyz and /metrics.', '0.0.0.0:9443'),
  probeAddress: text('probe-address', 'host:port of a plain-HTTP listener for /healthz, /readyz and /metrics (for probes and scrapes of a watcher-only process); empty disables it.', ''),
  enforcement: oneOf('enforcement', 'deny rejects misconfigured pods, Jobs and CronJobs, except those a controller creates (admitted with warnings and an event on their owner); warn admits them all and returns every error as a warning (audit mode).', ['deny', 'warn'] as const, 'deny'),
  quickExitImageAllowlist: list('quick-exit-image-allowlist', 'When set, quick-exit images must match one of these patterns (* matches anything, e.g. registry.example.com/quick-exit:*).'),
  nativeSidecars: oneOf(
    'native-sidecars',
    `Move the containers marked KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true to native sidecars (init containers with restartPolicy: Always, which the kubelet stops once the main containers are done) when their pod is created: none does not; labelled in namespaces labelled ${NATIVE_SIDECARS_NAMESPACE_LABEL.key}=${NATIVE_SIDECARS_NAMESPACE_LABEL.value}; all in every namespace the webhooks serve. Pods that could behave differently stay as they are, annotated with why; a pod annotated ${NATIVE_SIDECARS_OPT_OUT.key}: ${NATIVE_SIDECARS_OPT_OUT.value} opts out. Needs Kubernetes 1.29 or later (otherwise no pod is moved). With --register-webhooks it decides which namespaces the mutating webhook configuration sends.`,
    NATIVE_SIDECARS_MODES,
    'none',
  ),
  bodyLimit: bytes('body-limit', 'Largest AdmissionReview body accepted; larger requests get a 413.', 8 * 1024 * 1024),
  shutdownGrace: duration('shutdown-grace', 'On SIGTERM, how long in-flight requests and reconciles may take to finish.', '20s'),
  shutdownDrain: duration('shutdown-drain', 'On SIGTERM, how long the webhook keeps listening, unready and closing each connection after its answer, before it stops listening (so the API server moves to another replica); part of --shutdown-grace.', '3s'),
  certDir: text('cert-dir', 'Keep the CA and serving certificate in this directory (local runs, e.g. certs/) instead of a Secret.', ''),
  tlsCertDir: text(
    'tls-cert-dir',
    'Serve tls.crt and tls.key from this directory, issued and renewed by someone else (a mounted kubernetes.io/tls Secret that cert-manager keeps current), re-read every --cert-check-interval: the webhook then issues no certificate, writes no Secret and patches no caBundle (cert-manager\'s cainjector does). Empty: the webhook issues its own, in --tls-secret (or --cert-dir).',
    '',
  ),
  tlsSecret: text('tls-secret', 'Name of the Secret holding the CA and serving certificate, shared by every replica.', 'sidecar-terminator-tls'),
  serviceName: text('service-name', 'Name of the webhook Service; its DNS names go into the serving certificate.', 'sidecar-terminator'),
  certHosts: list('cert-hosts', 'Extra DNS names or IP addresses for the serving certificate (127.0.0.1 and localhost are always included).'),
  certValidity: duration('cert-validity', 'Lifetime of a newly issued serving certificate (the CA lives ten times longer).', '365d'),
  certRenewBefore: duration('cert-renew-before', 'Renew the serving certificate when it expires within this window.', '30d'),
  certCheckInterval: duration('cert-check-interval', 'How often to re-read the stored certificates (picking up a renewal by another replica), renew them when due and re-check the caBundle of the webhook configurations.', '1m'),
  registerWebhooks: bool('register-webhooks', 'Create or update the Mutating and Validating webhook configurations (otherwise only their caBundle is patched, when they exist), and the ValidatingAdmissionPolicies that fence the ServiceAccounts of --watcher-service-account and --webhook-service-account (Kubernetes 1.30+).'),
  webhookConfigName: text('webhook-config-name', 'Name of the MutatingWebhookConfiguration and ValidatingWebhookConfiguration.', 'sidecar-terminator'),
  watcherServiceAccount: text('watcher-service-account', "The watcher's ServiceAccount, in --namespace; with --register-webhooks, the admission policy that fences its writes is registered for it.", 'sidecar-terminator-watcher'),
  webhookServiceAccount: text('webhook-service-account', "The webhook's ServiceAccount, in --namespace; with --register-webhooks, the admission policy that fences its writes is registered for it.", 'sidecar-terminator-webhook'),
  webhookUrl: text('webhook-url', 'Register the webhooks with this base URL (e.g. https://127.0.0.1:9443) instead of the Service; for local runs.', ''),
  namespaceLabels: {
    ...list('namespace-labels', 'Serve only namespaces carrying every one of these labels (key=value): written into the namespaceSelector of the registered configurations, and the sweeper labels pods in those namespaces only (listing the namespaces by label).'),
    parse: (raw: string) => {
      const pairs = list('namespace-labels', '').parse(raw);
      const bad = pairs.find((pair) => !/^[^=\s]+=[^=\s]*$/.test(pair));
      if (bad !== undefined) throw new Error(`--namespace-labels: expected key=value pairs separated by commas, got ${JSON.stringify(bad)}`);
      return pairs;
    },
  },
  excludedNamespaces: list('excluded-namespaces', 'Namespaces the webhooks skip besides kube-system and --namespace (written into the registered configurations) and that the sweeper leaves alone.'),
  failurePolicy: oneOf('failure-policy', 'failurePolicy of registered webhooks.', ['Ignore', 'Fail'] as const, 'Ignore'),
  webhookTimeoutSeconds: {
    name: 'webhook-timeout-seconds',
    env: envName('webhook-timeout-seconds'),
    help: 'How long the API server waits for an admission answer before failurePolicy decides (timeoutSeconds of registered webhooks, 1 to 30); the HTTPS server gives a TLS handshake, and a request from its first byte to its last, as long to arrive.',
    default: WEBHOOK_TIMEOUT_SECONDS,
    parse: (raw: string) => {
      const value = Number(raw);
      if (!Number.isInteger(value) || value < 1 || value > 30) throw new Error(`--webhook-timeout-seconds: expected a whole number of seconds from 1 to 30 (the API server's limits), got ${JSON.stringify(raw)}`);
      return value;
    },
  },
  validateWorkloads: bool('validate-workloads', 'Register the validating webhook for Deployment, StatefulSet and DaemonSet writes too (their pod templates get warnings, never a denial); off, only Pods, Jobs and CronJobs wait on the webhook.'),
  injectedSidecars: text(
    'injected-sidecars',
    "A policy file (YAML or JSON) naming the sidecars that other mutating webhooks inject (istio-proxy, linkerd-proxy, ...): the mutating webhook writes on each pod an entry applies to the annotations a Job's author would write (sidecar-terminator.io/sidecars, stop.sidecar-terminator.io/<container>, ...), at admission only (the sweeper does not: the watcher never names sidecars itself). The webhook's: refused with --no-webhook. A file that cannot be read or has an error at start: serve exits 2, naming the entry and the fix; a bad change later keeps the policy in force and says so (a warning, a metric, an event on this pod). Empty: no policy.",
    '',
  ),
  injectedSidecarsCheckInterval: duration('injected-sidecars-check-interval', 'How often the --injected-sidecars file is read again; a change takes effect without a restart. 0s: read at start only.', '10s'),
  namespaces: list('namespaces', 'Namespaces whose managed pods the watcher acts on; empty means every namespace.'),
  killMechanism: oneOf('kill-mechanism', 'How sidecars on normal nodes are stopped: crr creates an OpenKruise ContainerRecreateRequest (kruise-daemon kills the container), signal adds an ephemeral container that sends SIGTERM to the sidecar, auto uses crr for pods on nodes where a ready kruise-daemon pod runs while the cluster serves the Kruise CRD, and signal otherwise (see --kill-mechanism-check-interval and --kruise-namespace).', ['auto', 'crr', 'signal'] as const, 'auto'),
  killMechanismCheckInterval: duration(
    'kill-mechanism-check-interval',
    'With --kill-mechanism auto, how often the watcher asks the API server again whether it serves ContainerRecreateRequests, and switches mechanism when OpenKruise was installed or removed (a log line, and an event on the Lease with --leader-elect), and reads again which nodes a ready kruise-daemon pod runs on (a log line when that changes); a pod whose sidecars were told to stop already finishes with the mechanism it began with. 0s: only at start, nodes included.',
    '1m',
  ),
  kruiseNamespace: namespaceName(
    'kruise-namespace',
    "OpenKruise's namespace, where the watcher looks for ready kruise-daemon pods (label control-plane=daemon) with --kill-mechanism auto: only pods on their nodes get ContainerRecreateRequests, pods on other nodes signal containers. Read with the mechanism, every --kill-mechanism-check-interval; where the watcher may not list pods there, every node gets requests.",
    'kruise-system',
  ),
  signalImage: text(
    'signal-image',
    "Image of the ephemeral container that stops a sidecar from inside its pod: it sends SIGTERM, or the sidecar's HTTP shutdown request, and waits its grace period (the project's stop-sidecar image, one static program; the chart follows this default).",
    publishedImage(POD_IMAGES.signal),
  ),
  quickExitImage: text(
    'quick-exit-image',
    "Quick-exit image that ends a sidecar still running after its grace period (SIGTERM or its shutdown request ignored): the watcher puts it in place of the sidecar's image, the kubelet kills the sidecar through the runtime and runs this image, which must exit 0 whatever its arguments. Used for sidecars that set no command (the image runs the container's command) and declare no quick-exit image of their own; empty: the pod's phase is set from the main containers instead, and the kubelet kills the sidecar.",
    publishedImage(POD_IMAGES.quickExit),
  ),
  resyncInterval: duration('resync-interval', 'How often the watcher queues every managed pod again, whatever its watch says (a pod whose reconcile fails is also retried on its own for as long as it fails: with jittered exponential backoff up to 2m apart, or, when the API server refuses the request, after 15s and then less and less often, up to every 5m); 0s turns it off.', '5m'),
  sweepInterval: duration('sweep-interval', 'How often the watcher lists running Never/OnFailure pods without the managed label and labels those with sidecar markers (pods admitted while the webhook was down); a pod that changed meanwhile is read again and labelled at once, and a sweep that fails is tried again with jittered exponential backoff, up to 2m apart (from 15s up to 5m when the API server refuses a request) and never more than this interval; 0s turns it off.', '5m'),
  leaderElect: bool('leader-elect', 'Run the watcher only while holding a coordination.k8s.io Lease in --namespace, so several replicas never act twice; needed with more than one watcher replica.'),
  leaderElectionLease: text('leader-election-lease', 'Name of the Lease used for leader election.', 'sidecar-terminator-watcher'),
  leaderElectionDuration: duration('leader-election-duration', 'How long a leader holds the Lease without renewing it before another replica may take over.', '15s'),
  leaderStartTimeout: duration(
    'leader-start-timeout',
    'How long a replica that became leader retries starting its watcher (the kill mechanism discovered anew each time, with backoff from 1s doubling up to 30s) before it releases the Lease for another replica and stands back for --leader-election-duration.',
    '1m',
  ),
  concurrency: {
    name: 'concurrency',
    env: envName('concurrency'),
    help: 'Pods the watcher reconciles at the same time.',
    default: 16,
    parse: (raw: string) => {
      const value = Number(raw);
      if (!Number.isInteger(value) || value < 1) throw new Error(`--concurrency: expected a whole number of at least 1, got ${JSON.stringify(raw)}`);
      return value;
    },
  },
} satisfies Record<string, FlagSpec>;

export type ServeFlags = typeof SERVE_FLAGS;
export type ServeConfig = { [K in keyof ServeFlags]: ServeFlags[K]['default'] };

/** The default as a person would type it: for numbers, the first rendering the flag's own parser reads back. */
export function defaultText(spec: FlagSpec): string {
  const value = spec.default;
  if (Array.isArray(value)) return value.length > 0 ? value.join(',') : 'none';
  if (typeof value !== 'number') return value === '' ? 'none' : String(value);
  return [durationText(value), bytesText(value), String(value)].find((text) => readsBack(spec, text)) ?? String(value);
}

function readsBack(spec: FlagSpec, text: string): boolean {
  try {
    return spec.parse(text) === spec.default;
  } catch {
    return false;
  }
}

const DURATION_UNITS: Array<[string, number]> = [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]];

function durationText(ms: number): string {
  if (ms === 0) return '0s';
  const [unit, size] = DURATION_UNITS.find(([, size]) => ms % size === 0) ?? ['ms', 1];
  return `${ms / size}${unit}`;
}

function bytesText(bytes: number): string {
  if (bytes > 0 && bytes % (1024 * 1024) === 0) return `${bytes / 1024 / 1024}Mi`;
  if (bytes > 0 && bytes % 1024 === 0) return `${bytes / 1024}Ki`;
  return String(bytes);
}
