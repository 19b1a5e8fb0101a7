// The mutating handler (DESIGN.md section 3): a pod the watcher should manage gets the managed
// label (src/policy/labels.ts): the watcher watches those pods only. The patch is the
// difference between the pod and a labelled deep copy of it.
import { MANAGED, MANAGED_LABEL, isRecord, shouldManage } from '../policy/index.ts';
import { allowed, patched, type AdmissionDecision, type AdmissionRequest } from './admission.ts';
import { diff } from './json-patch.ts';
import { isPod, objectOf, type AdmissionSettings } from './validate.ts';

/**
 * The decision depends on the request alone and has no side effect, so a dryRun request is
 * answered exactly like a real one (the webhook registers with sideEffects: None).
 */
export function mutate(request: AdmissionRequest, settings: AdmissionSettings): AdmissionDecision {
  if (!isPod(request) || request.operation !== 'CREATE' || request.subResource || !isRecord(request.object)) return allowed();
  if (!shouldManage(objectOf(request), settings.quickExitImageAllowlist)) return allowed();
  return patched(diff(request.object, withManagedLabel(request.object)));
}

function withManagedLabel(pod: Record<string, unknown>): Record<string, unknown> {
  const copy = structuredClone(pod);
  const metadata = isRecord(copy.metadata) ? copy.metadata : (copy.metadata = {});
  const labels = isRecord(metadata.labels) ? metadata.labels : (metadata.labels = {});
  labels[MANAGED_LABEL] = MANAGED;
  return copy;
}
