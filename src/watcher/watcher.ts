// The watcher, wired as a controller-runtime manager wires a controller: a cache of the managed
// pods in flight (pod-cache.ts) tells which pods changed; their keys go on a work queue
// (queue.ts), which runs the reconciler (reconciler.ts: plan, then execute) one pod at a time per
// key; the reconciler reads the pods from the same cache. Besides the watch, a periodic resync
// queues every managed pod again, and the sweeper labels pods the webhook missed.
import { BatchV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../logger.ts';
import { sidecarsPendingSince, signalUserNote, type KillMechanism, type SignalSettings } from '../policy/index.ts';
import { readServerVersion } from '../kube/server-version.ts';
import { withPlainCustomObjectCalls, withPlainPodCalls } from '../kube/plain-calls.ts';
import { KILL_MECHANISM_CHANGED } from '../policy/index.ts';
import type { ClusterKillMechanism } from '../policy/index.ts';
import { KillMechanismFollower, type resolveKillMechanism } from './kill-mechanism-follower.ts';
import { EventRecorder } from './event-recorder.ts';
import { Executor, type EndedPod } from './executor.ts';
import type { WatcherMetrics } from './watcher-metrics.ts';
import { NodeLookup } from './node-lookup.ts';
import { PodCache } from './pod-cache.ts';
import { PodMemories } from './pod-memory.ts';
import { WorkQueue } from './queue.ts';
import { Reconciler } from './reconciler.ts';
import { Refused, isRefusal, retryDelay } from './retries.ts';
import { podKey, type PodListWatch } from './reflector.ts';
import { Sweeper } from './sweeper.ts';

export interface WatcherOptions {
  kubeConfig: KubeConfig;
  /** Namespaces to watch; every namespace when empty. */
  namespaces: readonly string[];
  killMechanism: 'auto' | KillMechanism;
  /** With auto, how often the API server is asked again whether it serves ContainerRecreateRequests; 0: only at start. */
  killMechanismCheckIntervalMs?: number;
  /** With auto, where kruise-daemon's pods are: only their nodes get ContainerRecreateRequests. */
  kruiseNamespace: string;
  /** The Lease the watcher runs under (leader election): a change of kill mechanism is an event on it. */
  lease?: { namespace: string; name: string };
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
  /** The API clients the watcher's requests go through; made from kubeConfig when unset. */
  clients?: WatcherClients;
  /** How the pod cache lists and watches; through kubeConfig when unset. */
  listWatch?: PodListWatch;
  /** How the kill mechanism is read from the cluster; resolveKillMechanism, through kubeConfig, when unset. */
  resolveKillMechanism?: typeof resolveKillMechanism;
}

/** The clients of the watcher's requests about pods, nodes, events, ContainerRecreateRequests and Jobs. */
export interface WatcherClients {
  core: CoreV1Api;
  custom: CustomObjectsApi;
  batch: BatchV1Api;
}

/** The watcher as serve runs it: started (once the kill mechanism is known, its parts are built and run), ready, stopped. */
export class Watcher {
  private readonly options: WatcherOptions;
  private controller: Controller | undefined;
  private killMechanism: KillMechanismFollower | undefined;
  private stopped = false;

  constructor(options: WatcherOptions) {
    this.options = options;
  }

  async start(): Promise<void> {
    const { options } = this;
    const follower = (this.killMechanism = new KillMechanismFollower({
      kubeConfig: options.kubeConfig,
      option: options.killMechanism,
      kruiseNamespace: options.kruiseNamespace,
      intervalMs: options.killMechanismCheckIntervalMs ?? 0,
      logger: options.logger,
      resolve: options.resolveKillMechanism,
      onChange: (previous, next) => void this.announce(previous, next),
    }));
    const kill = await follower.start();
    if (this.stopped) return follower.stop();
    options.logger.info({ killMechanism: kill.mechanism, namespaces: options.namespaces }, 'watcher starting');
    // Not awaited: a word for the operator, which the watch need not wait for.
    if (kill.mechanism === 'signal') void this.warnOfSignalLimits();
    this.controller = new Controller(options, follower);
    this.controller.start();
  }

  /** Ready once every watched namespace has been listed. */
  ready(): boolean {
    return this.controller?.cache.hasSynced() ?? false;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.killMechanism?.stop();
    await this.controller?.stop();
  }

  /** Says that the kill mechanism followed the cluster: a log line, and an event on the Lease the watcher runs under. */
  private async announce(previous: ClusterKillMechanism, next: ClusterKillMechanism): Promise<void> {
    const served = next.mechanism === 'crr' ? `the cluster now serves apps.kruise.io/${next.crrVersion} ContainerRecreateRequest` : 'the cluster no longer serves apps.kruise.io ContainerRecreateRequest';
    const message = `kill mechanism ${previous.mechanism} -> ${next.mechanism}: ${served}; a pod whose sidecars were told to stop already finishes with the mechanism it began with`;
    const { logger, lease, kubeConfig, clients } = this.options;
    logger.info({ previous: previous.mechanism, killMechanism: next.mechanism }, message);
    if (!lease) return;
    await new EventRecorder(clients?.core ?? kubeConfig.makeApiClient(CoreV1Api))
      .recordOnLease(lease, KILL_MECHANISM_CHANGED, message)
      .catch((error: unknown) => logger.warn({ err: error, lease }, 'could not record the change of kill mechanism as an event on the Lease'));
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

/** Ended pods read at once: a background task that must not compete with the stops for the API server. */
const ENDED_CONCURRENCY = 2;

/** The watcher's parts, built in one step: the cache feeds the queue, the queue runs the reconciler, the reconciler reads the cache. */
class Controller {
  readonly cache: PodCache;
  private readonly options: WatcherOptions;
  private readonly core: CoreV1Api;
  private readonly executor: Executor;
  /** What the watcher keeps of each pod in the watch, forgotten when it leaves. */
  private readonly memories: PodMemories;
  private readonly reconciler: Reconciler;
  private readonly queue: WorkQueue<string>;
  /** The pods read once they have ended (Executor.reportEnded), by key and uid; apart from the reconciles, two at a time. */
  private readonly ended: WorkQueue<string>;
  private readonly endedPods = new Map<string, EndedPod>();
  private readonly timers: NodeJS.Timeout[] = [];
  private sweeper: Sweeper | undefined;
  private stopped = false;

  constructor(options: WatcherOptions, kill: KillMechanismFollower) {
    const { kubeConfig, logger, metrics, clients } = options;
    this.options = options;
    this.core = clients?.core ?? withPlainPodCalls(kubeConfig.makeApiClient(CoreV1Api), kubeConfig);
    this.cache = new PodCache({ kubeConfig, namespaces: options.namespaces, logger, listWatch: options.listWatch }, {
      changed: (key) => this.queue.add(key),
      gone: (pod) => this.forget(pod),
      // The API server answers again: what failed meanwhile is retried now, not at the end of its backoff.
      recovered: (namespace) => {
        logger.info({ namespace, retrying: this.queue.retrying }, 'pod watch recovered; retrying failed pods now');
        this.queue.retryNow();
      },
    });
    this.memories = new PodMemories((pod) => this.cache.get(podKey(pod))?.metadata?.uid === pod.metadata?.uid);
    this.executor = new Executor({
      core: this.core,
      custom: clients?.custom ?? withPlainCustomObjectCalls(kubeConfig.makeApiClient(CustomObjectsApi), kubeConfig),
      batch: clients?.batch ?? kubeConfig.makeApiClient(BatchV1Api),
      // Read at each request: the version served now.
      get crrVersion() {
        return kill.crrVersion;
      },
      metrics,
      quickExitImages: [options.quickExitImage].filter((image) => image !== ''),
    });
    const { signal, quickExitImageAllowlist, quickExitImage } = options;
    this.reconciler = new Reconciler({
      pods: this.cache,
      nodes: new NodeLookup(this.core),
      core: this.core,
      // The kill mechanism of each pod is chosen by policy from the cluster's (below) and the pod's memory.
      settings: { killMechanism: 'signal', signal, quickExitImageAllowlist, quickExitImage },
      cluster: () => kill.current,
      memories: this.memories,
      executor: this.executor,
      logger,
    });
    this.queue = new WorkQueue({
      concurrency: options.concurrency,
      process: (key) => this.reconciler.reconcile(key),
      backoff: retryDelay,
      // A refusal was reported on the pod by the reconciler already: the queue only logs and retries.
      onError: (key, error, attempt, retryInMs) => {
        logger.warn({ pod: key, attempt, retryInMs, refused: isRefusal(error), err: error instanceof Refused ? error.cause : error }, 'reconcile failed, will retry');
      },
      observer: metrics.queue,
    });
    this.ended = new WorkQueue({
      concurrency: ENDED_CONCURRENCY,
      process: async (key) => {
        const ended = this.endedPods.get(key);
        try {
          const report = ended ? await this.executor.reportEnded(ended) : undefined;
          // A sidecar the kubelet is still killing: the record says how it ended once it has.
          if (report && 'requeueAfterMs' in report) return report;
          if (report) logger.info({ pod: podKey(ended!.pod), uid: ended!.pod.metadata?.uid, phase: report.record.phase, mains: report.record.mains, sidecars: report.record.sidecars }, 'pod ended');
          if (report?.exitFailed) logger.warn({ pod: podKey(ended!.pod), uid: ended!.pod.metadata?.uid, code: 'sidecar-exit-failed-pod' }, 'the pod failed by the exit code of a stopped sidecar, although its main containers succeeded');
        } catch (error) {
          // A refusal (an events quota, RBAC, an admission policy) does not pass by retrying: the log says it once. Anything else is retried.
          if (!isRefusal(error)) throw error;
          logger.warn({ pod: key.split('\n')[0], err: error }, 'the stop record or the event of an ended pod was refused; not retried');
        }
        this.endedPods.delete(key);
      },
      backoff: retryDelay,
      onError: (key, error, attempt, retryInMs) => logger.warn({ pod: key.split('\n')[0], attempt, retryInMs, err: error }, 'reading an ended pod failed, will retry'),
    });
  }

  start(): void {
    const { options } = this;
    options.metrics.observe({ queue: this.queue, pendingSince: () => this.pendingSince() });
    this.cache.start();
    if (options.sweepIntervalMs > 0) this.startSweeper();
    if (options.resyncIntervalMs > 0) this.every(options.resyncIntervalMs, async () => this.resync());
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.sweeper?.stop();
    this.cache.stop();
    this.options.metrics.observe(undefined);
    await Promise.all([this.queue.shutDown(), this.ended.shutDown()]);
  }

  /**
   * A pod left the watch when it ended (or was deleted): the last state seen says when its main
   * containers finished. A pod whose sidecars were told to stop is read once more, for its stop record.
   */
  private forget(pod: V1Pod): void {
    const { observed, readEnd } = this.executor.left(pod, this.memories.forget(pod));
    if (observed) this.options.logger.info({ pod: podKey(pod), uid: pod.metadata?.uid }, 'sidecars stopped; the pod left the watch');
    if (readEnd) {
      const key = `${podKey(pod)}\n${pod.metadata?.uid ?? ''}`;
      this.endedPods.set(key, readEnd);
      this.ended.add(key);
    }
  }

  /** Runs `job` every `intervalMs`, one run at a time. */
  private every(intervalMs: number, job: () => Promise<void>): void {
    const index = this.timers.length;
    const schedule = (delayMs: number) => {
      this.timers[index] = setTimeout(() => {
        void job().then(() => {
          if (!this.stopped) schedule(intervalMs);
        });
      }, delayMs);
    };
    schedule(intervalMs);
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

  private startSweeper(): void {
    const { options } = this;
    this.sweeper = new Sweeper({
      core: this.core,
      namespaces: options.namespaces,
      excludedNamespaces: options.excludedNamespaces,
      namespaceLabels: options.namespaceLabels,
      quickExitImageAllowlist: options.quickExitImageAllowlist,
      intervalMs: options.sweepIntervalMs,
      logger: options.logger,
    });
    this.sweeper.start();
  }

  private pendingSince(): number[] {
    return this.cache.pods().flatMap((pod) => sidecarsPendingSince(pod) ?? []);
  }
}
