// The watcher: a watch of the pods labelled managed=true and still in flight (not in a terminal
// phase) feeds a work queue, which reconciles one pod at a time per key (reconciler.ts: plan, then
// execute). Its cache keeps only what the plan reads of each pod (retainedPod). Besides the watch,
// a periodic resync queues every managed pod again, and the sweeper labels pods the webhook missed.
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../logger.ts';
import { IN_FLIGHT_FIELD_SELECTOR, MANAGED, MANAGED_LABEL, retainedPod, sidecarsPendingSince, signalUserNote, type KillMechanism, type SignalSettings } from '../policy/index.ts';
import { readServerVersion } from '../kube/server-version.ts';
import { KillMechanismFollower, killMechanismFor, type ResolvedKillMechanism } from './discovery.ts';
import { EventRecorder, KILL_MECHANISM_CHANGED } from './events.ts';
import { Executor } from './executor.ts';
import type { WatcherMetrics } from './metrics.ts';
import { NodeLookup } from './nodes.ts';
import { WorkQueue } from './queue.ts';
import { Reconciler } from './reconciler.ts';
import { isRefusal, retryDelay } from './retries.ts';
import { PodReflector, podKey } from './reflector.ts';
import { sweep } from './sweeper.ts';

export interface WatcherOptions {
  kubeConfig: KubeConfig;
  /** Namespaces to watch; every namespace when empty. */
  namespaces: readonly string[];
  killMechanism: 'auto' | KillMechanism;
  /** With auto, how often the API server is asked again whether it serves ContainerRecreateRequests; 0: only at start. */
  killMechanismCheckIntervalMs?: number;
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
}

export class Watcher {
  private readonly options: WatcherOptions;
  private readonly core: CoreV1Api;
  private readonly reflectors: PodReflector[];
  private readonly queue: WorkQueue<string>;
  private readonly synced = new Set<PodReflector>();
  private reconciler: Reconciler | undefined;
  private executor: Executor | undefined;
  private killMechanism: KillMechanismFollower | undefined;
  private readonly timers: NodeJS.Timeout[] = [];
  private stopped = false;

  constructor(options: WatcherOptions) {
    this.options = options;
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.queue = new WorkQueue({
      concurrency: options.concurrency,
      process: (key) => this.reconciler!.reconcile(key),
      backoff: retryDelay,
      onError: (key, error, attempt, retryInMs) => {
        options.logger.warn({ pod: key, attempt, retryInMs, refused: isRefusal(error), err: error }, 'reconcile failed, will retry');
        const pod = isRefusal(error) ? this.findPod(key) : undefined;
        if (pod) void this.executor?.reportRefused(pod, error);
      },
      observer: options.metrics.queue,
    });
    const namespaces = options.namespaces.length > 0 ? options.namespaces : [undefined];
    this.reflectors = namespaces.map((namespace) => {
      const reflector: PodReflector = new PodReflector({
        kubeConfig: options.kubeConfig,
        labelSelector: `${MANAGED_LABEL}=${MANAGED}`,
        fieldSelector: IN_FLIGHT_FIELD_SELECTOR,
        retain: retainedPod,
        ...(namespace ? { namespace } : {}),
        // A pod leaves the watch when it ends (or is deleted): the last state seen says when its main containers finished.
        onEvent: (event, pod) => {
          if (event !== 'deleted') this.queue.add(podKey(pod));
          else if (this.executor?.forget(pod)) options.logger.info({ pod: podKey(pod), uid: pod.metadata?.uid }, 'sidecars stopped; the pod left the watch');
        },
        onSynced: () => {
          this.synced.add(reflector);
          options.logger.info({ namespace: namespace ?? '*', pods: reflector.cache.size }, 'managed pods listed');
        },
        onError: (error) => options.logger.warn({ err: error, namespace: namespace ?? '*' }, 'pod watch failed, retrying'),
        // The API server answers again: what failed meanwhile is retried now, not at the end of its backoff.
        onRecovered: () => {
          options.logger.info({ namespace: namespace ?? '*', retrying: this.queue.retrying }, 'pod watch recovered; retrying failed pods now');
          this.queue.retryNow();
        },
      });
      return reflector;
    });
  }

  async start(): Promise<void> {
    const { options } = this;
    const follower = (this.killMechanism = new KillMechanismFollower({
      kubeConfig: options.kubeConfig,
      option: options.killMechanism,
      intervalMs: options.killMechanismCheckIntervalMs ?? 0,
      logger: options.logger,
      onChange: (previous, next) => void this.announce(previous, next),
    }));
    const kill = await follower.start();
    const executor = (this.executor = new Executor({
      core: this.core,
      custom: options.kubeConfig.makeApiClient(CustomObjectsApi),
      // Read at each request: the version served now.
      get crrVersion() {
        return follower.crrVersion;
      },
      metrics: options.metrics,
      inFlight: (pod) => this.findPod(podKey(pod))?.metadata?.uid === pod.metadata?.uid,
    }));
    const { signal, quickExitImageAllowlist } = options;
    this.reconciler = new Reconciler({
      findPod: (key) => this.findPod(key),
      nodes: new NodeLookup(this.core),
      core: this.core,
      settings: (pod) => ({ killMechanism: killMechanismFor(pod, executor.startedWith(pod), follower.current), signal, quickExitImageAllowlist }),
      executor,
      logger: options.logger,
    });
    options.logger.info({ killMechanism: kill.mechanism, namespaces: options.namespaces }, 'watcher starting');
    // Not awaited: a word for the operator, which the watch need not wait for.
    if (kill.mechanism === 'signal') void this.warnOfSignalLimits();
    options.metrics.observe({ queue: this.queue, pendingSince: () => this.pendingSince() });
    for (const reflector of this.reflectors) reflector.start();
    if (options.sweepIntervalMs > 0) this.every(options.sweepIntervalMs, () => this.sweep(), true);
    if (options.resyncIntervalMs > 0) this.every(options.resyncIntervalMs, async () => this.resync());
  }

  /** Says at start what the signal mechanism cannot know on this Kubernetes release (README, "Kubernetes versions"). */
  private async warnOfSignalLimits(): Promise<void> {
    try {
      const version = await readServerVersion(this.options.kubeConfig);
      const note = signalUserNote(version);
      if (note) this.options.logger.warn({ kubernetes: version.gitVersion }, note);
    } catch (error) {
      this.options.logger.debug({ err: error }, 'could not read the Kubernetes version to say what the signal mechanism can know there');
    }
  }

  /** Says that the kill mechanism followed the cluster: a log line, and an event on the Lease the watcher runs under. */
  private async announce(previous: ResolvedKillMechanism, next: ResolvedKillMechanism): Promise<void> {
    const served = next.mechanism === 'crr' ? `the cluster now serves apps.kruise.io/${next.crrVersion} ContainerRecreateRequest` : 'the cluster no longer serves apps.kruise.io ContainerRecreateRequest';
    const message = `kill mechanism ${previous.mechanism} -> ${next.mechanism}: ${served}; a pod whose sidecars were told to stop already finishes with the mechanism it began with`;
    this.options.logger.info({ previous: previous.mechanism, killMechanism: next.mechanism }, message);
    const { lease } = this.options;
    if (!lease) return;
    const involvedObject = { kind: 'Lease', apiVersion: 'coordination.k8s.io/v1', ...lease };
    // A key of its own for every change: crr, signal, then crr again is three events.
    await new EventRecorder(this.core).recordOn(involvedObject, 'Normal', KILL_MECHANISM_CHANGED, message, new Set(), `${message}\n${Date.now()}`).catch((error: unknown) => {
      this.options.logger.warn({ err: error, lease }, 'could not record the change of kill mechanism as an event on the Lease');
    });
  }

  /** Ready once every watched namespace has been listed. */
  ready(): boolean {
    return this.synced.size === this.reflectors.length;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.killMechanism?.stop();
    for (const timer of this.timers) clearTimeout(timer);
    for (const reflector of this.reflectors) reflector.stop();
    this.options.metrics.observe(undefined);
    await this.queue.shutDown();
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
    let count = 0;
    for (const reflector of this.reflectors) {
      for (const key of reflector.cache.keys()) {
        this.queue.add(key);
        count++;
      }
    }
    this.options.logger.debug({ pods: count }, 'resync: managed pods queued again');
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

  private findPod(key: string): V1Pod | undefined {
    for (const reflector of this.reflectors) {
      const pod = reflector.cache.get(key);
      if (pod) return pod;
    }
    return undefined;
  }

  private pendingSince(): number[] {
    return this.reflectors.flatMap((reflector) => [...reflector.cache.values()].flatMap((pod) => sidecarsPendingSince(pod) ?? []));
  }
}
