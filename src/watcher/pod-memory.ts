// What the watcher keeps of each managed pod in the watch, which the pod's own status cannot show:
// its stop history (a value the plan reads: src/policy/kill-mechanism.ts), the events recorded
// for it, and what the metrics count once. Kept only while the pod is in the watch, so memory
// follows the managed pods in flight; a write that completes after the pod has left (and was
// forgotten) does not bring it back.
import type { V1Pod } from '@kubernetes/client-node';
import type { StopHistory } from '../policy/index.ts';

export interface PodMemory {
  /** What this watcher made for the pod: read by the plan, written by the executor as it makes it. */
  history: StopHistory;
  /** Its sidecars were told to stop by this watcher: the stop duration is observed when they finish or the pod leaves. */
  told: boolean;
  /** A plan stopped its sidecars, told by this watcher or by one before it: its end is worth reading (Executor.reportEnded). */
  stopping: boolean;
  /** That stop duration was observed: once per pod. */
  observed: boolean;
  /** The events recorded for it, by id (EventRecorder). */
  events: Set<string>;
}

export function freshMemory(): PodMemory {
  return { history: {}, told: false, stopping: false, observed: false, events: new Set() };
}

export class PodMemories {
  /** By pod uid. */
  private readonly byUid = new Map<string, PodMemory>();
  /** Whether the pod is still in the watch (the same uid under its key); every pod is, without it. */
  private readonly inFlight: (pod: V1Pod) => boolean;

  constructor(inFlight: (pod: V1Pod) => boolean = () => true) {
    this.inFlight = inFlight;
  }

  /**
   * The pod's memory: kept while the pod is in the watch; for a pod that has left already (a
   * reconcile that started before it left), a fresh one that goes with the reconcile.
   */
  of(pod: V1Pod): PodMemory {
    const uid = pod.metadata?.uid ?? '';
    const kept = this.byUid.get(uid);
    if (kept) return kept;
    const memory = freshMemory();
    if (this.inFlight(pod)) this.byUid.set(uid, memory);
    return memory;
  }

  /** Forgets a pod that left the watch; what was kept of it, if anything. */
  forget(pod: V1Pod): PodMemory | undefined {
    const uid = pod.metadata?.uid ?? '';
    const memory = this.byUid.get(uid);
    this.byUid.delete(uid);
    return memory;
  }

  /** Pods something is kept of. */
  get size(): number {
    return this.byUid.size;
  }
}
