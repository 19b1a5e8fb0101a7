// The parts of Kubernetes objects the policy reads. They are structural subsets of the API
// types, so a pod from @kubernetes/client-node or a parsed admission request fits as it is.
// Admission bodies and lint input are untrusted: every reader below checks shapes before use.

/** A DNS-1123 label: how Kubernetes names a container (and an injected-sidecar policy its entries). */
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export interface EnvVar {
  name?: unknown;
  value?: unknown;
  valueFrom?: unknown;
}

export interface Container {
  name?: unknown;
  image?: unknown;
  command?: unknown;
  env?: unknown;
  restartPolicy?: unknown;
  restartPolicyRules?: unknown;
  startupProbe?: unknown;
  lifecycle?: unknown;
}

export interface Toleration {
  key?: unknown;
  operator?: unknown;
  value?: unknown;
}

export interface PodSpec {
  containers?: unknown;
  initContainers?: unknown;
  restartPolicy?: unknown;
  nodeName?: unknown;
  nodeSelector?: unknown;
  affinity?: unknown;
  tolerations?: unknown;
  shareProcessNamespace?: unknown;
  terminationGracePeriodSeconds?: unknown;
}

export interface ContainerState {
  running?: unknown;
  waiting?: unknown;
  terminated?: { exitCode?: unknown; finishedAt?: unknown } | null;
}

export interface ContainerStatus {
  name?: unknown;
  state?: ContainerState | null;
  restartCount?: unknown;
}

export interface PodLike {
  metadata?: { name?: unknown; namespace?: unknown; deletionTimestamp?: unknown; annotations?: unknown } | null;
  spec?: PodSpec | null;
  status?: { phase?: unknown; containerStatuses?: unknown; conditions?: unknown } | null;
}

export interface NodeLike {
  metadata?: { labels?: unknown } | null;
  spec?: { taints?: unknown } | null;
}

export type RestartPolicy = 'Always' | 'OnFailure' | 'Never';

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function arrayOf(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

/** A pod's restartPolicy as Kubernetes applies it: unset means Always. */
export function restartPolicyOf(spec: PodSpec): RestartPolicy | undefined {
  const policy = spec.restartPolicy ?? 'Always';
  return policy === 'Always' || policy === 'OnFailure' || policy === 'Never' ? policy : undefined;
}
