// values.schema.json: helm refuses bad values before rendering anything, naming the value; good
// values of every kind pass.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
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
  ['a budget that blocks every drain', { webhook: { podDisruptionBudget: { enabled: true, maxUnavailable: 0 } } }, /\/webhook\/podDisruptionBudget\/maxUnavailable/],
  ['the minAvailable of earlier versions', { webhook: { podDisruptionBudget: { enabled: true, maxUnavailable: 1, minAvailable: 1 } } }, /minAvailable/],
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

interface Schema {
  $ref?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: unknown;
  required?: string[];
  definitions?: Record<string, Schema>;
}
