// Reconciling one managed pod: its plan (pure, src/policy/stop-plan.ts) from the pod as the watch
// last saw it and from its node, then the plan executed. The result tells the queue whether to
// look again later; an error (thrown) makes it retry with backoff.
import type { V1Pod } from '@kubernetes/client-node';
import type { FastifyBaseLogger } from 'fastify';
import { planStop, type StopSettings } from '../policy/index.ts';
import type { Executor } from './executor.ts';
import type { NodeLookup } from './nodes.ts';
import type { Result } from './queue.ts';

export interface ReconcilerOptions {
  /** The pod under this key (namespace/name) as the watch last saw it; undefined once it is gone. */
  findPod(key: string): V1Pod | undefined;
  nodes: NodeLookup;
  settings: StopSettings;
  executor: Executor;
  logger: FastifyBaseLogger;
}

export class Reconciler {
  private readonly options: ReconcilerOptions;

  constructor(options: ReconcilerOptions) {
    this.options = options;
  }

  async reconcile(key: string): Promise<Result> {
    const { findPod, nodes, settings, executor, logger } = this.options;
    const pod = findPod(key);
    if (!pod) return {};
    const log = logger.child({ pod: key, uid: pod.metadata?.uid });
    const plan = planStop(pod, await nodes.get(pod.spec?.nodeName), settings, Date.now());
    if (plan.steps.length === 0) log.debug({ reason: plan.reason }, 'nothing to do');
    return executor.execute(pod, plan, log);
  }
}
