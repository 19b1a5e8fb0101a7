// The watcher's Prometheus metrics, created once per process in the registry serve passes in: a
// watcher is created anew each time its replica becomes leader, and the gauges read the one
// running now (none on a standby: they are 0 there, and sidecar_terminator_leader says which
// replica runs it). Every series of the stop counter exists from the start, at 0, so that
// increase() sees the first refused or failed stop of a process.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { countedAs, type StopMechanism, type StopRecord, type WarningCode } from '../policy/index.ts';

/** What the gauges read from the running watcher. */
export interface WatcherState {
  /** Pods waiting to be reconciled now, and pods waiting for a retry after failing. */
  queue: { depth: number; retrying: number };
  /** Epoch milliseconds at which each pod still waiting for its sidecars to stop had its main containers finish. */
  pendingSince(): number[];
}

export const ACTION_RESULTS = ['ok', 'error', 'refused', 'failed', 'escalated'] as const;
export type ActionResult = (typeof ACTION_RESULTS)[number];
export const MECHANISMS = ['crr', 'signal', 'image', 'phase', 'none'] as const satisfies readonly StopMechanism[];

export class WatcherMetrics {
  /** Stop actions: `sidecar_terminator_terminations_total`, the name and labels of earlier versions. */
  readonly actions: Counter<'mechanism' | 'result'>;
  /** From the main containers' end to a stop request. */
  readonly requestLatency: Histogram<'mechanism'>;
  /** From the main containers' end to every sidecar seen stopped. */
  readonly stopDuration: Histogram;
  /** The work queue's observer (QueueObserver, queue.ts). */
  readonly queue: ReturnType<typeof queueMetrics>;
  private readonly podsEnded: Counter<'phase'>;
  private readonly sidecarsEnded: Counter<'stopped_by' | 'exit_code'>;
  private readonly sidecarEndSeconds: Histogram<'stopped_by'>;
  private state: WatcherState | undefined;

  constructor(registry: Registry) {
    const registers = [registry];
    this.actions = new Counter({
      name: 'sidecar_terminator_terminations_total',
      help: 'Sidecar stop actions by mechanism (crr, signal, image, phase, none) and result (ok: requested; error: the request failed, it is retried; refused: cannot be stopped here; failed: the request ran and did not stop it; escalated: a sidecar still running after its grace period, or whose PID 1 drops SIGTERM, ended from outside).',
      labelNames: ['mechanism', 'result'],
      registers,
    });
    for (const mechanism of MECHANISMS) for (const result of ACTION_RESULTS) this.actions.inc({ mechanism, result }, 0);
    this.requestLatency = new Histogram({
      name: 'sidecar_terminator_termination_latency_seconds',
      help: "Time from the last main container's finish to the request that stops a sidecar.",
      labelNames: ['mechanism'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
      registers,
    });
    this.stopDuration = new Histogram({
      name: 'sidecar_terminator_stop_duration_seconds',
      help: "Time from the last main container's finish until every sidecar of the pod is seen stopped, or the pod, told to stop them, leaves the watch (it ended or was deleted): how long a Job waits on its sidecars.",
      buckets: [0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800],
      registers,
    });
    this.podsEnded = new Counter({
      name: 'sidecar_terminator_pods_ended_total',
      help: "Pods whose sidecars the watcher told to stop, once they ended, by phase (Succeeded: every main container exited 0): the stop record written in their SidecarTerminated condition.",
      labelNames: ['phase'],
      registers,
    });
    this.sidecarsEnded = new Counter({
      name: 'sidecar_terminator_sidecars_ended_total',
      help: "The sidecars of those pods, by how they were stopped (the ways in order, joined by '+': crr, http, signal, image, phase; none: it exited by itself) and exit code.",
      labelNames: ['stopped_by', 'exit_code'],
      registers,
    });
    this.sidecarEndSeconds = new Histogram({
      name: 'sidecar_terminator_sidecar_end_seconds',
      help: "Time from the last main container's exit to the sidecar's, by how it was stopped, as the kubelet reports them (whole seconds).",
      labelNames: ['stopped_by'],
      buckets: [0, 1, 2, 5, 10, 30, 60, 120, 300, 600],
      registers,
    });
    this.queue = queueMetrics(registers);
    const read = <T>(get: (state: WatcherState) => T, fallback: T) => (this.state ? get(this.state) : fallback);
    new Gauge({
      name: 'sidecar_terminator_leader',
      help: 'Whether this replica runs the watcher now: 1 once it leads (holds the Lease, or runs without leader election) and its watcher has started; 0 on a standby, and on a leader whose watcher failed to start.',
      registers,
      collect() {
        this.set(read(() => 1, 0));
      },
    });
    new Gauge({
      name: 'sidecar_terminator_queue_depth',
      help: 'Pods waiting to be reconciled now.',
      registers,
      collect() {
        this.set(read((state) => state.queue.depth, 0));
      },
    });
    new Gauge({
      name: 'sidecar_terminator_queue_retrying',
      help: 'Pods whose reconcile failed, waiting for their next attempt.',
      registers,
      collect() {
        this.set(read((state) => state.queue.retrying, 0));
      },
    });
    new Gauge({
      name: 'sidecar_terminator_pending_pods',
      help: 'Managed pods whose main containers are done and whose sidecars have not all stopped yet.',
      registers,
      collect() {
        this.set(read((state) => state.pendingSince().length, 0));
      },
    });
    new Gauge({
      name: 'sidecar_terminator_oldest_pending_pod_seconds',
      help: "Of those pods, the longest wait: seconds since its last main container finished (0 when there is none).",
      registers,
      collect() {
        const oldest = Math.min(...read((state) => state.pendingSince(), []));
        this.set(Number.isFinite(oldest) ? Math.max(0, (Date.now() - oldest) / 1000) : 0);
      },
    });
  }

  /** The running watcher the gauges read; undefined when none runs (a standby replica). */
  observe(state: WatcherState | undefined): void {
    this.state = state;
  }

  /** The stop record of a pod that ended. */
  recorded(record: StopRecord): void {
    this.podsEnded.inc({ phase: record.phase ?? 'unknown' });
    for (const sidecar of record.sidecars) {
      const stoppedBy = sidecar.stoppedBy.join('+') || 'none';
      this.sidecarsEnded.inc({ stopped_by: stoppedBy, exit_code: sidecar.exitCode === undefined ? 'unknown' : String(sidecar.exitCode) });
      if (sidecar.secondsAfterMains !== undefined) this.sidecarEndSeconds.observe({ stopped_by: stoppedBy }, Math.max(0, sidecar.secondsAfterMains));
    }
  }

  /** A warning recorded on a pod, counted as its code says (src/policy/codes.ts); some are not counted. */
  warned(code: WarningCode): void {
    const counted = countedAs(code);
    if (counted) this.actions.inc({ ...counted });
  }
}

/** What the work queue reports: how long each reconcile took, by result, and how many were retried. */
function queueMetrics(registers: Registry[]) {
  const duration = new Histogram({
    name: 'sidecar_terminator_reconcile_duration_seconds',
    help: 'Time to reconcile one pod, by result (done; requeue: look again later; error: retried with backoff).',
    labelNames: ['result'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const retries = new Counter({
    name: 'sidecar_terminator_reconcile_retries_total',
    help: 'Reconciles that failed and were scheduled again with backoff.',
    registers,
  });
  return {
    processed: (outcome: 'done' | 'requeue' | 'error', seconds: number) => duration.observe({ result: outcome }, seconds),
    retrying: () => retries.inc(),
  };
}
