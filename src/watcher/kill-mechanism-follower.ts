// What the cluster offers for stopping sidecars by a kill, followed while the watcher runs. With
// `auto` the API server is asked again every interval whether it serves Kruise's
// ContainerRecreateRequest, and which nodes a kruise-daemon serves, so installing or removing
// OpenKruise needs no restart and a node without a daemon is never sent a request nobody acts on.
// Which mechanism each pod gets, given what the cluster offers and what its stop began with, is
// policy's (src/policy/kill-mechanism.ts).
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { servedCrrVersion } from '../kube/discovery.ts';
import { apiErrorMessage } from '../kube/api-errors.ts';
import { KRUISE_DAEMON_SELECTOR, readKruiseDaemonNodes } from '../kube/kruise-daemons.ts';
import type { Logger } from '../logger.ts';
import type { ClusterKillMechanism, KillMechanism, KruiseDaemonNodes } from '../policy/index.ts';

export interface KillMechanismSource {
  kubeConfig: KubeConfig;
  option: 'auto' | KillMechanism;
  /** The namespace of OpenKruise's kruise-daemon pods, read with auto. */
  kruiseNamespace: string;
}

/**
 * crr when asked for or, with auto, when the cluster serves Kruise's ContainerRecreateRequest
 * (with the nodes a kruise-daemon serves); signal otherwise. A failed read of the daemons is
 * thrown, or with `daemonReadErrors: 'unknown'` (at start, which must not fail on it) taken as
 * not knowing them.
 */
export async function resolveKillMechanism(source: KillMechanismSource, daemonReadErrors: 'throw' | 'unknown' = 'throw'): Promise<ClusterKillMechanism> {
  const { kubeConfig, option, kruiseNamespace } = source;
  if (option === 'signal') return { mechanism: 'signal' };
  const crrVersion = await servedCrrVersion(kubeConfig);
  if (crrVersion && option === 'crr') return { mechanism: 'crr', crrVersion };
  if (crrVersion) {
    let daemons: KruiseDaemonNodes;
    try {
      daemons = await readKruiseDaemonNodes(kubeConfig.makeApiClient(CoreV1Api), kruiseNamespace);
    } catch (error) {
      if (daemonReadErrors === 'throw') throw error;
      daemons = { unknown: `listing them failed: ${apiErrorMessage(error)}` };
    }
    return { mechanism: 'crr', crrVersion, daemons };
  }
  if (option === 'crr') {
    throw new Error('--kill-mechanism crr: the cluster does not serve apps.kruise.io ContainerRecreateRequest; install OpenKruise or use --kill-mechanism signal');
  }
  return { mechanism: 'signal' };
}

export interface KillMechanismFollowerOptions extends KillMechanismSource {
  /** How often auto asks again; 0: never. */
  intervalMs: number;
  logger: Logger;
  /** How the mechanism is read; resolveKillMechanism unless a test plays the cluster. */
  resolve?: typeof resolveKillMechanism;
  /** Told of every change of mechanism or version after the first resolution, once it is in effect. */
  onChange(previous: ClusterKillMechanism, next: ClusterKillMechanism): void;
}

/** At most this many node names in a log line. */
const NAMED_NODES = 10;

const named = (nodes: Iterable<string>) => [...nodes].slice(0, NAMED_NODES);

/** Whether two resolutions send the same requests to the same nodes. */
function sameNodes(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  return a.size === b.size && [...a].every((node) => b.has(node));
}

/** The cluster's kill mechanism now: resolved at start, then, with auto, every interval. */
export class KillMechanismFollower {
  private readonly options: KillMechanismFollowerOptions;
  private resolved: ClusterKillMechanism = { mechanism: 'signal' };
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(options: KillMechanismFollowerOptions) {
    this.options = options;
  }

  private get resolve(): typeof resolveKillMechanism {
    return this.options.resolve ?? resolveKillMechanism;
  }

  get current(): ClusterKillMechanism {
    return this.resolved;
  }

  /** The version to create ContainerRecreateRequests with, while the cluster serves them. */
  get crrVersion(): string | undefined {
    return this.resolved.mechanism === 'crr' ? this.resolved.crrVersion : undefined;
  }

  /** Resolves the mechanism (failing as resolveKillMechanism does), then follows the cluster with auto. */
  async start(): Promise<ClusterKillMechanism> {
    const { option, intervalMs } = this.options;
    this.resolved = await this.resolve(this.options, 'unknown');
    this.sayDaemonNodes(undefined);
    if (option === 'auto' && intervalMs > 0 && !this.stopped) this.schedule();
    return this.resolved;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      void this.check().finally(() => {
        if (!this.stopped) this.schedule();
      });
    }, this.options.intervalMs);
  }

  private async check(): Promise<void> {
    let next: ClusterKillMechanism;
    try {
      next = await this.resolve({ ...this.options, option: 'auto' });
    } catch (error) {
      // Discovery failing (an API server restarting) says nothing about Kruise: keep the mechanism.
      this.options.logger.debug({ err: error }, 'could not ask the API server whether it serves ContainerRecreateRequests, or which nodes a kruise-daemon serves; keeping the kill mechanism');
      return;
    }
    if (this.stopped) return;
    const previous = this.resolved;
    this.resolved = next;
    if (next.mechanism !== previous.mechanism || this.crrVersion !== (previous.mechanism === 'crr' ? previous.crrVersion : undefined)) {
      this.options.onChange(previous, next);
      this.sayDaemonNodes(undefined);
    } else if (previous.mechanism === 'crr') {
      this.sayDaemonNodes(previous.daemons);
    }
  }

  /**
   * Logs which nodes get ContainerRecreateRequests when that changed (from what was read `before`,
   * if anything), and warns when none does or when it cannot be told.
   */
  private sayDaemonNodes(before: KruiseDaemonNodes | undefined): void {
    const { resolved } = this;
    const { logger, kruiseNamespace } = this.options;
    if (resolved.mechanism !== 'crr' || resolved.daemons === undefined) return;
    if ('unknown' in resolved.daemons) {
      if (before === undefined || !('unknown' in before)) logger.warn({ kruiseNamespace }, `cannot tell which nodes a kruise-daemon serves (${resolved.daemons.unknown}): ContainerRecreateRequests go to every node; a request no daemon acts on is ended from outside after a minute (crr-not-done)`);
      return;
    }
    const nodes = resolved.daemons.nodes;
    const known = before !== undefined && 'nodes' in before ? before.nodes : undefined;
    if (known !== undefined && sameNodes(known, nodes)) return;
    if (nodes.size === 0) {
      logger.warn(
        { kruiseNamespace },
        `no ready kruise-daemon pod (${KRUISE_DAEMON_SELECTOR}) in namespace ${kruiseNamespace}: no node acts on ContainerRecreateRequests, so sidecars are stopped by signal containers until one does (set --kruise-namespace if OpenKruise runs in another namespace)`,
      );
      return;
    }
    const fields = known === undefined
      ? { daemonNodes: nodes.size, nodes: named(nodes) }
      : { daemonNodes: nodes.size, added: named([...nodes].filter((node) => !known.has(node))), removed: named([...known].filter((node) => !nodes.has(node))) };
    logger.info({ kruiseNamespace, ...fields }, 'nodes a kruise-daemon serves: their pods get ContainerRecreateRequests, pods on other nodes signal containers');
  }
}
