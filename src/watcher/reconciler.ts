// Reconciling one managed pod: its plan (pure, src/policy/stop-plan.ts) from the pod as the watch
// last saw it and from its node, then the plan executed. The result tells the queue whether to
// look again later; an error (thrown) makes it retry with backoff.
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import { isApiError } from '../kube/api-errors.ts';
import type { Logger } from '../logger.ts';
import { planStop, type StopSettings } from '../policy/index.ts';
import type { Executor } from './executor.ts';
import type { NodeLookup } from './nodes.ts';
import type { Result } from './queue.ts';

export interface ReconcilerOptions {
  /** The pod under this key (namespace/name) as the watch last saw it; undefined once it is gone. */
  findPod: (key: string) => V1Pod | undefined;
  nodes: NodeLookup;
  core: Pick<CoreV1Api, 'readNamespacedPod'>;
  /** The same for every pod, or per pod (its kill mechanism is the one its stop began with). */
  settings: StopSettings | ((pod: V1Pod) => StopSettings);
  executor: Pick<Executor, 'execute'>;
  logger: Logger;
}

export class Reconciler {
  private readonly options: ReconcilerOptions;

  constructor(options: ReconcilerOptions) {
    this.options = options;
  }

  async reconcile(key: string): Promise<Result> {
    const { findPod, nodes, settings, executor, logger } = this.options;
    let pod = findPod(key);
    if (!pod) return {};
    const log = logger.child({ pod: key, uid: pod.metadata?.uid });
    const node = await nodes.get(pod.spec?.nodeName);
    const settingsOf = (pod: V1Pod) => (typeof settings === 'function' ? settings(pod) : settings);
    let plan = planStop(pod, node, settingsOf(pod), Date.now());
    // That a sidecar still runs after its grace period is read from the absence of a change, and
    // the watch's copy can lag (an outage, a slow watch): it is said only of the pod as it is now.
    if (plan.steps.some((step) => step.type === 'warn' && step.count?.result === 'ignored')) {
      pod = await this.current(pod);
      if (!pod) return {};
      plan = planStop(pod, node, settingsOf(pod), Date.now());
    }
    if (plan.steps.length === 0) log.debug({ reason: plan.reason }, 'nothing to do');
    return executor.execute(pod, plan, log);
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
