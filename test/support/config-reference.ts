// The configuration reference of docs/installation.md, generated from the flag table in
// src/config.ts, and how the Helm chart sets each flag. scripts/config-reference.ts writes the
// table into that page; test/chart/docs.test.ts fails when the page or the chart falls behind
// src/config.ts.
import { SERVE_FLAGS, defaultText, type FlagSpec } from '../../src/config.ts';
import { withParts } from '../../scripts/generated-parts.ts';

export type Component = 'webhook' | 'watcher';

/** How the chart sets a flag. */
export type ChartSetting =
  /** From a value: setting `path` to `sample` makes each component's args carry `--flag=arg` (or drop the flag when arg is null). */
  | { kind: 'value'; path: string; sample: unknown; arg: string | null; components: Component[]; note?: string }
  /** Always set by the chart, to what `note` says. */
  | { kind: 'fixed'; note: string; components: Component[] }
  /** Never set by the chart, for the reason in `note`. */
  | { kind: 'unset'; note: string };

export type FlagKey = keyof typeof SERVE_FLAGS;

const both: Component[] = ['webhook', 'watcher'];

/** Every flag of `serve`: a test fails when src/config.ts gains a flag that is missing here. */
export const CHART_SETTINGS: Record<string, ChartSetting> = {
  kubeconfig: { kind: 'unset', note: "in-cluster configuration: the pod's service account" },
  namespace: { kind: 'fixed', note: 'the release namespace', components: both },
  logLevel: { kind: 'value', path: 'logLevel', sample: 'debug', arg: 'debug', components: both },
  noWebhook: { kind: 'fixed', note: 'on the watcher Deployment', components: ['watcher'] },
  noWatcher: { kind: 'fixed', note: 'on the webhook Deployment', components: ['webhook'] },
  listenAddress: { kind: 'value', path: 'webhook.port', sample: 9444, arg: '0.0.0.0:9444', components: ['webhook'], note: '`0.0.0.0:` + the port' },
  probeAddress: { kind: 'value', path: 'watcher.probePort', sample: 9090, arg: '0.0.0.0:9090', components: ['watcher'], note: '`0.0.0.0:` + the port; 0 turns it off' },
  enforcement: { kind: 'value', path: 'admission.enforcement', sample: 'warn', arg: 'warn', components: ['webhook'] },
  quickExitImageAllowlist: {
    kind: 'value',
    path: 'admission.quickExitImageAllowlist',
    sample: ['registry.example.com/quick-exit:*', 'busybox:*'],
    arg: 'registry.example.com/quick-exit:*,busybox:*',
    components: both,
    note: 'a list; the watcher needs it for the sweeper',
  },
  bodyLimit: { kind: 'value', path: 'admission.bodyLimit', sample: '16Mi', arg: '16Mi', components: ['webhook'] },
  nativeSidecars: { kind: 'value', path: 'admission.nativeSidecars', sample: 'labelled', arg: 'labelled', components: ['webhook'], note: 'also adds the native-sidecars webhook to the MutatingWebhookConfiguration' },
  shutdownGrace: { kind: 'value', path: 'shutdownGrace', sample: '45s', arg: '45s', components: both },
  shutdownDrain: { kind: 'value', path: 'webhook.shutdown.drain', sample: '5s', arg: '5s', components: ['webhook'], note: 'after `webhook.shutdown.preStopSleepSeconds` of a preStop sleep' },
  certDir: { kind: 'unset', note: 'the certificates live in a Secret' },
  tlsCertDir: {
    kind: 'value',
    path: 'webhook.tls.certManager',
    sample: { enabled: true, issuerRef: { name: 'my-ca' } },
    arg: '/tls',
    components: ['webhook'],
    note: "with `webhook.tls.certManager.enabled`: the Secret cert-manager issues the certificate into, mounted at /tls; cert-manager's cainjector writes the caBundle",
  },
  tlsSecret: { kind: 'value', path: 'webhook.tls.secretName', sample: 'my-webhook-tls', arg: 'my-webhook-tls', components: ['webhook'], note: 'default `<full name>-tls`' },
  serviceName: { kind: 'fixed', note: "the chart's Service, named after the release", components: ['webhook'] },
  certHosts: { kind: 'value', path: 'webhook.tls.extraHosts', sample: ['webhook.example.com', '10.0.0.7'], arg: 'webhook.example.com,10.0.0.7', components: ['webhook'], note: 'a list' },
  certValidity: { kind: 'value', path: 'webhook.tls.validity', sample: '90d', arg: '90d', components: ['webhook'] },
  certRenewBefore: { kind: 'value', path: 'webhook.tls.renewBefore', sample: '7d', arg: '7d', components: ['webhook'] },
  certCheckInterval: { kind: 'value', path: 'webhook.tls.checkInterval', sample: '5m', arg: '5m', components: ['webhook'] },
  registerWebhooks: { kind: 'unset', note: 'the chart creates both webhook configurations; the webhook patches their caBundle' },
  webhookConfigName: { kind: 'value', path: 'webhook.configurationName', sample: 'my-webhooks', arg: 'my-webhooks', components: ['webhook'], note: 'default: the full name' },
  watcherServiceAccount: { kind: 'unset', note: 'the chart fences `watcher.serviceAccount` itself (`fence.enabled`)' },
  webhookServiceAccount: { kind: 'unset', note: 'the chart fences `webhook.serviceAccount` itself (`fence.enabled`)' },
  webhookUrl: { kind: 'unset', note: 'the webhook configurations call the Service' },
  excludedNamespaces: {
    kind: 'value',
    path: 'webhook.excludedNamespaces',
    sample: ['kube-system', 'team-x'],
    arg: 'kube-system,team-x',
    components: ['watcher'],
    note: 'a list, also written into both configurations; the sweeper skips them',
  },
  namespaceLabels: { kind: 'value', path: 'webhook.namespaceLabels', sample: { team: 'batch', tier: 'jobs' }, arg: 'team=batch,tier=jobs', components: ['watcher'], note: 'a map, also written into both configurations; the sweeper lists the namespaces carrying them' },
  failurePolicy: { kind: 'value', path: 'webhook.failurePolicy', sample: 'Fail', arg: 'Fail', components: ['webhook'], note: 'also written into both configurations' },
  webhookTimeoutSeconds: { kind: 'value', path: 'webhook.timeoutSeconds', sample: 5, arg: '5', components: ['webhook'], note: 'also written into both configurations' },
  validateWorkloads: { kind: 'value', path: 'admission.validateWorkloads', sample: true, arg: 'true', components: ['webhook'], note: 'also decides the rules of the ValidatingWebhookConfiguration' },
  namespaces: { kind: 'value', path: 'watcher.namespaces', sample: ['team-a', 'team-b'], arg: 'team-a,team-b', components: ['watcher'], note: 'a list; RBAC becomes a Role per namespace' },
  killMechanism: { kind: 'value', path: 'watcher.killMechanism', sample: 'crr', arg: 'crr', components: ['watcher'] },
  killMechanismCheckInterval: { kind: 'value', path: 'watcher.killMechanismCheckInterval', sample: '5m', arg: '5m', components: ['watcher'] },
  kruiseNamespace: { kind: 'value', path: 'watcher.kruiseNamespace', sample: 'openkruise', arg: 'openkruise', components: ['watcher'] },
  signalImage: { kind: 'value', path: 'watcher.signalImage', sample: 'registry.example.com/signal:1.0', arg: 'registry.example.com/signal:1.0', components: ['watcher'], note: 'default: stop-sidecar beside the add-on image (`image.registry`), with its tag' },
  quickExitImage: { kind: 'value', path: 'watcher.quickExitImage', sample: 'registry.example.com/quick-exit:1.0', arg: 'registry.example.com/quick-exit:1.0', components: ['watcher'], note: 'default (null): quick-exit beside the add-on image, with its tag; `""` sets the phase instead' },
  resyncInterval: { kind: 'value', path: 'watcher.resyncInterval', sample: '10m', arg: '10m', components: ['watcher'] },
  sweepInterval: { kind: 'value', path: 'watcher.sweepInterval', sample: '10m', arg: '10m', components: ['watcher'] },
  injectedSidecars: {
    kind: 'value', path: 'injectedSidecars.entries', sample: [{ name: 'otel', container: 'otc-container' }], arg: '/etc/sidecar-terminator/injected-sidecars/policy.yaml', components: ['webhook'],
    note: 'the ConfigMap `<full name>-injected-sidecars` (the presets, then the entries), mounted there; unset while no preset is enabled and no entry given',
  },
  injectedSidecarsCheckInterval: { kind: 'value', path: 'injectedSidecars.checkInterval', sample: '30s', arg: '30s', components: ['webhook'] },
  leaderElect: { kind: 'value', path: 'watcher.leaderElection.enabled', sample: false, arg: null, components: ['watcher'], note: 'default true' },
  leaderElectionLease: { kind: 'value', path: 'watcher.leaderElection.leaseName', sample: 'my-lease', arg: 'my-lease', components: ['watcher'], note: 'default `<full name>-watcher`' },
  leaderElectionDuration: { kind: 'value', path: 'watcher.leaderElection.leaseDuration', sample: '30s', arg: '30s', components: ['watcher'] },
  leaderStartTimeout: { kind: 'value', path: 'watcher.leaderElection.startTimeout', sample: '2m', arg: '2m', components: ['watcher'] },
  concurrency: { kind: 'value', path: 'watcher.concurrency', sample: 32, arg: '32', components: ['watcher'] },
};

export const TABLE_BEGIN = '<!-- serve flags: generated from src/config.ts by `node scripts/config-reference.ts --write`; edit src/config.ts, not this table -->';
export const TABLE_END = '<!-- end of serve flags -->';

/** The Markdown table of every serve flag. */
export function serveFlagsTable(): string {
  const rows = Object.entries(SERVE_FLAGS as Record<string, FlagSpec>).map(([key, spec]) => {
    const name = typeof spec.default === 'boolean' ? `--${spec.name}` : `--${spec.name} VALUE`;
    return `| \`${name}\` | \`${spec.env}\` | ${defaultText(spec) === 'none' ? 'none' : `\`${defaultText(spec)}\``} | ${cell(spec.help)} | ${chartCell(CHART_SETTINGS[key])} |`;
  });
  return ['| flag | environment variable | default | meaning | Helm chart |', '|---|---|---|---|---|', ...rows].join('\n');
}

/** `page` with the text between the markers replaced by the current table. */
export function withServeFlagsTable(page: string): string {
  return withParts(page, [{ begin: TABLE_BEGIN, end: TABLE_END, make: serveFlagsTable }], 'docs/installation.md');
}

function chartCell(setting: ChartSetting | undefined): string {
  if (!setting) return '**missing: add it to test/support/config-reference.ts and the chart**';
  if (setting.kind === 'value') return `\`${setting.path}\`${setting.note ? ` (${cell(setting.note)})` : ''}`;
  if (setting.kind === 'fixed') return `set: ${cell(setting.note)}`;
  return `not set: ${cell(setting.note)}`;
}

function cell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}
