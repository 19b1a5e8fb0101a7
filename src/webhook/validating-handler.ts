// The validating handler: a pure function from an AdmissionRequest and the cluster's settings
// to an answer, with the notice for the owner of an object a controller created despite
// errors (app.ts records it as an Event). The rules themselves live in src/policy.
import { enforcedFindings, errorsOf, formatFinding, formatFindingWithoutValue, inspectObject, listedFindings, nearMissFindings, suspectWebhooks, warningsOf, type Finding, type Inspection } from '../policy/index.ts';
import { allowed, denied, isPod, objectOf, type AdmissionRequest, type AdmissionSettings, type Answer, type OwnerNotice } from './admission.ts';

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

export function validate(request: AdmissionRequest, settings: AdmissionSettings): Answer {
  if (!isValidated(request)) return allowed();
  const object = objectOf(request);
  const inspection = inspectObject(object, settings.quickExitImageAllowlist);
  if (!inspection) return allowed();
  // Refused whoever created the pod: it could never start its main containers.
  const lost = inspection.findings.filter((finding) => finding.rule === 'native-sidecar-lost');
  if (lost.length > 0) {
    const suspects = settings.podMutatingWebhooks ? `; ${suspectWebhooks(settings.podMutatingWebhooks)}` : '';
    return denied(`${lost.length === 1 ? '1 native sidecar' : `${lost.length} native sidecars`} lost: ${listedFindings(lost, 'native sidecar').join('; ')}${suspects}`);
  }

  // A near miss first: it may be why the other findings are there (a sidecar not marked after all).
  let findings = [...nearMissFindings(inspection), ...inspection.findings];
  if (request.operation === 'UPDATE') {
    findings = ratchet(findings, inspectObject(objectOf(request, 'oldObject'), settings.quickExitImageAllowlist)?.findings ?? []);
  }
  findings = enforcedFindings({ ...inspection, findings }, settings.enforcement);

  // The first few of each, and how many more: the answer, its log line and kubectl's output stay small.
  const warnings = listedFindings(warningsOf(findings), 'sidecar configuration warning');
  const errors = errorsOf(findings);
  if (errors.length === 0) {
    const ownerNotice = ownerNoticeOf(request, inspection);
    return ownerNotice ? { ...allowed({ warnings }), ownerNotice } : allowed({ warnings });
  }
  return denied(`${errorCount(errors.length)}: ${listedFindings(errors, 'error').join('; ')}`, { warnings });
}

function errorCount(count: number): string {
  return count === 1 ? '1 sidecar configuration error' : `${count} sidecar configuration errors`;
}

/**
 * For an object a controller created with errors (admitted as warnings), what its owner's event
 * says. Only on a real CREATE: a dry run has no side effects (the webhook registers with
 * sideEffects NoneOnDryRun), and an update by a controller repeats what its creation said.
 * Nothing in it is the object's own text: its kind is one the policy knows, the findings are
 * given without their values (field paths and the rules' words), and the owner is only a claim
 * until the recorder has read it from the API server.
 */
function ownerNoticeOf(request: AdmissionRequest, inspection: Inspection): OwnerNotice | undefined {
  const errors = errorsOf(inspection.findings);
  if (!inspection.controller || errors.length === 0 || request.operation !== 'CREATE' || request.dryRun || !request.namespace) return undefined;
  return { namespace: request.namespace, owner: inspection.controller, kind: request.kind.kind, errors: listedFindings(errors, 'error', formatFindingWithoutValue), errorCount: errors.length };
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
