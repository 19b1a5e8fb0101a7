// The simulated containers of one pod on a node, and the pod status kubelet would compute
// from them. Synchronous and free of I/O: the simulator feeds it the pod as the API server
// has it (observe), lets it make progress (advance) and writes status() back. Timers come
// from the simulator (`later`), which runs them in the pod's lane and syncs afterwards.
import type { V1Container, V1EphemeralContainer, V1Pod } from '@kubernetes/client-node';
import { containerRestart } from '../../../src/policy/restarts.ts';
import { NEEDS_FAILURE_EXIT_CODE, type ContainerBehaviour, type ContainerKind } from './container-behaviour.ts';

export interface RuntimeTimings {
  /** Pause before a crashed container is started again (kubelet's back-off, shortened). */
  restartDelayMs: number;
  /** How long a quick-exit image, and an ephemeral signalling container, runs before exiting 0. */
  quickExitAfterMs: number;
  /** Upper bound of any termination grace period, so tests with `ignore` reactions stay fast. */
  maxGracePeriodMs: number;
}

/** Runs `action` after `delayMs` in this pod's lane (followed by a status sync); returns a cancel function. */
export type Later = (delayMs: number, action: () => void) => () => void;

type TerminalPhase = 'Succeeded' | 'Failed';

interface Termination {
  exitCode: number;
  reason: string;
  /** What the process wrote before it failed (terminationMessagePolicy FallbackToLogsOnError). */
  message?: string;
  startedAt: string;
  finishedAt: string;
  containerID: string;
}

interface SimContainer {
  name: string;
  kind: ContainerKind;
  /** The image of the current or latest run. */
  image: string;
  /** How many times it has started. */
  runs: number;
  running: { startedAt: string; containerID: string } | undefined;
  /** How each run ended, oldest first: the last one is the current state when not running, the one before it lastState. */
  ends: Termination[];
  /** SIGTERM delivered with a grace period; SIGKILL follows unless it exits. */
  stopping: boolean;
  awaitingRestart: boolean;
  /** The last start failed because its image cannot be pulled; kubelet retries the pull when it would restart the container. */
  pullFailure: 'ErrImagePull' | 'ImagePullBackOff' | undefined;
  cancelTimers: Set<() => void>;
  exitWaiters: Array<() => void>;
}

/** The status fields kubelet owns, as written with a strategic merge patch (times as RFC 3339 strings). */
export interface SimPodStatus {
  phase: string;
  /** `reason: null` removes an earlier reason: conditions are merged field by field. */
  conditions: Array<{ type: string; status: string; reason: string | null; lastTransitionTime: string; lastProbeTime: null }>;
  startTime: string;
  initContainerStatuses: unknown[];
  containerStatuses: unknown[];
  ephemeralContainerStatuses?: unknown[];
}

export class PodRuntime {
  readonly uid: string;
  private pod: V1Pod;
  private readonly behaviour: ContainerBehaviour;
  private readonly timings: RuntimeTimings;
  private readonly later: Later;
  private readonly containers = new Map<string, SimContainer>();
  private readonly startTime = now();
  private readonly conditionTransitions = new Map<string, { status: string; time: string }>();
  private initialized = false;
  private terminal: { phase: TerminalPhase; setByOthers: boolean } | undefined;
  private deleting = false;
  /** A pod already finished before this runtime saw it (e.g. a restarted simulator): its status is left alone. */
  private readonly foundFinished: boolean;
  private disposed = false;

  constructor(pod: V1Pod, behaviour: ContainerBehaviour, timings: RuntimeTimings, later: Later) {
    this.uid = pod.metadata?.uid ?? '';
    this.pod = pod;
    this.behaviour = behaviour;
    this.timings = timings;
    this.later = later;
    this.foundFinished = isTerminalPhase(pod.status?.phase);
    for (const spec of pod.spec?.initContainers ?? []) {
      this.addContainer(spec.name, spec.restartPolicy === 'Always' ? 'native-sidecar' : 'init', spec.image);
    }
    for (const spec of pod.spec?.containers ?? []) this.addContainer(spec.name, 'main', spec.image);
  }

  /** Takes in the pod as the API server has it now: new ephemeral containers, image changes, a terminal phase set by others, deletion. */
  observe(pod: V1Pod): void {
    this.pod = pod;
    const phase = pod.status?.phase;
    if (isTerminalPhase(phase) && this.terminal?.phase !== phase) {
      // Kubelet never moves a pod out of a terminal phase, whoever set it.
      this.terminal = { phase, setByOthers: true };
    }
    if (pod.metadata?.deletionTimestamp) this.deleting = true;
    for (const spec of pod.spec?.ephemeralContainers ?? []) {
      if (!this.containers.has(spec.name)) {
        const container = this.addContainer(spec.name, 'ephemeral', spec.image);
        if (!this.stopsEverything()) this.start(container);
      }
    }
    for (const container of this.containers.values()) {
      // An in-place image change: kubelet kills the container and starts it again with the new image.
      if (container.running && container.kind !== 'ephemeral' && this.specImage(container) !== container.image) {
        this.stop(container);
      }
      // A container stuck on an image that cannot be pulled gets another image: kubelet starts it with that one.
      if (container.pullFailure && this.specImage(container) !== container.image && !this.stopsEverything()) {
        this.cancelTimers(container);
        this.start(container);
      }
    }
  }

  /** One pass of kubelet's sync loop: start what is due, find the end of the pod, stop what must stop. */
  advance(): void {
    if (this.foundFinished || this.disposed) return;
    if (!this.stopsEverything()) {
      if (!this.initialized) this.runInitContainers();
      if (this.initialized) this.startMainContainers();
      const finished = this.finishedPhase();
      if (finished) this.terminal = { phase: finished, setByOthers: false };
    }
    if (this.stopsEverything()) this.stopAll();
  }

  /** The process of a running container exits (a test decides it). False when it is not running. */
  exitOnRequest(name: string, exitCode: number): boolean {
    const container = this.containers.get(name);
    if (!container?.running) return false;
    this.exited(container, exitCode);
    return true;
  }

  isRunning(name: string): boolean {
    return !!this.containers.get(name)?.running;
  }

  /**
   * Stops a container the way kruise-daemon executes a ContainerRecreateRequest (SIGTERM, SIGKILL
   * after the grace period); kubelet's restart rules apply afterwards. Resolves once it has exited.
   */
  recreate(name: string): Promise<void> | 'not-found' {
    const container = this.containers.get(name);
    if (!container || container.kind === 'ephemeral') return 'not-found';
    if (!container.running) return Promise.resolve();
    const exited = new Promise<void>((resolve) => container.exitWaiters.push(resolve));
    this.stop(container);
    return exited;
  }

  /** The status to write, or undefined when the pod is not this runtime's to report. */
  status(): SimPodStatus | undefined {
    if (this.foundFinished) return undefined;
    const specs = this.pod.spec;
    const ephemeral = (specs?.ephemeralContainers ?? []).map((s) => this.containerStatus(s.name));
    return {
      phase: this.reportedPhase(),
      conditions: this.conditions(),
      startTime: this.startTime,
      initContainerStatuses: (specs?.initContainers ?? []).map((s) => this.containerStatus(s.name)),
      containerStatuses: (specs?.containers ?? []).map((s) => this.containerStatus(s.name)),
      ...(ephemeral.length > 0 ? { ephemeralContainerStatuses: ephemeral } : {}),
    };
  }

  /** Deleted and every container stopped: kubelet now removes the pod with grace period 0. */
  readyToBeRemoved(): boolean {
    return this.deleting && (this.foundFinished || !this.anyRunning());
  }

  dispose(): void {
    this.disposed = true;
    for (const container of this.containers.values()) {
      this.cancelTimers(container);
      this.notifyExitWaiters(container);
    }
  }

  private addContainer(name: string, kind: ContainerKind, image: string | undefined): SimContainer {
    const container: SimContainer = {
      name, kind, image: image ?? '', runs: 0, running: undefined, ends: [],
      stopping: false, awaitingRestart: false, pullFailure: undefined, cancelTimers: new Set(), exitWaiters: [],
    };
    this.containers.set(name, container);
    return container;
  }

  /** Regular init containers run one after another to success; native sidecars start and keep running. */
  private runInitContainers(): void {
    for (const spec of this.pod.spec?.initContainers ?? []) {
      const container = this.mustGet(spec.name);
      if (container.runs === 0) this.start(container);
      if (container.kind === 'native-sidecar') continue;
      const lastEnd = container.ends.at(-1);
      if (container.running || container.awaitingRestart || !lastEnd) return; // not done yet
      if (lastEnd.exitCode === 0) continue;
      // A failed init container is retried, except under Never, where it fails the pod.
      if (this.restartPolicy() === 'Never') this.terminal = { phase: 'Failed', setByOthers: false };
      return;
    }
    this.initialized = true;
  }

  private startMainContainers(): void {
    for (const spec of this.pod.spec?.containers ?? []) {
      const container = this.mustGet(spec.name);
      if (container.runs === 0) this.start(container);
    }
  }

  /**
   * Succeeded/Failed once every main container has exited for good (native sidecars do not count):
   * none runs or waits for its restart, whichever policy decides it (kubelet's getPhase with
   * ContainerRestartRules; under the pod's restartPolicy Always, every exit is followed by a restart).
   */
  private finishedPhase(): TerminalPhase | undefined {
    const mains = this.mainContainers();
    if (mains.some((c) => c.running || c.awaitingRestart || c.pullFailure || c.runs === 0)) return undefined;
    return mains.every((c) => c.ends.at(-1)?.exitCode === 0) ? 'Succeeded' : 'Failed';
  }

  /** Regular and ephemeral containers first; native sidecars after them, as kubelet orders termination. */
  private stopAll(): void {
    for (const container of this.containers.values()) {
      if (container.awaitingRestart || container.pullFailure) {
        this.cancelTimers(container);
        container.awaitingRestart = false;
      }
    }
    const running = [...this.containers.values()].filter((c) => c.running);
    const regular = running.filter((c) => c.kind !== 'native-sidecar');
    for (const container of regular.length > 0 ? regular : running) this.stop(container);
  }

  private start(container: SimContainer): void {
    container.awaitingRestart = false;
    container.image = this.specImage(container);
    if (!this.behaviour.isPullableImage(container.image)) {
      this.pullFailed(container);
      return;
    }
    container.pullFailure = undefined;
    container.runs += 1;
    container.running = { startedAt: now(), containerID: `sim://${this.uid}/${container.name}/${container.runs}` };
    this.scheduleOwnExit(container);
  }

  /**
   * The image cannot be pulled. Kubelet tries again (ErrImagePull, then ImagePullBackOff) as long
   * as it would start the container: one never started, or one its restart policy restarts; a
   * container that ran and that its policy does not restart keeps its last termination.
   */
  private pullFailed(container: SimContainer): void {
    const lastEnd = container.ends.at(-1);
    if (lastEnd && !this.restartsAfter(container, lastEnd.exitCode)) {
      container.pullFailure = undefined;
      return;
    }
    container.pullFailure = container.pullFailure ? 'ImagePullBackOff' : 'ErrImagePull';
    this.after(container, this.timings.restartDelayMs, () => {
      if (!this.stopsEverything()) this.start(container);
    });
  }

  private scheduleOwnExit(container: SimContainer): void {
    if (container.kind === 'ephemeral') {
      this.after(container, this.timings.quickExitAfterMs, () => {
        if (this.signalTarget(container)) this.exited(container, 0);
        else this.exited(container, 1, SIGNAL_REFUSED);
      });
      return;
    }
    const spec = this.spec(container);
    if (this.behaviour.isQuickExitImage(container.image, spec)) {
      this.after(container, this.timings.quickExitAfterMs, () => this.exited(container, 0));
      return;
    }
    const ownExit = this.behaviour.ownExit(this.pod, spec, container.kind, container.runs);
    const needs = this.behaviour.needs(this.pod, container.name);
    const unknown = needs.filter((name) => !this.containers.has(name));
    if (unknown.length > 0) throw new Error(`container ${container.name} needs ${unknown.join(', ')}, which pod ${this.pod.metadata?.name} does not have`);
    if (!ownExit) return;
    this.after(container, ownExit.afterMs, () => {
      const missing = needs.some((name) => !this.containers.get(name)?.running);
      this.exited(container, missing ? NEEDS_FAILURE_EXIT_CODE : ownExit.exitCode);
    });
  }

  /** What kubelet (or kruise-daemon) does to stop a container: SIGTERM, then SIGKILL after the grace period. */
  private stop(container: SimContainer): void {
    if (!container.running || container.stopping) return;
    container.stopping = true;
    this.deliverSigterm(container, this.gracePeriodMs());
  }

  /** Without `killAfterMs` nobody follows up with SIGKILL (a signal sent from inside the pod). */
  private deliverSigterm(container: SimContainer, killAfterMs?: number): void {
    const reaction = this.behaviour.sigtermReaction(this.pod, container.name);
    if (reaction === 'exit0') this.exited(container, 0);
    else if (reaction === 'exit143') this.exited(container, 143);
    else if (killAfterMs !== undefined) this.after(container, killAfterMs, () => this.exited(container, 137));
  }

  /**
   * An ephemeral container with a target signals the target's PID 1, unless the pod shares one PID
   * namespace (PID 1 is the pause process then, and the signal goes there) and it is not told the
   * target's container ID (stop-sidecar's --container-id). Linux lets it only as the same user, or
   * with CAP_KILL; false when refused (EPERM).
   */
  private signalTarget(ephemeral: SimContainer): boolean {
    const spec = this.pod.spec?.ephemeralContainers?.find((s) => s.name === ephemeral.name);
    const target = spec?.targetContainerName ? this.containers.get(spec.targetContainerName) : undefined;
    const findsTarget = !this.pod.spec?.shareProcessNamespace || (spec?.args ?? []).some((arg) => arg.startsWith('--container-id='));
    if (!spec || !target?.running || !findsTarget) return true;
    const sender = this.behaviour.userOf(this.pod, spec);
    if (sender.uid !== this.userOf(target).uid && !(sender.uid === 0 && hasCapKill(spec))) return false;
    this.deliverSigterm(target);
    return true;
  }

  private userOf(container: SimContainer): { uid: number; gid: number } {
    return this.behaviour.userOf(this.pod, { ...this.spec(container), image: container.image });
  }

  private exited(container: SimContainer, exitCode: number, message?: string): void {
    if (!container.running) return;
    this.cancelTimers(container);
    container.ends.push({
      exitCode,
      reason: exitCode === 0 ? 'Completed' : 'Error',
      ...(message ? { message } : {}),
      startedAt: container.running.startedAt,
      finishedAt: now(),
      containerID: container.running.containerID,
    });
    container.running = undefined;
    container.stopping = false;
    this.notifyExitWaiters(container);
    if (this.stopsEverything() || container.kind === 'ephemeral') return;
    if (this.specImage(container) !== container.image) {
      this.start(container); // the in-place image change: restarted at once, whatever the restart policy
    } else if (this.restartsAfter(container, exitCode)) {
      container.awaitingRestart = true;
      this.after(container, this.timings.restartDelayMs, () => {
        if (!this.stopsEverything()) this.start(container);
      });
    }
  }

  private restartsAfter(container: SimContainer, exitCode: number): boolean {
    const policy = this.restartPolicy();
    switch (container.kind) {
      case 'native-sidecar':
        return true;
      case 'init':
        return exitCode !== 0 && policy !== 'Never';
      case 'main':
        // The container's own restartPolicy and restartPolicyRules first (Kubernetes 1.35+), then the pod's.
        return containerRestart(this.pod.spec ?? {}, this.spec(container), exitCode).restarts;
      case 'ephemeral':
        return false;
    }
  }

  private reportedPhase(): string {
    if (this.terminal?.setByOthers) return this.terminal.phase;
    const running = this.anyRunning();
    // Kubelet reports a terminal phase only once no container of the pod runs any more.
    if (this.terminal && !running) return this.terminal.phase;
    if (this.deleting && !running) return this.mainsSucceeded() ? 'Succeeded' : 'Failed';
    return this.initialized ? 'Running' : 'Pending';
  }

  private conditions(): SimPodStatus['conditions'] {
    const finished = isTerminalPhase(this.reportedPhase());
    const ready = !finished && this.initialized && [...this.containers.values()]
      .filter((c) => c.kind === 'main' || c.kind === 'native-sidecar')
      .every((c) => c.running && !c.stopping);
    const notReadyReason = finished ? 'PodCompleted' : 'ContainersNotReady';
    return [
      this.condition('PodScheduled', true),
      this.condition('Initialized', this.initialized, finished ? 'PodCompleted' : 'ContainersNotInitialized'),
      this.condition('ContainersReady', ready, notReadyReason),
      this.condition('Ready', ready, notReadyReason),
    ];
  }

  private condition(type: string, isTrue: boolean, reasonWhenFalse?: string): SimPodStatus['conditions'][number] {
    const status = isTrue ? 'True' : 'False';
    let transition = this.conditionTransitions.get(type);
    if (transition?.status !== status) {
      transition = { status, time: now() };
      this.conditionTransitions.set(type, transition);
    }
    const reason = isTrue ? null : (reasonWhenFalse ?? null);
    return { type, status, reason, lastProbeTime: null, lastTransitionTime: transition.time };
  }

  private containerStatus(name: string): Record<string, unknown> {
    const container = this.mustGet(name);
    const [previous, last] = [container.ends.at(-2), container.ends.at(-1)];
    const pulling = !container.running && container.pullFailure;
    const state = container.running
      ? { running: { startedAt: container.running.startedAt } }
      : pulling
        ? { waiting: { reason: container.pullFailure, message: pullFailureMessage(container.pullFailure!, container.image) } }
        : last
          ? { terminated: last }
          : { waiting: { reason: this.initialized ? 'ContainerCreating' : 'PodInitializing' } };
    const lastState = container.running || pulling ? last : previous;
    const image = container.image;
    // The user the runtime started it as (containerd 2 reports it, Kubernetes 1.31+).
    const user = this.behaviour.reportsUsers && container.runs > 0 ? { user: { linux: { ...this.userOf(container), supplementalGroups: [this.userOf(container).gid] } } } : {};
    return {
      name,
      image,
      imageID: image ? `sim://${image}` : '',
      containerID: container.running?.containerID ?? last?.containerID,
      ready: !!container.running && container.kind !== 'ephemeral' && !container.stopping,
      started: !!container.running,
      restartCount: container.kind === 'ephemeral' ? 0 : Math.max(0, container.runs - 1),
      state,
      lastState: lastState ? { terminated: lastState } : {},
      ...user,
    };
  }

  private after(container: SimContainer, delayMs: number, action: () => void): void {
    const cancel = this.later(delayMs, () => {
      container.cancelTimers.delete(cancel);
      if (!this.disposed) action();
    });
    container.cancelTimers.add(cancel);
  }

  private cancelTimers(container: SimContainer): void {
    for (const cancel of container.cancelTimers) cancel();
    container.cancelTimers.clear();
  }

  private notifyExitWaiters(container: SimContainer): void {
    for (const notify of container.exitWaiters.splice(0)) notify();
  }

  private stopsEverything(): boolean {
    return this.deleting || this.terminal !== undefined;
  }

  private anyRunning(): boolean {
    return [...this.containers.values()].some((c) => c.running);
  }

  private mainsSucceeded(): boolean {
    return this.initialized && this.mainContainers().every((c) => c.ends.at(-1)?.exitCode === 0);
  }

  private mainContainers(): SimContainer[] {
    return [...this.containers.values()].filter((c) => c.kind === 'main');
  }

  private restartPolicy(): string {
    return this.pod.spec?.restartPolicy ?? 'Always';
  }

  private gracePeriodMs(): number {
    const spec = this.pod.spec?.terminationGracePeriodSeconds ?? 30;
    const seconds = this.deleting ? (this.pod.metadata?.deletionGracePeriodSeconds ?? spec) : spec;
    return Math.min(seconds * 1000, this.timings.maxGracePeriodMs);
  }

  private spec(container: SimContainer): V1Container | V1EphemeralContainer {
    const spec = this.pod.spec;
    const all = [...(spec?.initContainers ?? []), ...(spec?.containers ?? []), ...(spec?.ephemeralContainers ?? [])];
    const found = all.find((s) => s.name === container.name);
    if (!found) throw new Error(`container ${container.name} is not in the spec of pod ${this.pod.metadata?.name}`);
    return found;
  }

  private specImage(container: SimContainer): string {
    return this.spec(container).image ?? '';
  }

  private mustGet(name: string): SimContainer {
    const container = this.containers.get(name);
    if (!container) throw new Error(`unknown container ${name}`);
    return container;
  }
}

/** What images/stop-sidecar writes to its termination message when Linux refuses the signal. */
const SIGNAL_REFUSED = '2026-01-01T00:00:00Z SIGTERM to PID 1 (sidecar) failed: operation not permitted (EPERM: this container runs as another user than the sidecar)\n';

/** The capabilities a container's process has: Docker's defaults (KILL among them) unless dropped, plus those added. */
function hasCapKill(container: V1EphemeralContainer): boolean {
  const { add = [], drop = [] } = container.securityContext?.capabilities ?? {};
  return add.includes('KILL') || add.includes('ALL') || !(drop.includes('KILL') || drop.includes('ALL'));
}

function pullFailureMessage(reason: 'ErrImagePull' | 'ImagePullBackOff', image: string): string {
  return reason === 'ErrImagePull'
    ? `failed to pull and unpack image "${image}": failed to resolve reference "${image}": not found`
    : `Back-off pulling image "${image}"`;
}

function isTerminalPhase(phase: string | undefined): phase is TerminalPhase {
  return phase === 'Succeeded' || phase === 'Failed';
}

/** Kubernetes keeps times with second precision. */
function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}
