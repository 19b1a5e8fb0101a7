// A pod whose main containers succeeded and that failed all the same. With restartPolicy Never, a
// sidecar that exits non-zero when it is stopped (143 when SIGTERM ends a program without a
// handler for it, 137 when it is killed) fails its pod, as it does under OpenKruise's terminator;
// the Job then counts the pod as failed, or a podFailurePolicy rule without
// onExitCodes.containerName judges the sidecar's exit code (FailJob fails the whole Job). The
// webhook warns of such a rule when the Job is created (validate-exits.ts); the watcher reads a pod
// it stopped once it has ended and says, in a Warning event, what happened and what to change.
import { podAnnotations, ENV_IGNORE_EXIT_CODE, classifyContainers, type ContainerRole } from './markers.ts';
import { epochMs, exitCodesByName } from './decide.ts';
import { clip } from './findings.ts';
import { POD_FAILURE_OUTCOMES, podFailureRules, type PodFailureRule } from './pod-failure-policy.ts';
import { arrayOf, isRecord, restartPolicyOf, type ContainerStatus, type PodLike } from './types.ts';

export interface SidecarExitFailure {
  /** The sidecars whose exit codes failed the pod, in the pod's order. */
  sidecars: Array<{ name: string; exitCode: number }>;
  /** The rule of the Job's podFailurePolicy that judged the pod, when one did. */
  rule: PodFailureRule | undefined;
  /** What happened and what to change, for the event. */
  message: string;
}

/** At most this many sidecars are named in the message: a pod may have many. */
const MAX_NAMED = 3;

/** A sidecar whose exit code decides the pod's phase: stopped by the add-on, its exit code not ignored. */
function exitCodeCounts(role: ContainerRole): boolean {
  return role.role === 'sidecar' && (role.markers.whenJobExit || role.markers.quickExitImage !== undefined) && !role.markers.ignoreExitCode;
}

/**
 * The failure, for a pod in phase Failed whose main containers all exited 0 and whose sidecars
 * exited non-zero once the main containers had finished; undefined for any other pod: a sidecar
 * that crashed while the work ran is its own failure, not the stop's, and a pod being deleted or
 * disrupted (evicted, preempted: condition DisruptionTarget) was ended by that, which a
 * podFailurePolicy rule onPodConditions may judge first. A time that is not reported counts as
 * after the main containers. `jobSpec`: the spec of the Job the pod belongs to, when it was read
 * (its podFailurePolicy names the rule that judged it).
 */
export function sidecarExitFailure(pod: PodLike, jobSpec?: unknown): SidecarExitFailure | undefined {
  const spec = pod.spec ?? {};
  if (pod.status?.phase !== 'Failed' || restartPolicyOf(spec) !== 'Never' || pod.metadata?.deletionTimestamp || disrupted(pod)) return undefined;
  const roles = classifyContainers(spec, podAnnotations(pod));
  const mains = roles.filter((role) => role.role === 'main');
  const codes = exitCodesByName(pod);
  if (mains.length === 0 || mains.some((main) => codes.get(main.name) !== 0)) return undefined;
  const finished = new Map<string, number | undefined>();
  for (const raw of arrayOf(pod.status?.containerStatuses)) {
    if (isRecord(raw) && typeof raw.name === 'string') finished.set(raw.name, epochMs((raw as ContainerStatus).state?.terminated?.finishedAt));
  }
  const mainsFinished = Math.max(...mains.map((main) => finished.get(main.name) ?? Number.NEGATIVE_INFINITY));
  const sidecars = roles
    .filter((role) => exitCodeCounts(role) && (codes.get(role.name) ?? 0) !== 0 && (finished.get(role.name) ?? Number.POSITIVE_INFINITY) >= mainsFinished)
    .map((role) => ({ name: role.name, exitCode: codes.get(role.name)! }));
  if (sidecars.length === 0) return undefined;
  const rules = podFailureRules(isRecord(jobSpec) ? jobSpec.podFailurePolicy : undefined);
  // The Job controller takes the first rule that matches any container: the lowest index.
  const rule = sidecars
    .map(({ name, exitCode }) => rules.ruleFor(name, exitCode))
    .filter((matched) => matched !== undefined)
    .sort((a, b) => a.index - b.index)[0];
  return { sidecars, rule, message: failureMessage(sidecars, rule, jobSpec !== undefined) };
}

/** The pod's DisruptionTarget condition is True: the API server or a controller ended it (eviction, preemption, taint). */
function disrupted(pod: PodLike): boolean {
  return arrayOf(pod.status?.conditions).some((condition) => isRecord(condition) && condition.type === 'DisruptionTarget' && condition.status === 'True');
}

function failureMessage(sidecars: SidecarExitFailure['sidecars'], rule: PodFailureRule | undefined, jobRead: boolean): string {
  const listed = sidecars.slice(0, MAX_NAMED);
  const more = sidecars.length - listed.length;
  const exits = listed.map(({ name, exitCode }) => `sidecar ${clip(name, 63)} exited ${exitCode}`).join(', ') + (more > 0 ? `, and ${more} more sidecars exited non-zero` : '');
  const one = sidecars.length === 1;
  const names = listed.map(({ name }) => clip(name, 63)).join(', ') + (more > 0 ? ` and the ${more} others` : '');
  const judged = rule
    ? `the Job's podFailurePolicy.rules[${rule.index}] (${rule.action}) matched that exit code, so the pod ${POD_FAILURE_OUTCOMES[rule.action]}`
    : jobRead
      ? `no rule of the Job's podFailurePolicy matched it, so the pod ${POD_FAILURE_OUTCOMES.Count}`
      : `a Job then counts the pod as failed, unless a rule of its podFailurePolicy judges that exit code`;
  const containerName = rule && rule.action !== 'Count' ? ', and set onExitCodes.containerName to the main container so that the rule judges it alone' : '';
  return (
    `the pod failed although its main containers succeeded: ${exits} after ${one ? 'it was' : 'they were'} stopped (143 when SIGTERM ends a program without a handler for it, 137 when it is killed); ${judged}; ` +
    `set ${ENV_IGNORE_EXIT_CODE}="true" on ${names} (the watcher then sets the pod's phase from its main containers before stopping ${one ? 'it' : 'them'}) or make ${one ? 'it' : 'them'} exit 0 on SIGTERM${containerName}`
  );
}
