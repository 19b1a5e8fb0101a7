// The requests that stop one pod's sidecars, in order. The decision (decide.ts: which sidecar, by
// which route, in which order) made concrete: the kill mechanism resolved (one
// ContainerRecreateRequest for every kill sidecar told by SIGTERM, or a signal container each,
// which also sends the HTTP stop requests), the refusals, and what the pod's status says about
// requests made before, which the escalation ladder reads (escalation.ts: a signal container
// done, failing, or telling that the sidecar ignores its stop; a request past its deadline; a
// quick-exit image that cannot be pulled). Pure: each action of the decision adds to a draft
// (plan-draft.ts); src/watcher/executor.ts makes the requests and records the events.
import type { V1EphemeralContainer, V1Pod } from '@kubernetes/client-node';
import { CODES } from './codes.ts';
import { decide, mainsFinishedAt, type Action } from './decide.ts';
import { checkCrr, checkSignal, endFromOutside } from './escalation.ts';
import { rolesOf, type ContainerRole } from './markers.ts';
import { CONDITION_REASONS, TERMINATED_CONDITION } from './names.ts';
import {
  EMPTY_DRAFT,
  PHASE_SET,
  gracePeriodSeconds,
  imageAllowed,
  lookingAgainIn,
  setsPhase,
  telling,
  warning,
  withSteps,
  type Draft,
  type NodeState,
  type Plan,
  type PlanContext,
  type Planning,
  type StopSettings,
} from './plan-draft.ts';
import { existingSignalContainer, signalContainer } from './signal-container.ts';
import { describeStop } from './stop-method.ts';

/** How often a pod whose node is missing is looked at again. */
export const MISSING_NODE_RECHECK_MS = 15_000;

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
  const planning: Planning = { pod, settings, now, roles: new Map(roles.map((role) => [role.name, role])), mains: roles.filter((role) => role.role === 'main'), history: context.history ?? {} };
  const draft = decision.actions.reduce((draft, action) => addAction(planning, draft, action, decision.actions), EMPTY_DRAFT);
  return finish(planning, draft);
}

/** One action of the decision, added to the draft. */
function addAction(planning: Planning, draft: Draft, action: Action, all: readonly Action[]): Draft {
  switch (action.type) {
    case 'cannotStop':
      return warning(draft, action.code, `sidecar ${action.container} cannot be stopped: ${CODES[action.code].meaning}`);
    case 'replaceImage':
      if (!imageAllowed(planning, action.image)) return warning(draft, 'quick-exit-image-not-allowed', `sidecar ${action.container} is not stopped: its quick-exit image is not in --quick-exit-image-allowlist`);
      return telling(withSteps(draft, { type: 'replace-image', container: action.container, image: action.image }), byImage(action.container, action.image));
    case 'markTerminal': {
      const pullFailures = all.flatMap((a) => (a.type === 'imageNotPulled' ? [a.container] : []));
      const why = pullFailures.length > 0 ? `the quick-exit image of ${pullFailures.join(', ')} cannot be pulled` : 'sidecar exit codes are ignored';
      const message = `${PHASE_SET}${action.phase}: the main containers are done, ${why}`;
      return withSteps(draft, { type: 'mark-terminal', phase: action.phase, condition: { status: 'True', reason: CONDITION_REASONS.stopping, message } });
    }
    case 'imageNotPulled':
      return imageNotPulled(draft, action);
    case 'kill': {
      // One step for every kill sidecar, where the first one is: one ContainerRecreateRequest per pod, one write of signal containers.
      const kills = all.flatMap((a) => (a.type === 'kill' ? [a.container] : []));
      return action.container === kills[0] ? kill(planning, draft, kills.map((name) => planning.roles.get(name)!)) : draft;
    }
  }
}

/** The draft made a plan: the SidecarTerminated condition written where it says otherwise. */
function finish(planning: Planning, draft: Draft): Plan {
  const current = planning.pod.status?.conditions?.find((c) => c.type === TERMINATED_CONDITION);
  // True is written only over a condition saying otherwise: the event already says the sidecars are told to stop.
  const stopping = current && draft.stopping.length > 0 ? { status: 'True' as const, reason: CONDITION_REASONS.stopping, message: `stopping sidecars: ${draft.stopping.join(', ')}` } : undefined;
  const condition = draft.waitingForImage ?? stopping;
  const conditioned = condition && !setsPhase(draft) && (current?.status !== condition.status || current.reason !== condition.reason) ? withSteps(draft, { type: 'set-condition', condition }) : draft;
  return {
    code: 'mains-done',
    stopping: [...conditioned.stopping],
    steps: [...conditioned.steps],
    ...(conditioned.requeueAfterMs !== undefined ? { requeueAfterMs: conditioned.requeueAfterMs } : {}),
    ...(conditioned.confirm ? { confirmOnCurrentPod: true as const } : {}),
  };
}

/** The sidecars the kill mechanism stops: by one ContainerRecreateRequest, or a signal container each. */
function kill(planning: Planning, draft: Draft, roles: readonly ContainerRole[]): Draft {
  // Kruise's request for what SIGTERM stops: kruise-daemon kills a sidecar that ignores it after the grace period.
  const byCrr = planning.settings.killMechanism === 'crr' ? roles.filter((role) => role.markers.stop.kind === 'signal') : [];
  const requested = byCrr.length > 0 ? requestCrr(planning, draft, byCrr) : draft;
  return signal(planning, requested, roles.filter((role) => !byCrr.includes(role)));
}

/** The ContainerRecreateRequest for these sidecars, once per pod; past its deadline, the ones it did not stop are ended from outside. */
function requestCrr(planning: Planning, draft: Draft, byCrr: readonly ContainerRole[]): Draft {
  // Past its deadline a request is not made again: it did nothing, or it cannot be made (refused).
  const mainsFinished = mainsFinishedAt(planning.pod, planning.mains);
  const asked: ContainerRole[] = [];
  let checked = draft;
  for (const role of byCrr) {
    const { draft: next, overdue } = checkCrr(planning, checked, role, mainsFinished);
    checked = next;
    if (!overdue) asked.push(role);
  }
  // One request per pod: once made (or found) it is not asked for again, whatever it holds.
  const requested = asked.length > 0 && planning.history.crr === undefined ? withSteps(checked, { type: 'create-crr', containers: asked.map((role) => role.name) }) : checked;
  return telling(requested, ...byCrr.map((role) => `${role.name} (ContainerRecreateRequest)`));
}

/** A signal container for each of these sidecars (one write for all), or what the one sent already says. */
function signal(planning: Planning, draft: Draft, roles: readonly ContainerRole[]): Draft {
  const { pod, settings } = planning;
  const send: V1EphemeralContainer[] = [];
  let next = draft;
  for (const role of roles) {
    const stopping = `${role.name} (${describeStop(role.markers.stop)})`;
    const sent = existingSignalContainer(pod, role.name);
    if (sent) {
      next = checkSignal(planning, telling(next, stopping), role, sent.name);
      continue;
    }
    const containerId = pod.spec?.shareProcessNamespace ? containerIdOf(pod, role.name) : undefined;
    if (pod.spec?.shareProcessNamespace && !containerId) {
      // The kubelet reports the ID of every running container: it comes with the next status.
      next = lookingAgainIn(next, 2000);
      continue;
    }
    const request = { stop: role.markers.stop, gracePeriodSeconds: gracePeriodSeconds(planning, role), ...(containerId ? { containerId } : {}) };
    const made = signalContainer(pod, role.name, settings.signal, new Set(send.map((c) => c.name)), request);
    if ('refused' in made) {
      next = endFromOutside(planning, next, role, 'signal-user-unknown', made.refused.message);
      continue;
    }
    send.push(made.container);
    next = telling(next, stopping);
  }
  return send.length > 0 ? withSteps(next, { type: 'add-signal-containers', containers: send }) : next;
}

/** The sidecar's container ID without the runtime's scheme (`containerd://`). */
function containerIdOf(pod: V1Pod, name: string): string | undefined {
  const id = pod.status?.containerStatuses?.find((s) => s.name === name)?.containerID;
  return id?.replace(/^[a-z0-9-]+:\/\//, '') || undefined;
}

/** The kubelet's words change (ErrImagePull, then ImagePullBackOff) while the cause stays: one event per sidecar. */
function imageNotPulled(draft: Draft, action: Extract<Action, { type: 'imageNotPulled' }>): Draft {
  const cause = `${action.reason}${action.message ? `: ${action.message}` : ''}`;
  const key = `image-not-pulled/${action.container}`;
  if (action.fallback === 'phase') {
    const message = `sidecar ${action.container} is not stopped by its quick-exit image ${action.image}: the node cannot pull it (${cause}); the pod is moved to its terminal phase instead once the other sidecars have stopped`;
    return warning(draft, 'quick-exit-image-not-pulled', message, key);
  }
  const message = `sidecar ${action.container} waits for its quick-exit image ${action.image}, which the node cannot pull (${cause}); make the image pullable, or fix KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE`;
  return { ...warning(draft, 'quick-exit-image-not-pulled', message, key), waitingForImage: { status: 'False', reason: CONDITION_REASONS.imageNotPulled, message } };
}

/** How a sidecar is told to stop, in the words of events, the condition and logs. */
function byImage(container: string, image: string): string {
  return `${container} (quick-exit image ${image})`;
}
