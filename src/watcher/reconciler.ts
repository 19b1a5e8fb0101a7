// Reconciling one managed pod, as a controller-runtime reconciler does: its plan (pure,
// src/policy/stop-plan.ts) from the pod as the cache holds it and from its node, then the plan
// executed. The Result says whether to look at the pod again later; an error (thrown) makes the
// queue retry it with backoff.
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { isApiError } from '../kube/api-errors.ts';
import type { Logger } from '../logger.ts';
import { CODES, planStop, type StopSettings } from '../policy/index.ts';
import type { Executor } from './executor.ts';
import type { NodeLookup } from './nodes.ts';
import type { PodCache } from './pod-cache.ts';

/** A reconcile's result: done (`{}`), or look at the pod again after `requeueAfterMs` even if it does not change. */
export interface Result {
  /** A grace period to watch, a node that may come back, a pod that changed under a write. */
  requeueAfterMs?: number;
}

export interface ReconcilerOptions {
  pods: Pick<PodCache, 'get'>;
  nodes: Pick<NodeLookup, 'get'>;
  core: Pick<CoreV1Api, 'readNamespacedPod'>;
  settings: StopSettings;
  executor: Pick<Executor, 'execute'>;
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
    const { pods, nodes, settings, executor, logger } = this.options;
    let pod = pods.get(key);
    if (!pod) return {};
    const log = logger.child({ pod: key, uid: pod.metadata?.uid });
    const node = await nodes.get(pod.spec?.nodeName);
    let plan = planStop(pod, node, settings, Date.now());
    if (plan.confirmOnCurrentPod) {
      pod = await this.current(pod);
      if (!pod) return {};
      plan = planStop(pod, node, settings, Date.now());
    }
    if (plan.steps.length === 0) log.debug({ code: plan.code, reason: CODES[plan.code].meaning }, 'nothing to do');
    if ((await executor.execute(pod, plan, log)) === 'pod-changed') return { requeueAfterMs: AFTER_POD_CHANGED_MS };
    return plan.requeueAfterMs !== undefined ? { requeueAfterMs: plan.requeueAfterMs } : {};
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
