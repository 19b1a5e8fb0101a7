// The watcher's metrics as a scrape reads them: every series of the stop counter from the start
// (an alert on increase() sees the first refusal of a process), and sidecar_terminator_leader
// following the watcher that runs.
import t from 'tap';
import { Registry } from 'prom-client';
import { ACTION_RESULTS, MECHANISMS, WatcherMetrics } from '../../src/watcher/watcher-metrics.ts';
import { registerCertificateExpiry } from '../../src/webhook/admission-metrics.ts';

async function samples(registry: Registry, name: string): Promise<Array<{ labels: Partial<Record<string, string | number>>; value: number }>> {
  const metric = registry.getSingleMetric(name);
  if (!metric) throw new Error(`${name} is not registered`);
  return (await metric.get()).values;
}

t.test('every mechanism and result of sidecar_terminator_terminations_total is a series at 0 before any stop', async (t) => {
  const registry = new Registry();
  new WatcherMetrics(registry);
  const values = await samples(registry, 'sidecar_terminator_terminations_total');
  t.equal(values.length, MECHANISMS.length * ACTION_RESULTS.length, `${MECHANISMS.length} mechanisms by ${ACTION_RESULTS.length} results`);
  for (const mechanism of MECHANISMS) {
    for (const result of ACTION_RESULTS) t.ok(values.some((v) => v.labels.mechanism === mechanism && v.labels.result === result && v.value === 0), `${mechanism}/${result}`);
  }
  t.match(await registry.metrics(), /sidecar_terminator_terminations_total\{mechanism="none",result="refused"\} 0/, 'in the text a scrape reads');
});

t.test('sidecar_terminator_leader: 1 while a watcher runs in this process, 0 before and after', async (t) => {
  const registry = new Registry();
  const metrics = new WatcherMetrics(registry);
  const leader = async () => (await samples(registry, 'sidecar_terminator_leader'))[0]?.value;
  t.equal(await leader(), 0, 'a standby, or a leader whose watcher has not started');
  metrics.observe({ queue: { depth: 0, retrying: 0 }, pendingSince: () => [] });
  t.equal(await leader(), 1, 'its watcher runs');
  metrics.observe(undefined);
  t.equal(await leader(), 0, 'stopped: leadership lost, or shutting down');
});

t.test('sidecar_terminator_certificate_expiration_timestamp_seconds follows the certificate served', async (t) => {
  const registry = new Registry();
  let notAfter = new Date('2027-01-01T00:00:00Z');
  registerCertificateExpiry(registry, () => notAfter);
  t.equal((await samples(registry, 'sidecar_terminator_certificate_expiration_timestamp_seconds'))[0]?.value, Date.parse('2027-01-01T00:00:00Z') / 1000);
  notAfter = new Date('2028-01-01T00:00:00Z');
  t.equal((await samples(registry, 'sidecar_terminator_certificate_expiration_timestamp_seconds'))[0]?.value, Date.parse('2028-01-01T00:00:00Z') / 1000, 'a renewed certificate moves it on');
});
