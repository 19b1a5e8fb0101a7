// The watcher: pods labelled managed=true only, one reconcile per pod at a time. Reconcile is
// the policy's decision for the pod on its node, executed by the action modules.
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Node, type V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../logger.ts';
import type { Counter, Histogram } from 'prom-client';
import { DONE, MANAGED, MANAGED_LABEL, classifyContainers, decide, isAllowedImage, type Action } from '../policy/index.ts';
import {
  killByCrr,
  killBySignal,
  hasTerminatedCondition,
  markTerminal,
  replaceImage,
  setLabel,
  setTerminatedCondition,
  signalContainerName,
  type ActionClients,
  type KillMechanism,
  type SignalSettings,
} from './actions.ts';
import { isApiError } from '../kube/api-errors.ts';
import { servedCrrVersion } from './discovery.ts';
import { EventRecorder } from './events.ts';
import type { WatcherMetrics } from './metrics.ts';
import { WorkQueue } from './queue.ts';
import { sweep } from './sweeper.ts';
import { PodReflector, podKey } from './reflector.ts';

export interface WatcherOptions {
  kubeConfig: KubeConfig;
  /** Namespaces to watch; every namespace when empty. */
  namespaces: readonly string[];
  killMechanism: 'auto' | KillMechanism;
  signal: SignalSettings;
  concurrency: number;
  logger: Logger;
  metrics: WatcherMetrics;
  /** How often the sweeper labels pods the webhook missed; 0 turns it off. */
  sweepIntervalMs: number;
  /** Namespaces the webhook does not serve; the sweeper skips them. */
  excludedNamespaces: readonly string[];
  quickExitImageAllowlist: readonly string[];
}

const NODE_CACHE_MS = 5 * 60_000;

export class Watcher {
  private readonly options: WatcherOptions;
  private readonly clients: ActionClients;
  private readonly events: EventRecorder;
  private readonly reflectors: PodReflector[];
  private readonly queue: WorkQueue<string>;
  private readonly nodes = new Map<string, { node: V1Node | undefined; fetchedAt: number }>();
  private readonly synced = new Set<PodReflector>();
  private readonly terminations: Counter<'mechanism' | 'result'>;
  private readonly latency: Histogram<'mechanism'>;
  private kill: { mechanism: 'crr'; version: string } | { mechanism: 'signal' } | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(options: WatcherOptions) {
    this.options = options;
    this.clients = { core: options.kubeConfig.makeApiClient(CoreV1Api), custom: options.kubeConfig.makeApiClient(CustomObjectsApi) };
    this.events = new EventRecorder(this.clients.core);
    this.queue = new WorkQueue({
      concurrency: options.concurrency,
      process: (key) => this.reconcile(key),
      onError: (key, error, attempt) => options.logger.warn({ pod: key, attempt, err: error }, 'reconcile failed, will retry'),
    });
    const namespaces = options.namespaces.length > 0 ? options.namespaces : [undefined];
    this.reflectors = namespaces.map((namespace) => {
      const reflector: PodReflector = new PodReflector({
        kubeConfig: options.kubeConfig,
        labelSelector: `${MANAGED_LABEL}=${MANAGED}`,
        ...(namespace ? { namespace } : {}),
        onEvent: (event, pod) => {
          if (event === 'deleted') this.events.forget(pod.metadata?.uid ?? '');
          else this.queue.add(podKey(pod));
        },
        onSynced: () => {
          this.synced.add(reflector);
          options.logger.info({ namespace: namespace ?? '*', pods: reflector.cache.size }, 'managed pods listed');
        },
        onError: (error) => options.logger.warn({ err: error, namespace: namespace ?? '*' }, 'pod watch failed, retrying'),
      });
      return reflector;
    });
    this.terminations = options.metrics.terminations;
    this.latency = options.metrics.latency;
  }

  async start(): Promise<void> {
    this.kill = await this.resolveKillMechanism();
    this.options.logger.info({ killMechanism: this.kill.mechanism, namespaces: this.options.namespaces }, 'watcher starting');
    for (const reflector of this.reflectors) reflector.start();
    if (this.options.sweepIntervalMs > 0) this.scheduleSweep(0);
  }

  private scheduleSweep(delayMs: number): void {
    // eslint-disable-next-line @typescript-eslint/no-misused-promises -- the callback catches every error itself
    this.sweepTimer = setTimeout(async () => {
      try {
        const labelled = await sweep({
          core: this.clients.core,
          namespaces: this.options.namespaces,
          excludedNamespaces: this.options.excludedNamespaces,
          quickExitImageAllowlist: this.options.quickExitImageAllowlist,
        });
        if (labelled.length > 0) this.options.logger.info({ pods: labelled }, 'sweeper labelled pods the webhook missed');
      } catch (error) {
        this.options.logger.warn({ err: error }, 'sweep failed; trying again at the next interval');
      }
      if (!this.stopped) this.scheduleSweep(this.options.sweepIntervalMs);
    }, delayMs);
  }

  /** Ready once every watched namespace has been listed. */
  ready(): boolean {
    return this.synced.size === this.reflectors.length;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.sweepTimer);
    for (const reflector of this.reflectors) reflector.stop();
    await this.queue.shutDown();
  }

  private async resolveKillMechanism(): Promise<NonNullable<Watcher['kill']>> {
    if (this.options.killMechanism === 'signal') return { mechanism: 'signal' };
    const version = await servedCrrVersion(this.options.kubeConfig);
    if (version) return { mechanism: 'crr', version };
    if (this.options.killMechanism === 'crr') {
      throw new Error('--kill-mechanism crr: the cluster does not serve apps.kruise.io ContainerRecreateRequest; install OpenKruise or use --kill-mechanism signal');
    }
    return { mechanism: 'signal' };
  }

  private findPod(key: string): V1Pod | undefined {
    for (const reflector of this.reflectors) {
      const pod = reflector.cache.get(key);
      if (pod) return pod;
    }
    return undefined;
  }

  private async nodeOf(pod: V1Pod): Promise<V1Node | undefined> {
    const name = pod.spec?.nodeName;
    if (!name) return undefined;
    const cached = this.nodes.get(name);
    if (cached && Date.now() - cached.fetchedAt < NODE_CACHE_MS) return cached.node;
    let node: V1Node | undefined;
    try {
      node = await this.clients.core.readNode({ name });
    } catch (error) {
      if (!isApiError(error, 404)) throw error;
    }
    this.nodes.set(name, { node, fetchedAt: Date.now() });
    return node;
  }

  private async reconcile(key: string): Promise<void> {
    const pod = this.findPod(key);
    if (!pod) return;
    const log = this.options.logger.child({ pod: key, uid: pod.metadata?.uid });
    const decision = decide(pod, await this.nodeOf(pod));
    if (decision.outcome === 'finished') {
      await setLabel(this.clients, pod, MANAGED_LABEL, DONE);
      log.info('sidecars stopped; pod leaves the watch');
      return;
    }
    if (decision.outcome !== 'act') {
      log.debug({ outcome: decision.outcome, reason: decision.reason }, 'nothing to do');
      return;
    }
    try {
      await this.execute(pod, decision.actions, log);
    } catch (error) {
      await this.events.record(pod, 'Warning', 'SidecarTerminationFailed', `could not stop the sidecars: ${messageOf(error)}`).catch(() => {});
      throw error;
    }
  }

  private async execute(pod: V1Pod, actions: Action[], log: Logger): Promise<void> {
    const told: Stopping[] = [];
    let conditionSet = hasTerminatedCondition(pod);
    // Announced before the requests are made, once per pod: a watcher that dies between a request
    // and its event cannot leave the pod without one (its successor may find nothing left to do).
    const planned = this.planned(pod, actions);
    if (planned.length > 0) await this.events.record(pod, 'Normal', 'SidecarTerminating', `stopping sidecars: ${planned.join(', ')}`, { oncePerPod: true });
    for (const action of withKillsMerged(actions)) {
      switch (action.type) {
        case 'cannotStop':
          await this.events.record(pod, 'Warning', 'SidecarTerminationFailed', `sidecar ${action.container} cannot be stopped: ${action.reason}`);
          this.terminations.inc({ mechanism: 'none', result: 'refused' });
          break;
        case 'replaceImage':
          if (!this.imageAllowed(action.image)) {
            await this.events.record(pod, 'Warning', 'SidecarTerminationFailed', `sidecar ${action.container} is not stopped: its quick-exit image is not in --quick-exit-image-allowlist`);
            this.terminations.inc({ mechanism: 'image', result: 'refused' });
            break;
          }
          await this.measured(pod, 'image', () => replaceImage(this.clients, pod, action.container, action.image));
          told.push({ description: byImage(action.container, action.image), now: true });
          break;
        case 'markTerminal':
          await this.measured(pod, 'phase', () => markTerminal(this.clients, pod, action.phase));
          conditionSet = true;
          log.info({ phase: action.phase }, 'pod moved to its terminal phase; sidecar exit codes ignored');
          break;
        case 'killAll':
          told.push(...(await this.killAll(pod, action.containers)));
          break;
      }
    }
    if (told.length === 0) return;
    const message = `stopping sidecars: ${told.map((s) => s.description).join(', ')}`;
    if (!conditionSet) await setTerminatedCondition(this.clients, pod, message);
    // Logged once: a reconcile that finds its requests already made says nothing new.
    if (!told.some((s) => s.now)) return;
    log.info({ sidecars: told.map((s) => s.description) }, 'stopping sidecars');
  }

  /** The sidecars the actions will tell to stop, in the words of the event. */
  private planned(pod: V1Pod, actions: Action[]): string[] {
    return actions.flatMap((action) => {
      if (action.type === 'replaceImage') return this.imageAllowed(action.image) ? [byImage(action.container, action.image)] : [];
      if (action.type !== 'kill' || this.cannotSignal(pod)) return [];
      return [byKill(action.container, this.kill!.mechanism)];
    });
  }

  /** The signal mechanism cannot reach a sidecar whose pod shares one PID namespace (PID 1 is the pause process). */
  private cannotSignal(pod: V1Pod): boolean {
    return this.kill!.mechanism === 'signal' && pod.spec?.shareProcessNamespace === true;
  }

  /** Stops the containers by the kill mechanism; says which were told to stop, and whether just now. */
  private async killAll(pod: V1Pod, containers: string[]): Promise<Stopping[]> {
    const kill = this.kill!;
    if (kill.mechanism === 'crr') {
      const result = await this.measured(pod, 'crr', () => killByCrr(this.clients, kill.version, pod, containers));
      return containers.map((c) => ({ description: byKill(c, 'crr'), now: result === 'created' }));
    }
    if (this.cannotSignal(pod)) {
      this.terminations.inc({ mechanism: 'signal', result: 'refused' });
      await this.events.record(
        pod,
        'Warning',
        'SidecarTerminationFailed',
        `cannot signal ${containers.join(', ')}: the pod sets shareProcessNamespace, so PID 1 is the pause process, not the sidecar; use --kill-mechanism crr or a quick-exit image`,
      );
      return [];
    }
    const told: Stopping[] = [];
    for (const container of containers) {
      const result = await this.measured(pod, 'signal', () => killBySignal(this.clients, this.options.signal, pod, container));
      told.push({ description: byKill(container, 'signal'), now: result === 'created' });
      if (result === 'exists') await this.checkSignalTakenEffect(pod, container);
    }
    return told;
  }

  /**
   * A sidecar still running a grace period after its SIGTERM ignores the signal: its PID 1 has no
   * handler, and nothing inside its PID namespace can SIGKILL it. Say so once; until then, look again.
   */
  private async checkSignalTakenEffect(pod: V1Pod, container: string): Promise<void> {
    const signal = pod.status?.ephemeralContainerStatuses?.find((s) => s.name === signalContainerName(container));
    const signalledAt = signal?.state?.terminated?.finishedAt ?? signal?.state?.running?.startedAt;
    if (!signalledAt) return;
    const graceMs = (pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000;
    const remainingMs = new Date(signalledAt).getTime() + graceMs - Date.now();
    if (remainingMs > 0) {
      this.queue.addAfter(podKey(pod), remainingMs + 1000);
      return;
    }
    this.terminations.inc({ mechanism: 'signal', result: 'ignored' });
    await this.events.record(
      pod,
      'Warning',
      'SidecarTerminationFailed',
      `sidecar ${container} still runs ${Math.round(graceMs / 1000)}s after SIGTERM: its PID 1 ignores SIGTERM and cannot be killed from inside its PID namespace; make it exit on SIGTERM, or stop it with a quick-exit image or --kill-mechanism crr`,
    );
  }

  /** The admission rule, applied again: the webhook does not see every labelled pod. */
  private imageAllowed(image: string): boolean {
    const allowlist = this.options.quickExitImageAllowlist;
    return allowlist.length === 0 || isAllowedImage(image, allowlist);
  }

  private async measured<T>(pod: V1Pod, mechanism: string, act: () => Promise<T>): Promise<T> {
    try {
      const result = await act();
      if (result === 'exists') return result; // done by an earlier reconcile
      this.terminations.inc({ mechanism, result: 'ok' });
      const finishedAt = lastMainFinishedAt(pod);
      if (finishedAt !== undefined) this.latency.observe({ mechanism }, Math.max(0, Date.now() - finishedAt) / 1000);
      return result;
    } catch (error) {
      this.terminations.inc({ mechanism, result: 'error' });
      throw error;
    }
  }
}

/** When the last main container finished, in epoch milliseconds. */
function lastMainFinishedAt(pod: V1Pod): number | undefined {
  const mains = new Set(classifyContainers(pod.spec ?? {}).filter((r) => r.role === 'main').map((r) => r.name));
  const times = (pod.status?.containerStatuses ?? [])
    .filter((s) => mains.has(s.name) && s.state?.terminated?.finishedAt)
    .map((s) => new Date(s.state!.terminated!.finishedAt!).getTime());
  return times.length > 0 ? Math.max(...times) : undefined;
}

/** A sidecar told to stop, and whether by this reconcile. */
interface Stopping {
  description: string;
  now: boolean;
}

type Step = Exclude<Action, { type: 'kill' }> | { type: 'killAll'; containers: string[] };

/** The decision's kills become one step where the first was, so a pod gets one ContainerRecreateRequest. */
function withKillsMerged(actions: Action[]): Step[] {
  const containers = actions.flatMap((a) => (a.type === 'kill' ? [a.container] : []));
  return actions.flatMap((action): Step[] => {
    if (action.type !== 'kill') return [action];
    return action.container === containers[0] ? [{ type: 'killAll', containers }] : [];
  });
}

function messageOf(error: unknown): string {
  const body = (error as { body?: unknown } | null)?.body;
  if (typeof body === 'string') {
    try {
      return (JSON.parse(body) as { message?: string }).message ?? body;
    } catch {
      return body;
    }
  }
  return error instanceof Error ? error.message : String(error);
}

/** How a sidecar is told to stop, in the words of events and logs. */
function byImage(container: string, image: string): string {
  return `${container} (quick-exit image ${image})`;
}

function byKill(container: string, mechanism: 'crr' | 'signal'): string {
  return `${container} (${mechanism === 'crr' ? 'ContainerRecreateRequest' : 'SIGTERM'})`;
}
