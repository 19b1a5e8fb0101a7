// The operator's policy for sidecars that other mutating webhooks inject (istio-proxy,
// linkerd-proxy, vault-agent...): which containers of which pods are sidecars, and how each is
// stopped. It is applied at admission as the pod annotations a Job's author would write
// (POD_ANNOTATIONS), so everything downstream reads one model. Pure: serve reads the file
// (injected-sidecar-file.ts), the webhook applies what this returns.
import { annotationNames, classifyContainers, ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, markerEntries, podAnnotations } from './markers.ts';
import { INJECTED_POLICY_ANNOTATION, POD_ANNOTATIONS } from './names.ts';
import { arrayOf, isRecord, restartPolicyOf, type PodSpec } from './types.ts';

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; values?: string[] }>;
}

export interface InjectedSidecarEntry {
  /** Names the entry in errors, in the pod's INJECTED_POLICY_ANNOTATION and in `status`. */
  name: string;
  /** The container the injector adds to spec.containers. */
  container: string;
  /** A stop method as stop-method.ts reads it; absent: SIGTERM. */
  stop?: string;
  gracePeriodSeconds?: number;
  ignoreExitCode?: boolean;
  /** Absent: every namespace the webhook serves. */
  namespaceSelector?: LabelSelector;
  /** The controllers whose pods it applies to; `{apiVersion: v1, kind: Pod}` stands for pods without one. */
  owners: Array<{ apiVersion: string; kind: string }>;
}

export interface InjectedSidecarPolicy {
  entries: InjectedSidecarEntry[];
}

export const EMPTY_INJECTED_SIDECAR_POLICY: InjectedSidecarPolicy = { entries: [] };

/** The owner that stands for a pod no controller owns. */
const BARE_POD = { apiVersion: 'v1', kind: 'Pod' } as const;

/** Whether any entry needs the labels of the pod's namespace to decide. */
export function policyNeedsNamespaceLabels(policy: InjectedSidecarPolicy): boolean {
  return policy.entries.some((entry) => entry.namespaceSelector !== undefined);
}

/** Whether labels match a Kubernetes label selector (every matchLabels pair and every expression). */
export function labelSelectorMatches(selector: SelectorLike, labels: Record<string, string>): boolean {
  const pairs = Object.entries(selector.matchLabels ?? {}).every(([key, value]) => labels[key] === value);
  return (
    pairs &&
    (selector.matchExpressions ?? []).every(({ key, operator, values = [] }) => {
      const value = Object.hasOwn(labels, key) ? labels[key] : undefined;
      if (operator === 'In') return value !== undefined && values.includes(value);
      if (operator === 'NotIn') return value === undefined || !values.includes(value);
      if (operator === 'Exists') return value !== undefined;
      if (operator === 'DoesNotExist') return value === undefined;
      // An operator the API server does not know matches nothing (a selector read from the cluster, as status reads one).
      return false;
    })
  );
}

/** A label selector as the policy holds one, or as client-node reads one from the cluster (its operator a plain string). */
export interface SelectorLike {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
}

/** The pod as injectedSidecarAnnotations reads it (an admission request's object, or a pod read from the API). */
export interface InjectedSidecarPod {
  metadata?: { annotations?: unknown; ownerReferences?: unknown } | null;
  spec?: PodSpec | null;
}

/**
 * What the policy adds to a pod at admission: the annotations a user would write, or undefined
 * when no entry applies. `namespaceLabels` undefined = unknown (then entries with a
 * namespaceSelector do not apply; entriesAwaitingNamespaceLabels names them). Applied to a pod
 * that already carries its output, it returns the same output, so a second admission of the pod
 * changes nothing.
 */
export function injectedSidecarAnnotations(
  pod: InjectedSidecarPod,
  namespaceLabels: Record<string, string> | undefined,
  policy: InjectedSidecarPolicy,
): { annotations: Record<string, string>; entries: string[] } | undefined {
  const judged = judgeEntries(pod, namespaceLabels, policy);
  if (!judged || judged.applied.length === 0) return undefined;
  const { annotations, applied } = judged;

  const listed = (key: string, added: readonly string[]) => [...new Set([...annotationNames(annotations[key]), ...added])].join(',');
  const output: Record<string, string> = { [POD_ANNOTATIONS.sidecars]: listed(POD_ANNOTATIONS.sidecars, applied.map((entry) => entry.container)) };
  const ignoring = applied.filter((entry) => entry.ignoreExitCode === true).map((entry) => entry.container);
  if (ignoring.length > 0) output[POD_ANNOTATIONS.ignoreExitCode] = listed(POD_ANNOTATIONS.ignoreExitCode, ignoring);
  // A value the pod already has is kept; the output repeats only one equal to the policy's, so it is the same on every admission.
  const unlessSet = (key: string, value: string | undefined) => {
    if (value !== undefined && (annotations[key] === undefined || annotations[key] === value)) output[key] = value;
  };
  for (const entry of applied) {
    unlessSet(`${POD_ANNOTATIONS.stopPrefix}${entry.container}`, entry.stop);
    unlessSet(`${POD_ANNOTATIONS.gracePeriodPrefix}${entry.container}`, entry.gracePeriodSeconds?.toString());
  }
  output[INJECTED_POLICY_ANNOTATION] = applied.map((entry) => entry.name).join(',');
  return { annotations: output, entries: applied.map((entry) => entry.name) };
}

/**
 * The entries whose namespaceSelector alone decides whether they apply to the pod: what the labels
 * of its namespace would decide, when they are not known (the webhook then reads them).
 */
export function entriesAwaitingNamespaceLabels(pod: InjectedSidecarPod, policy: InjectedSidecarPolicy): string[] {
  return judgeEntries(pod, undefined, policy)?.awaiting.map((entry) => entry.name) ?? [];
}

/**
 * The entries that apply to the pod, in the policy's order, and those that would but for the
 * labels of its namespace, unknown (`namespaceLabels` undefined); undefined when the pod is not
 * one any entry can apply to.
 */
function judgeEntries(
  pod: InjectedSidecarPod,
  namespaceLabels: Record<string, string> | undefined,
  policy: InjectedSidecarPolicy,
): { annotations: Record<string, unknown>; applied: InjectedSidecarEntry[]; awaiting: InjectedSidecarEntry[] } | undefined {
  const spec = pod.spec ?? {};
  // Such pods never finish, so there is nothing to stop.
  const restartPolicy = restartPolicyOf(spec);
  if (restartPolicy !== 'Never' && restartPolicy !== 'OnFailure') return undefined;
  if (policy.entries.length === 0) return undefined;

  const annotations = podAnnotations(pod);
  const named = annotationNames(annotations[POD_ANNOTATIONS.sidecars]);
  // What the policy wrote at an earlier admission (the entry named, its container listed) is not
  // the pod's own marker: the same entry applies again, with the same output.
  const earlier = new Set(annotationNames(annotations[INJECTED_POLICY_ANNOTATION]));
  const written = new Set(policy.entries.filter((entry) => earlier.has(entry.name) && named.includes(entry.container)).map((entry) => entry.container));
  const own = { ...annotations, [POD_ANNOTATIONS.sidecars]: named.filter((name) => !written.has(name)).join(',') };
  const roles = classifyContainers(spec, own);
  const mains = new Set(roles.filter((role) => role.role === 'main').map((role) => role.name));
  const marked = new Set(arrayOf(spec.containers).filter(isRecord).filter((container) => markerEntries(container).some((marker) => marker.name === ENV_WHEN_JOB_EXIT || marker.name === ENV_WITH_IMAGE)).map((container) => container.name));
  const controller = controllerKind(pod.metadata?.ownerReferences);

  const awaiting: InjectedSidecarEntry[] = [];
  const applied = policy.entries.filter((entry) => {
    const possible =
      mains.has(entry.container) &&
      !marked.has(entry.container) &&
      // Never every container: with no main container left, nothing would say when the work is done.
      mains.size > 1 &&
      entry.owners.some((owner) => owner.apiVersion === controller.apiVersion && owner.kind === controller.kind);
    if (!possible) return false;
    if (entry.namespaceSelector !== undefined) {
      if (namespaceLabels === undefined) {
        awaiting.push(entry);
        return false;
      }
      if (!labelSelectorMatches(entry.namespaceSelector, namespaceLabels)) return false;
    }
    mains.delete(entry.container);
    return true;
  });
  return { annotations, applied, awaiting };
}

/** The apiVersion and kind of the pod's controller (ownerReference with controller: true), BARE_POD's when it has none. */
function controllerKind(references: unknown): { apiVersion?: unknown; kind?: unknown } {
  const controller = arrayOf(references).find((reference) => isRecord(reference) && reference.controller === true) as { apiVersion?: unknown; kind?: unknown } | undefined;
  return controller ?? BARE_POD;
}
