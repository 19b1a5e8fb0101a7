// The watcher's cache of the managed pods in flight, as controller-runtime's cache is a
// reconciler's: one list-then-watch per watched namespace (or one for all of them), of the pods
// labelled managed=true and not in a terminal phase, each kept as the stop plan reads it
// (retainedPod). The reconciler reads pods from it; the watcher hears from it which pods changed.
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../logger.ts';
import { IN_FLIGHT_FIELD_SELECTOR, MANAGED, MANAGED_LABEL, retainedPod } from '../policy/index.ts';
import { PodReflector, podKey, type PodListWatch } from './reflector.ts';

export interface PodCacheOptions {
  kubeConfig: KubeConfig;
  /** Namespaces to watch; every namespace when empty. */
  namespaces: readonly string[];
  logger: Logger;
  /** How the reflectors list and watch; client-node's, through kubeConfig, when unset. */
  listWatch?: PodListWatch;
}

/** What the cache tells its user: a pod added or changed, a pod gone from the watch, the API server answering again after failures. */
export interface PodCacheHandler {
  changed(key: string): void;
  /** The pod left the watch (it ended, or was deleted); `pod` is its last state seen. */
  gone(pod: V1Pod): void;
  /** The watch of `namespace` (`*`: all) works again after failures. */
  recovered(namespace: string): void;
}

export class PodCache {
  private readonly reflectors: PodReflector[];
  private readonly synced = new Set<PodReflector>();

  constructor(options: PodCacheOptions, handler: PodCacheHandler) {
    const { logger } = options;
    const namespaces = options.namespaces.length > 0 ? options.namespaces : [undefined];
    this.reflectors = namespaces.map((namespace) => {
      const where = namespace ?? '*';
      const reflector: PodReflector = new PodReflector({
        kubeConfig: options.kubeConfig,
        labelSelector: `${MANAGED_LABEL}=${MANAGED}`,
        fieldSelector: IN_FLIGHT_FIELD_SELECTOR,
        retain: retainedPod,
        ...(namespace ? { namespace } : {}),
        ...(options.listWatch ? { listWatch: options.listWatch } : {}),
        onEvent: (event, pod) => (event === 'deleted' ? handler.gone(pod) : handler.changed(podKey(pod))),
        onSynced: () => {
          this.synced.add(reflector);
          logger.info({ namespace: where, pods: reflector.cache.size }, 'managed pods listed');
        },
        onError: (error) => logger.warn({ err: error, namespace: where }, 'pod watch failed, retrying'),
        onRecovered: () => handler.recovered(where),
      });
      return reflector;
    });
  }

  start(): void {
    for (const reflector of this.reflectors) reflector.start();
  }

  stop(): void {
    for (const reflector of this.reflectors) reflector.stop();
  }

  /** Every watched namespace has been listed. */
  hasSynced(): boolean {
    return this.synced.size === this.reflectors.length;
  }

  /** The pod under this key (namespace/name) as the watch last saw it; undefined once it is gone. */
  get(key: string): V1Pod | undefined {
    for (const reflector of this.reflectors) {
      const pod = reflector.cache.get(key);
      if (pod) return pod;
    }
    return undefined;
  }

  keys(): string[] {
    return this.reflectors.flatMap((reflector) => [...reflector.cache.keys()]);
  }

  pods(): V1Pod[] {
    return this.reflectors.flatMap((reflector) => [...reflector.cache.values()]);
  }
}
