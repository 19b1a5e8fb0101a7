// The mutating handler (docs/ARCHITECTURE.md, the path of a marker, step 2): a pod the watcher
// should manage gets the managed label (src/policy/labels.ts): the watcher watches those pods
// only. The patch is the difference between the pod and a labelled deep copy of it.
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

/**
 * A copy of the pod with the label set. Only the objects on the path to the label are copied
 * (pod, metadata, labels); everything else is shared with the original, so diff() skips it by
 * identity instead of comparing the whole pod, and nothing of the original is changed.
 */
function withManagedLabel(pod: Record<string, unknown>): Record<string, unknown> {
  const metadata = isRecord(pod.metadata) ? pod.metadata : {};
  const labels = isRecord(metadata.labels) ? metadata.labels : {};
  return { ...pod, metadata: { ...metadata, labels: { ...labels, [MANAGED_LABEL]: MANAGED } } };
}
