// Executes a stop plan (src/policy/stop-plan.ts) on one pod: the requests, in order, and the
// events and metrics they come with. The one place where the watcher acts.
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
  recordCondition,
  sidecarExitFailure,
  stopRecord,
  type KillMechanism,
  type StopMechanism,
  type Plan,
  type Step,
  type StopRecord,
} from '../policy/index.ts';
import { apiErrorMessage, isApiError } from '../kube/api-errors.ts';
import { createCrr } from './crr.ts';
import { EventRecorder } from './events.ts';
import type { WatcherMetrics } from './metrics.ts';
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
  /**
   * Whether the pod is still in the watch (the same uid under its key). What the executor keeps
   * of a pod is kept only while it is: a write that completes after the pod has left (and was
   * forgotten) does not bring it back. Every pod counts as in the watch without it.
   */
  inFlight?: (pod: V1Pod) => boolean;
}

/** What this watcher knows of one pod in the watch, which the pod's own status cannot show. */
interface PodState {
  /** Its sidecars were told to stop by this watcher: the stop duration is observed when they finish or the pod leaves. */
  told: boolean;
  /** A plan stopped its sidecars, told by this watcher or by one before it: its end is worth reading (reportEnded). */
  stopping: boolean;
  /** That stop duration was observed: once per pod. */
  observed: boolean;
  /** The sidecars in its ContainerRecreateRequest, once this watcher created or found it: it is not requested again. */
  crr?: readonly string[];
  /** The events recorded for it, by id (EventRecorder). */
  events: Set<string>;
  /** The kill mechanism its sidecars were told to stop with: a pod finishes with the mechanism it began with. */
  started?: KillMechanism;
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
  /** By pod uid, for the pods in the watch only: memory follows the managed pods in flight. */
  private readonly pods = new Map<string, PodState>();

  constructor(options: ExecutorOptions) {
    this.options = options;
    this.writer = new PodWriter(options.core);
    this.events = new EventRecorder(options.core);
  }

  /** The kill mechanism this watcher told the pod's sidecars to stop with, if it did. */
  startedWith(pod: V1Pod): KillMechanism | undefined {
    return this.pods.get(pod.metadata?.uid ?? '')?.started;
  }

  /** Pods the executor keeps something of. */
  get size(): number {
    return this.pods.size;
  }

  async execute(pod: V1Pod, plan: Plan, log: Logger): Promise<Execution> {
    const state = this.stateOf(pod);
    // Announced with the requests, not before them: one round trip less between the main
    // containers' end and the stop. A watcher that dies between a request and its event leaves
    // its successor to announce it: every plan that tells sidecars to stop, by its requests or by
    // earlier ones, announces it, and the event's name, derived from the pod and the key, makes
    // the second announcement a conflict rather than a second event.
    const announced = plan.stopping.length > 0 ? this.announce(pod, plan, state) : Promise.resolve();
    // Handled at once, while the requests are still in flight: a rejection nobody handles yet
    // (the API server gone mid-write) would end the process. It is awaited, and thrown, below.
    const settled = announced.catch(() => undefined);
    if (plan.stopping.length > 0 && plan.steps.some((step) => STOP_REQUESTS.has(step.type) && !made(state, step))) state.told = true;
    if (plan.stopping.length > 0) state.stopping = true;
    // The stop requests made just now, by their step codes: the log says how the sidecars are told.
    const requestedNow: Step['type'][] = [];
    try {
      const execution = await this.run(pod, state, plan, log, (step) => requestedNow.push(step));
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
  private async announce(pod: V1Pod, plan: Plan, state: PodState): Promise<void> {
    const related = plan.steps.some((step) => step.type === 'create-crr') || state.crr !== undefined ? this.crrReference(pod) : undefined;
    const message = `stopping sidecars: ${plan.stopping.join(', ')}`;
    await this.events.record(pod, { type: 'Normal', reason: EVENT_REASONS.stopping, code: 'stop-requested', message, key: EVENT_REASONS.stopping, ...(related ? { related } : {}) }, state.events);
  }

  /** The steps in order; `requested` hears of each stop request made just now. */
  private async run(pod: V1Pod, state: PodState, plan: Plan, log: Logger, requested: (step: Step['type']) => void): Promise<Execution> {
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
            current = await this.requested(pod, 'image', 1, () => this.writer.replaceImage(current, step.container, step.image));
            if (step.type === 'escalate-image') log.info({ sidecar: step.container, image: step.image }, 'sidecar ended from outside: its image replaced by the quick-exit image');
            requested(step.type);
            break;
          case 'mark-terminal':
          case 'escalate-phase':
            current = await this.requested(pod, 'phase', 1, () => this.writer.setStatus(current, { type: TERMINATED_CONDITION, ...step.condition }, step.phase));
            log.info({ phase: step.phase }, step.condition.message);
            break;
          case 'create-crr': {
            if (made(state, step)) break;
            const crrVersion = this.options.crrVersion!;
            if ((await this.requested(pod, 'crr', 1, () => createCrr(this.options.custom, crrVersion, current, step.containers))) === 'created') requested(step.type);
            state.crr = step.containers;
            state.started ??= 'crr';
            break;
          }
          case 'add-signal-containers':
            current = await this.requested(pod, 'signal', step.containers.length, () => this.writer.addEphemeralContainers(current, step.containers));
            requested(step.type);
            state.started ??= 'signal';
            break;
          case 'set-condition':
            current = await this.writer.setStatus(current, { type: TERMINATED_CONDITION, ...step.condition });
            break;
          case 'finish':
            if (this.observeStopped(pod, state)) log.info('sidecars stopped');
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
  async reportRefused(pod: V1Pod, error: unknown): Promise<void> {
    const status = (error as { code?: unknown }).code;
    const message = `the API server refused a request for this pod (HTTP ${String(status)}): ${apiErrorMessage(error)}; retrying cannot fix that by itself, so it is tried again after ${REFUSED_FIRST_RETRY_MS / 1000}s, then less and less often, up to every ${REFUSED_RETRY_MS / 60_000}m: check the watcher's RBAC and the admission policies in its way`;
    const event = { type: 'Warning' as const, reason: EVENT_REASONS.failed, code: 'request-refused' as const, message, key: `refused\n${String(status)}\n${apiErrorMessage(error)}` };
    await this.events.record(pod, event, this.stateOf(pod).events).catch(() => undefined);
  }

  /**
   * Forgets a pod once it leaves the watch (it ended, or was deleted), so memory follows the
   * managed pods; `pod` is its last state seen. Its stop duration ends here if it was not seen
   * stopped before: a pod usually leaves in the same status write that reports its last sidecar
   * stopped. True when that duration was observed now.
   */
  forget(pod: V1Pod): { observed: boolean; readEnd?: EndedPod } {
    const uid = pod.metadata?.uid ?? '';
    const state = this.pods.get(uid);
    this.pods.delete(uid);
    return {
      observed: state !== undefined && state.told && this.observeStopped(pod, state),
      // Read once it has left: the watch tells of a pod that ended with its state from before the end.
      ...(state?.stopping ? { readEnd: { pod, leftAt: Date.now(), crr: () => state.crr ?? [] } } : {}),
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

  /**
   * The pod's state: kept while the pod is in the watch; for a pod that has left already (a
   * reconcile that started before it left), a fresh one that goes with the reconcile.
   */
  private stateOf(pod: V1Pod): PodState {
    const uid = pod.metadata?.uid ?? '';
    const kept = this.pods.get(uid);
    if (kept) return kept;
    const state: PodState = { told: false, stopping: false, observed: false, events: new Set() };
    if (this.options.inFlight?.(pod) ?? true) this.pods.set(uid, state);
    return state;
  }

  /** The pod's ContainerRecreateRequest, as the `related` object of the event that announces it. */
  private crrReference(pod: V1Pod): V1ObjectReference {
    return { apiVersion: `${CRR.group}/${this.options.crrVersion}`, kind: CRR.kind, namespace: pod.metadata?.namespace, name: crrName(pod.metadata?.uid ?? '') };
  }

  /** A stop request, counted (`count` sidecars) with its latency from the main containers' end. */
  private async requested<T>(pod: V1Pod, mechanism: StopMechanism, count: number, request: () => Promise<T>): Promise<T> {
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
    const finishedAt = mainsFinishedAt(pod);
    for (let i = 0; finishedAt !== undefined && i < count; i++) metrics.requestLatency.observe({ mechanism }, Math.max(0, Date.now() - finishedAt) / 1000);
    return result;
  }

  /** True when the stop duration is observed now (once per pod). */
  private observeStopped(pod: V1Pod, state: PodState): boolean {
    const finishedAt = mainsFinishedAt(pod);
    if (state.observed || finishedAt === undefined) return false;
    state.observed = true;
    this.options.metrics.stopDuration.observe(Math.max(0, Date.now() - finishedAt) / 1000);
    return true;
  }
}

/** A stop request already made for this pod by this watcher, which the pod's own status cannot show (a ContainerRecreateRequest). */
function made(state: PodState, step: Step): boolean {
  return step.type === 'create-crr' && state.crr !== undefined;
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
