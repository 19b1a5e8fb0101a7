// The catalogue of validation rules: one entry per rule id of findings.ts, with the words
// lint's JSON and SARIF reports and the rules table of docs/admission-rules.md give each rule. Typed by RuleId,
// so a new rule does not compile until it is described here.
import type { RuleId, Severity } from './findings.ts';

export interface RuleDescription {
  /** The severity the rule reports with; `info` only in lint with --native-sidecars. */
  severity: Severity;
  /** The severity in the cases the summary names as milder. */
  milder?: Severity;
  /** What the rule catches, in one line. */
  summary: string;
  /** What to do about it. */
  fix: string;
}

export const RULES: Readonly<Record<RuleId, RuleDescription>> = {
  'marker-value': {
    severity: 'error',
    summary: 'A sidecar marker has a value other than "true" or "false".',
    fix: 'Set the marker to "true" (quoted: env values are strings), or to "false" to turn it off.',
  },
  'marker-value-from': {
    severity: 'error',
    summary: 'A sidecar marker is set through valueFrom, which cannot be read from the pod spec.',
    fix: 'Set a literal value: "true", or the quick-exit image reference for ..._WITH_IMAGE.',
  },
  'quick-exit-image-empty': {
    severity: 'error',
    summary: 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE is empty.',
    fix: 'Set it to an image that exits 0 at once (for example a pinned busybox running `true`), or remove the variable.',
  },
  'quick-exit-image-invalid': {
    severity: 'error',
    summary: 'The quick-exit image is not a valid image reference.',
    fix: 'Write it as [registry/]repository[:tag][@digest], with a lowercase repository name.',
  },
  'quick-exit-image-own': {
    severity: 'error',
    summary: "The quick-exit image is the sidecar's own image, so replacing it changes nothing.",
    fix: 'Use an image that exits 0 at once, different from the sidecar\'s image.',
  },
  'quick-exit-image-not-allowed': {
    severity: 'error',
    summary: "The quick-exit image is outside the cluster's --quick-exit-image-allowlist.",
    fix: 'Use an image that matches one of the allowlist patterns.',
  },
  'no-main-container': {
    severity: 'error',
    summary: 'Every container is marked as a sidecar: there is no main container to wait for.',
    fix: 'Remove the markers from the container that does the work.',
  },
  'ignore-exit-code-without-kill': {
    severity: 'error',
    summary: 'KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE without KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT="true" on the same container.',
    fix: 'Add KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT="true" to the container, or remove KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE.',
  },
  'restart-policy-always': {
    severity: 'error',
    milder: 'warning',
    summary: 'Sidecar markers on a pod whose restartPolicy is Always (or unset): they never take effect. An error on Jobs, CronJobs and strict pods, a warning elsewhere.',
    fix: 'Set restartPolicy to Never or OnFailure, or remove the markers.',
  },
  'quick-exit-image-unpinned': {
    severity: 'warning',
    summary: 'The quick-exit image has no tag or digest, or uses :latest.',
    fix: 'Pin a tag or, better, a digest.',
  },
  'quick-exit-image-command': {
    severity: 'warning',
    summary: 'A quick-exit image on a container that sets command: the quick-exit image runs that command.',
    fix: 'Use a quick-exit image that provides the command (or exits 0 whatever the command), or drop command from the container.',
  },
  'on-failure-kill-exit-code': {
    severity: 'warning',
    summary:
      'A sidecar stopped without KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE that the kubelet restarts after an exit code a stop can leave (0, 137 or 143 when it is told by SIGTERM): by the pod\'s restartPolicy OnFailure, or by its own restartPolicy or restartPolicyRules.',
    fix: 'Set KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE="true"; or make the sidecar exit 0 on SIGTERM, where exit code 0 does not restart it; or change its restartPolicy or restartPolicyRules.',
  },
  'sidecar-restart-policy-always': {
    severity: 'error',
    milder: 'warning',
    summary:
      'A sidecar with its own restartPolicy Always: the kubelet restarts it whatever its exit code, so a stop does not keep it down. An error for a sidecar only its quick-exit image stops (the Job never completes), a warning for one the kill mechanism stops (by signal it is ended from outside after its grace period; by a ContainerRecreateRequest it comes back).',
    fix: 'Remove the container\'s restartPolicy (and restartPolicyRules), or make the sidecar a native sidecar (an init container with restartPolicy: Always).',
  },
  'main-restarted-after-success': {
    severity: 'warning',
    summary: 'A main container of a pod with sidecars that the kubelet restarts when it exits 0 (its own restartPolicy Always, or a restart rule that matches 0): it is never done, so the sidecars are never stopped and the Job does not complete.',
    fix: 'Remove its restartPolicy Always, or leave exit code 0 out of its restartPolicyRules (In without 0, or NotIn with 0 among the values).',
  },
  'pod-failure-policy-sidecar-exit-code': {
    severity: 'warning',
    summary:
      "A rule of the Job's podFailurePolicy (FailJob, FailIndex or Ignore) that matches exit code 137 or 143 of a sidecar stopped without KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE: a pod whose main containers succeeded fails the Job or its index, or runs again.",
    fix: 'Set KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE="true" on the sidecar, or make it exit 0 on SIGTERM; and set onExitCodes.containerName to the main container, so that the rule judges it alone.',
  },
  'virtual-node-without-image': {
    severity: 'warning',
    summary: 'The pod can run on virtual-kubelet nodes, where a sidecar without a quick-exit image cannot be stopped.',
    fix: 'Add KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE with a quick-exit image to the sidecar.',
  },
  'marker-on-init-container': {
    severity: 'warning',
    summary: 'A sidecar marker on an init container, where it has no effect.',
    fix: 'Move the marker to the sidecar in spec.containers, or remove it (a native sidecar already stops when the main containers finish).',
  },
  'duplicate-marker': {
    severity: 'warning',
    summary: 'A sidecar marker defined more than once in one container.',
    fix: 'Keep one definition of each marker.',
  },
  'sidecar-name-invalid': {
    severity: 'error',
    summary: 'The sidecar-terminator.io/sidecars or sidecar-terminator.io/ignore-exit-code annotation, or a stop.sidecar-terminator.io/ or grace-period-seconds.sidecar-terminator.io/ annotation key, holds something that is not a container name.',
    fix: 'List container names (lowercase letters, digits and "-"), separated by commas.',
  },
  'sidecar-not-found': {
    severity: 'warning',
    summary: 'A pod annotation names a container the pod does not have (checked on pods, after every webhook has injected its containers).',
    fix: 'Correct the name, or remove it from the annotation.',
  },
  'stop-method-invalid': {
    severity: 'error',
    summary: 'SIDECAR_TERMINATOR_STOP or a stop.sidecar-terminator.io/<container> annotation is not a stop method the add-on knows, or sends the request elsewhere than the pod\'s loopback.',
    fix: 'Use signal, istio-proxy, linkerd-proxy, cloud-sql-proxy or envoy (optionally :PORT), or "POST http://localhost:PORT/PATH".',
  },
  'grace-period-invalid': {
    severity: 'error',
    summary: 'SIDECAR_TERMINATOR_GRACE_PERIOD_SECONDS or a grace-period-seconds.sidecar-terminator.io/<container> annotation is not a whole number of seconds.',
    fix: 'Write whole seconds, as terminationGracePeriodSeconds: "10".',
  },
  'stop-without-sidecar': {
    severity: 'error',
    summary: 'A stop method, a grace period or the ignore-exit-code annotation for a container that is not a sidecar stopped by the kill mechanism: it has no effect.',
    fix: 'Mark the container: KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT="true", or its name in the sidecar-terminator.io/sidecars annotation; or remove the setting.',
  },
  'native-sidecar-lost': {
    severity: 'error',
    summary:
      'A pod whose sidecar the add-on moved to a native sidecar (annotation sidecar-terminator.io/native-sidecars-migrated) has it as a plain init container: its restartPolicy: Always was dropped after the move, by a later mutating webhook or by the API server with the SidecarContainers feature gate off. It would never finish, and the main containers would never start.',
    fix: 'Upgrade the mutating webhook that rewrites the init containers (one built on a client library older than native sidecars drops the field), or exclude these pods from it; turn the SidecarContainers feature gate on (it can be off up to Kubernetes 1.32); or set --native-sidecars=none (chart value admission.nativeSidecars).',
  },
  'near-miss-marker': {
    severity: 'warning',
    summary:
      'An env var of a container, or an annotation of the pod, whose name is close to a marker\'s but is not it (another case, "-" for "_", a letter dropped, doubled or swapped, a word missing, added or swapped with its neighbour), or starts like the Kruise markers or the add-on\'s annotations but names none of them: the add-on ignores it. Pods with restartPolicy Never or OnFailure only.',
    fix: 'Write the marker\'s name exactly as the message gives it (names are case-sensitive), or rename the variable or annotation if it is not meant for the add-on.',
  },
  'native-sidecar-migration': {
    severity: 'info',
    summary: 'With --native-sidecars, this sidecar becomes a native sidecar (an init container with restartPolicy: Always) when the pod is created, and the kubelet stops it.',
    fix: 'Nothing to do. To keep a pod as it is, annotate its template sidecar-terminator.io/native-sidecars: disabled.',
  },
  'native-sidecar-migration-skipped': {
    severity: 'info',
    summary: 'With --native-sidecars, this pod keeps its sidecars where they are, for the reason given: moving them could change what the pod does. The watcher stops them as before.',
    fix: 'Nothing to do; or change what the message names, if the pod should run native sidecars.',
  },
};

/** The rule ids in the catalogue's order. */
export const RULE_IDS = Object.keys(RULES) as RuleId[];

/** The severity a finding of the rule reports with: its milder one, where it has one, in the cases its summary names. */
export function severityOf(rule: RuleId, milder = false): Severity {
  const { severity, milder: milderSeverity } = RULES[rule];
  return milder ? milderSeverity ?? severity : severity;
}

/** The rule's fix as the last clause of a finding's detail: `...; remove the markers from ...`. */
export function fixClause(rule: RuleId): string {
  const { fix } = RULES[rule];
  return `${fix[0]!.toLowerCase()}${fix.slice(1).replace(/\.$/, '')}`;
}
