// Reconciling one managed pod, as a controller-runtime reconciler does: its plan (pure,
// src/policy/stop-plan.ts) from the pod as the cache holds it, its node and what the watcher made
// for it (its memory), then the plan executed. The Result says whether to look at the pod again
// later; an error (thrown) makes the queue retry it with backoff, and a refusal is reported on the
// pod and handed to the queue as a Refused error (retries.ts).
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { isApiError } from '../kube/api-errors.ts';
import type { Logger } from '../logger.ts';
import { CODES, killMechanismFor, planStop, rolesOf, type ClusterKillMechanism, type ContainerRole, type StopSettings } from '../policy/index.ts';
import type { Executor } from './executor.ts';
import type { NodeLookup } from './node-lookup.ts';
import { freshMemory, type PodMemories, type PodMemory } from './pod-memory.ts';
import { Refused, isRefusal } from './retries.ts';

/** A reconcile's result: done (`{}`), or look at the pod again after `requeueAfterMs` even if it does not change. */
export interface Result {
  /** A grace period to watch, a node that may come back, a pod that changed under a write. */
  requeueAfterMs?: number;
}

export interface ReconcilerOptions {
  /** The pods in flight, by key (the watch's cache, pod-cache.ts). */
  pods: { get(key: string): V1Pod | undefined };
  nodes: Pick<NodeLookup, 'get'>;
  core: Pick<CoreV1Api, 'readNamespacedPod'>;
  settings: StopSettings;
  /**
   * What the cluster offers now for a kill: each pod's kill mechanism is then chosen by policy
   * (killMechanismFor, from what its stop began with); settings.killMechanism for every pod without it.
   */
  cluster?: () => ClusterKillMechanism;
  /** What the watcher keeps of each pod in the watch; a fresh memory per reconcile without it. */
  memories?: Pick<PodMemories, 'of'>;
  executor: Pick<Executor, 'execute' | 'reportRefused'>;
  logger: Logger;
}

/** A pod that changed under a write is looked at again once the watch has brought the change. */
export const AFTER_POD_CHANGED_MS = 1000;

export class Reconciler {
  private readonly options: ReconcilerOptions;

  constructor(options: ReconcilerOptions) {
    this.options = options;
  }

  /** Reconciles the pod under `key` (namespace/name). */
  async reconcile(key: string): Promise<Result> {
    const pod = this.options.pods.get(key);
    if (!pod) return {};
    const memory = this.options.memories?.of(pod) ?? freshMemory();
    try {
      return await this.stop(pod, memory, this.options.logger.child({ pod: key, uid: pod.metadata?.uid }));
    } catch (error) {
      if (!isRefusal(error)) throw error;
      await this.options.executor.reportRefused(pod, error, memory);
      throw new Refused(error);
    }
  }

  /** Plans the pod's stop and executes the plan; the container roles are computed once per pod read. */
  private async stop(cached: V1Pod, memory: PodMemory, log: Logger): Promise<Result> {
    const { nodes, executor } = this.options;
    const node = await nodes.get(cached.spec?.nodeName);
    const planFor = (pod: V1Pod) => {
      const roles = rolesOf(pod);
      return { pod, roles, plan: planStop(pod, node, this.settingsFor(pod, memory, roles), Date.now(), { history: memory.history, roles }) };
    };
    let planned = planFor(cached);
    if (planned.plan.confirmOnCurrentPod) {
      const current = await this.current(cached);
      if (!current) return {};
      planned = planFor(current);
    }
    const { pod, roles, plan } = planned;
    if (plan.steps.length === 0) log.debug({ code: plan.code, reason: CODES[plan.code].meaning }, 'nothing to do');
    if ((await executor.execute(pod, plan, log, { memory, roles })) === 'pod-changed') return { requeueAfterMs: AFTER_POD_CHANGED_MS };
    return plan.requeueAfterMs !== undefined ? { requeueAfterMs: plan.requeueAfterMs } : {};
  }

  /** The settings for this pod: its kill mechanism is the one its stop began with, else the cluster's now. */
  private settingsFor(pod: V1Pod, memory: PodMemory, roles: readonly ContainerRole[]): StopSettings {
    const { settings, cluster } = this.options;
    return cluster ? { ...settings, killMechanism: killMechanismFor(pod, memory.history.startedWith, cluster(), roles) } : settings;
  }

  /** The pod as the API server has it now; undefined when it is gone or replaced under its name. */
  private async current(pod: V1Pod): Promise<V1Pod | undefined> {
    try {
      const read = await this.options.core.readNamespacedPod({ name: pod.metadata!.name!, namespace: pod.metadata!.namespace! });
      return read.metadata?.uid === pod.metadata?.uid ? read : undefined;
    } catch (error) {
      if (isApiError(error, 404)) return undefined;
      throw error;
    }
  }
}
