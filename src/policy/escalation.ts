// The escalation ladder: what a stop already requested has done, read from the pod's status, and
// how a sidecar it did not stop is ended from outside its PID namespace. A signal container reports
// the sidecar exited, or that it cannot be stopped from inside, or it failed or cannot start; a
// ContainerRecreateRequest still pending after its deadline did nothing. Such a sidecar gets its
// image replaced by a quick-exit image (the kubelet kills it through the runtime and runs that
// image, which exits 0), or, where no quick-exit image can run in its place, the pod's phase is set
// from its main containers (the kubelet then kills it). Each rung is a pure function of the pod and
// the plan so far (plan-draft.ts).
import type { V1ContainerState } from '@kubernetes/client-node';
import type { WarningCode } from './codes.ts';
import { epochMs, exitCodesByName, phaseOfMains } from './decide.ts';
import { IMAGE_PULL_FAILURES } from './image-pull.ts';
import type { ContainerRole } from './markers.ts';
import { CONDITION_REASONS } from './names.ts';
import { PHASE_SET, gracePeriodSeconds, imageAllowed, lookingAgainIn, setsPhase, warning, withSteps, type Draft, type Planning } from './plan-draft.ts';
import { STOP_EXIT_CODES } from './signal-container.ts';
import { describeStop } from './stop-method.ts';

/** Waiting reasons of a signal container that will not run. */
const CONTAINER_START_FAILURES = new Set([...IMAGE_PULL_FAILURES, 'CreateContainerError', 'CreateContainerConfigError', 'RunContainerError']);

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

/**
 * A signal container already sent (`name`): what it says. It reports the sidecar exited (0, or
 * 137: the sidecar was PID 1 of their namespace), or that the sidecar cannot be stopped from
 * inside (no SIGTERM handler; still running after the grace period), or it failed (non-zero exit:
 * EPERM), or cannot start: then the sidecar is ended from outside. A sidecar still running a grace
 * period after its signal container reported it exited, or a signal container still running well
 * past the grace period, is ended from outside too.
 */
export function checkSignal(planning: Planning, draft: Draft, role: ContainerRole, name: string): Draft {
  const sidecar = role.name;
  const state = planning.pod.status?.ephemeralContainerStatuses?.find((s) => s.name === name)?.state;
  const graceSeconds = gracePeriodSeconds(planning, role);
  const exit = state?.terminated;
  const output = exit?.message?.trim();
  const said = output ? ` (${output.split('\n').at(-1)!.replace(/^\S+Z /, '')})` : '';
  if (exit?.exitCode === STOP_EXIT_CODES.noHandler) {
    return endFromOutside(planning, draft, role, 'sigterm-unhandled', `sidecar ${sidecar} cannot be stopped by SIGTERM from inside its pod: its PID 1 has no SIGTERM handler, so the kernel drops SIGTERM (and SIGKILL) sent to it from inside its PID namespace`);
  }
  if (exit?.exitCode === STOP_EXIT_CODES.stillRunning) {
    return endFromOutside(planning, draft, role, 'signal-ignored', `sidecar ${sidecar} still runs ${graceSeconds}s after ${describeStop(role.markers.stop)}${said}`);
  }
  if (exit && !signalDelivered(exit)) {
    const eperm = /EPERM/.test(output ?? '') ? '; it runs as another user than the sidecar: set runAsUser on the sidecar to the uid it runs as' : '';
    return endFromOutside(planning, draft, role, 'signal-failed', `the signal container ${name} did not stop sidecar ${sidecar}: it exited with code ${exit.exitCode}${output ? ` (${output})` : ''}${eperm}`);
  }
  const waiting = state?.waiting;
  if (waiting?.reason && CONTAINER_START_FAILURES.has(waiting.reason)) {
    return endFromOutside(planning, draft, role, 'signal-not-started', `the signal container ${name} for sidecar ${sidecar} cannot start: ${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''}`);
  }
  return waitForSignal(planning, draft, role, state);
}

/**
 * A signal container that has said nothing decisive yet. Reported done: the kubelet reports the
 * sidecar's exit soon. Running: it reports within the grace period and a few seconds. Past those,
 * the sidecar ignores its stop, read from the absence of a change: confirmed on the pod as it is now.
 */
function waitForSignal(planning: Planning, draft: Draft, role: ContainerRole, state: V1ContainerState | undefined): Draft {
  const graceSeconds = gracePeriodSeconds(planning, role);
  const graceMs = graceSeconds * 1000;
  const exit = state?.terminated;
  // Exited without a finish time: its status changing brings the pod back.
  if (exit && !exit.finishedAt) return draft;
  const since = exit?.finishedAt ?? state?.running?.startedAt;
  if (!since) return lookingAgainIn(draft, graceMs + SIGNAL_CONTAINER_MARGIN_MS);
  const remainingMs = new Date(since).getTime() + (exit ? graceMs : graceMs + SIGNAL_CONTAINER_MARGIN_MS) - planning.now;
  if (remainingMs > 0) return lookingAgainIn(draft, remainingMs + 1000);
  const cause = `sidecar ${role.name} still runs ${graceSeconds}s after ${describeStop(role.markers.stop)}, ${exit ? 'which its signal container reported done' : 'and its signal container has not finished'}`;
  return endFromOutside(planning, { ...draft, confirm: true }, role, 'signal-ignored', cause);
}

/**
 * A sidecar asked to stop by a ContainerRecreateRequest: still running its grace period and
 * CRR_MARGIN_MS after the last main container finished (`mainsFinished`; or after it started, if
 * later), the request did nothing: no kruise-daemon serves the node (OpenKruise's manager then
 * completes the request after a minute without the container restarted), the daemon failed, or
 * the request itself was refused (a webhook, RBAC). The sidecar is then ended from outside, as one
 * that ignores its signal (`overdue`). Before then, the pod is looked at again when the wait is over.
 */
export function checkCrr(planning: Planning, draft: Draft, role: ContainerRole, mainsFinished: number | undefined): { draft: Draft; overdue: boolean } {
  const started = epochMs(planning.pod.status?.containerStatuses?.find((s) => s.name === role.name)?.state?.running?.startedAt);
  if (started === undefined || mainsFinished === undefined) return { draft, overdue: false };
  const waitedSeconds = gracePeriodSeconds(planning, role) + CRR_MARGIN_MS / 1000;
  const remainingMs = Math.max(started, mainsFinished) + waitedSeconds * 1000 - planning.now;
  if (remainingMs > 0) return { draft: lookingAgainIn(draft, remainingMs + 1000), overdue: false };
  // Read from the absence of a change: confirmed on the pod as it is now.
  const node = planning.pod.spec?.nodeName ?? 'its node';
  const cause = `sidecar ${role.name} still runs ${waitedSeconds}s after the main containers finished: its ContainerRecreateRequest did not stop it (no kruise-daemon serves ${node}, the daemon failed, or the request was refused)`;
  return { draft: endFromOutside(planning, { ...draft, confirm: true }, role, 'crr-not-done', cause), overdue: true };
}

/**
 * Ends a sidecar from outside its PID namespace, through the kubelet, with a Warning saying why:
 * its quick-exit image in its place (its own, else --quick-exit-image where the sidecar sets no
 * command, which that image would have to run), else the pod's terminal phase from its main
 * containers. Once either is written, the kubelet does the rest: nothing more is requested.
 */
export function endFromOutside(planning: Planning, draft: Draft, role: ContainerRole, code: WarningCode, cause: string): Draft {
  const { pod, settings } = planning;
  const sidecar = role.name;
  const image = role.markers.quickExitImage ?? (settings.quickExitImage !== '' && !role.hasCommand ? settings.quickExitImage : undefined);
  const imageUsable = image !== undefined && (role.markers.quickExitImage === undefined || imageAllowed(planning, image));
  // One event per sidecar and way of ending it: the kubelet's words in `cause` change while it does not.
  const eventKey = (how: string) => `${code}/${sidecar}/${how}`;
  if (imageUsable && role.image !== image) {
    const warned = warning(draft, code, `${cause}; ending it from outside: its image is replaced by the quick-exit image ${image}, and the kubelet kills it and runs that image`, eventKey('image'));
    return withSteps(warned, { type: 'escalate-image', container: sidecar, image });
  }
  const failure = imageUsable ? pod.status?.containerStatuses?.find((s) => s.name === sidecar)?.state?.waiting : undefined;
  // Being killed by the kubelet, which then runs the quick-exit image.
  if (imageUsable && !(failure?.reason && ESCALATION_IMAGE_FAILURES.has(failure.reason))) return lookingAgainIn(draft, gracePeriodSeconds(planning, role) * 1000 + SIGNAL_CONTAINER_MARGIN_MS);
  // Once the phase is terminal, the kubelet kills what still runs: nothing more to write.
  if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return draft;
  if (setsPhase(draft)) return warning(draft, code, `${cause}; ending it from outside: the pod's phase is set from its main containers, and the kubelet kills what still runs`, eventKey('phase'));
  const codes = exitCodesByName(pod);
  const next = phaseOfMains(planning.mains.map((main) => codes.get(main.name)));
  const why = failure
    ? `its quick-exit image ${image} cannot run (${failure.reason})`
    : image !== undefined
      ? `its quick-exit image ${image} is not in --quick-exit-image-allowlist`
      : role.hasCommand
        ? 'no quick-exit image can run in its place (it sets command)'
        : 'no quick-exit image is configured';
  const message = `${PHASE_SET}${next}: the main containers are done, and sidecar ${sidecar} is ended by the kubelet (${why})`;
  const warned = warning(draft, code, `${cause}; ending it from outside: ${why}, so the pod's phase is set to ${next} from its main containers, and the kubelet kills what still runs`, eventKey('phase'));
  const phased = withSteps(warned, { type: 'escalate-phase', phase: next, condition: { status: 'True', reason: CONDITION_REASONS.stopping, message } });
  // The kubelet acts on a change of a pod's status only at its next sync of the pod (syncFrequency,
  // a minute by default), on a change of its spec at once: the quick-exit image is written too,
  // and never runs, since the kubelet starts no container of a pod in a terminal phase.
  const trigger = settings.quickExitImage;
  return !failure && trigger !== '' && role.image !== trigger ? withSteps(phased, { type: 'escalate-image', container: sidecar, image: trigger }) : phased;
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
