// Plays kubelet (and kruise-daemon) against a real API server for end-to-end tests: registers
// a normal and a virtual-kubelet node, binds unscheduled pods to them (there is no scheduler),
// "runs" their containers in memory and reports container states, conditions and phase
// through pods/status the way kubelet computes them.
//
// What a container does is scripted per pod with annotations (names in full; <c> = container name):
//   sim.sidecar-terminator.io/exit-after.<c>  "2s" | "500ms" | "1m" | "never"  exits on its own this long after each start
//   sim.sidecar-terminator.io/exit-code.<c>   "1" | "1,0"  the code of that exit, one per start, the last repeats (default 0)
//   sim.sidecar-terminator.io/on-sigterm.<c>  exit0 | exit143 | ignore  (ignore: SIGKILL, 137, after the grace period)
//   sim.sidecar-terminator.io/needs.<c>       "proxy" | "proxy,sql"  a run that ends on its own while one of these does not run exits 1
// and per container with exitContainer() / setSigtermReaction(). Without annotations, main
// containers exit 0 after `defaultMainExitAfterMs` (never, if unset), containers marked as
// Kruise sidecars (KRUISE_TERMINATE_SIDECAR_* env) and native sidecars run until stopped.
// A regular container that exited is restarted as the kubelet's ContainerShouldRestart decides: by
// its own restartPolicy and restartPolicyRules (Kubernetes 1.35+), else the pod's restartPolicy; the
// pod is terminal once no regular container runs or waits for its restart.
//
// It reacts as kubelet / kruise-daemon would to in-place image changes (a quick-exit image
// exits 0 at once; an image that cannot be pulled waits in ErrImagePull/ImagePullBackOff when
// kubelet would restart the container), ContainerRecreateRequests, ephemeral containers
// signalling their target (refused with EPERM, exit 1, unless they run as the target's user or
// as root with CAP_KILL), a terminal phase written by someone else, and pod deletion. Container
// statuses report the user each container runs as, as containerd 2 does.
import {
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1Container,
  type V1ContainerStatus,
  type V1Pod,
} from '@kubernetes/client-node';
import { describeError, isApiError } from './sim/api-errors.ts';
import { ContainerBehaviour, isPullableImageByDefault, isQuickExitImageByDefault, type SigtermReaction } from './sim/container-behaviour.ts';
import { ContainerRecreateRequestExecutor, type RecreateContainers } from './sim/container-recreate-requests.ts';
import { KeyedLanes } from './sim/lanes.ts';
import { KRUISE_NAMESPACE, createKruiseDaemonPods } from './sim/kruise-daemon-pods.ts';
import { SimulatedNodes } from './sim/nodes.ts';
import { PodRuntime, type Later, type RuntimeTimings } from './sim/pod-runtime.ts';
import { startResilientInformer, type RunningInformer } from './sim/resilient-informer.ts';
import { waitFor, type WaitOptions } from './wait.ts';

export { simAnnotations, type SigtermReaction } from './sim/container-behaviour.ts';
export { VIRTUAL_NODE_LABEL, VIRTUAL_NODE_TAINT } from './sim/nodes.ts';
export { CRR } from './sim/container-recreate-requests.ts';

export interface KubeletSimulatorOptions {
  /** Default ['sim-node']. */
  normalNodes?: string[];
  /** Labelled type=virtual-kubelet, tainted virtual-kubelet.io/provider=mock:NoSchedule. Default ['sim-virtual-node']. */
  virtualNodes?: string[];
  /** Only pods (and ContainerRecreateRequests) in these namespaces. Default: all namespaces. */
  namespaces?: string[];
  /** Main containers without a sidecar marker exit 0 this long after starting. Default: they run until told. */
  defaultMainExitAfterMs?: number;
  /** Regular init containers exit 0 this long after starting. Default 100. */
  defaultInitExitAfterMs?: number;
  /** Default 'exit0'. */
  defaultSigtermReaction?: SigtermReaction;
  /** Default 500 (kubelet's back-off starts at 10 s). */
  restartDelayMs?: number;
  /** How long a quick-exit image, and an ephemeral container, runs before exiting 0. Default 100. */
  quickExitAfterMs?: number;
  /** Caps every termination grace period. Default 2000. */
  maxGracePeriodMs?: number;
  /** Default: the container's KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE value, or an image containing "quick-exit". */
  isQuickExitImage?: (image: string, container: V1Container) => boolean;
  /** Default: every image but those of a registry under `.invalid` (e.g. registry.invalid/quick-exit:1.0). */
  isPullableImage?: (image: string) => boolean;
  /** The uid each image runs as without runAsUser (its USER); default: root (0) for every image. */
  imageUsers?: Record<string, number>;
  /** Report the user each container runs as in its status (containerd 2, Kubernetes 1.31+). Default true. */
  reportUsers?: boolean;
  /** Where errors go. Default: stderr. */
  log?: (message: string) => void;
}

/** A pod running on a simulated node. */
interface TrackedPod {
  runtime: PodRuntime;
  /** The last status written, to write only changes. */
  sentStatus?: string;
  removalRequested: boolean;
}

const statusConflictAttempts = 5;
const failedSyncRetryMs = 2000;
const strategicMergePatch = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

export class KubeletSimulator {
  private readonly kubeConfig: KubeConfig;
  private readonly core: CoreV1Api;
  private readonly namespaces: readonly string[] | undefined;
  private readonly behaviour: ContainerBehaviour;
  private readonly timings: RuntimeTimings;
  private readonly log: (message: string) => void;
  private readonly nodes: SimulatedNodes;
  private readonly crrExecutor: ContainerRecreateRequestExecutor;
  private readonly lanes = new KeyedLanes();
  /** By namespace/name. */
  private readonly pods = new Map<string, TrackedPod>();
  private readonly syncQueued = new Set<string>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private informers: RunningInformer[] = [];
  private stopped = false;

  constructor(kubeConfig: KubeConfig, options: KubeletSimulatorOptions = {}) {
    this.kubeConfig = kubeConfig;
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.namespaces = options.namespaces;
    this.log = options.log ?? ((message) => console.error(`[kubelet-simulator] ${message}`));
    this.behaviour = new ContainerBehaviour({
      defaultMainExitAfterMs: options.defaultMainExitAfterMs,
      defaultInitExitAfterMs: options.defaultInitExitAfterMs ?? 100,
      defaultSigtermReaction: options.defaultSigtermReaction ?? 'exit0',
      isQuickExitImage: options.isQuickExitImage ?? isQuickExitImageByDefault,
      isPullableImage: options.isPullableImage ?? isPullableImageByDefault,
      imageUsers: options.imageUsers ?? {},
      reportUsers: options.reportUsers ?? true,
    });
    this.timings = {
      restartDelayMs: options.restartDelayMs ?? 500,
      quickExitAfterMs: options.quickExitAfterMs ?? 100,
      maxGracePeriodMs: options.maxGracePeriodMs ?? 2000,
    };
    this.nodes = new SimulatedNodes(kubeConfig, options.normalNodes ?? ['sim-node'], options.virtualNodes ?? ['sim-virtual-node'], this.log);
    this.crrExecutor = new ContainerRecreateRequestExecutor(kubeConfig, this.recreateContainers, this.log);
  }

  get normalNodes(): readonly string[] {
    return this.nodes.normal;
  }

  get virtualNodes(): readonly string[] {
    return this.nodes.virtual;
  }

  async start(): Promise<void> {
    await this.nodes.register();
    const podHandlers = {
      changed: (pod: V1Pod) => {
        const nodeName = pod.spec?.nodeName;
        if (!nodeName || this.nodes.owns(nodeName)) this.requestSync(podKey(pod));
      },
      deleted: (pod: V1Pod) => {
        if (this.pods.has(podKey(pod))) this.requestSync(podKey(pod));
      },
    };
    // kruise-daemon's pods run in their own namespace, watched whatever `namespaces` says.
    const sources = this.namespaces
      ? [...new Set([...this.namespaces, KRUISE_NAMESPACE])].map((namespace) => ({
          path: `/api/v1/namespaces/${namespace}/pods`,
          list: () => this.core.listNamespacedPod({ namespace }),
        }))
      : [{ path: '/api/v1/pods', list: () => this.core.listPodForAllNamespaces() }];
    this.informers = await Promise.all(
      sources.map(({ path, list }) => startResilientInformer(this.kubeConfig, path, list, podHandlers, this.log)),
    );
    await this.crrExecutor.start(this.namespaces);
    await createKruiseDaemonPods(this.core, this.nodes.normal);
  }

  /** Stops watching and every timer; pods and nodes stay as they are. */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([...this.informers.map((informer) => informer.stop()), this.crrExecutor.stop()]);
    this.nodes.stop();
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    for (const tracked of this.pods.values()) tracked.runtime.dispose();
    await this.lanes.idle();
    this.pods.clear();
  }

  /** Makes a container's process exit with that code, once it runs (waits for it to start). */
  async exitContainer(namespace: string, podName: string, containerName: string, exitCode: number, options?: WaitOptions): Promise<void> {
    const key = `${namespace}/${podName}`;
    await waitFor(`container ${containerName} of pod ${key} to run`, () => this.pods.get(key)?.runtime.isRunning(containerName), options);
    await this.lanes.run(key, async () => {
      if (!this.pods.get(key)?.runtime.exitOnRequest(containerName, exitCode)) {
        throw new Error(`container ${containerName} of pod ${key} is not running`);
      }
      await this.sync(key);
    });
  }

  /** How a container reacts to SIGTERM from now on; wins over the pod's annotation. May be set before the pod exists. */
  setSigtermReaction(namespace: string, podName: string, containerName: string, reaction: SigtermReaction): void {
    this.behaviour.setSigtermReaction(namespace, podName, containerName, reaction);
  }

  /** Polls the namespace's pods until one matches and returns it. */
  waitForPod(namespace: string, matches: (pod: V1Pod) => boolean, options?: WaitOptions & { description?: string }): Promise<V1Pod> {
    return waitFor(
      options?.description ?? `a pod in ${namespace} matching the condition`,
      async () => (await this.core.listNamespacedPod({ namespace })).items.find(matches),
      options,
    );
  }

  private requestSync(key: string): void {
    if (this.stopped || this.syncQueued.has(key)) return;
    this.syncQueued.add(key);
    this.lanes
      .run(key, () => {
        this.syncQueued.delete(key);
        return this.sync(key);
      })
      .catch((err: unknown) => this.syncFailed(key, err));
  }

  private syncFailed(key: string, err: unknown): void {
    if (this.stopped) return;
    this.log(`pod ${key}: ${describeError(err)}; retrying`);
    this.after(failedSyncRetryMs, () => this.requestSync(key));
  }

  /** Kubelet's sync of one pod: bind it if unscheduled, else run it and write its status; remove it once deleted and stopped. */
  private async sync(key: string): Promise<void> {
    for (let attempt = 1; !this.stopped; attempt++) {
      const pod = await this.readPod(key);
      if (!pod) return this.forget(key);
      const nodeName = pod.spec?.nodeName;
      if (!nodeName) return this.bind(pod);
      if (!this.nodes.owns(nodeName)) return this.forget(key);
      const tracked = this.track(key, pod);
      tracked.runtime.observe(pod);
      tracked.runtime.advance();
      if (await this.writeStatus(tracked, pod)) {
        if (tracked.runtime.readyToBeRemoved()) await this.remove(tracked, pod);
        return;
      }
      if (attempt === statusConflictAttempts) throw new Error(`status write conflicted ${attempt} times`);
    }
  }

  private async readPod(key: string): Promise<V1Pod | undefined> {
    const [namespace = '', name = ''] = key.split('/');
    try {
      return await this.core.readNamespacedPod({ namespace, name });
    } catch (err) {
      if (isApiError(err, 404)) return undefined;
      throw err;
    }
  }

  private async bind(pod: V1Pod): Promise<void> {
    if (pod.metadata?.deletionTimestamp || (pod.spec?.schedulingGates?.length ?? 0) > 0) return;
    const name = pod.metadata?.name ?? '';
    const target = { kind: 'Node', name: this.nodes.choose(pod) };
    try {
      await this.core.createNamespacedPodBinding({ namespace: pod.metadata?.namespace ?? '', name, body: { metadata: { name }, target } });
    } catch (err) {
      if (!isApiError(err, 409) && !isApiError(err, 404)) throw err; // already bound, or gone
    }
  }

  private track(key: string, pod: V1Pod): TrackedPod {
    const existing = this.pods.get(key);
    if (existing && existing.runtime.uid === pod.metadata?.uid) return existing;
    existing?.runtime.dispose(); // a new pod with the same name
    const tracked: TrackedPod = { runtime: new PodRuntime(pod, this.behaviour, this.timings, this.laterFor(key)), removalRequested: false };
    this.pods.set(key, tracked);
    return tracked;
  }

  private forget(key: string): void {
    this.pods.get(key)?.runtime.dispose();
    this.pods.delete(key);
  }

  /**
   * Writes the status if it changed: a strategic merge patch, so conditions set by others stay,
   * with the resourceVersion read, so a phase set by someone meanwhile is never overwritten. False on conflict.
   */
  private async writeStatus(tracked: TrackedPod, pod: V1Pod): Promise<boolean> {
    const status = tracked.runtime.status();
    const serialized = JSON.stringify(status);
    if (!status || serialized === tracked.sentStatus) return true;
    const { name = '', namespace = '', resourceVersion } = pod.metadata ?? {};
    try {
      await this.core.patchNamespacedPodStatus({ name, namespace, body: { metadata: { resourceVersion }, status } }, strategicMergePatch);
    } catch (err) {
      if (isApiError(err, 409)) return false;
      throw err;
    }
    tracked.sentStatus = serialized;
    return true;
  }

  /** What kubelet does once a deleted pod's containers have stopped: delete it for good (grace period 0). */
  private async remove(tracked: TrackedPod, pod: V1Pod): Promise<void> {
    if (tracked.removalRequested) return;
    tracked.removalRequested = true;
    const { name = '', namespace = '', uid } = pod.metadata ?? {};
    try {
      // Options go in the body: the API server ignores query parameters when a delete has a body.
      await this.core.deleteNamespacedPod({ name, namespace, body: { gracePeriodSeconds: 0, preconditions: { uid } } });
    } catch (err) {
      if (!isApiError(err, 404) && !isApiError(err, 409)) throw err;
    }
  }

  /** Timers of a pod runtime: their action runs in the pod's lane, then the pod is synced. */
  private laterFor(key: string): Later {
    return (delayMs, action) =>
      this.after(delayMs, () => {
        this.lanes
          .run(key, async () => {
            action();
            await this.sync(key);
          })
          .catch((err: unknown) => this.syncFailed(key, err));
      });
  }

  private after(delayMs: number, action: () => void): () => void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.stopped) action();
    }, delayMs);
    this.timers.add(timer);
    return () => {
      clearTimeout(timer);
      this.timers.delete(timer);
    };
  }

  /** For the ContainerRecreateRequest executor: stops containers of a pod on a simulated node. */
  private readonly recreateContainers: RecreateContainers = (namespace, podName, containers) => {
    const key = `${namespace}/${podName}`;
    return this.lanes.run(key, async () => {
      await this.sync(key); // the CRR may arrive before the pod's first sync
      const tracked = this.pods.get(key);
      if (!tracked) return undefined;
      const outcomes = containers.map((name) => tracked.runtime.recreate(name));
      await this.sync(key);
      return outcomes;
    });
  };
}

/** The status of a container, init container or ephemeral container, by name. */
export function findContainerStatus(pod: V1Pod, name: string): V1ContainerStatus | undefined {
  const status = pod.status;
  return [...(status?.initContainerStatuses ?? []), ...(status?.containerStatuses ?? []), ...(status?.ephemeralContainerStatuses ?? [])].find(
    (s) => s.name === name,
  );
}

function podKey(pod: V1Pod): string {
  return `${pod.metadata?.namespace}/${pod.metadata?.name}`;
}
