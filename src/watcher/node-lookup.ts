// The nodes of the pods the watcher acts on, read on demand (a node's kind decides the mechanism)
// and kept a few minutes: nodes rarely change kind, and many pods share one. Only what the kind
// is read from is kept (labels and taints, a few hundred bytes where a whole Node is about 20 KB),
// for at most NODE_CACHE_SIZE nodes, the least recently used going first: spot nodes that come
// and go cannot grow it. Only nodes found are kept. A node that does not exist is reported as
// such, and looked up again next time (it may be registered again); a lookup that fails throws,
// for the queue to retry.
import type { CoreV1Api, V1Node } from '@kubernetes/client-node';
import { isApiError } from '../kube/api-errors.ts';
import type { NodeState } from '../policy/index.ts';

const NODE_CACHE_MS = 5 * 60_000;
/** More nodes than one watcher's pods in flight usually run on; a lookup past it costs one GET. */
export const NODE_CACHE_SIZE = 1000;

export class NodeLookup {
  private readonly core: Pick<CoreV1Api, 'readNode'>;
  /** In use order: a Map iterates in insertion order, and a hit is moved to the end. */
  private readonly cache = new Map<string, { node: V1Node; fetchedAt: number }>();
  private readonly maxSize: number;

  constructor(core: Pick<CoreV1Api, 'readNode'>, maxSize = NODE_CACHE_SIZE) {
    this.core = core;
    this.maxSize = maxSize;
  }

  /** Nodes kept now. */
  get size(): number {
    return this.cache.size;
  }

  /** The node named (its labels and taints), 'missing' when it does not exist, undefined without a name (the pod is not scheduled). */
  async get(name: string | undefined): Promise<NodeState> {
    if (!name) return undefined;
    const cached = this.cache.get(name);
    this.cache.delete(name);
    if (cached && Date.now() - cached.fetchedAt < NODE_CACHE_MS) {
      this.cache.set(name, cached);
      return cached.node;
    }
    try {
      const node = kindOnly(await this.core.readNode({ name }));
      this.cache.set(name, { node, fetchedAt: Date.now() });
      if (this.cache.size > this.maxSize) this.cache.delete(this.cache.keys().next().value!);
      return node;
    } catch (error) {
      if (isApiError(error, 404)) return 'missing';
      throw error;
    }
  }
}

/** What nodeKindOf (src/policy/nodes.ts) reads of a node. */
function kindOnly(node: V1Node): V1Node {
  const labels = node.metadata?.labels;
  const taints = node.spec?.taints;
  return { metadata: { name: node.metadata?.name, ...(labels ? { labels } : {}) }, ...(taints ? { spec: { taints } } : {}) };
}
