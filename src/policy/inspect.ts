// Judging a whole object: find its pod spec, validate it, and say what admission makes of the
// findings. The webhook, the lint command and the watcher's sweeper all judge objects through these.
import { applyEnforcement, errorsOf, type EnforcementMode, type Finding } from './findings.ts';
import { migratedSidecars, planNativeSidecars, type MigrationPlan, type OldKubelet } from './native-sidecars.ts';
import { controllerOf, podAnnotationsOf, podSpecOf, type ControllerReference } from './templates.ts';
import { isManageableSpec, validatePodSpec } from './validate.ts';

export interface Inspection {
  /** The object's pod spec, as found (possibly malformed). */
  spec: unknown;
  /** Path of the spec inside the object. */
  fieldPrefix: string;
  /** The annotations of the pod, or of its template. */
  annotations: Record<string, unknown>;
  /** Every finding with the severity its rule gives it (workloads' findings are warnings already). */
  findings: Finding[];
  /**
   * The controller that created the object (a pod's Job, a Job's CronJob), if any. Its findings
   * are never enforced: the template they come from was admitted before (before the add-on was
   * installed, or in warn mode), and denying what a controller creates from it breaks a workload
   * that OpenKruise runs, with the controller retrying in a loop. The template is what to fix.
   */
  controller: ControllerReference | undefined;
}

/** The findings for the pod spec of a Pod, Job, CronJob or workload object; undefined when it carries none. */
export function inspectObject(object: unknown, quickExitImageAllowlist: readonly string[]): Inspection | undefined {
  const location = podSpecOf(object);
  if (!location) return undefined;
  const { spec, fieldPrefix, strictRestartPolicy, advisory, job } = location;
  const annotations = podAnnotationsOf(object, location);
  const findings = validatePodSpec(spec, { fieldPrefix, strictRestartPolicy, quickExitImageAllowlist, migratedSidecars: migratedSidecars(annotations), annotations, containersFinal: fieldPrefix === 'spec', job });
  return { spec, fieldPrefix, annotations, findings: advisory ? applyEnforcement(findings, 'warn') : findings, controller: controllerOf(object) };
}

/** Whether the object's pods move to native sidecars under --native-sidecars, and why (not); `injectedSidecars` as planNativeSidecars takes them. */
export function nativeSidecarPlan(inspection: Inspection, oldKubelets?: readonly OldKubelet[] | 'unread', injectedSidecars?: ReadonlyMap<string, string>): MigrationPlan {
  const { spec, annotations, fieldPrefix } = inspection;
  return planNativeSidecars({ spec, annotations, fieldPrefix, hasErrors: errorsOf(findingsOnceRepaired(inspection)).length > 0, oldKubelets, injectedSidecars });
}

/**
 * The findings of the pod the mutating webhook answers with: a native sidecar lost after an
 * earlier move is put back in that same answer (restoreNativeSidecars).
 */
function findingsOnceRepaired(inspection: Inspection): Finding[] {
  return inspection.findings.filter((finding) => finding.rule !== 'native-sidecar-lost');
}

/** The findings as admission and lint report them: errors become warnings in warn mode, and for an object a controller created. */
export function enforcedFindings(inspection: Inspection, mode: EnforcementMode): Finding[] {
  return applyEnforcement(inspection.findings, inspection.controller ? 'warn' : mode);
}

/**
 * Whether a pod should carry the managed label: the webhook's rule, also applied by the sweeper.
 * A pod from a controller is handled as OpenKruise handles it, errors or not; any other pod with
 * an error is left alone even when warn mode admitted it.
 */
export function shouldManageObject(pod: unknown, quickExitImageAllowlist: readonly string[]): boolean {
  const inspection = inspectObject(pod, quickExitImageAllowlist);
  return inspection !== undefined && shouldManage(inspection);
}

/** Whether the inspected pod should carry the managed label (shouldManageObject, for an inspection made already). */
export function shouldManage(inspection: Inspection): boolean {
  return isManageableSpec(inspection.spec, inspection.controller ? [] : findingsOnceRepaired(inspection), inspection.annotations);
}
