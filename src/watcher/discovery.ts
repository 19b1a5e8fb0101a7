// Which kill mechanism the watcher uses on normal nodes. With `auto` it follows the cluster: the
// API server is asked again every interval whether it serves Kruise's ContainerRecreateRequest,
// so installing or removing OpenKruise needs no restart. A pod whose stop has begun finishes with
// the mechanism it began with, so a switch never stops a sidecar twice: a pod with a signal
// container keeps the signal mechanism; one whose ContainerRecreateRequest this watcher made keeps
// that while the API is served (when it goes, the requests go with it, and the pod is signalled).
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import { servedCrrVersion } from '../kube/discovery.ts';
import type { Logger } from '../logger.ts';
import { classifyContainers, existingSignalContainer, podAnnotations, type KillMechanism } from '../policy/index.ts';

export type ResolvedKillMechanism = { mechanism: 'crr'; crrVersion: string } | { mechanism: 'signal' };

/** crr when asked for or, with auto, when the cluster serves Kruise's ContainerRecreateRequest; signal otherwise. */
export async function resolveKillMechanism(kubeConfig: KubeConfig, option: 'auto' | KillMechanism): Promise<ResolvedKillMechanism> {
  if (option === 'signal') return { mechanism: 'signal' };
  const crrVersion = await servedCrrVersion(kubeConfig);
  if (crrVersion) return { mechanism: 'crr', crrVersion };
  if (option === 'crr') {
    throw new Error('--kill-mechanism crr: the cluster does not serve apps.kruise.io ContainerRecreateRequest; install OpenKruise or use --kill-mechanism signal');
  }
  return { mechanism: 'signal' };
}

/**
 * Whether a signal container was sent to one of the pod's sidecars that SIGTERM stops (the ones
 * the kill mechanism decides for; one with an HTTP stop method gets a signal container with either
 * mechanism): its stop began with the signal mechanism.
 */
function signalled(pod: V1Pod): boolean {
  return classifyContainers(pod.spec ?? {}, podAnnotations(pod)).some(
    (role) => role.role === 'sidecar' && role.markers.stop.kind === 'signal' && existingSignalContainer(pod, role.name) !== undefined,
  );
}

/**
 * The mechanism for a pod: the one its stop began with (`startedWith`, what this watcher
 * requested; a signal container in its spec, whoever sent it), else the cluster's now.
 */
export function killMechanismFor(pod: V1Pod, startedWith: KillMechanism | undefined, now: ResolvedKillMechanism): KillMechanism {
  if (startedWith === 'crr' && now.mechanism === 'crr') return 'crr';
  // A ContainerRecreateRequest made while the API was served is gone with it: signalled now, not twice.
  return startedWith === 'signal' || signalled(pod) ? 'signal' : now.mechanism;
}

export interface KillMechanismFollowerOptions {
  kubeConfig: KubeConfig;
  option: 'auto' | KillMechanism;
  /** How often auto asks again; 0: never. */
  intervalMs: number;
  logger: Logger;
  /** Told of every change after the first resolution, once it is in effect. */
  onChange(previous: ResolvedKillMechanism, next: ResolvedKillMechanism): void;
}

/** The cluster's kill mechanism now: resolved at start, then, with auto, every interval. */
export class KillMechanismFollower {
  private readonly options: KillMechanismFollowerOptions;
  private resolved: ResolvedKillMechanism = { mechanism: 'signal' };
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(options: KillMechanismFollowerOptions) {
    this.options = options;
  }

  get current(): ResolvedKillMechanism {
    return this.resolved;
  }

  /** The version to create ContainerRecreateRequests with, while the cluster serves them. */
  get crrVersion(): string | undefined {
    return this.resolved.mechanism === 'crr' ? this.resolved.crrVersion : undefined;
  }

  /** Resolves the mechanism (failing as resolveKillMechanism does), then follows the cluster with auto. */
  async start(): Promise<ResolvedKillMechanism> {
    const { kubeConfig, option, intervalMs } = this.options;
    this.resolved = await resolveKillMechanism(kubeConfig, option);
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
    let next: ResolvedKillMechanism;
    try {
      next = await resolveKillMechanism(this.options.kubeConfig, 'auto');
    } catch (error) {
      // Discovery failing (an API server restarting) says nothing about Kruise: keep the mechanism.
      this.options.logger.debug({ err: error }, 'could not ask the API server whether it serves ContainerRecreateRequests; keeping the kill mechanism');
      return;
    }
    if (this.stopped || (next.mechanism === this.resolved.mechanism && this.crrVersion === (next.mechanism === 'crr' ? next.crrVersion : undefined))) return;
    const previous = this.resolved;
    this.resolved = next;
    this.options.onChange(previous, next);
  }
}
