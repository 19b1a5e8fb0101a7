// Prometheus metrics of the admission endpoints, plus prom-client's default process metrics.
import { Counter, Gauge, Histogram, collectDefaultMetrics, type Registry } from 'prom-client';
import { MIGRATION_RESULTS, type MigrationResult } from './admission.ts';
import { ADMISSION_RESULTS, type AdmissionResult } from './judgement.ts';
import { ADMISSION_ENDPOINTS, type AdmissionEndpoint } from './routes.ts';

export interface AdmissionMetrics {
  observe(endpoint: AdmissionEndpoint, result: AdmissionResult, seconds: number): void;
  migration(result: MigrationResult): void;
  /** A pod admitted without the policy entries its namespace's labels decide: they could not be read. */
  namespaceLabelsUnread(): void;
}

/** Registers the admission metrics in `registry`, and the default process metrics unless it has them already. */
export function createAdmissionMetrics(registry: Registry): AdmissionMetrics {
  if (!registry.getSingleMetric('process_cpu_user_seconds_total')) collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: 'sidecar_terminator_admission_requests_total',
    help: 'Admission requests answered, by endpoint and result (allowed, denied, patched, or error for malformed requests).',
    labelNames: ['endpoint', 'result'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'sidecar_terminator_admission_duration_seconds',
    help: 'Time from receiving an admission request to answering it.',
    labelNames: ['endpoint'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const migrations = new Counter({
    name: 'sidecar_terminator_native_sidecar_pods_total',
    help: 'Pods with sidecars the native-sidecars webhook answered (dry runs included): migrated (their sidecars became native sidecars), kept (left to the watcher, the pod annotated with why), or restored (called again after a later webhook dropped restartPolicy: Always from its native sidecars, which it put back).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const namespaceMisses = new Counter({
    name: 'sidecar_terminator_injected_sidecars_namespace_misses_total',
    help: 'Pods admitted without the entries of the injected-sidecar policy that select namespaces and would have applied to them, because the labels of their namespace were neither seen yet nor readable from the API server in time.',
    registers: [registry],
  });
  // Every series exists from the start, so rate() and alerts see a zero rather than nothing.
  for (const endpoint of ADMISSION_ENDPOINTS) {
    for (const result of ADMISSION_RESULTS) requests.inc({ endpoint, result }, 0);
  }
  for (const result of MIGRATION_RESULTS) migrations.inc({ result }, 0);
  return {
    observe(endpoint, result, seconds) {
      requests.inc({ endpoint, result });
      duration.observe({ endpoint }, seconds);
    },
    migration(result) {
      migrations.inc({ result });
    },
    namespaceLabelsUnread() {
      namespaceMisses.inc();
    },
  };
}

/**
 * The serving certificate's expiry, read from `notAfter` at each scrape: a renewal that keeps
 * failing shows as a time that comes closer instead of moving on (cert-manager exports the same
 * as certmanager_certificate_expiration_timestamp_seconds).
 */
export function registerCertificateExpiry(registry: Registry, notAfter: () => Date): void {
  new Gauge({
    name: 'sidecar_terminator_certificate_expiration_timestamp_seconds',
    help: 'When the serving certificate this replica serves expires, in seconds since the Unix epoch; it is renewed --cert-renew-before that time.',
    registers: [registry],
    collect() {
      this.set(notAfter().getTime() / 1000);
    },
  });
}
