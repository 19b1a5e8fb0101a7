// The mutating handlers. /mutate: a pod the watcher should manage gets the managed label
// (src/policy/names.ts): the watcher watches those pods only. /native-sidecars (registered
// with --native-sidecars, for the namespaces it selects): the same, and first the pod's marked
// sidecars move to native sidecars where the policy allows (src/policy/native-sidecars.ts); a
// migrated pod is not labelled, as the kubelet stops its sidecars.
//
// With an injected-sidecar policy (--injected-sidecars), both first write on the pod the
// annotations its entries add (src/policy/injected-sidecars.ts), as if the pod's author had
// written them: the pod is judged, labelled and migrated with them. An entry with a
// namespaceSelector in a namespace whose labels the settings lack does not apply, and the answer
// says it wants them (namespaceLabelsWanted): the HTTP layer reads them and asks again.
//
// The patch is the difference between the pod and a mutated copy of it, so a pod mutated already
// gets no patch: the webhooks register with reinvocationPolicy IfNeeded, and are called again
// after a later webhook injected a sidecar, without changing what they already did.
import {
  MANAGED,
  MANAGED_LABEL,
  MIGRATED_ANNOTATION,
  SKIPPED_ANNOTATION,
  formatFinding,
  inspectObject,
  listedFindings,
  nearMissFindings,
  shouldManage,
  isRecord,
  migratePodSpec,
  migratedAnnotation,
  nativeSidecarPlan,
  restoreNativeSidecars,
  skippedAnnotation,
  strippedNativeSidecars,
  clipValue,
  injectedSidecarAnnotations,
  entriesAwaitingNamespaceLabels,
  type Inspection,
} from '../policy/index.ts';
import { allowed, isPod, objectOf, patched, type AdmissionRequest, type AdmissionSettings, type Answer, type InjectedSidecarSettings } from './admission.ts';
import { diff } from './json-patch.ts';

type Pod = Record<string, unknown>;

/**
 * The answer depends on the request alone and has no side effect, so a dryRun request is
 * answered exactly like a real one (the webhooks register with sideEffects: None).
 */
export function mutate(request: AdmissionRequest, settings: AdmissionSettings): Answer {
  return mutatePod(request, settings, false);
}

/** /native-sidecars: migrates when --native-sidecars is on and the API server runs native sidecars; else as /mutate. */
export function mutateNativeSidecars(request: AdmissionRequest, settings: AdmissionSettings): Answer {
  return mutatePod(request, settings, settings.nativeSidecars === true);
}

function mutatePod(request: AdmissionRequest, settings: AdmissionSettings, migrate: boolean): Answer {
  if (!isPod(request) || request.operation !== 'CREATE' || request.subResource || !isRecord(request.object)) return allowed();
  const original = request.object;
  const { pod, injectedSidecars, namespaceLabelsWanted } = settings.injectedSidecars ? withInjectedSidecars(original, request, settings.injectedSidecars) : { pod: original };
  const inspection = inspectObject(objectOf(pod === original ? request : { ...request, object: pod }), settings.quickExitImageAllowlist);
  // The validating webhook sees marked pods only (its matchConditions), so a pod whose markers are
  // all misspelt hears of them here. Worded as the validating webhook words them: the API server
  // shows a warning both webhooks give once.
  const answer = inspection ? withWarnings(mutateInspected(original, pod, inspection, settings, migrate, injectedSidecars), listedFindings(nearMissFindings(inspection), 'sidecar configuration warning')) : allowed();
  return namespaceLabelsWanted ? { ...answer, namespaceLabelsWanted } : answer;
}

interface InjectedSidecarsApplied {
  /** The request's pod with the annotations the policy adds to it; the pod itself when no entry applies. */
  pod: Pod;
  /** The sidecars the entries applied name, each with its entry's name (for the words of /native-sidecars). */
  injectedSidecars?: ReadonlyMap<string, string>;
  /** When the labels of the pod's namespace are not in the settings: the entries they would decide. */
  namespaceLabelsWanted?: Answer['namespaceLabelsWanted'];
}

function withInjectedSidecars(pod: Pod, request: AdmissionRequest, { policy, namespaceLabels }: InjectedSidecarSettings): InjectedSidecarsApplied {
  if (policy.entries.length === 0) return { pod };
  const metadata = isRecord(pod.metadata) ? pod.metadata : {};
  const namespace = request.namespace ?? (typeof metadata.namespace === 'string' ? metadata.namespace : undefined);
  const labels = namespace === undefined ? undefined : namespaceLabels?.get(namespace);
  const added = injectedSidecarAnnotations(pod, labels, policy);
  const applied: InjectedSidecarsApplied = added
    ? { pod: withAnnotations(pod, added.annotations), injectedSidecars: new Map(policy.entries.filter((entry) => added.entries.includes(entry.name)).map((entry) => [entry.container, entry.name])) }
    : { pod };
  if (namespace === undefined || labels !== undefined) return applied;
  const entries = entriesAwaitingNamespaceLabels(pod, policy);
  return entries.length > 0 ? { ...applied, namespaceLabelsWanted: { namespace, entries } } : applied;
}

/** The answer for the pod as `pod` (the request's object, or a copy with the policy's annotations), as a patch from `original`. */
function mutateInspected(original: Pod, pod: Pod, inspection: Inspection, settings: AdmissionSettings, migrate: boolean, injectedSidecars?: ReadonlyMap<string, string>): Answer {
  const labelled = (pod: Pod) => (shouldManage(inspection) ? withLabel(pod, MANAGED) : pod);
  if (!migrate) return patched(diff(original, labelled(pod)));

  // Called again after a later webhook stripped restartPolicy from the sidecars moved before: put back.
  const stripped = strippedNativeSidecars(inspection.spec, inspection.annotations);
  const restored = stripped.length > 0 ? withNativeSidecarsRestored(pod, stripped) : pod;
  const restoredWarnings = stripped.map(
    ({ index, name }) => `spec.initContainers[${index}].restartPolicy: Always put back on native sidecar ${clipValue(name)}: a mutating webhook that ran after this one dropped it (a client library older than native sidecars drops the field)`,
  );
  const restoring = stripped.length > 0 ? ({ migration: 'restored' } as const) : {};

  const plan = nativeSidecarPlan(inspection, settings.oldKubelets, injectedSidecars);
  if (plan.outcome === 'migrate') return { ...patched(diff(original, migrated(restored, inspection, plan.sidecars)), { warnings: restoredWarnings }), migration: 'migrated' };
  if (plan.outcome === 'none') return { ...patched(diff(original, labelled(restored)), { warnings: restoredWarnings }), ...restoring };
  const warnings = [...restoredWarnings, ...plan.findings.map((finding) => `not moved to native sidecars (the watcher stops the sidecars): ${formatFinding(finding)}`)];
  return { ...patched(diff(original, withAnnotations(labelled(restored), { [SKIPPED_ANNOTATION]: skippedAnnotation(plan.findings) })), { warnings }), migration: 'kept' };
}

/** The answer with these warnings before its own. */
function withWarnings(answer: Answer, warnings: readonly string[]): Answer {
  if (warnings.length === 0) return answer;
  return { ...answer, response: { ...answer.response, warnings: [...warnings, ...(answer.response.warnings ?? [])] } };
}

/** The pod with restartPolicy: Always back on its stripped native sidecars. */
function withNativeSidecarsRestored(pod: Pod, stripped: ReadonlyArray<{ index: number }>): Pod {
  return { ...pod, spec: restoreNativeSidecars(isRecord(pod.spec) ? pod.spec : {}, stripped) };
}

/** The pod with its sidecars moved, the annotation naming them, and no managed label: nothing is left for the watcher. */
function migrated(pod: Pod, inspection: Inspection, sidecars: readonly string[]): Pod {
  const spec = isRecord(pod.spec) ? pod.spec : {};
  return withAnnotations({ ...withLabel(pod, undefined), spec: migratePodSpec(spec, sidecars) }, {
    [MIGRATED_ANNOTATION]: migratedAnnotation(inspection.annotations, sidecars),
    [SKIPPED_ANNOTATION]: undefined,
  });
}

/**
 * Copies of the pod with the label set (or removed: undefined) or annotations changed. Only the
 * objects on the path are copied (pod, metadata, labels or annotations); everything else is
 * shared with the original, so diff() skips it by identity instead of comparing the whole pod,
 * and nothing of the original is changed.
 */
function withLabel(pod: Pod, value: string | undefined): Pod {
  return withMetadataMap(pod, 'labels', { [MANAGED_LABEL]: value });
}

function withAnnotations(pod: Pod, changes: Record<string, string | undefined>): Pod {
  return withMetadataMap(pod, 'annotations', changes);
}

function withMetadataMap(pod: Pod, field: 'labels' | 'annotations', changes: Record<string, string | undefined>): Pod {
  const metadata = isRecord(pod.metadata) ? pod.metadata : {};
  const current = isRecord(metadata[field]) ? metadata[field] : undefined;
  const entries = { ...current };
  for (const [key, value] of Object.entries(changes)) {
    if (value === undefined) delete entries[key];
    else entries[key] = value;
  }
  // Nothing to write into a map that does not exist: the pod stays as it is.
  if (current === undefined && Object.keys(entries).length === 0) return pod;
  return { ...pod, metadata: { ...metadata, [field]: entries } };
}
