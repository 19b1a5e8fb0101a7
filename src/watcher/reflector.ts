// List-then-watch of the pods matching a label (and field) selector, kept in a local cache: resourceVersion
// bookkeeping, a fresh list when the API server says 410 Gone, and reconnects with backoff on
// errors and on a silent watch (client-node's Watch aborts after 30 s without data; bookmarks
// keep a healthy watch talking).
import { Watch, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { getJson } from '../kube/client.ts';
import { exponentialBackoff } from './retries.ts';

export type PodEvent = 'added' | 'modified' | 'deleted';

export interface ReflectorOptions {
  kubeConfig: KubeConfig;
  labelSelector: string;
  /** A pod that stops matching it leaves the cache as if deleted (the API server says so). */
  fieldSelector?: string;
  /** What the cache keeps of each pod (and the handlers receive); the whole pod when unset. */
  retain?(pod: V1Pod): V1Pod;
  /** Watch one namespace; all namespaces when undefined. */
  namespace?: string;
  onEvent(event: PodEvent, pod: V1Pod): void;
  /** Called after every complete list (the first one makes the watcher ready). */
  onSynced?(): void;
  onError?(error: unknown): void;
  /** Called when a list or watch succeeds after failures: the API server answers again. */
  onRecovered?(): void;
  pageSize?: number;
  /** Server-side watch timeout; the watch is then resumed from the last resourceVersion. */
  watchTimeoutSeconds?: number;
  /** How lists and watches reach the API server; client-node's, through kubeConfig, when unset. */
  listWatch?: PodListWatch;
}

export const podKey = (pod: V1Pod): string => `${pod.metadata?.namespace}/${pod.metadata?.name}`;

/** A page of a pod list as the API server sends it (plain JSON, as watch events are). */
export interface PodListPage {
  items: V1Pod[];
  metadata?: { continue?: string; resourceVersion?: string };
}

export type WatchQuery = Record<string, string | number | boolean | undefined>;

/** The two requests a reflector makes: a page of a list, and a watch (as client-node's Watch.watch). */
export interface PodListWatch {
  list(path: string, query: Record<string, string | number | undefined>): Promise<PodListPage>;
  /** Resolves once the watch is answered; `onDone` is called once when it ends, with the error if any. */
  watch(path: string, query: WatchQuery, onEvent: (type: string, object: Record<string, unknown>) => void, onDone: (error: unknown) => void): Promise<AbortController>;
}

/** Lists and watches sent to the API server of `kubeConfig`. */
function apiServerListWatch(kubeConfig: KubeConfig): PodListWatch {
  return {
    list: (path, query) => getJson<PodListPage>(kubeConfig, path, query),
    watch: (path, query, onEvent, onDone) => new Watch(kubeConfig).watch(path, query, onEvent, onDone),
  };
}

export class PodReflector {
  readonly cache = new Map<string, V1Pod>();
  private readonly options: ReflectorOptions;
  private readonly listWatch: PodListWatch;
  /** The pods' collection: in one namespace, or in all. */
  private readonly path: string;
  private resourceVersion: string | undefined;
  private abort: AbortController | undefined;
  private stopped = false;
  private failures = 0;
  private readonly backoff = exponentialBackoff(500, 30_000);
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(options: ReflectorOptions) {
    this.options = options;
    this.listWatch = options.listWatch ?? apiServerListWatch(options.kubeConfig);
    this.path = options.namespace ? `/api/v1/namespaces/${encodeURIComponent(options.namespace)}/pods` : '/api/v1/pods';
  }

  start(): void {
    void this.listAndWatch();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.abort?.abort();
  }

  private async listAndWatch(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.list();
      await this.watch();
    } catch (error) {
      this.retry(error, true);
    }
  }

  /** Lists page by page, then replaces the cache, announcing what changed meanwhile. */
  private async list(): Promise<void> {
    const { labelSelector, fieldSelector, pageSize = 500 } = this.options;
    const fresh = new Map<string, V1Pod>();
    let continueToken: string | undefined;
    let resourceVersion: string | undefined;
    do {
      const page = await this.listWatch.list(this.path, { labelSelector, fieldSelector, limit: pageSize, continue: continueToken });
      for (const pod of page.items) fresh.set(podKey(pod), this.retained(pod));
      continueToken = page.metadata?.continue || undefined;
      resourceVersion = page.metadata?.resourceVersion;
    } while (continueToken);

    if (this.stopped) return;
    // The cache is replaced before anyone hears of the change: handlers read it at once.
    const previous = new Map(this.cache);
    this.cache.clear();
    for (const [key, pod] of fresh) this.cache.set(key, pod);
    this.resourceVersion = resourceVersion;
    for (const [key, pod] of previous) if (!fresh.has(key)) this.options.onEvent('deleted', pod);
    for (const [key, pod] of fresh) this.options.onEvent(previous.has(key) ? 'modified' : 'added', pod);
    this.succeeded();
    this.options.onSynced?.();
  }

  private succeeded(): void {
    if (this.failures === 0) return;
    this.failures = 0;
    this.options.onRecovered?.();
  }

  private async watch(): Promise<void> {
    if (this.stopped) return;
    const { labelSelector, fieldSelector, watchTimeoutSeconds = 300 } = this.options;
    const params = { labelSelector, ...(fieldSelector ? { fieldSelector } : {}), resourceVersion: this.resourceVersion, allowWatchBookmarks: true, timeoutSeconds: watchTimeoutSeconds };
    let gone = false;
    let ended = false;
    this.abort = await this.listWatch.watch(
      this.path,
      params,
      (type: string, object: Record<string, unknown>) => {
        // Lines already received are still delivered after abort(): a stopped reflector tells no one.
        if (this.stopped) return;
        if (type === 'ERROR') {
          gone ||= object.code === 410;
          return;
        }
        this.handle(type, object);
      },
      (error: unknown) => {
        ended = true;
        if (this.stopped) return;
        if (gone || (error as { statusCode?: number } | null)?.statusCode === 410) {
          this.resourceVersion = undefined;
          this.retry(undefined, true);
        } else if (error && !isTimeout(error)) {
          this.retry(error, false);
        } else {
          void this.watch().catch((e: unknown) => this.retry(e, false));
        }
      },
    );
    // Watch.watch resolves once the request is answered; still open, it was accepted.
    if (!ended) this.succeeded();
  }

  private handle(type: string, received: V1Pod): void {
    this.succeeded();
    const resourceVersion = received.metadata?.resourceVersion;
    if (resourceVersion) this.resourceVersion = resourceVersion;
    if (type === 'BOOKMARK') return;
    const pod = this.retained(received);
    const key = podKey(pod);
    if (type === 'DELETED') {
      this.cache.delete(key);
      this.options.onEvent('deleted', pod);
    } else if (type === 'ADDED' || type === 'MODIFIED') {
      const known = this.cache.has(key);
      this.cache.set(key, pod);
      this.options.onEvent(known ? 'modified' : 'added', pod);
    }
  }

  private retained(pod: V1Pod): V1Pod {
    return this.options.retain ? this.options.retain(pod) : pod;
  }

  private retry(error: unknown, relist: boolean): void {
    if (this.stopped) return;
    if (error) this.options.onError?.(error);
    this.failures++;
    const next = relist || !this.resourceVersion ? () => this.listAndWatch() : () => this.watch().catch((e: unknown) => this.retry(e, false));
    this.retryTimer = setTimeout(() => void next(), this.backoff(this.failures));
  }
}

function isTimeout(error: unknown): boolean {
  return error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError');
}
