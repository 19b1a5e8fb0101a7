// The watcher, wired as a controller-runtime manager wires a controller: a cache of the managed
// pods in flight (pod-cache.ts) tells which pods changed; their keys go on a work queue
// (queue.ts), which runs the reconciler (reconciler.ts: plan, then execute) one pod at a time per
// key; the reconciler reads the pods from the same cache. Besides the watch, a periodic resync
// queues every managed pod again, and the sweeper labels pods the webhook missed.
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../logger.ts';
import { sidecarsPendingSince, signalUserNote, type KillMechanism, type SignalSettings } from '../policy/index.ts';
import { readServerVersion } from '../kube/server-version.ts';
import { resolveKillMechanism, type ResolvedKillMechanism } from './discovery.ts';
import { Executor } from './executor.ts';
import type { WatcherMetrics } from './metrics.ts';
import { NodeLookup } from './nodes.ts';
import { PodCache } from './pod-cache.ts';
import { WorkQueue } from './queue.ts';
import { Reconciler } from './reconciler.ts';
import { podKey } from './reflector.ts';
import { sweep } from './sweeper.ts';

export interface WatcherOptions {
  kubeConfig: KubeConfig;
  /** Namespaces to watch; every namespace when empty. */
  namespaces: readonly string[];
  killMechanism: 'auto' | KillMechanism;
  signal: SignalSettings;
  concurrency: number;
  logger: Logger;
  metrics: WatcherMetrics;
  /** How often every managed pod is queued again, whatever the watch says; 0 turns it off. */
  resyncIntervalMs: number;
  /** How often the sweeper labels pods the webhook missed; 0 turns it off. */
  sweepIntervalMs: number;
  /** Namespaces the webhook does not serve; the sweeper skips them. */
  excludedNamespaces: readonly string[];
  /** Labels (key=value) of the namespaces the webhook serves; the sweeper skips the others. */
  namespaceLabels: readonly string[];
  quickExitImageAllowlist: readonly string[];
  /** --quick-exit-image: what ends a sidecar still running after its grace period. */
  quickExitImage: string;
}

/** The watcher as serve runs it: started (once the kill mechanism is known, its parts are built and run), ready, stopped. */
export class Watcher {
  private readonly options: WatcherOptions;
  private controller: Controller | undefined;
  private stopped = false;

  constructor(options: WatcherOptions) {
    this.options = options;
  }

  async start(): Promise<void> {
    const { options } = this;
    const kill = await resolveKillMechanism(options.kubeConfig, options.killMechanism);
    if (this.stopped) return;
    options.logger.info({ killMechanism: kill.mechanism, namespaces: options.namespaces }, 'watcher starting');
    // Not awaited: a word for the operator, which the watch need not wait for.
    if (kill.mechanism === 'signal') void this.warnOfSignalLimits();
    this.controller = new Controller(options, kill);
    this.controller.start();
  }

  /** Ready once every watched namespace has been listed. */
  ready(): boolean {
    return this.controller?.cache.hasSynced() ?? false;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.controller?.stop();
  }

  /** Says at start what the signal mechanism cannot know on this Kubernetes release (docs/installation.md, "Kubernetes versions"). */
  private async warnOfSignalLimits(): Promise<void> {
    try {
      const version = await readServerVersion(this.options.kubeConfig);
      const note = signalUserNote(version);
      if (note) this.options.logger.warn({ kubernetes: version.gitVersion }, note);
    } catch (error) {
      this.options.logger.debug({ err: error }, 'could not read the Kubernetes version to say what the signal mechanism can know there');
    }
  }
}

/** The watcher's parts, built in one step: the cache feeds the queue, the queue runs the reconciler, the reconciler reads the cache. */
class Controller {
  readonly cache: PodCache;
  private readonly options: WatcherOptions;
  private readonly core: CoreV1Api;
  private readonly executor: Executor;
  private readonly reconciler: Reconciler;
  private readonly queue: WorkQueue<string>;
  private readonly timers: NodeJS.Timeout[] = [];
  private stopped = false;

  constructor(options: WatcherOptions, kill: ResolvedKillMechanism) {
    const { kubeConfig, logger, metrics } = options;
    this.options = options;
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.cache = new PodCache({ kubeConfig, namespaces: options.namespaces, logger }, {
      changed: (key) => this.queue.add(key),
      gone: (pod) => this.forget(pod),
      // The API server answers again: what failed meanwhile is retried now, not at the end of its backoff.
      recovered: (namespace) => {
        logger.info({ namespace, retrying: this.queue.retrying }, 'pod watch recovered; retrying failed pods now');
        this.queue.retryNow();
      },
    });
    this.executor = new Executor({
      core: this.core,
      custom: kubeConfig.makeApiClient(CustomObjectsApi),
      crrVersion: kill.mechanism === 'crr' ? kill.crrVersion : undefined,
      metrics,
      inFlight: (pod) => this.cache.get(podKey(pod))?.metadata?.uid === pod.metadata?.uid,
    });
    this.reconciler = new Reconciler({
      pods: this.cache,
      nodes: new NodeLookup(this.core),
      core: this.core,
      settings: { killMechanism: kill.mechanism, signal: options.signal, quickExitImageAllowlist: options.quickExitImageAllowlist, quickExitImage: options.quickExitImage },
      executor: this.executor,
      logger,
    });
    this.queue = new WorkQueue({
      concurrency: options.concurrency,
      process: (key) => this.reconciler.reconcile(key),
      onError: (key, error, attempt, retryInMs) => logger.warn({ pod: key, attempt, retryInMs, err: error }, 'reconcile failed, will retry'),
      observer: metrics.queue,
    });
  }

  start(): void {
    const { options } = this;
    options.metrics.observe({ queue: this.queue, pendingSince: () => this.pendingSince() });
    this.cache.start();
    if (options.sweepIntervalMs > 0) this.every(options.sweepIntervalMs, () => this.sweep(), true);
    if (options.resyncIntervalMs > 0) this.every(options.resyncIntervalMs, async () => this.resync());
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.cache.stop();
    this.options.metrics.observe(undefined);
    await this.queue.shutDown();
  }

  /** A pod left the watch when it ended (or was deleted): the last state seen says when its main containers finished. */
  private forget(pod: V1Pod): void {
    if (this.executor.forget(pod)) this.options.logger.info({ pod: podKey(pod), uid: pod.metadata?.uid }, 'sidecars stopped; the pod left the watch');
  }

  /** Runs `job` every `intervalMs` (and at once with `now`), one run at a time. */
  private every(intervalMs: number, job: () => Promise<void>, now = false): void {
    const index = this.timers.length;
    const schedule = (delayMs: number) => {
      this.timers[index] = setTimeout(() => {
        void job().then(() => {
          if (!this.stopped) schedule(intervalMs);
        });
      }, delayMs);
    };
    schedule(now ? 0 : intervalMs);
  }

  /**
   * Every managed pod queued again: a pod whose reconcile keeps failing is retried anyway, but a
   * pod that was waiting (for a node, a grace period) when something was missed is looked at too.
   */
  private resync(): Promise<void> {
    const keys = this.cache.keys();
    for (const key of keys) this.queue.add(key);
    this.options.logger.debug({ pods: keys.length }, 'resync: managed pods queued again');
    return Promise.resolve();
  }

  private async sweep(): Promise<void> {
    try {
      const labelled = await sweep({
        core: this.core,
        namespaces: this.options.namespaces,
        excludedNamespaces: this.options.excludedNamespaces,
        namespaceLabels: this.options.namespaceLabels,
        quickExitImageAllowlist: this.options.quickExitImageAllowlist,
      });
      if (labelled.length > 0) this.options.logger.info({ pods: labelled }, 'sweeper labelled pods the webhook missed');
    } catch (error) {
      this.options.logger.warn({ err: error }, 'sweep failed; trying again at the next interval');
    }
  }

  private pendingSince(): number[] {
    return this.cache.pods().flatMap((pod) => sidecarsPendingSince(pod) ?? []);
  }
}
