// The chart's monitoring: the PrometheusRule (off by default; its thresholds from values) and the
// Grafana dashboard (the JSON in dashboards/, optionally as a ConfigMap for Grafana's sidecar).
// Every metric their queries name is one src/ registers.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { alertGroups, chartDir, find, get, registeredMetrics, render, template, type Manifest } from './helm.ts';

interface Panel {
  type: string;
  title: string;
  datasource?: { uid: string };
  targets?: Array<{ expr: string }>;
}

const dashboardText = readFileSync(join(chartDir, 'dashboards/sidecar-terminator.json'), 'utf8');
const dashboard = JSON.parse(dashboardText) as { uid: string; title: string; panels: Panel[]; templating: { list: Array<{ name: string }> } };
const registered = registeredMetrics();

/** The metric names a PromQL expression reads: ours, with a histogram's series suffixes taken off. */
function metricsIn(expr: string): string[] {
  return [...expr.matchAll(/\b(sidecar_terminator_\w+)/g)].map(([, name = '']) => (registered.has(name) ? name : name.replace(/_(bucket|sum|count)$/, '')));
}

const rulesOf = (manifests: Manifest[]) => alertGroups(manifests).flatMap((group) => group.rules);

t.test('off by default: no PrometheusRule, no dashboard ConfigMap', async (t) => {
  const manifests = await render();
  t.notOk(find(manifests, 'PrometheusRule'));
  t.notOk(find(manifests, 'ConfigMap'));
});

t.test('the PrometheusRule renders only with something scraping the metrics it reads', async (t) => {
  for (const values of [{ prometheusRule: { enabled: true } }, { prometheusRule: { enabled: true }, serviceMonitor: { enabled: true }, watcher: { probePort: 0 } }]) {
    const result = await template(values);
    t.not(result.code, 0, `refused: ${JSON.stringify(values)}`);
    t.match(result.stderr, /prometheusRule\.enabled: the alerts read the add-on's metrics, which only a scrape brings, and would stay silent without one; set serviceMonitor\.enabled=true/);
  }
  t.ok(find(await render({ prometheusRule: { enabled: true }, serviceMonitor: { enabled: true } }), 'PrometheusRule'), 'rendered with the ServiceMonitors');
});

t.test('the PrometheusRule: an alert for pods waiting too long on sidecars, with the thresholds of values', async (t) => {
  const manifests = await render({ serviceMonitor: { enabled: true }, prometheusRule: { enabled: true, labels: { release: 'prometheus' }, waitingOnSidecarsSeconds: 900, for: '10m', failedStopsWindow: '30m', retryingFor: '20m', severity: 'critical' } }, { namespace: 'batch-system' });
  const rule = get(manifests, 'PrometheusRule');
  t.equal(rule.metadata.namespace, 'batch-system');
  t.equal(rule.metadata.labels?.release, 'prometheus', 'the label Prometheus selects rules by');
  const rules = rulesOf(manifests);
  t.same(rules.map((r) => r.alert), [
    'SidecarTerminatorPodsWaitingOnSidecars',
    'SidecarTerminatorCannotStopSidecars',
    'SidecarTerminatorReconcilesFailing',
    'SidecarTerminatorNoLeader',
    'SidecarTerminatorWatcherDown',
    'SidecarTerminatorWebhookDown',
    'SidecarTerminatorWebhookFailingOpen',
    'SidecarTerminatorCertificateExpiresSoon',
  ], 'test/chart/alerts.test.ts runs them in promtool');
  const [waiting, cannot, failing] = rules;
  t.equal(waiting?.expr, 'max(sidecar_terminator_oldest_pending_pod_seconds{namespace="batch-system"}) > 900');
  t.equal(waiting?.for, '10m');
  t.match(cannot?.expr, /\[30m\]\)\) > 0$/);
  t.equal(failing?.for, '20m');
  for (const r of rules) {
    t.equal(r.labels.severity, 'critical', `${r.alert}: severity`);
    t.equal(r.labels.namespace, 'batch-system', `${r.alert}: the release's namespace, for routing`);
    // The API server's count of fail-open calls has no namespace: it names the webhooks instead.
    if (r.alert !== 'SidecarTerminatorWebhookFailingOpen') t.match(r.expr, 'namespace="batch-system"', `${r.alert}: this release's metrics only`);
    t.ok(r.annotations.summary && r.annotations.description, `${r.alert}: says what and what to do`);
    t.notMatch(r.annotations.description, /\{\{`/, `${r.alert}: alert templates reach Prometheus unescaped`);
  }
  t.match(waiting?.annotations.description, '{{ $value | humanizeDuration }}');
});

t.test('every metric the alerts and the dashboard query is one src/ registers', async (t) => {
  const rules = rulesOf(await render({ prometheusRule: { enabled: true }, serviceMonitor: { enabled: true } }));
  // Not ours: the scrape's own up, and the API server's count of webhook calls it let through.
  const others = /^absent\(up\{|apiserver_admission_webhook_fail_open_count/;
  const queried = [...rules.map((r) => r.expr).filter((expr) => !others.test(expr)), ...dashboard.panels.flatMap((panel) => panel.targets?.map((target) => target.expr) ?? [])];
  t.ok(queried.length > 10, `${queried.length} queries`);
  for (const expr of queried) {
    const metrics = metricsIn(expr);
    t.ok(metrics.length > 0, `queries a metric of ours: ${expr}`);
    for (const metric of metrics) t.ok(registered.has(metric), `${metric} is registered (${expr})`);
  }
  const dashboardMetrics = new Set(queried.flatMap(metricsIn));
  for (const metric of ['sidecar_terminator_pending_pods', 'sidecar_terminator_oldest_pending_pod_seconds', 'sidecar_terminator_stop_duration_seconds', 'sidecar_terminator_terminations_total', 'sidecar_terminator_queue_depth', 'sidecar_terminator_reconcile_duration_seconds']) {
    t.ok(dashboardMetrics.has(metric), `${metric} is on the dashboard or in an alert`);
  }
});

t.test('the dashboard: one data source variable, every panel on it; shipped as a ConfigMap Grafana picks up', async (t) => {
  t.equal(dashboard.uid, 'sidecar-terminator');
  t.same(dashboard.templating.list.map((v) => v.name), ['datasource', 'namespace']);
  for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) {
    t.equal(panel.datasource?.uid, '${datasource}', `${panel.title}: the chosen data source`);
    t.ok(panel.targets?.every((target) => target.expr.includes('namespace="$namespace"')), `${panel.title}: the chosen namespace`);
  }
  const manifests = await render({ grafanaDashboard: { enabled: true, namespace: 'monitoring', annotations: { grafana_folder: 'Batch' } } });
  const configMap = get(manifests, 'ConfigMap', 'sidecar-terminator-dashboard') as Manifest & { data: Record<string, string> };
  t.equal(configMap.metadata.namespace, 'monitoring', "where Grafana's sidecar looks");
  t.equal(configMap.metadata.labels?.grafana_dashboard, '1', "the label Grafana's sidecar selects by default");
  t.equal(configMap.metadata.annotations?.grafana_folder, 'Batch');
  t.equal(configMap.data['sidecar-terminator.json'], dashboardText.trimEnd(), 'the JSON of dashboards/, as it is');
});
