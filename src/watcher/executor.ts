// Executes a stop plan (src/policy/stop-plan.ts) on one pod: the requests, in order, and the
// events and metrics they come with. The one place where the watcher acts. It keeps nothing of a
// pod itself: what it makes is written into the pod's memory (pod-memory.ts), which the caller
// keeps and the next plan reads.
import type { BatchV1Api, CoreV1Api, CustomObjectsApi, V1ObjectReference, V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../logger.ts';
import {
  CRR,
  EVENT_REASONS,
  TERMINATED_CONDITION,
  controllerOf,
  crrName,
  mainsFinishedAt,
  readStopRecord,
  type ContainerRole,
  recordCondition,
  sidecarExitFailure,
  stopRecord,
  type StopMechanism,
  type Plan,
  type Step,
  type StopRecord,
} from '../policy/index.ts';
import { apiErrorMessage, isApiError } from '../kube/api-errors.ts';
import { createCrr } from './crr.ts';
import { EventRecorder } from './event-recorder.ts';
import type { WatcherMetrics } from './watcher-metrics.ts';
import { freshMemory, type PodMemory } from './pod-memory.ts';
import { PodChanged, PodWriter } from './pod-writes.ts';
import { REFUSED_FIRST_RETRY_MS, REFUSED_RETRY_MS, isRefusal } from './retries.ts';

export interface ExecutorOptions {
  core: CoreV1Api;
  custom: CustomObjectsApi;
  /** Reads the Job of a pod a stopped sidecar's exit code failed (its podFailurePolicy); without it, the event names no rule. */
  batch?: Pick<BatchV1Api, 'readNamespacedJob'>;
  /** The apps.kruise.io version serving ContainerRecreateRequests, with --kill-mechanism crr; read at each request (the watcher's is a getter: the mechanism follows the cluster). */
  readonly crrVersion: string | undefined;
  metrics: WatcherMetrics;
  /** The quick-exit images that may have replaced a sidecar's (--quick-exit-image): the stop record tells them apart. */
  quickExitImages?: readonly string[];
}

/** What an execution is given besides the pod and the plan. */
export interface ExecutionContext {
  /** The pod's memory, kept by the caller while the pod is in the watch; a fresh one without it. */
  memory?: PodMemory;
  /** The pod's container roles, computed once by the reconcile; computed here without them. */
  roles?: readonly ContainerRole[];
}

/**
 * How a plan's execution ended: every step done, or the pod changed under a write (the rest of the
 * plan was made for a pod that is no more, so it stops there). A request that fails throws.
 */
export type Execution = 'done' | 'pod-changed';

const STOP_REQUESTS = new Set<Step['type']>(['replace-image', 'mark-terminal', 'create-crr', 'add-signal-containers', 'escalate-image', 'escalate-phase']);

export class Executor {
  private readonly options: ExecutorOptions;
  private readonly writer: PodWriter;
  private readonly events: EventRecorder;
  constructor(options: ExecutorOptions) {
    this.options = options;
    this.writer = new PodWriter(options.core);
    this.events = new EventRecorder(options.core);
  }

  async execute(pod: V1Pod, plan: Plan, log: Logger, context: ExecutionContext = {}): Promise<Execution> {
    const state = context.memory ?? freshMemory();
    const finishedAt = mainsFinishedAt(pod, context.roles);
    // Announced with the requests, not before them: one round trip less between the main
    // containers' end and the stop. A watcher that dies between a request and its event leaves
    // its successor to announce it: every plan that tells sidecars to stop, by its requests or by
    // earlier ones, announces it, and the event's name, derived from the pod and the key, makes
    // the second announcement a conflict rather than a second event.
    const announced = plan.stopping.length > 0 ? this.announce(pod, plan, state) : Promise.resolve();
    // Handled at once, while the requests are still in flight: a rejection nobody handles yet
    // (the API server gone mid-write) would end the process. It is awaited, and thrown, below.
    const settled = announced.catch(() => undefined);
    if (plan.stopping.length > 0 && plan.steps.some((step) => STOP_REQUESTS.has(step.type))) state.told = true;
    if (plan.stopping.length > 0) state.stopping = true;
    // The stop requests made just now, by their step codes: the log says how the sidecars are told.
    const requestedNow: Step['type'][] = [];
    try {
      const execution = await this.run(pod, state, plan, log, finishedAt, (step) => requestedNow.push(step));
      await announced;
      return execution;
    } finally {
      // Settled either way: a request that failed has its own error to throw.
      await settled;
      // Logged once, when the requests are made: a reconcile that finds them made says nothing new.
      if (requestedNow.length > 0) log.info({ sidecars: plan.stopping, steps: requestedNow }, 'stopping sidecars');
    }
  }

  /** The `stopping sidecars` event, once per pod. */
  private async announce(pod: V1Pod, plan: Plan, state: PodMemory): Promise<void> {
    const related = plan.steps.some((step) => step.type === 'create-crr') || state.history.crr !== undefined ? this.crrReference(pod) : undefined;
    const message = `stopping sidecars: ${plan.stopping.join(', ')}`;
    await this.events.record(pod, { type: 'Normal', reason: EVENT_REASONS.stopping, code: 'stop-requested', message, key: EVENT_REASONS.stopping, ...(related ? { related } : {}) }, state.events);
  }

  /** The steps in order; `requested` hears of each stop request made just now. */
  private async run(pod: V1Pod, state: PodMemory, plan: Plan, log: Logger, finishedAt: number | undefined, requested: (step: Step['type']) => void): Promise<Execution> {
    const { metrics } = this.options;
    // Each write carries the resourceVersion the previous one left.
    let current = pod;
    for (const step of plan.steps) {
      try {
        switch (step.type) {
          case 'warn': {
            const event = { type: 'Warning' as const, reason: EVENT_REASONS.failed, code: step.code, message: step.message, ...(step.key ? { key: step.key } : {}) };
            if (await this.events.record(pod, event, state.events)) metrics.warned(step.code);
            break;
          }
          case 'replace-image':
          case 'escalate-image':
            current = await this.requested(finishedAt, 'image', 1, () => this.writer.replaceImage(current, step.container, step.image));
            if (step.type === 'escalate-image') log.info({ sidecar: step.container, image: step.image }, 'sidecar ended from outside: its image replaced by the quick-exit image');
            requested(step.type);
            break;
          case 'mark-terminal':
          case 'escalate-phase':
            current = await this.requested(finishedAt, 'phase', 1, () => this.writer.setStatus(current, { type: TERMINATED_CONDITION, ...step.condition }, step.phase));
            log.info({ phase: step.phase }, step.condition.message);
            break;
          case 'create-crr': {
            const crrVersion = this.options.crrVersion!;
            if ((await this.requested(finishedAt, 'crr', 1, () => createCrr(this.options.custom, crrVersion, current, step.containers))) === 'created') requested(step.type);
            state.history.crr = step.containers;
            state.history.startedWith ??= 'crr';
            break;
          }
          case 'add-signal-containers':
            current = await this.requested(finishedAt, 'signal', step.containers.length, () => this.writer.addEphemeralContainers(current, step.containers));
            requested(step.type);
            state.history.startedWith ??= 'signal';
            break;
          case 'set-condition':
            current = await this.writer.setStatus(current, { type: TERMINATED_CONDITION, ...step.condition });
            break;
          case 'finish':
            if (this.observeStopped(finishedAt, state)) log.info('sidecars stopped');
            break;
        }
      } catch (error) {
        if (error instanceof PodChanged) {
          log.debug({ err: error }, 'the pod changed since it was read; looking at it again');
          return 'pod-changed';
        }
        // A refusal is reported by reportRefused, once, whichever request it was.
        if (STOP_REQUESTS.has(step.type) && !isRefusal(error)) {
          const event = { type: 'Warning' as const, reason: EVENT_REASONS.failed, code: 'stop-failed' as const, message: `could not stop the sidecars: ${apiErrorMessage(error)}` };
          await this.events.record(pod, event, state.events).catch(() => undefined);
        }
        throw error;
      }
    }
    return 'done';
  }

  /**
   * Tells, in a Warning event on the pod, that the API server refused a request for it in a way
   * retrying cannot fix (retries.ts), and when it is tried again: once per pod and refusal, so
   * the slow retries that follow say nothing new. Best effort: the event may be refused too.
   */
  async reportRefused(pod: V1Pod, error: unknown, memory: PodMemory = freshMemory()): Promise<void> {
    const status = (error as { code?: unknown }).code;
    const message = `the API server refused a request for this pod (HTTP ${String(status)}): ${apiErrorMessage(error)}; retrying cannot fix that by itself, so it is tried again after ${REFUSED_FIRST_RETRY_MS / 1000}s, then less and less often, up to every ${REFUSED_RETRY_MS / 60_000}m: check the watcher's RBAC and the admission policies in its way`;
    const event = { type: 'Warning' as const, reason: EVENT_REASONS.failed, code: 'request-refused' as const, message, key: `refused\n${String(status)}\n${apiErrorMessage(error)}` };
    await this.events.record(pod, event, memory.events).catch(() => undefined);
  }

  /**
   * A pod that left the watch (it ended, or was deleted; `pod` is its last state seen, `memory`
   * what was kept of it). Its stop duration ends here if it was not seen stopped before: a pod
   * usually leaves in the same status write that reports its last sidecar stopped (`observed`:
   * that duration was observed now). A pod whose sidecars were told to stop is to be read once
   * more, for its stop record (`readEnd`).
   */
  left(pod: V1Pod, memory: PodMemory | undefined): { observed: boolean; readEnd?: EndedPod } {
    return {
      observed: memory !== undefined && memory.told && this.observeStopped(mainsFinishedAt(pod), memory),
      // Read once it has left: the watch tells of a pod that ended with its state from before the end.
      ...(memory?.stopping ? { readEnd: { pod, leftAt: Date.now(), crr: () => memory.history.crr ?? [] } } : {}),
    };
  }

  /**
   * Reads a pod whose sidecars were stopped, once it has left the watch (forget's `readEnd`): writes
   * the stop record in its SidecarTerminated condition (stop-record.ts) and counts it, and when a
   * stopped sidecar's exit code failed the pod although its main containers succeeded
   * (sidecar-exit-failure.ts), says so in a Warning event on the pod, with the Job as its related
   * object and the rule of the Job's podFailurePolicy that judged it. The record, and whether it
   * warned; nothing for a pod deleted or replaced meanwhile.
   */
  async reportEnded(ended: EndedPod, now = Date.now()): Promise<EndReport | undefined> {
    const { core } = this.options;
    const last = ended.pod;
    const namespace = last.metadata!.namespace!;
    const read = async () => {
      try {
        const pod = await core.readNamespacedPod({ name: last.metadata!.name!, namespace });
        return pod.metadata?.uid === last.metadata?.uid ? pod : undefined;
      } catch (error) {
        if (isApiError(error, 404)) return undefined; // deleted: nothing to say
        throw error;
      }
    };
    let pod = await read();
    let record = pod && readStopRecord(pod);
    const waitMs = pod && !record ? untilSidecarsEnd(pod, ended.leftAt, now) : 0;
    if (waitMs > 0) return { requeueAfterMs: waitMs };
    // The Job controller's own writes (its finalizer) may come between the read and the write: read again.
    for (let attempt = 1; pod && !record; attempt++) {
      const made = stopRecord(pod, { crr: new Set(ended.crr()), quickExitImages: this.options.quickExitImages ?? [] });
      try {
        pod = await this.writer.setStatus(pod, { type: TERMINATED_CONDITION, ...recordCondition(made) });
        this.options.metrics.recorded(made);
        record = made;
      } catch (error) {
        if (!(error instanceof PodChanged) || attempt === 3) throw error;
        pod = await read();
        record = pod && readStopRecord(pod);
      }
    }
    if (!pod || !record) return undefined;
    return { record, exitFailed: await this.reportExitFailure(pod) };
  }

  /** The Warning event of a pod a stopped sidecar's exit code failed; true when it was recorded now. */
  private async reportExitFailure(pod: V1Pod): Promise<boolean> {
    const { batch } = this.options;
    const namespace = pod.metadata!.namespace!;
    if (!sidecarExitFailure(pod)) return false;
    const owner = controllerOf(pod);
    let job: { spec: unknown; related: V1ObjectReference } | undefined;
    if (batch && owner?.kind === 'Job' && owner.apiVersion === 'batch/v1') {
      try {
        const read = await batch.readNamespacedJob({ name: owner.name, namespace });
        if (read.metadata?.uid === owner.uid) job = { spec: read.spec ?? {}, related: { apiVersion: owner.apiVersion, kind: owner.kind, namespace, name: owner.name, uid: owner.uid } };
      } catch (error) {
        // Gone, or not readable (an RBAC without jobs get): the event names no rule then.
        if (!isApiError(error, 404) && !isApiError(error, 403)) throw error;
      }
    }
    const failure = sidecarExitFailure(pod, job?.spec)!;
    // One per pod, whatever its words (they differ when the Job could not be read on a retry).
    const event = { type: 'Warning' as const, reason: EVENT_REASONS.exitFailedPod, code: 'sidecar-exit-failed-pod' as const, message: failure.message, key: EVENT_REASONS.exitFailedPod, ...(job ? { related: job.related } : {}) };
    return this.events.record(pod, event, new Set());
  }

  /** The pod's ContainerRecreateRequest, as the `related` object of the event that announces it. */
  private crrReference(pod: V1Pod): V1ObjectReference {
    return { apiVersion: `${CRR.group}/${this.options.crrVersion}`, kind: CRR.kind, namespace: pod.metadata?.namespace, name: crrName(pod.metadata?.uid ?? '') };
  }

  /** A stop request, counted (`count` sidecars) with its latency from the main containers' end (`finishedAt`). */
  private async requested<T>(finishedAt: number | undefined, mechanism: StopMechanism, count: number, request: () => Promise<T>): Promise<T> {
    const { metrics } = this.options;
    let result: T;
    try {
      result = await request();
    } catch (error) {
      if (!(error instanceof PodChanged)) metrics.actions.inc({ mechanism, result: 'error' }, count);
      throw error;
    }
    if (result === 'exists') return result; // made by an earlier reconcile
    metrics.actions.inc({ mechanism, result: 'ok' }, count);
    for (let i = 0; finishedAt !== undefined && i < count; i++) metrics.requestLatency.observe({ mechanism }, Math.max(0, Date.now() - finishedAt) / 1000);
    return result;
  }

  /** True when the stop duration, from the main containers' end (`finishedAt`), is observed now (once per pod). */
  private observeStopped(finishedAt: number | undefined, state: PodMemory): boolean {
    if (state.observed || finishedAt === undefined) return false;
    state.observed = true;
    this.options.metrics.stopDuration.observe(Math.max(0, Date.now() - finishedAt) / 1000);
    return true;
  }
}

/** What reading an ended pod found: its record, and whether it warned that a sidecar's exit code failed it; or to read it again later. */
export type EndReport = { record: StopRecord; exitFailed: boolean } | { requeueAfterMs: number };

/**
 * How long past its grace period, counted from when the pod left the watch, the record waits for
 * a sidecar the kubelet is still killing: the kubelet acts on a phase set by the watcher at its
 * next sync of the pod (a minute by default), then kills within the grace period.
 */
const KILL_MARGIN_MS = 90_000;

/** How often a pod whose sidecar is being killed is read again. */
const KILL_RECHECK_MS = 5_000;

/**
 * A pod moved to its terminal phase while a sidecar still ran: the kubelet kills it, and the
 * record says how it ended once it has; how long to wait before reading it again (0: no wait, or
 * waited long enough: the record then says it had not exited).
 */
function untilSidecarsEnd(pod: V1Pod, leftAt: number, now: number): number {
  const running = pod.status?.containerStatuses?.some((status) => !status.state?.terminated) ?? false;
  if (!running) return 0;
  const graceMs = (pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000;
  return Math.max(0, Math.min(leftAt + graceMs + KILL_MARGIN_MS - now, KILL_RECHECK_MS));
}

/** A pod told to stop its sidecars, as last seen in the watch, to read once it has ended. */
export interface EndedPod {
  pod: V1Pod;
  /** When it left the watch (epoch milliseconds). */
  leftAt: number;
  /**
   * The sidecars in its ContainerRecreateRequest, as far as this watcher knows, read when the
   * ended pod is: with ignore-exit-code, the request is made after the status write that takes
   * the pod out of the watch.
   */
  crr(): readonly string[];
}
