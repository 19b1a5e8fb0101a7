// Validation of what becomes of the exit codes of a pod whose sidecars the add-on stops: whether
// the kubelet restarts a sidecar once it is stopped (its own restartPolicy and
// restartPolicyRules, or the pod's OnFailure) or a main container once it has succeeded, and
// whether the Job's podFailurePolicy judges a stopped sidecar's exit code. validate.ts calls it
// for a pod spec with sidecars and a restartPolicy the markers apply to (Never or OnFailure).
import { clip, type Report } from './findings.ts';
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT, markerEntries, type ContainerRole } from './markers.ts';
import { POD_ANNOTATIONS } from './names.ts';
import { POD_FAILURE_OUTCOMES, podFailureRules, type PodFailureRule } from './pod-failure-policy.ts';
import { restartCause, restartOfContainerAt, type Restart } from './restarts.ts';
import { podMetadataPrefix, type JobSpecLocation } from './templates.ts';
import { arrayOf, isRecord, restartPolicyOf, type Container, type PodSpec } from './types.ts';


/**
 * The exit codes a stop can leave a sidecar stopped by the kill mechanism with: 0 when it exits
 * by itself (it handles SIGTERM, or its shutdown request), and, told by SIGTERM, 143 when SIGTERM
 * ends it and 137 when it is killed (kruise-daemon's SIGKILL after its grace period, or the
 * signal container's for a child of an init that forwards SIGTERM). A stop by its shutdown
 * request leaves its own exit code, 0 for every program measured (docs/sidecars.md).
 */
function exitCodesOfStop(sidecar: ContainerRole): number[] {
  return sidecar.markers.stop.kind === 'signal' ? [0, 137, 143] : [0];
}

/** A sidecar stopped by the kill mechanism whose exit code counts: the pod's phase follows it. */
function exitCodeCounts(sidecar: ContainerRole): boolean {
  return sidecar.markers.whenJobExit && !sidecar.markers.ignoreExitCode;
}

export function validateExits(spec: PodSpec, roles: ContainerRole[], fieldPrefix: string, job: JobSpecLocation | undefined, report: Report): void {
  const containers = arrayOf(spec.containers);
  for (const role of roles) {
    const raw = containers[role.index];
    const container: Container = isRecord(raw) ? raw : {};
    const path = `${fieldPrefix}.containers[${role.index}]`;
    if (role.role === 'main') validateMain(spec, role, path, report);
    else if (container.restartPolicy === 'Always') validateAlwaysSidecar(role, path, report);
    else if (exitCodeCounts(role)) validateRestartedAfterStop(spec, container, role, path, fieldPrefix, report);
  }
  // The API server requires restartPolicy Never with a podFailurePolicy.
  if (job && restartPolicyOf(spec) === 'Never') validatePodFailurePolicy(spec, roles, job, report);
}

/** A main container the kubelet restarts after it exits 0 is never done: nothing is ever stopped. */
function validateMain(spec: PodSpec, main: ContainerRole, path: string, report: Report): void {
  const restart = restartOfContainerAt(spec, main.index, 0);
  if (!restart.restarts) return;
  // Neither pod policy the markers apply to restarts after exit 0: the container's own policy or a rule does.
  const { decidedBy } = restart;
  report({
    rule: 'main-restarted-after-success',
    field: decidedBy.by === 'rule' ? `${path}.restartPolicyRules[${decidedBy.rule - 1}]` : `${path}.restartPolicy`,
    detail:
      `the kubelet restarts this main container when it exits 0 (${restartCause(restart)}), so it is never done: its sidecars are never stopped, and the Job does not complete (it would not without the add-on either); ` +
      (decidedBy.by === 'rule' ? 'leave exit code 0 out of this rule (In without 0, or NotIn with 0 among its values)' : 'remove its restartPolicy, or set it to Never or OnFailure'),
  });
}

/**
 * A sidecar whose own restartPolicy is Always comes back whatever its exit code. Stopped by
 * signal, it is ended from outside once it still runs after its grace period (stop-plan.ts: a
 * quick-exit image in its place, which Always restarts too, then the pod's phase from its main
 * containers); a ContainerRecreateRequest is made once per pod, and a quick-exit image put in its
 * place by decide.ts is restarted and never ends. A sidecar whose exit code is ignored is not
 * concerned: the pod's phase is set before it is stopped, and the kubelet restarts nothing in a
 * terminal phase.
 */
function validateAlwaysSidecar(sidecar: ContainerRole, path: string, report: Report): void {
  if (sidecar.markers.whenJobExit && sidecar.markers.ignoreExitCode) return;
  const fix = 'remove its restartPolicy (and restartPolicyRules), or make it a native sidecar (an init container with restartPolicy Always)';
  const finding = { rule: 'sidecar-restart-policy-always', field: `${path}.restartPolicy`, type: 'Unsupported value', value: 'Always' } as const;
  if (!sidecar.markers.whenJobExit) {
    report({
      ...finding,
      detail: `the kubelet restarts this sidecar whatever its exit code: the quick-exit image put in its place exits 0 and is started again and again, so the sidecar never stays down and the Job never completes; ${fix}`,
    });
    return;
  }
  report({
    ...finding,
    detail:
      'the kubelet restarts this sidecar whatever its exit code, so a stop does not keep it down: stopped by signal, it is ended from outside after its grace period (the pod\'s phase is set from its main containers) and the Job completes late; ' +
      `stopped by a ContainerRecreateRequest (--kill-mechanism crr), or by its quick-exit image on a virtual node, it comes back and the Job does not complete; ${fix}`,
  }, true);
}

/** A sidecar its own policy or rules (or the pod's OnFailure) restart after an exit code a stop can leave. */
function validateRestartedAfterStop(spec: PodSpec, container: Container, sidecar: ContainerRole, path: string, fieldPrefix: string, report: Report): void {
  const restarts = exitCodesOfStop(sidecar)
    .map((code) => restartOfContainerAt(spec, sidecar.index, code))
    .filter((restart) => restart.restarts);
  if (restarts.length === 0) return;
  const marked = markerEntries(container).some((entry) => entry.name === ENV_WHEN_JOB_EXIT);
  report({
    rule: 'on-failure-kill-exit-code',
    field: marked ? `${path}.env[${ENV_WHEN_JOB_EXIT}]` : `${podMetadataPrefix(fieldPrefix)}.annotations[${POD_ANNOTATIONS.sidecars}]`,
    detail: restartedAfterStop(restarts),
  });
}

/** Why the kubelet restarts a stopped sidecar, naming the exit codes, and the fixes that apply. */
function restartedAfterStop(restarts: Restart[]): string {
  const [first] = restarts as [Restart];
  if (restarts.every(({ decidedBy }) => decidedBy.by !== 'rule' && decidedBy.policy === 'OnFailure')) {
    return `with ${restartCause(first)}, kubelet restarts a sidecar that exits non-zero when it is stopped by signal (143 when SIGTERM ends it, 137 when it is killed); set ${ENV_IGNORE_EXIT_CODE}="true", or make the sidecar exit 0 on SIGTERM`;
  }
  const codes = restarts.map((restart) => `${restart.exitCode} (${restartCause(restart)})`).join(', ');
  const exitZero = restarts.some((restart) => restart.exitCode === 0) ? '' : ', or make the sidecar exit 0 on SIGTERM';
  return `kubelet restarts this sidecar if it exits ${codes}, as a stop can leave it (0 when it exits by itself, 143 when SIGTERM ends it, 137 when it is killed); set ${ENV_IGNORE_EXIT_CODE}="true", or change its restartPolicy or restartPolicyRules${exitZero}`;
}

/** The non-zero exit codes a stop can leave: the only ones a podFailurePolicy rule can match. */
const FAILURE_CODES = (sidecar: ContainerRole) => exitCodesOfStop(sidecar).filter((code) => code !== 0);


/** At most this many sidecars are named in one finding: a hostile pod may have thousands. */
const MAX_NAMED_SIDECARS = 3;

/**
 * A rule of the Job's podFailurePolicy that judges a stopped sidecar: with restartPolicy Never, a
 * sidecar that exits non-zero fails the pod whose main containers succeeded, and the first rule
 * matching its exit code decides what the Job controller makes of that. FailJob, FailIndex and
 * Ignore make it worse than no rule; Count is what happens without one, so it is not reported.
 */
function validatePodFailurePolicy(spec: PodSpec, roles: ContainerRole[], job: JobSpecLocation, report: Report): void {
  const rules = podFailureRules(isRecord(job.spec) ? job.spec.podFailurePolicy : undefined);
  const judged = new Map<number, { rule: PodFailureRule; action: Exclude<PodFailureRule['action'], 'Count'>; sidecars: Array<{ index: number; name: string; codes: number[] }> }>();
  for (const sidecar of roles) {
    if (sidecar.role !== 'sidecar' || !exitCodeCounts(sidecar)) continue;
    for (const code of FAILURE_CODES(sidecar)) {
      // A code its own policy or rules restart it after does not end the pod: on-failure-kill-exit-code says so.
      if (restartOfContainerAt(spec, sidecar.index, code).restarts) continue;
      const rule = rules.ruleFor(sidecar.name, code);
      if (!rule || rule.action === 'Count') continue;
      const entry = judged.get(rule.index) ?? { rule, action: rule.action, sidecars: [] };
      judged.set(rule.index, entry);
      // A sidecar's codes come one after the other: it is the last one named, if it is named at all.
      const last = entry.sidecars.at(-1);
      if (last?.index === sidecar.index) last.codes.push(code);
      else entry.sidecars.push({ index: sidecar.index, name: sidecar.name, codes: [code] });
    }
  }
  for (const { rule, action, sidecars } of [...judged.values()].sort((a, b) => a.rule.index - b.rule.index)) {
    const listed = sidecars.slice(0, MAX_NAMED_SIDECARS);
    const more = sidecars.length - listed.length;
    const matched = listed.map(({ name, codes }) => `${codes.join(' or ')} of sidecar ${clip(name, 63)}`).join(', and ') + (more > 0 ? `, and of ${more} more sidecars` : '');
    const names = [...listed.map(({ name }) => clip(name, 63)), ...(more > 0 ? [`${more} more`] : [])].join(', ').replace(/, ([^,]*)$/, ' and $1');
    const one = sidecars.length === 1;
    report({
      rule: 'pod-failure-policy-sidecar-exit-code',
      field: `${job.fieldPrefix}.podFailurePolicy.rules[${rule.index}].onExitCodes`,
      detail:
        `this rule (${action}) matches exit code ${matched}, which a stop can leave (143 when SIGTERM ends it, 137 when it is killed), so a pod whose main containers succeeded ${POD_FAILURE_OUTCOMES[action]}; ` +
        `set ${ENV_IGNORE_EXIT_CODE}="true" on ${names} (the watcher then sets the pod's phase from its main containers before stopping ${one ? 'it' : 'them'}, and the Job controller judges failed pods only) or make ${one ? 'it' : 'them'} exit 0 on SIGTERM, ` +
        'and set onExitCodes.containerName to the main container so that this rule judges it alone',
    });
  }
}
