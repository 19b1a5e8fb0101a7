// The requests that stop one pod's sidecars, in order. The decision (decide.ts: which sidecar, by
// which mechanism, in which order) made concrete: the kill mechanism resolved (one
// ContainerRecreateRequest for every kill sidecar, or a signal container each), the refusals,
// and what the pod's status says about requests made before (a signal container sent, ignored or
// failing; a quick-exit image that cannot be pulled). Pure: src/watcher/executor.ts makes the
// requests and records the events.
import type { V1EphemeralContainer, V1Node, V1Pod } from '@kubernetes/client-node';
import { CODES, type Code, type CountedAs, type WarningCode } from './codes.ts';
import { decide, type Action } from './decide.ts';
import { isAllowedImage } from './image.ts';
import { CONDITION_REASONS, TERMINATED_CONDITION } from './names.ts';
import { existingSignalContainer, signalContainer, type SignalSettings } from './signal-container.ts';

export type KillMechanism = 'crr' | 'signal';

/** How a sidecar is stopped, as the metrics count it: `phase` is the pod's terminal phase, `none` a sidecar nothing can stop. */
export type Mechanism = CountedAs['mechanism'];

export interface StopSettings {
  killMechanism: KillMechanism;
  signal: SignalSettings;
  /** Quick-exit images must match one of these (admission checks it too, but not every labelled pod went through admission). */
  quickExitImageAllowlist: readonly string[];
}

/** The pod's node: undefined before it is scheduled, 'missing' when the Node object does not exist. */
export type NodeState = V1Node | 'missing' | undefined;

/**
 * The SidecarTerminated condition as the watcher writes it: with the terminal phase it sets (as
 * OpenKruise does), False while a sidecar waits for a quick-exit image its node cannot pull, and
 * True again once that wait is over. A stop says itself in the `SidecarTerminator` event.
 */
export interface SidecarCondition {
  status: 'True' | 'False';
  reason: string;
  message: string;
}

/** The steps of a plan; each `type` is its code (codes.ts). */
export type Step =
  | { type: 'replace-image'; container: string; image: string }
  /** The pod's terminal phase, with the condition saying why. */
  | { type: 'mark-terminal'; phase: 'Succeeded' | 'Failed'; condition: SidecarCondition }
  | { type: 'create-crr'; containers: string[] }
  /** One request for all of them: each write to the pod is conditional on the version read. */
  | { type: 'add-signal-containers'; containers: V1EphemeralContainer[] }
  | { type: 'set-condition'; condition: SidecarCondition }
  /**
   * A Warning event with this code, once per pod and message, or once per pod and `key` (the
   * first message stays) for reports whose words change while the cause does not.
   */
  | { type: 'warn'; code: WarningCode; message: string; key?: string }
  /** Every sidecar has stopped: nothing is written (the pod leaves the watch once its phase is terminal). */
  | { type: 'finish' };

export interface Plan {
  /** Why the plan is what it is: the decision's code, `node-missing`, or `mains-done` when there is something to stop. */
  code: Code;
  /** The sidecars told to stop, by these requests or earlier ones, in the words of the event and the condition: `proxy (SIGTERM)`. */
  stopping: string[];
  steps: Step[];
  /** Look at the pod again after this long even if it does not change (a grace period running out, a node coming back). */
  requeueAfterMs?: number;
  /**
   * A warning of this plan is read from the absence of a change (a sidecar still running after its
   * grace period), and the watch's copy of a pod can lag: plan again from the pod as it is now
   * before carrying it out.
   */
  confirmOnCurrentPod?: true;
}

/** How often a pod whose node is missing is looked at again. */
export const MISSING_NODE_RECHECK_MS = 15_000;

/** Waiting reasons of a signal container that will not run. */
const CONTAINER_START_FAILURES = new Set(['ErrImagePull', 'ImagePullBackOff', 'InvalidImageName', 'ErrImageNeverPull', 'CreateContainerError', 'CreateContainerConfigError', 'RunContainerError']);

export function planStop(pod: V1Pod, node: NodeState, settings: StopSettings, now: number): Plan {
  const decision = decide(pod, node === 'missing' ? undefined : node);
  if (decision.outcome === 'finished') return { code: 'sidecars-stopped', stopping: [], steps: [{ type: 'finish' }] };
  if (decision.outcome !== 'act') return { code: decision.code, stopping: [], steps: [] };
  if (node === 'missing') {
    // Not a normal node: nothing runs the pod's containers, so nothing can stop them.
    const nodeName = pod.spec?.nodeName;
    return {
      code: 'node-missing',
      stopping: [],
      steps: [{ type: 'warn', code: 'node-missing', message: `the sidecars are not stopped: the pod's node ${nodeName} does not exist; they are stopped if it comes back (the pod garbage collector deletes the pods of deleted nodes)` }],
      requeueAfterMs: MISSING_NODE_RECHECK_MS,
    };
  }
  const planner = new Planner(pod, settings, now);
  for (const action of decision.actions) planner.add(action, decision.actions);
  return planner.plan();
}

class Planner {
  private readonly pod: V1Pod;
  private readonly settings: StopSettings;
  private readonly now: number;
  private readonly steps: Step[] = [];
  private readonly stopping: string[] = [];
  private requeueAfterMs: number | undefined;
  /** Set when a sidecar waits for an image its virtual node cannot pull: the condition says so. */
  private waitingForImage: SidecarCondition | undefined;
  private confirm = false;

  constructor(pod: V1Pod, settings: StopSettings, now: number) {
    this.pod = pod;
    this.settings = settings;
    this.now = now;
  }

  add(action: Action, all: Action[]): void {
    switch (action.type) {
      case 'cannotStop':
        this.warn(action.code, `sidecar ${action.container} cannot be stopped: ${CODES[action.code].meaning}`);
        return;
      case 'replaceImage':
        if (!this.imageAllowed(action.image)) {
          this.warn('quick-exit-image-not-allowed', `sidecar ${action.container} is not stopped: its quick-exit image is not in --quick-exit-image-allowlist`);
          return;
        }
        this.steps.push({ type: 'replace-image', container: action.container, image: action.image });
        this.stopping.push(byImage(action.container, action.image));
        return;
      case 'markTerminal': {
        const pullFailures = all.flatMap((a) => (a.type === 'imageNotPulled' ? [a.container] : []));
        const why = pullFailures.length > 0 ? `the quick-exit image of ${pullFailures.join(', ')} cannot be pulled` : 'sidecar exit codes are ignored';
        const message = `phase set to ${action.phase}: the main containers are done, ${why}`;
        this.steps.push({ type: 'mark-terminal', phase: action.phase, condition: { status: 'True', reason: CONDITION_REASONS.stopping, message } });
        return;
      }
      case 'imageNotPulled':
        this.imageNotPulled(action);
        return;
      case 'kill': {
        // One step for every kill sidecar, where the first one is: one ContainerRecreateRequest per pod, one write of signal containers.
        const kills = all.flatMap((a) => (a.type === 'kill' ? [a.container] : []));
        if (action.container === kills[0]) this.kill(kills);
        return;
      }
    }
  }

  plan(): Plan {
    const current = this.pod.status?.conditions?.find((c) => c.type === TERMINATED_CONDITION);
    // True is written only over a condition saying otherwise: the event already says the sidecars are told to stop.
    const stopping = current && this.stopping.length > 0 ? { status: 'True' as const, reason: CONDITION_REASONS.stopping, message: `stopping sidecars: ${this.stopping.join(', ')}` } : undefined;
    const condition = this.waitingForImage ?? stopping;
    const phaseSet = this.steps.some((step) => step.type === 'mark-terminal');
    if (condition && !phaseSet && (current?.status !== condition.status || current.reason !== condition.reason)) {
      this.steps.push({ type: 'set-condition', condition });
    }
    return {
      code: 'mains-done',
      stopping: this.stopping,
      steps: this.steps,
      ...(this.requeueAfterMs !== undefined ? { requeueAfterMs: this.requeueAfterMs } : {}),
      ...(this.confirm ? { confirmOnCurrentPod: true as const } : {}),
    };
  }

  private kill(containers: string[]): void {
    if (this.settings.killMechanism === 'crr') {
      this.steps.push({ type: 'create-crr', containers });
      this.stopping.push(...containers.map((c) => byKill(c, 'crr')));
      return;
    }
    if (this.pod.spec?.shareProcessNamespace) {
      // One PID namespace for the pod: PID 1 is the pause process, not the sidecar.
      this.warn('share-process-namespace', `cannot signal ${containers.join(', ')}: the pod sets shareProcessNamespace, so PID 1 is the pause process, not the sidecar; use --kill-mechanism crr or a quick-exit image`);
      return;
    }
    const send: V1EphemeralContainer[] = [];
    for (const sidecar of containers) {
      const sent = existingSignalContainer(this.pod, sidecar);
      if (sent) {
        this.stopping.push(byKill(sidecar, 'signal'));
        this.checkSignal(sidecar, sent.name);
        continue;
      }
      const made = signalContainer(this.pod, sidecar, this.settings.signal, new Set(send.map((c) => c.name)));
      if ('refused' in made) {
        this.warn('signal-user-unknown', made.refused.message);
        continue;
      }
      send.push(made.container);
      this.stopping.push(byKill(sidecar, 'signal'));
    }
    if (send.length > 0) this.steps.push({ type: 'add-signal-containers', containers: send });
  }

  /**
   * A signal container already sent: did it signal? It fails on its own (non-zero exit: EPERM, an
   * image that cannot be pulled), or the sidecar outlives its grace period after the signal
   * container's exit: its PID 1 has no handler, and nothing inside its PID namespace can SIGKILL
   * it. Until then, look again.
   */
  private checkSignal(sidecar: string, name: string): void {
    const state = this.pod.status?.ephemeralContainerStatuses?.find((s) => s.name === name)?.state;
    const exit = state?.terminated;
    if (exit && !signalDelivered(exit)) {
      const output = exit.message?.trim();
      this.warn(
        'signal-failed',
        `the signal container ${name} did not signal sidecar ${sidecar}: it exited with code ${exit.exitCode}${output ? ` (${output})` : ''}${/EPERM/.test(output ?? '') ? '; it runs as another user than the sidecar: set runAsUser on the sidecar to the uid it runs as' : ''}`,
      );
      return;
    }
    const waiting = state?.waiting;
    if (waiting?.reason && CONTAINER_START_FAILURES.has(waiting.reason)) {
      this.warn('signal-not-started', `the signal container ${name} for sidecar ${sidecar} cannot start: ${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''}`, `signal-not-started/${sidecar}`);
      return;
    }
    const graceMs = (this.pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000;
    // The signal is sent when its container's process has run: it is known sent once that
    // container has exited 0. Before, look again a grace period later (its status changing also brings the pod back).
    if (!exit) {
      if (state?.running) this.lookAgainIn(graceMs);
      return;
    }
    if (!exit.finishedAt) return;
    const remainingMs = new Date(exit.finishedAt).getTime() + graceMs - this.now;
    if (remainingMs > 0) {
      this.lookAgainIn(remainingMs + 1000);
      return;
    }
    this.warn(
      'signal-ignored',
      `sidecar ${sidecar} still runs ${Math.round(graceMs / 1000)}s after SIGTERM: its PID 1 ignores SIGTERM and cannot be killed from inside its PID namespace; make it exit on SIGTERM, or stop it with a quick-exit image or --kill-mechanism crr`,
    );
    this.confirm = true;
  }

  private lookAgainIn(delayMs: number): void {
    this.requeueAfterMs = Math.min(this.requeueAfterMs ?? Infinity, delayMs);
  }

  /** The kubelet's words change (ErrImagePull, then ImagePullBackOff) while the cause stays: one event per sidecar. */
  private imageNotPulled(action: Extract<Action, { type: 'imageNotPulled' }>): void {
    const cause = `${action.reason}${action.message ? `: ${action.message}` : ''}`;
    const key = `image-not-pulled/${action.container}`;
    if (action.fallback === 'phase') {
      const message = `sidecar ${action.container} is not stopped by its quick-exit image ${action.image}: the node cannot pull it (${cause}); the pod is moved to its terminal phase instead once the other sidecars have stopped`;
      this.warn('quick-exit-image-not-pulled', message, key);
      return;
    }
    const message = `sidecar ${action.container} waits for its quick-exit image ${action.image}, which the node cannot pull (${cause}); make the image pullable, or fix KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE`;
    this.warn('quick-exit-image-not-pulled', message, key);
    this.waitingForImage = { status: 'False', reason: CONDITION_REASONS.imageNotPulled, message };
  }

  private warn(code: WarningCode, message: string, key?: string): void {
    this.steps.push({ type: 'warn', code, message, ...(key ? { key } : {}) });
  }

  /** The admission rule, applied again: the webhook does not see every labelled pod. */
  private imageAllowed(image: string): boolean {
    const allowlist = this.settings.quickExitImageAllowlist;
    return allowlist.length === 0 || isAllowedImage(image, allowlist);
  }
}

/** How a sidecar is told to stop, in the words of events, the condition and logs. */
function byImage(container: string, image: string): string {
  return `${container} (quick-exit image ${image})`;
}

function byKill(container: string, mechanism: KillMechanism): string {
  return `${container} (${mechanism === 'crr' ? 'ContainerRecreateRequest' : 'SIGTERM'})`;
}

/**
 * Whether a terminated signal container did its job: it exited 0, or it was killed with SIGKILL
 * (137, not for memory) because the sidecar it signalled was PID 1 of the PID namespace they share:
 * when that process exits, the kernel kills everything else in the namespace, the signal container
 * included, often before it has exited on its own.
 */
function signalDelivered(exit: { exitCode: number; reason?: string }): boolean {
  return exit.exitCode === 0 || (exit.exitCode === 137 && exit.reason !== 'OOMKilled');
}
