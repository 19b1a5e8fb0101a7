// The labels of every namespace, kept current by a list and a watch (client-node's ListWatch):
// what the namespaceSelectors of the injected-sidecar policy are matched against at admission, at
// hand without an API call in the admission's path. A namespace not seen yet (created or labelled
// a moment before its first pod, ahead of the watch) is read on its own, as kube-apiserver's
// namespaceSelector matcher reads one its cache lacks. The webhook runs it only while its policy
// has a namespaceSelector.
import { CoreV1Api, ListWatch, Watch, type KubeConfig, type KubernetesListObject, type V1Namespace } from '@kubernetes/client-node';
import type { Logger } from '../logger.ts';
import { apiErrorMessage } from './api-errors.ts';
import { withRequestSignal } from './client.ts';

/** The labels of each namespace, by name. */
export type NamespaceLabelMap = ReadonlyMap<string, Readonly<Record<string, string>>>;

/** How the namespaces are listed, watched and read one by one: namespaceListWatch's, or a test's. */
export interface NamespaceListWatch {
  list(): Promise<KubernetesListObject<V1Namespace>>;
  watch: Pick<Watch, 'watch'>;
  /** One namespace, the request aborted after timeoutMs. */
  get(name: string, timeoutMs: number): Promise<V1Namespace>;
}

export interface NamespaceLabelsOptions {
  listWatch: NamespaceListWatch;
  logger: Logger;
  /** The wait before the n-th attempt after a failed list or watch; 1 s doubling up to 30 s by default. */
  retryDelayMs?: (failures: number) => number;
}

const PATH = '/api/v1/namespaces';

export class NamespaceLabels {
  private readonly labels = new Map<string, Readonly<Record<string, string>>>();
  private readonly informer: ListWatch<V1Namespace>;
  private readonly listWatch: NamespaceListWatch;
  private readonly logger: Logger;
  private readonly retryDelayMs: (failures: number) => number;
  private listed = false;
  private failures = 0;
  private stopped = false;
  private retry: NodeJS.Timeout | undefined;

  constructor(options: NamespaceLabelsOptions) {
    this.logger = options.logger;
    this.retryDelayMs = options.retryDelayMs ?? ((failures) => Math.min(30_000, 1000 * 2 ** (failures - 1)));
    const { listWatch } = options;
    this.listWatch = listWatch;
    this.informer = new ListWatch<V1Namespace>(PATH, listWatch.watch as Watch, () => listWatch.list(), false);
    const keep = (namespace: V1Namespace) => {
      if (namespace.metadata?.name) this.labels.set(namespace.metadata.name, namespace.metadata.labels ?? {});
    };
    this.informer.on('add', keep);
    this.informer.on('update', keep);
    this.informer.on('delete', (namespace) => this.labels.delete(namespace.metadata?.name ?? ''));
    // ListWatch gives up on an error (a failed list, a refused or broken watch): started again here.
    this.informer.on('error', (error) => this.failed(error));
  }

  /** Lists, then watches; settles once the first list and watch are under way, or have failed (retried in the background). */
  async start(): Promise<void> {
    if (this.stopped) return;
    const failuresBefore = this.failures;
    await this.informer.start();
    if (this.stopped || this.failures !== failuresBefore) return;
    this.listed = true;
    if (this.failures > 0) this.logger.info({ failures: this.failures }, 'namespaces listed and watched again');
    this.failures = 0;
  }

  /** Whether the namespaces were listed at least once. */
  synced(): boolean {
    return this.listed;
  }

  /** The labels of every namespace as last seen (read, never written, by the caller); undefined before the first list. */
  current(): NamespaceLabelMap | undefined {
    return this.listed ? this.labels : undefined;
  }

  /**
   * The labels of the namespace `name`, read from the API server (for one the list and the watch
   * have not brought yet) and kept with the others; rejects with the API's reason when it cannot
   * be read within timeoutMs. A version the watch brought meanwhile is kept rather than this one.
   */
  async read(name: string, timeoutMs: number): Promise<Readonly<Record<string, string>>> {
    let namespace: V1Namespace;
    try {
      namespace = await this.listWatch.get(name, timeoutMs);
    } catch (error) {
      throw new Error(apiErrorMessage(error), { cause: error });
    }
    const labels = namespace.metadata?.labels ?? {};
    if (!this.labels.has(name)) this.labels.set(name, labels);
    return labels;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    await this.informer.stop();
  }

  private failed(error: unknown): void {
    // Stopping aborts the watch, which ends with an error.
    if (this.stopped) return;
    this.failures++;
    const retryInMs = this.retryDelayMs(this.failures);
    if (this.failures === 1) {
      this.logger.warn(
        { error: apiErrorMessage(error), retryInMs },
        this.listed
          ? 'cannot watch namespaces: the namespaceSelectors of the injected-sidecar policy are matched against the labels last seen until the watch is back'
          : 'cannot list namespaces: the entries of the injected-sidecar policy with a namespaceSelector apply to no pod until they are listed',
      );
    }
    this.retry = setTimeout(() => void this.start(), retryInMs);
    this.retry.unref();
  }
}

/** The namespaces of the API server of `kubeConfig`. */
export function namespaceListWatch(kubeConfig: KubeConfig): NamespaceListWatch {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  return {
    list: () => core.listNamespace(),
    watch: new Watch(kubeConfig),
    get: (name, timeoutMs) => withRequestSignal(kubeConfig, () => AbortSignal.timeout(timeoutMs)).makeApiClient(CoreV1Api).readNamespace({ name }),
  };
}
