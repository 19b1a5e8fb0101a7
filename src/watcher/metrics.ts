// The watcher's Prometheus metrics, created once per process: a watcher is created anew each
// time its replica becomes leader.
import { Counter, Histogram, type Registry } from 'prom-client';

export interface WatcherMetrics {
  terminations: Counter<'mechanism' | 'result'>;
  latency: Histogram<'mechanism'>;
}

export function createWatcherMetrics(registry: Registry): WatcherMetrics {
  return {
    terminations: new Counter({
      name: 'sidecar_terminator_terminations_total',
      help: 'Sidecar stop actions by mechanism (crr, signal, image, phase, none) and result (ok, error, refused, ignored: a signalled sidecar still running after its grace period).',
      labelNames: ['mechanism', 'result'],
      registers: [registry],
    }),
    latency: new Histogram({
      name: 'sidecar_terminator_termination_latency_seconds',
      help: "Time from the last main container's finish to the stop action.",
      labelNames: ['mechanism'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
      registers: [registry],
    }),
  };
}
