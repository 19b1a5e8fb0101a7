// Virtual-kubelet nodes (ECI, Fargate, ...) cannot kill a container, only replace its image.
import { arrayOf, isRecord, type NodeLike, type PodSpec } from './types.ts';

export const VIRTUAL_NODE_LABEL = { key: 'type', value: 'virtual-kubelet' } as const;
export const VIRTUAL_NODE_TAINT_KEY = 'virtual-kubelet.io/provider';

export type NodeKind = 'normal' | 'virtual';

/** A node is virtual when it has the label `type=virtual-kubelet` or a `virtual-kubelet.io/provider` taint. */
export function nodeKindOf(node: NodeLike | undefined): NodeKind {
  const labels = node?.metadata?.labels;
  if (isRecord(labels) && labels[VIRTUAL_NODE_LABEL.key] === VIRTUAL_NODE_LABEL.value) return 'virtual';
  const taints = arrayOf(node?.spec?.taints);
  return taints.some((taint) => isRecord(taint) && taint.key === VIRTUAL_NODE_TAINT_KEY) ? 'virtual' : 'normal';
}

/** Whether a pod spec asks for, prefers or tolerates virtual-kubelet nodes. */
export function targetsVirtualNodes(spec: PodSpec): boolean {
  return virtualNodeField(spec) !== undefined;
}

/** The field by which a pod spec asks for, prefers or tolerates virtual-kubelet nodes, if any. */
export function virtualNodeField(spec: PodSpec): 'nodeSelector' | 'tolerations' | 'affinity' | undefined {
  const selector = spec.nodeSelector;
  if (isRecord(selector) && selector[VIRTUAL_NODE_LABEL.key] === VIRTUAL_NODE_LABEL.value) return 'nodeSelector';
  if (arrayOf(spec.tolerations).some((t) => isRecord(t) && t.key === VIRTUAL_NODE_TAINT_KEY)) return 'tolerations';
  const inAffinity = nodeAffinityTerms(spec.affinity).some((term) =>
    arrayOf(isRecord(term) ? term.matchExpressions : undefined).some(
      (expression) =>
        isRecord(expression) &&
        expression.key === VIRTUAL_NODE_LABEL.key &&
        expression.operator === 'In' &&
        arrayOf(expression.values).includes(VIRTUAL_NODE_LABEL.value),
    ),
  );
  return inAffinity ? 'affinity' : undefined;
}

/** Node selector terms of both required and preferred node affinity. */
function nodeAffinityTerms(affinity: unknown): unknown[] {
  const nodeAffinity = isRecord(affinity) ? affinity.nodeAffinity : undefined;
  if (!isRecord(nodeAffinity)) return [];
  const required = nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution;
  const requiredTerms = arrayOf(isRecord(required) ? required.nodeSelectorTerms : undefined);
  const preferredTerms = arrayOf(nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution).map((p) =>
    isRecord(p) ? p.preference : undefined,
  );
  return [...requiredTerms, ...preferredTerms];
}
