// The validating handler: a pure function from an AdmissionRequest and the cluster's settings to
// a decision. The rules themselves live in src/policy (README.md, "Rules checked at admission").
import {
  applyEnforcement,
  errorsOf,
  formatFinding,
  inspectObject,
  warningsOf,
  isRecord,
  type EnforcementMode,
  type Finding,
} from '../policy/index.ts';
import { allowed, denied, type AdmissionDecision, type AdmissionRequest, type GroupVersionKind } from './admission.ts';

export interface AdmissionSettings {
  enforcement: EnforcementMode;
  /** When non-empty, quick-exit images must match one of these patterns. */
  quickExitImageAllowlist: readonly string[];
}

/**
 * The object as the request names it. The API server always sends apiVersion and kind inside
 * the object too, but request.kind is the authority (after any version conversion).
 */
export function objectOf(request: AdmissionRequest, which: 'object' | 'oldObject' = 'object'): unknown {
  const object = request[which];
  if (!isRecord(object)) return object;
  return { ...object, apiVersion: apiVersionOf(request.kind), kind: request.kind.kind };
}

function apiVersionOf({ group, version }: GroupVersionKind): string {
  return group === '' ? version : `${group}/${version}`;
}

export function isPod(request: AdmissionRequest): boolean {
  return request.kind.group === '' && request.kind.kind === 'Pod';
}

/**
 * Pods are validated on CREATE only: the watcher's in-place image replacement is a pod UPDATE
 * whose new image is the quick-exit image, which the own-image rule would deny. Templates
 * (Job, CronJob and, when an operator registers them, other workloads) on CREATE and UPDATE.
 * Subresources (status, ephemeralcontainers, ...) are not the object's configuration.
 */
function isValidated(request: AdmissionRequest): boolean {
  if (request.subResource) return false;
  if (isPod(request)) return request.operation === 'CREATE';
  return request.operation === 'CREATE' || request.operation === 'UPDATE';
}

export function validate(request: AdmissionRequest, settings: AdmissionSettings): AdmissionDecision {
  if (!isValidated(request)) return allowed();
  const inspection = inspectObject(objectOf(request), settings.quickExitImageAllowlist);
  if (!inspection) return allowed();

  let findings = inspection.findings;
  if (request.operation === 'UPDATE') {
    findings = ratchet(findings, inspectObject(objectOf(request, 'oldObject'), settings.quickExitImageAllowlist)?.findings ?? []);
  }
  findings = applyEnforcement(findings, settings.enforcement);

  const warnings = warningsOf(findings).map(formatFinding);
  const errors = errorsOf(findings);
  if (errors.length === 0) return allowed({ warnings });
  const count = errors.length === 1 ? '1 sidecar configuration error' : `${errors.length} sidecar configuration errors`;
  return denied(`${count}: ${errors.map(formatFinding).join('; ')}`, { warnings });
}

/**
 * On UPDATE, an error the old object already had is reported as a warning instead of denying,
 * as the API server ratchets its own validation: an object admitted before the webhook (or in
 * warn mode) must stay updatable, or the garbage collector could not even remove its finalizers.
 */
function ratchet(findings: Finding[], oldFindings: Finding[]): Finding[] {
  const existing = new Set(errorsOf(oldFindings).map(formatFinding));
  return findings.map((finding) =>
    finding.severity === 'error' && existing.has(formatFinding(finding)) ? { ...finding, severity: 'warning' } : finding,
  );
}
