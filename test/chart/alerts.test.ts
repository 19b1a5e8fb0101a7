// The chart's alerts as Prometheus evaluates them: `promtool test rules` (Debian's promtool) on the
// rules the chart renders, against series written the way the add-on and the API server export
// them. Each alert fires when it should, and stays silent in a healthy cluster, through a leader
// handover, for another webhook failing open, and for a certificate the webhook renews in time.
// test/e2e/real-node-helm.test.ts has a real Prometheus scrape the add-on and fire one.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { stringify } from 'yaml';
import { runCommand } from '../support/command.ts';
import { prometheusBinDir } from '../support/prometheus.ts';
import { alertGroups, render } from './helm.ts';

const NS = 'batch-system';
const manifests = await render({ prometheusRule: { enabled: true }, serviceMonitor: { enabled: true } }, { namespace: NS });
const groups = alertGroups(manifests);
const rules = groups.flatMap((group) => group.rules);
const ALERTS = rules.map((rule) => rule.alert);

const dir = mkdtempSync(join(tmpdir(), 'st-alerts-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(join(dir, 'rules.yaml'), stringify({ groups }));

// The series, labelled as a scrape through the chart's ServiceMonitors labels them.
const watcherTarget = `namespace="${NS}",job="sidecar-terminator-watcher-metrics"`;
const webhookTarget = `namespace="${NS}",job="sidecar-terminator"`;
const pod = (name: string) => `${watcherTarget},pod="${name}"`;
const series = (name: string, values: string) => ({ series: name, values });

/** What a healthy release exports for `minutes`: both components up, one leader, stops that work. */
function healthy(minutes: number, except: string[] = []): Array<{ series: string; values: string }> {
  const all = {
    watcherUp: [series(`up{${pod('watcher-a')}}`, `1x${minutes}`), series(`up{${pod('watcher-b')}}`, `1x${minutes}`)],
    webhookUp: [series(`up{${webhookTarget},pod="webhook-a"}`, `1x${minutes}`)],
    leader: [series(`sidecar_terminator_leader{${pod('watcher-a')}}`, `1x${minutes}`), series(`sidecar_terminator_leader{${pod('watcher-b')}}`, `0x${minutes}`)],
    stops: [
      series(`sidecar_terminator_terminations_total{${pod('watcher-a')},mechanism="signal",result="ok"}`, `0+1x${minutes}`),
      series(`sidecar_terminator_terminations_total{${pod('watcher-a')},mechanism="signal",result="refused"}`, `0x${minutes}`),
    ],
    pending: [series(`sidecar_terminator_oldest_pending_pod_seconds{${pod('watcher-a')}}`, `0x${minutes}`), series(`sidecar_terminator_queue_retrying{${pod('watcher-a')}}`, `0x${minutes}`)],
    // 30 days after the start of the test: renewed long before the alert's 14 days.
    certificate: [series(`sidecar_terminator_certificate_expiration_timestamp_seconds{${webhookTarget},pod="webhook-a"}`, `${30 * 86400}x${minutes}`)],
    failOpen: [series('apiserver_admission_webhook_fail_open_count{job="apiserver",name="mutate.sidecar-terminator.io",type="admit"}', `0x${minutes}`)],
  };
  return Object.entries(all).flatMap(([key, list]) => (except.includes(key) ? [] : list));
}

/** The rule's annotations with the value Prometheus fills in. */
function annotations(alert: string, value: string): Record<string, string> {
  const rule = rules.find((r) => r.alert === alert)!;
  return Object.fromEntries(Object.entries(rule.annotations).map(([key, text]) => [key, text.replaceAll(/\{\{ \$value( \| humanizeDuration)? \}\}/g, value)]));
}

const silent = (evalTime: string, alerts = ALERTS) => alerts.map((alertname) => ({ eval_time: evalTime, alertname, exp_alerts: [] }));
const firing = (evalTime: string, alertname: string, labels: Record<string, string>, value: string) => ({
  eval_time: evalTime,
  alertname,
  exp_alerts: [{ exp_labels: { severity: 'warning', namespace: NS, ...labels }, exp_annotations: annotations(alertname, value) }],
});

const tests = [
  {
    name: 'a healthy release: no alert, although another webhook fails open and the certificate expires within 30 days',
    interval: '1m',
    input_series: [
      ...healthy(60),
      series('apiserver_admission_webhook_fail_open_count{job="apiserver",name="policy.example.com",type="validating"}', '0+1x60'),
    ],
    alert_rule_test: silent('60m'),
  },
  {
    name: 'a leader handover of a minute: no SidecarTerminatorNoLeader',
    interval: '1m',
    input_series: [
      ...healthy(30, ['leader']),
      series(`sidecar_terminator_leader{${pod('watcher-a')}}`, '1x10 0x20'),
      series(`sidecar_terminator_leader{${pod('watcher-b')}}`, '0x11 1x19'),
    ],
    alert_rule_test: silent('30m', ['SidecarTerminatorNoLeader']),
  },
  {
    name: 'replicas up but none runs the watcher (its start keeps failing): SidecarTerminatorNoLeader after 5m',
    interval: '1m',
    input_series: [...healthy(20, ['leader']), series(`sidecar_terminator_leader{${pod('watcher-a')}}`, '0x20'), series(`sidecar_terminator_leader{${pod('watcher-b')}}`, '0x20')],
    alert_rule_test: [...silent('4m', ['SidecarTerminatorNoLeader']), firing('6m', 'SidecarTerminatorNoLeader', {}, '0'), ...silent('6m', ['SidecarTerminatorPodsWaitingOnSidecars', 'SidecarTerminatorWatcherDown'])],
  },
  {
    name: 'the first refused stop of a process: its series was at 0 before, so increase() sees it',
    interval: '1m',
    input_series: [
      ...healthy(60, ['stops']),
      series(`sidecar_terminator_terminations_total{${pod('watcher-a')},mechanism="none",result="refused"}`, '0x29 1x30'),
    ],
    alert_rule_test: [...silent('20m', ['SidecarTerminatorCannotStopSidecars']), firing('60m', 'SidecarTerminatorCannotStopSidecars', {}, '1')],
  },
  {
    name: 'a series born at 1 (a counter not set to 0 at start) is what increase() would miss',
    interval: '1m',
    input_series: [...healthy(60, ['stops']), series(`sidecar_terminator_terminations_total{${pod('watcher-a')},mechanism="none",result="refused"}`, '_x29 1x30')],
    alert_rule_test: silent('60m', ['SidecarTerminatorCannotStopSidecars']),
  },
  {
    name: 'a pod waiting on its sidecars more than 10 minutes, for 5 minutes: SidecarTerminatorPodsWaitingOnSidecars',
    interval: '1m',
    input_series: [...healthy(20, ['pending']), series(`sidecar_terminator_oldest_pending_pod_seconds{${pod('watcher-a')}}`, '0+60x20'), series(`sidecar_terminator_queue_retrying{${pod('watcher-a')}}`, '0x20')],
    alert_rule_test: [...silent('12m', ['SidecarTerminatorPodsWaitingOnSidecars']), firing('17m', 'SidecarTerminatorPodsWaitingOnSidecars', {}, '17m 0s')],
  },
  {
    name: 'no watcher target up, or none scraped at all: SidecarTerminatorWatcherDown after 5m; the webhook the same',
    interval: '1m',
    input_series: [...healthy(20, ['watcherUp', 'webhookUp', 'leader', 'stops', 'pending']), series(`up{${webhookTarget},pod="webhook-a"}`, '0x20')],
    alert_rule_test: [
      ...silent('4m', ['SidecarTerminatorWatcherDown', 'SidecarTerminatorWebhookDown']),
      firing('6m', 'SidecarTerminatorWatcherDown', {}, '1'),
      firing('6m', 'SidecarTerminatorWebhookDown', {}, '1'),
    ],
  },
  {
    name: 'the API server lets pods through without the webhook: SidecarTerminatorWebhookFailingOpen',
    interval: '1m',
    input_series: [...healthy(20, ['failOpen']), series('apiserver_admission_webhook_fail_open_count{job="apiserver",name="mutate.sidecar-terminator.io",type="admit"}', '0x10 3x10')],
    alert_rule_test: [...silent('9m', ['SidecarTerminatorWebhookFailingOpen']), firing('15m', 'SidecarTerminatorWebhookFailingOpen', {}, '3')],
  },
  {
    name: 'a certificate a week from expiry, not renewed: SidecarTerminatorCertificateExpiresSoon',
    interval: '1m',
    input_series: [...healthy(10, ['certificate']), series(`sidecar_terminator_certificate_expiration_timestamp_seconds{${webhookTarget},pod="webhook-a"}`, `${7 * 86400}x10`)],
    alert_rule_test: [firing('1m', 'SidecarTerminatorCertificateExpiresSoon', {}, '6d 23h 59m 0s')],
  },
];

t.test('every alert the chart renders is covered here', async (t) => {
  t.same(ALERTS.sort(), [
    'SidecarTerminatorCannotStopSidecars',
    'SidecarTerminatorCertificateExpiresSoon',
    'SidecarTerminatorNoLeader',
    'SidecarTerminatorPodsWaitingOnSidecars',
    'SidecarTerminatorReconcilesFailing',
    'SidecarTerminatorWatcherDown',
    'SidecarTerminatorWebhookDown',
    'SidecarTerminatorWebhookFailingOpen',
  ]);
  const fired = new Set(tests.flatMap((test) => test.alert_rule_test.filter((rule) => rule.exp_alerts.length > 0).map((rule) => rule.alertname)));
  t.same([...ALERTS].filter((alert) => !fired.has(alert) && alert !== 'SidecarTerminatorReconcilesFailing'), [], 'each alert but the unchanged ReconcilesFailing is seen firing');
});

t.test('promtool test rules: each alert fires when it should and stays silent when it should not', async (t) => {
  const bin = await prometheusBinDir();
  writeFileSync(join(dir, 'tests.yaml'), stringify({ rule_files: ['rules.yaml'], evaluation_interval: '1m', tests }));
  const check = await runCommand(join(bin, 'promtool'), ['check', 'rules', join(dir, 'rules.yaml')]);
  t.equal(check.code, 0, `promtool check rules: ${check.stdout}${check.stderr}`);
  const started = performance.now();
  const result = await runCommand(join(bin, 'promtool'), ['test', 'rules', join(dir, 'tests.yaml')]);
  t.equal(result.code, 0, `promtool test rules:\n${result.stdout}${result.stderr}`);
  t.comment(`promtool test rules: ${result.stdout.trim().split('\n').pop()} (${tests.length} groups, ${Math.round(performance.now() - started)} ms)`);
});
