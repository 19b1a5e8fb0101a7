// values.schema.json: helm refuses bad values before rendering anything, naming the value; good
// values of every kind pass.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { KNOWN_PROXIES, MAX_GRACE_PERIOD_SECONDS } from '../../src/policy/index.ts';
import { parseInjectedSidecarPolicy } from '../../src/policy/injected-sidecar-file.ts';
import { chartDir, template } from './helm.ts';

const bad: Array<[string, object, RegExp]> = [
  ['an enforcement mode that does not exist', { admission: { enforcement: 'block' } }, /\/admission\/enforcement/],
  ['a kill mechanism that does not exist', { watcher: { killMechanism: 'kill' } }, /\/watcher\/killMechanism/],
  ['a failure policy in the wrong case', { webhook: { failurePolicy: 'ignore' } }, /\/webhook\/failurePolicy/],
  ['an unknown log level', { logLevel: 'verbose' }, /\/logLevel/],
  ['a duration without a unit', { shutdownGrace: '20' }, /\/shutdownGrace/],
  ['a duration as a number', { shutdownGrace: 20 }, /\/shutdownGrace/],
  ['a duration in years', { webhook: { tls: { validity: '1y' } } }, /\/webhook\/tls\/validity/],
  ['a sweep interval in words', { watcher: { sweepInterval: 'hourly' } }, /\/watcher\/sweepInterval/],
  ['a body limit in MB', { admission: { bodyLimit: '8MB' } }, /\/admission\/bodyLimit/],
  ['two watchers without leader election', { watcher: { replicas: 2, leaderElection: { enabled: false } } }, /\/watcher\/replicas/],
  ['no concurrency', { watcher: { concurrency: 0 } }, /\/watcher\/concurrency/],
  ['a namespace name Kubernetes refuses', { watcher: { namespaces: ['Team_A'] } }, /\/watcher\/namespaces\/0/],
  ['an excluded namespace Kubernetes refuses', { webhook: { excludedNamespaces: ['kube_system'] } }, /\/webhook\/excludedNamespaces\/0/],
  ['an allowlist entry with a comma (the flag joins them with commas)', { admission: { quickExitImageAllowlist: ['a:1,b:2'] } }, /\/admission\/quickExitImageAllowlist\/0/],
  ['a webhook timeout above the API server maximum', { webhook: { timeoutSeconds: 31 } }, /\/webhook\/timeoutSeconds/],
  ['a Secret name Kubernetes refuses', { webhook: { tls: { secretName: 'Bad_Name' } } }, /\/webhook\/tls\/secretName/],
  ['a digest that is a tag', { image: { digest: 'latest' } }, /\/image\/digest/],
  ['a repository with a tag in it', { image: { repository: 'ghcr.io/x/y:1.0' } }, /\/image\/repository/],
  ['a probe port out of range', { watcher: { probePort: 70000 } }, /\/watcher\/probePort/],
  ['a scrape interval in words', { serviceMonitor: { interval: 'often' } }, /\/serviceMonitor\/interval/],
  ['an extra arg that is not a flag', { webhook: { extraArgs: ['debug'] } }, /\/webhook\/extraArgs\/0/],
  ['an unknown top-level value (a typo, or another chart\'s habit)', { replicaCount: 3 }, /replicaCount/],
  ['a typo in a nested value', { webhook: { tls: { validty: '90d' } } }, /validty/],
  ['a string for a boolean', { rbac: { create: 'yes' } }, /\/rbac\/create/],
  ['an alert threshold that is not a number of seconds', { prometheusRule: { waitingOnSidecarsSeconds: '10m' } }, /\/prometheusRule\/waitingOnSidecarsSeconds/],
  ['an alert duration in words', { prometheusRule: { for: 'a while' } }, /\/prometheusRule\/for/],
  ['a dashboard namespace Kubernetes refuses', { grafanaDashboard: { namespace: 'Monitoring' } }, /\/grafanaDashboard\/namespace/],
  ['failurePolicy Fail with one webhook replica', { webhook: { failurePolicy: 'Fail', replicas: 1 } }, /\/webhook\/replicas': minimum: got 1, want 2/],
  ['failurePolicy Fail without the PodDisruptionBudget', { webhook: { failurePolicy: 'Fail', podDisruptionBudget: { enabled: false, maxUnavailable: 1 } } }, /\/webhook\/podDisruptionBudget\/enabled/],
  ['cert-manager without an issuer to ask', { webhook: { tls: { certManager: { enabled: true } } } }, /\/webhook\/tls\/certManager\/issuerRef\/name/],
  ['a cert-manager issuer of another kind', { webhook: { tls: { certManager: { enabled: true, issuerRef: { name: 'ca', kind: 'Vault' } } } } }, /\/webhook\/tls\/certManager\/issuerRef\/kind/],
  ['a cert-manager duration in days (cert-manager reads Go durations)', { webhook: { tls: { certManager: { enabled: true, issuerRef: { name: 'ca' }, duration: '90d' } } } }, /\/webhook\/tls\/certManager\/duration/],
  ['a budget that blocks every drain', { webhook: { podDisruptionBudget: { enabled: true, maxUnavailable: 0 } } }, /\/webhook\/podDisruptionBudget\/maxUnavailable/],
  ['the minAvailable of earlier versions', { webhook: { podDisruptionBudget: { enabled: true, maxUnavailable: 1, minAvailable: 1 } } }, /minAvailable/],
  ['a preset the chart does not have', { injectedSidecars: { presets: { kuma: { enabled: true } } } }, /\/injectedSidecars\/presets': additional properties 'kuma'/],
  ['a preset switched on with a typo', { injectedSidecars: { presets: { istio: { enable: true } } } }, /\/injectedSidecars\/presets\/istio/],
  ['an entry without its container', { injectedSidecars: { entries: [{ name: 'otel' }] } }, /\/injectedSidecars\/entries\/0': missing property 'container'/],
  ['an entry name that is no DNS label', { injectedSidecars: { entries: [{ name: 'Vault_Agent', container: 'vault-agent' }] } }, /\/injectedSidecars\/entries\/0\/name/],
  ['a stop request off the pod\'s loopback', { injectedSidecars: { entries: [{ name: 'mesh', container: 'proxy', stop: 'POST http://10.0.0.7:15020/quitquitquit' }] } }, /\/injectedSidecars\/entries\/0\/stop/],
  ['a grace period over a day', { injectedSidecars: { entries: [{ name: 'mesh', container: 'proxy', gracePeriodSeconds: 86_401 }] } }, /\/injectedSidecars\/entries\/0\/gracePeriodSeconds/],
  ['an owner without its kind', { injectedSidecars: { entries: [{ name: 'mesh', container: 'proxy', owners: [{ apiVersion: 'batch/v1' }] }] } }, /\/injectedSidecars\/entries\/0\/owners\/0': missing property 'kind'/],
  ['In without values', { injectedSidecars: { presets: { istio: { enabled: true, namespaceSelector: { matchExpressions: [{ key: 'istio-injection', operator: 'In' }] } } } } }, /\/injectedSidecars\/presets\/istio\/namespaceSelector\/matchExpressions\/0': missing property 'values'/],
  ['Exists with values', { injectedSidecars: { presets: { istio: { enabled: true, namespaceSelector: { matchExpressions: [{ key: 'istio-injection', operator: 'Exists', values: ['enabled'] }] } } } } }, /\/injectedSidecars\/presets\/istio\/namespaceSelector\/matchExpressions\/0\/values/],
  ['a label key with a space', { injectedSidecars: { presets: { dapr: { enabled: true, namespaceSelector: { matchLabels: { 'dapr enabled': 'true' } } } } } }, /\/injectedSidecars\/presets\/dapr\/namespaceSelector\/matchLabels': additional properties 'dapr enabled'/],
  ['a label key whose prefix is over 253 characters', { injectedSidecars: { presets: { dapr: { enabled: true, namespaceSelector: { matchLabels: { [`${'p'.repeat(254)}/a`]: 'true' } } } } } }, /\/injectedSidecars\/presets\/dapr\/namespaceSelector\/matchLabels\/p{254}~1a': false schema/],
  ['an expression key whose prefix is over 253 characters', { injectedSidecars: { presets: { dapr: { enabled: true, namespaceSelector: { matchExpressions: [{ key: `${'p'.repeat(254)}/a`, operator: 'Exists' }] } } } } }, /\/injectedSidecars\/presets\/dapr\/namespaceSelector\/matchExpressions\/0\/key': 'allOf' failed/],
  ['a label value that is a boolean', { injectedSidecars: { presets: { dapr: { enabled: true, namespaceSelector: { matchLabels: { 'dapr-enabled': true } } } } } }, /\/injectedSidecars\/presets\/dapr\/namespaceSelector\/matchLabels\/dapr-enabled/],
  ['a check interval without a unit', { injectedSidecars: { checkInterval: '10' } }, /\/injectedSidecars\/checkInterval/],
];

for (const [what, values, path] of bad) {
  t.test(`refused: ${what}`, async (t) => {
    const result = await template(values);
    t.not(result.code, 0, 'helm template fails');
    t.match(result.stderr, /values don't meet the specifications of the schema/);
    t.match(result.stderr, path, 'naming the value');
    t.equal(result.stdout, '', 'nothing rendered');
  });
}

const good: Array<[string, object]> = [
  ['the defaults', {}],
  ['audit mode', { admission: { enforcement: 'warn' } }],
  ['two watchers with leader election', { watcher: { replicas: 2 } }],
  ['a paused watcher', { watcher: { replicas: 0, leaderElection: { enabled: false } } }],
  ['compound durations and a disabled sweeper', { shutdownGrace: '1m30s', watcher: { sweepInterval: '0s' }, webhook: { tls: { checkInterval: '500ms' } } }],
  ['namespaces, allowlist, hosts', { watcher: { namespaces: ['team-a', 'batch-1'] }, admission: { quickExitImageAllowlist: ['registry.example.com/quick-exit:*'] }, webhook: { tls: { extraHosts: ['st.example.com', '10.1.2.3'] } } }],
  ['a digest and a registry with a port', { image: { repository: 'registry.example.com:5000/team/st', digest: `sha256:${'0'.repeat(64)}` } }],
  ['a percentage budget', { webhook: { podDisruptionBudget: { enabled: true, maxUnavailable: '50%' } } }],
  ['failurePolicy Fail with two replicas and the budget', { webhook: { failurePolicy: 'Fail' } }],
  ['one webhook replica with Ignore, budget on (it never blocks a drain)', { webhook: { replicas: 1 } }],
  ['alerts and the dashboard, with their settings', { serviceMonitor: { enabled: true }, prometheusRule: { enabled: true, waitingOnSidecarsSeconds: 300, for: '1m', failedStopsWindow: '6h', retryingFor: '1h', unavailableFor: '10m', failOpenWindow: '30m', certificateExpirySeconds: 604800 }, grafanaDashboard: { enabled: true, namespace: 'monitoring', labels: { grafana_dashboard: '1' } } }],
  ['scheduling settings', { webhook: { nodeSelector: { 'kubernetes.io/os': 'linux' }, tolerations: [{ key: 'dedicated', operator: 'Exists' }], priorityClassName: 'system-cluster-critical' } }],
  [
    'every preset, namespace selectors, and entries with every field',
    {
      injectedSidecars: {
        presets: {
          istio: { enabled: true, namespaceSelector: { matchLabels: { 'istio-injection': 'enabled' } } },
          linkerd: { enabled: true, namespaceSelector: { matchExpressions: [{ key: 'linkerd.io/inject', operator: 'In', values: ['enabled'] }, { key: 'legacy', operator: 'DoesNotExist' }] } },
          vaultAgent: { enabled: true },
          dapr: { enabled: true },
          consul: { enabled: true },
          cloudSqlProxy: { enabled: true },
        },
        entries: [
          { name: 'otel', container: 'otc-container', stop: 'signal', gracePeriodSeconds: 20, ignoreExitCode: false },
          { name: 'envoy', container: 'envoy', stop: 'envoy:15000', namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'batch' } }, owners: [{ apiVersion: 'v1', kind: 'Pod' }, { apiVersion: 'argoproj.io/v1alpha1', kind: 'Workflow' }] },
          { name: 'agent', container: 'agent', stop: 'PUT http://[::1]:8500/v1/agent/leave', ignoreExitCode: true },
        ],
        checkInterval: '1m',
      },
    },
  ],
];

for (const [what, values] of good) {
  t.test(`accepted: ${what}`, async (t) => {
    const result = await template(values);
    t.equal(result.code, 0, result.stderr);
  });
}

t.test('every value in values.yaml is described by the schema, and the schema requires nothing values.yaml lacks', async (t) => {
  const values = parse(readFileSync(join(chartDir, 'values.yaml'), 'utf8')) as Record<string, unknown>;
  const schema = JSON.parse(readFileSync(join(chartDir, 'values.schema.json'), 'utf8')) as Schema;
  const walk = (value: unknown, node: Schema | undefined, path: string) => {
    const resolved = node?.$ref ? schema.definitions?.[node.$ref.replace('#/definitions/', '')] : node;
    if (!resolved) return t.fail(`${path}: not in the schema`);
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return;
    if (!resolved.properties) return; // free-form objects (resources, affinity, securityContext)
    t.equal(resolved.additionalProperties, false, `${path || '(top)'}: unknown keys are refused`);
    for (const key of resolved.required ?? []) t.ok(key in value, `${path}.${key}: required and present in values.yaml`);
    for (const [key, child] of Object.entries(value)) walk(child, resolved.properties[key], path ? `${path}.${key}` : key);
  };
  walk(values, schema, '');
});

t.test("the injected-sidecar policy's fields: the schema lets through only what serve takes, and the forms the docs give", async (t) => {
  const { definitions } = JSON.parse(readFileSync(join(chartDir, 'values.schema.json'), 'utf8')) as { definitions: Record<string, PolicySchema> };
  const entry = definitions.injectedSidecarEntry!.properties!;
  const selector = definitions.labelSelector!.properties!;
  // The schema's patterns are RE2 (Go), written in the syntax RE2 and JavaScript share; a node's own and those of its allOf.
  const patterns = (node: PolicySchema) => [node.pattern!, ...(node.allOf ?? []).map((each) => each.pattern!)];
  const accepts = (node: PolicySchema, value: string) => patterns(node).every((pattern) => new RegExp(pattern, 'u').test(value)) && value.length <= (node.maxLength ?? Infinity);
  const serveTakes = (fields: object) => 'policy' in parseInjectedSidecarPolicy(JSON.stringify({ entries: [{ name: 'sidecar', container: 'proxy', ...fields }] }));
  const cases: Array<{ field: string; node: PolicySchema; fields: (value: string) => object; accepted: string[]; refused: string[] }> = [
    {
      field: 'stop',
      node: entry.stop!,
      fields: (stop) => ({ stop }),
      accepted: ['signal', ...Object.keys(KNOWN_PROXIES).flatMap((proxy) => [proxy, `${proxy}:15021`]), 'POST http://localhost:3500/v1.0/shutdown', 'POST http://localhost:20600/graceful_shutdown', 'GET 127.0.0.1:8080', 'DELETE http://[::1]:65535/a?b=c'],
      refused: ['', 'SIGTERM', 'kuma-dp', 'istio-proxy:0', 'istio-proxy:65536', 'POST http://10.0.0.7:15020/quitquitquit', 'POST http://localhost/quitquitquit', 'POST http://localhost:0/x', 'PATCH http://localhost:8080/', 'POST https://localhost:8080/', 'POST http://localhost:8080/a b', 'post http://localhost:8080/'],
    },
    { field: 'name', node: definitions.dnsLabel!, fields: (name) => ({ name }), accepted: ['istio', 'vault-agent', 'a1'], refused: ['', 'Istio', 'vault_agent', '-mesh', 'mesh-', 'a'.repeat(64)] },
    { field: 'label key', node: definitions.labelKey!, fields: (key) => ({ namespaceSelector: { matchLabels: { [key]: 'x' } } }), accepted: ['istio-injection', 'kubernetes.io/metadata.name', 'linkerd.io/inject', 'A_b.c', `${'p'.repeat(253)}/a`], refused: ['', 'a b', '-a', 'a/', '/a', 'Example.com/a', 'a/b/c', 'a'.repeat(64), `${'p'.repeat(254)}/a`] },
    { field: 'label value', node: definitions.labelValue!, fields: (value) => ({ namespaceSelector: { matchExpressions: [{ key: 'k', operator: 'In', values: [value] }] } }), accepted: ['', 'enabled', 'v1.2_3'], refused: ['a b', '-a', 'a.', 'a'.repeat(64)] },
  ];
  for (const { field, node, fields, accepted, refused } of cases) {
    for (const value of accepted) t.ok(accepts(node, value) && serveTakes(fields(value)), `${field} ${JSON.stringify(value)}: the schema and serve take it`);
    for (const value of refused) t.notOk(accepts(node, value), `${field} ${JSON.stringify(value)}: refused by the schema`);
    for (const value of [...accepted, ...refused]) if (accepts(node, value)) t.ok(serveTakes(fields(value)), `${field} ${JSON.stringify(value)}: what the schema lets through, serve takes`);
  }
  // matchLabels' keys: labelKey's pattern, less those its allOf refuses, which the second pattern (a false schema) says.
  const [keys, tooLong, ...more] = Object.entries(selector.matchLabels!.patternProperties!);
  t.same([keys?.[0], more], [definitions.labelKey!.pattern, []], 'matchLabels takes the keys labelKey takes...');
  t.equal(tooLong?.[1], false, '...and refuses those its second pattern matches');
  for (const key of ['istio-injection', `${'p'.repeat(253)}/a`, `${'p'.repeat(254)}/a`, `${'p'.repeat(300)}/a`, 'a/b']) {
    t.equal(!new RegExp(tooLong![0], 'u').test(key), patterns(definitions.labelKey!).slice(1).every((pattern) => new RegExp(pattern, 'u').test(key)), `${key.slice(0, 20)}: the same prefix limit`);
  }
  t.equal(entry.gracePeriodSeconds!.maximum, MAX_GRACE_PERIOD_SECONDS, 'the longest grace period serve takes');
  t.ok(serveTakes({ gracePeriodSeconds: MAX_GRACE_PERIOD_SECONDS }) && !serveTakes({ gracePeriodSeconds: MAX_GRACE_PERIOD_SECONDS + 1 }));
});

interface PolicySchema {
  pattern?: string;
  allOf?: PolicySchema[];
  maxLength?: number;
  maximum?: number;
  properties?: Record<string, PolicySchema>;
  patternProperties?: Record<string, PolicySchema | false>;
}

interface Schema {
  $ref?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: unknown;
  required?: string[];
  definitions?: Record<string, Schema>;
}
