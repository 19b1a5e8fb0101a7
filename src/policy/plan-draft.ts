// The vocabulary of a stop plan (its steps, the plan, the settings it is made with) and the draft
// it is built in: each rung of the plan (stop-plan.ts) and of the escalation ladder
// (escalation.ts) is a pure function from what is known of the pod (Planning) and the draft so far
// to the next draft.
import type { V1EphemeralContainer, V1Node, V1Pod } from '@kubernetes/client-node';
import type { Code, CountedAs, WarningCode } from './codes.ts';
import { isAllowedImage } from './image.ts';
import type { KillMechanism, StopHistory } from './kill-mechanism.ts';
import type { ContainerRole } from './markers.ts';
import type { SignalSettings } from './signal-container.ts';

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

/** What a reconcile knows of the pod besides the pod itself: what the watcher made for it, and its container roles (computed once). */
export interface PlanContext {
  history?: StopHistory;
  roles?: readonly ContainerRole[];
}

/** What a plan is made from: the pod, the settings, the time, its container roles and what was made for it before. */
export interface Planning {
  pod: V1Pod;
  settings: StopSettings;
  now: number;
  roles: ReadonlyMap<string, ContainerRole>;
  mains: readonly ContainerRole[];
  history: StopHistory;
}

/** A plan being made: the steps so far, in order, and what the plan will say besides them. */
export interface Draft {
  readonly steps: readonly Step[];
  readonly stopping: readonly string[];
  readonly requeueAfterMs?: number;
  /** A warning read from the absence of a change: the plan is made again from the pod as it is now. */
  readonly confirm?: true;
  /** Set when a sidecar waits for an image its virtual node cannot pull: the condition says so. */
  readonly waitingForImage?: SidecarCondition;
}

export const EMPTY_DRAFT: Draft = { steps: [], stopping: [] };

/** The draft with these steps after the others. */
export function withSteps(draft: Draft, ...steps: Step[]): Draft {
  return { ...draft, steps: [...draft.steps, ...steps] };
}

/** The draft naming these sidecars among those told to stop, in the words of the event: `proxy (SIGTERM)`. */
export function telling(draft: Draft, ...stopping: string[]): Draft {
  return { ...draft, stopping: [...draft.stopping, ...stopping] };
}

/** The draft with a Warning event: once per pod and message, or once per pod and `key`. */
export function warning(draft: Draft, code: WarningCode, message: string, key?: string): Draft {
  return withSteps(draft, { type: 'warn', code, message, ...(key ? { key } : {}) });
}

/** The draft looking at the pod again after `delayMs` at the latest. */
export function lookingAgainIn(draft: Draft, delayMs: number): Draft {
  return { ...draft, requeueAfterMs: Math.min(draft.requeueAfterMs ?? Infinity, delayMs) };
}

/** Whether the draft sets the pod's terminal phase already. */
export function setsPhase(draft: Draft): boolean {
  return draft.steps.some((step) => step.type === 'mark-terminal' || step.type === 'escalate-phase');
}

/** The sidecar's grace period: its own (annotation or env), else the pod's terminationGracePeriodSeconds. */
export function gracePeriodSeconds(planning: Planning, role: ContainerRole): number {
  return role.markers.gracePeriodSeconds ?? planning.pod.spec?.terminationGracePeriodSeconds ?? 30;
}

/** The admission rule, applied again: the webhook does not see every labelled pod. */
export function imageAllowed(planning: Planning, image: string): boolean {
  const allowlist = planning.settings.quickExitImageAllowlist;
  return allowlist.length === 0 || isAllowedImage(image, allowlist);
}
