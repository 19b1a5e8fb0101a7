// The nodes of the pods the watcher acts on, read on demand (a node's kind decides the mechanism)
// and kept a few minutes: nodes rarely change kind, and many pods share one. Only nodes found are
// kept. A node that does not exist is reported as such, and looked up again next time (it may be
// registered again); a lookup that fails throws, for the queue to retry.
import type { CoreV1Api, V1Node } from '@kubernetes/client-node';
import { isApiError } from '../kube/api-errors.ts';
import type { NodeState } from '../policy/index.ts';

const NODE_CACHE_MS = 5 * 60_000;

export class NodeLookup {
  private readonly core: Pick<CoreV1Api, 'readNode'>;
  private readonly cache = new Map<string, { node: V1Node; fetchedAt: number }>();

  constructor(core: Pick<CoreV1Api, 'readNode'>) {
    this.core = core;
  }

  /** The node named, 'missing' when it does not exist, undefined without a name (the pod is not scheduled). */
  async get(name: string | undefined): Promise<NodeState> {
    if (!name) return undefined;
    const cached = this.cache.get(name);
    if (cached && Date.now() - cached.fetchedAt < NODE_CACHE_MS) return cached.node;
    try {
      const node = await this.core.readNode({ name });
      this.cache.set(name, { node, fetchedAt: Date.now() });
      return node;
    } catch (error) {
      this.cache.delete(name);
      if (isApiError(error, 404)) return 'missing';
      throw error;
    }
  }
}
