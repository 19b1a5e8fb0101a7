// Judging a whole object: find its pod spec, validate it. The webhook, the lint command and
// the watcher's sweeper all judge objects through these.
import { applyEnforcement, type Finding } from './findings.ts';
import { podSpecOf } from './templates.ts';
import { isManageable, validatePodSpec } from './validate.ts';

export interface Inspection {
  /** The object's pod spec, as found (possibly malformed). */
  spec: unknown;
  /** Every finding, before the enforcement mode is applied (workloads' findings are warnings already). */
  findings: Finding[];
}

/** The findings for the pod spec of a Pod, Job, CronJob or workload object; undefined when it carries none. */
export function inspectObject(object: unknown, quickExitImageAllowlist: readonly string[]): Inspection | undefined {
  const location = podSpecOf(object);
  if (!location) return undefined;
  const { spec, fieldPrefix, strictRestartPolicy, advisory } = location;
  const findings = validatePodSpec(spec, { fieldPrefix, strictRestartPolicy, quickExitImageAllowlist });
  return { spec, findings: advisory ? applyEnforcement(findings, 'warn') : findings };
}

/** Whether a pod should carry the managed label: the webhook's rule, also applied by the sweeper. */
export function shouldManage(pod: unknown, quickExitImageAllowlist: readonly string[]): boolean {
  const inspection = inspectObject(pod, quickExitImageAllowlist);
  // The findings before enforcement: a pod with errors is not managed, even when warn mode admits it.
  return inspection !== undefined && isManageable(inspection.spec, inspection.findings);
}
