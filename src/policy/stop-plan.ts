// The requests that stop one pod's sidecars, in order. The decision (decide.ts: which sidecar, by
// which mechanism, in which order) made concrete: the kill mechanism resolved (one
// ContainerRecreateRequest for every kill sidecar told by SIGTERM, or a signal container each,
// which also sends the HTTP stop requests), the refusals, and what the pod's status says about
// requests made before (a signal container done, failing, or telling that the sidecar ignores
// its stop; a quick-exit image that cannot be pulled). A sidecar still running after its grace
// period is ended from outside its PID namespace: its image is replaced by a quick-exit image
// (the kubelet kills it through the runtime and runs that image, which exits 0), or, where no
// quick-exit image can run in its place, the pod's phase is set from its main containers (the
// kubelet then kills it). Pure: src/watcher/executor.ts makes the requests and records the events.
import type { V1EphemeralContainer, V1Node, V1Pod } from '@kubernetes/client-node';
import { CODES, type Code, type CountedAs, type WarningCode } from './codes.ts';
import { decide, epochMs, exitCodesByName, mainsFinishedAt, phaseOfMains, type Action } from './decide.ts';
import { isAllowedImage } from './image.ts';
import type { KillMechanism, StopHistory } from './kill-mechanism.ts';
import { rolesOf, type ContainerRole } from './markers.ts';
import { CONDITION_REASONS, TERMINATED_CONDITION } from './names.ts';
import { STOP_EXIT_CODES, existingSignalContainer, signalContainer, type SignalSettings } from './signal-container.ts';
import { describeStop } from './stop-method.ts';

/** How a sidecar is stopped, as the metrics count it: `phase` is the pod's terminal phase, `none` a sidecar nothing can stop. */
export type StopMechanism = CountedAs['mechanism'];

export interface StopSettings {
  killMechanism: KillMechanism;
  signal: SignalSettings;
  /** Quick-exit images must match one of these (admission checks it too, but not every labelled pod went through admission). */
  quickExitImageAllowlist: readonly string[];
  /**
   * The quick-exit image that ends a sidecar still running after its grace period, in place of its
   * own (KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE wins); empty: the pod's phase is set instead.
   */
  quickExitImage: string;
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

/** How the condition's message begins where the watcher set the pod's phase (the stop record reads it: src/policy/stop-record.ts). */
export const PHASE_SET = 'phase set to ';

/** The steps of a plan; each `type` is its code (codes.ts). */
export type Step =
  | { type: 'replace-image'; container: string; image: string }
  /** The pod's terminal phase, with the condition saying why. */
  | { type: 'mark-terminal'; phase: 'Succeeded' | 'Failed'; condition: SidecarCondition }
  | { type: 'create-crr'; containers: string[] }
  /** One request for all of them: each write to the pod is conditional on the version read. */
  | { type: 'add-signal-containers'; containers: V1EphemeralContainer[] }
  | { type: 'set-condition'; condition: SidecarCondition }
  /** A sidecar still running after its grace period: its image replaced by a quick-exit image; the kubelet kills it through the runtime. */
  | { type: 'escalate-image'; container: string; image: string }
  /** The same where no quick-exit image can run: the pod's terminal phase from its main containers; the kubelet kills what still runs. */
  | { type: 'escalate-phase'; phase: 'Succeeded' | 'Failed'; condition: SidecarCondition }
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

/** Waiting reasons of a sidecar whose quick-exit image, put in its place to end it, does not run. */
const ESCALATION_IMAGE_FAILURES = new Set([...CONTAINER_START_FAILURES, 'CrashLoopBackOff']);

/** How long past its grace period a signal container may run before the watcher stops waiting for it (it kills and gives up 5 s after). */
const SIGNAL_CONTAINER_MARGIN_MS = 15_000;

/**
 * How long past its grace period a sidecar asked to stop by a ContainerRecreateRequest may run
 * before the watcher ends it from outside. kruise-daemon acts within a second or two of the
 * request, and kills the container at the end of its grace period; OpenKruise's manager gives up
 * on a daemon that has not answered after a minute.
 */
const CRR_MARGIN_MS = 60_000;

/** What a reconcile knows of the pod besides the pod itself: what the watcher made for it, and its container roles (computed once). */
export interface PlanContext {
  history?: StopHistory;
  roles?: readonly ContainerRole[];
}

export function planStop(pod: V1Pod, node: NodeState, settings: StopSettings, now: number, context: PlanContext = {}): Plan {
  const roles = context.roles ?? rolesOf(pod);
  const decision = decide(pod, node === 'missing' ? undefined : node, roles);
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
  const planner = new Planner(pod, settings, now, roles, context.history ?? {});
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
  private readonly roles: Map<string, ContainerRole>;
  private readonly mainRoles: readonly ContainerRole[];
  private readonly history: StopHistory;

  constructor(pod: V1Pod, settings: StopSettings, now: number, roles: readonly ContainerRole[], history: StopHistory) {
    this.pod = pod;
    this.settings = settings;
    this.now = now;
    this.roles = new Map(roles.map((role) => [role.name, role]));
    this.mainRoles = roles.filter((role) => role.role === 'main');
    this.history = history;
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
        const message = `${PHASE_SET}${action.phase}: the main containers are done, ${why}`;
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
    const phaseSet = this.steps.some((step) => step.type === 'mark-terminal' || step.type === 'escalate-phase');
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
    const roles = containers.map((name) => this.roles.get(name)!);
    // Kruise's request for what SIGTERM stops: kruise-daemon kills a sidecar that ignores it after the grace period.
    const byCrr = this.settings.killMechanism === 'crr' ? roles.filter((role) => role.markers.stop.kind === 'signal') : [];
    if (byCrr.length > 0) {
      // Past its deadline a request is not made again: it did nothing, or it cannot be made (refused).
      const mainsFinished = mainsFinishedAt(this.pod, this.mainRoles);
      const asked = byCrr.filter((role) => !this.endOverdueCrr(role, mainsFinished));
      // One request per pod: once made (or found) it is not asked for again, whatever it holds.
      if (asked.length > 0 && this.history.crr === undefined) this.steps.push({ type: 'create-crr', containers: asked.map((role) => role.name) });
      this.stopping.push(...byCrr.map((role) => `${role.name} (ContainerRecreateRequest)`));
    }
    const send: V1EphemeralContainer[] = [];
    const viaCrr = new Set(byCrr);
    for (const role of roles.filter((role) => !viaCrr.has(role))) {
      const stopping = `${role.name} (${describeStop(role.markers.stop)})`;
      const sent = existingSignalContainer(this.pod, role.name);
      if (sent) {
        this.stopping.push(stopping);
        this.checkSignal(role, sent.name);
        continue;
      }
      const containerId = this.pod.spec?.shareProcessNamespace ? this.containerId(role.name) : undefined;
      if (this.pod.spec?.shareProcessNamespace && !containerId) {
        // The kubelet reports the ID of every running container: it comes with the next status.
        this.lookAgainIn(2000);
        continue;
      }
      const request = { stop: role.markers.stop, gracePeriodSeconds: this.gracePeriodSeconds(role), ...(containerId ? { containerId } : {}) };
      const made = signalContainer(this.pod, role.name, this.settings.signal, new Set(send.map((c) => c.name)), request);
      if ('refused' in made) {
        this.end(role, 'signal-user-unknown', made.refused.message);
        continue;
      }
      send.push(made.container);
      this.stopping.push(stopping);
    }
    if (send.length > 0) this.steps.push({ type: 'add-signal-containers', containers: send });
  }

  /** The sidecar's grace period: its own (annotation or env), else the pod's terminationGracePeriodSeconds. */
  private gracePeriodSeconds(role: ContainerRole): number {
    return role.markers.gracePeriodSeconds ?? this.pod.spec?.terminationGracePeriodSeconds ?? 30;
  }

  /** The sidecar's container ID without the runtime's scheme (`containerd://`). */
  private containerId(name: string): string | undefined {
    const id = this.pod.status?.containerStatuses?.find((s) => s.name === name)?.containerID;
    return id?.replace(/^[a-z0-9-]+:\/\//, '') || undefined;
  }

  /**
   * A signal container already sent: what it says. It reports the sidecar exited (0, or 137: the
   * sidecar was PID 1 of their namespace), or that the sidecar cannot be stopped from inside (no
   * SIGTERM handler; still running after the grace period), or it failed (non-zero exit: EPERM),
   * or cannot start: then the sidecar is ended from outside. A sidecar still running a grace
   * period after its signal container reported it exited, or a signal container still running
   * well past the grace period, is ended from outside too.
   */
  private checkSignal(role: ContainerRole, name: string): void {
    const sidecar = role.name;
    const state = this.pod.status?.ephemeralContainerStatuses?.find((s) => s.name === name)?.state;
    const graceSeconds = this.gracePeriodSeconds(role);
    const graceMs = graceSeconds * 1000;
    const exit = state?.terminated;
    const output = exit?.message?.trim();
    const said = output ? ` (${output.split('\n').at(-1)!.replace(/^\S+Z /, '')})` : '';
    if (exit?.exitCode === STOP_EXIT_CODES.noHandler) {
      this.end(role, 'sigterm-unhandled', `sidecar ${sidecar} cannot be stopped by SIGTERM from inside its pod: its PID 1 has no SIGTERM handler, so the kernel drops SIGTERM (and SIGKILL) sent to it from inside its PID namespace`);
      return;
    }
    if (exit?.exitCode === STOP_EXIT_CODES.stillRunning) {
      this.end(role, 'signal-ignored', `sidecar ${sidecar} still runs ${graceSeconds}s after ${describeStop(role.markers.stop)}${said}`);
      return;
    }
    if (exit && !signalDelivered(exit)) {
      this.end(
        role,
        'signal-failed',
        `the signal container ${name} did not stop sidecar ${sidecar}: it exited with code ${exit.exitCode}${output ? ` (${output})` : ''}${/EPERM/.test(output ?? '') ? '; it runs as another user than the sidecar: set runAsUser on the sidecar to the uid it runs as' : ''}`,
      );
      return;
    }
    const waiting = state?.waiting;
    if (waiting?.reason && CONTAINER_START_FAILURES.has(waiting.reason)) {
      this.end(role, 'signal-not-started', `the signal container ${name} for sidecar ${sidecar} cannot start: ${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''}`);
      return;
    }
    // Reported done: the kubelet reports the exit soon. Running: it reports within the grace period and a few seconds.
    // Exited without a finish time: its status changing brings the pod back.
    if (exit && !exit.finishedAt) return;
    const since = exit?.finishedAt ?? state?.running?.startedAt;
    if (!since) {
      this.lookAgainIn(graceMs + SIGNAL_CONTAINER_MARGIN_MS);
      return;
    }
    const remainingMs = new Date(since).getTime() + (exit ? graceMs : graceMs + SIGNAL_CONTAINER_MARGIN_MS) - this.now;
    if (remainingMs > 0) {
      this.lookAgainIn(remainingMs + 1000);
      return;
    }
    // Read from the absence of a change: confirmed on the pod as it is now.
    this.confirm = true;
    this.end(role, 'signal-ignored', `sidecar ${sidecar} still runs ${graceSeconds}s after ${describeStop(role.markers.stop)}, ${exit ? 'which its signal container reported done' : 'and its signal container has not finished'}`);
  }

  /**
   * A sidecar asked to stop by a ContainerRecreateRequest: still running its grace period and
   * CRR_MARGIN_MS after the last main container finished (`mainsFinished`; or after it started,
   * if later), the request did nothing: no kruise-daemon serves the node (OpenKruise's manager
   * then completes the request after a minute without the container restarted), the daemon
   * failed, or the request itself was refused (a webhook, RBAC). The sidecar is then ended from
   * outside, as one that ignores its signal; true when it is. Before then, the pod is looked at
   * again when the wait is over.
   */
  private endOverdueCrr(role: ContainerRole, mainsFinished: number | undefined): boolean {
    const started = epochMs(this.pod.status?.containerStatuses?.find((s) => s.name === role.name)?.state?.running?.startedAt);
    if (started === undefined || mainsFinished === undefined) return false;
    const graceSeconds = this.gracePeriodSeconds(role);
    const waitedSeconds = graceSeconds + CRR_MARGIN_MS / 1000;
    const remainingMs = Math.max(started, mainsFinished) + waitedSeconds * 1000 - this.now;
    if (remainingMs > 0) {
      this.lookAgainIn(remainingMs + 1000);
      return false;
    }
    // Read from the absence of a change: confirmed on the pod as it is now.
    this.confirm = true;
    const node = this.pod.spec?.nodeName ?? 'its node';
    this.end(role, 'crr-not-done', `sidecar ${role.name} still runs ${waitedSeconds}s after the main containers finished: its ContainerRecreateRequest did not stop it (no kruise-daemon serves ${node}, the daemon failed, or the request was refused)`);
    return true;
  }

  /**
   * Ends a sidecar from outside its PID namespace, through the kubelet, with a Warning saying why:
   * its quick-exit image in its place (its own, else --quick-exit-image where the sidecar sets no
   * command, which that image would have to run), else the pod's terminal phase from its main
   * containers. Once either is written, the kubelet does the rest: nothing more is requested.
   */
  private end(role: ContainerRole, code: WarningCode, cause: string): void {
    const sidecar = role.name;
    const image = role.markers.quickExitImage ?? (this.settings.quickExitImage !== '' && !role.hasCommand ? this.settings.quickExitImage : undefined);
    const phase = this.pod.status?.phase;
    const imageUsable = image !== undefined && (role.markers.quickExitImage === undefined || this.imageAllowed(image));
    // One event per sidecar and way of ending it: the kubelet's words in `cause` change while it does not.
    const eventKey = (how: string) => `${code}/${sidecar}/${how}`;
    if (imageUsable && role.image !== image) {
      this.warn(code, `${cause}; ending it from outside: its image is replaced by the quick-exit image ${image}, and the kubelet kills it and runs that image`, eventKey('image'));
      this.steps.push({ type: 'escalate-image', container: sidecar, image });
      return;
    }
    const failure = imageUsable ? this.pod.status?.containerStatuses?.find((s) => s.name === sidecar)?.state?.waiting : undefined;
    if (imageUsable && !(failure?.reason && ESCALATION_IMAGE_FAILURES.has(failure.reason))) {
      // Being killed by the kubelet, which then runs the quick-exit image.
      this.lookAgainIn(this.gracePeriodSeconds(role) * 1000 + SIGNAL_CONTAINER_MARGIN_MS);
      return;
    }
    // Once the phase is terminal, the kubelet kills what still runs: nothing more to write.
    if (phase === 'Succeeded' || phase === 'Failed') return;
    if (this.steps.some((step) => step.type === 'mark-terminal' || step.type === 'escalate-phase')) {
      this.warn(code, `${cause}; ending it from outside: the pod's phase is set from its main containers, and the kubelet kills what still runs`, eventKey('phase'));
      return;
    }
    const codes = exitCodesByName(this.pod);
    const next = phaseOfMains(this.mainRoles.map((main) => codes.get(main.name)));
    const why = failure ? `its quick-exit image ${image} cannot run (${failure.reason})` : role.hasCommand ? 'no quick-exit image can run in its place (it sets command)' : 'no quick-exit image is configured';
    const message = `${PHASE_SET}${next}: the main containers are done, and sidecar ${sidecar} is ended by the kubelet (${why})`;
    this.warn(code, `${cause}; ending it from outside: ${why}, so the pod's phase is set to ${next} from its main containers, and the kubelet kills what still runs`, eventKey('phase'));
    this.steps.push({ type: 'escalate-phase', phase: next, condition: { status: 'True', reason: CONDITION_REASONS.stopping, message } });
    // The kubelet acts on a change of a pod's status only at its next sync of the pod (syncFrequency,
    // a minute by default), on a change of its spec at once: the quick-exit image is written too,
    // and never runs, since the kubelet starts no container of a pod in a terminal phase.
    const trigger = this.settings.quickExitImage;
    if (!failure && trigger !== '' && role.image !== trigger) this.steps.push({ type: 'escalate-image', container: sidecar, image: trigger });
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

/**
 * Whether a terminated signal container did its job: it exited 0, or it was killed with SIGKILL
 * (137, not for memory) because the sidecar it signalled was PID 1 of the PID namespace they share:
 * when that process exits, the kernel kills everything else in the namespace, the signal container
 * included, often before it has exited on its own.
 */
function signalDelivered(exit: { exitCode: number; reason?: string }): boolean {
  return exit.exitCode === 0 || (exit.exitCode === 137 && exit.reason !== 'OOMKilled');
}
