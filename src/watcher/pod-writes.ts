// Every write of the watcher to a pod (spec, status and ephemeral containers) is a JSON patch that
// first tests the pod's uid: a pod deleted and created again under the same name is another pod,
// and what was decided for the first must not reach the second. Each write's content depends on
// what was read (a position in a list, whether a list exists yet), so each also carries the
// resourceVersion read: a pod changed meanwhile refuses it instead of taking a stale write.
// Either refusal is a PodChanged error; each write returns the pod as written, whose
// resourceVersion the next write of the same reconcile carries.
import { PatchStrategy, setHeaderOptions, type CoreV1Api, type V1EphemeralContainer, type V1Pod } from '@kubernetes/client-node';
import { isApiError } from '../kube/api-errors.ts';
import { PHASE_SET_ANNOTATION } from '../policy/index.ts';

/** The pod is not the one the write was decided for: deleted, replaced under the same name, or changed since it was read. */
export class PodChanged extends Error {
  constructor(pod: V1Pod, cause: unknown) {
    super(`pod ${pod.metadata?.namespace}/${pod.metadata?.name} (uid ${pod.metadata?.uid}) changed or is gone since it was read`, { cause });
    this.name = 'PodChanged';
  }
}

type Operation = { op: 'test' | 'add' | 'replace'; path: string; value: unknown };

export interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}

const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

export class PodWriter {
  private readonly core: CoreV1Api;

  constructor(core: CoreV1Api) {
    this.core = core;
  }

  /** The container's image, in place; kubelet restarts the container with it. */
  async replaceImage(pod: V1Pod, container: string, image: string): Promise<V1Pod> {
    const index = pod.spec?.containers.findIndex((c) => c.name === container) ?? -1;
    if (index < 0) throw new Error(`pod ${pod.metadata?.name} has no container ${container}`);
    return this.patch(pod, 'metadata', [
      ...this.sameVersion(pod),
      { op: 'test', path: `/spec/containers/${index}/name`, value: container },
      { op: 'replace', path: `/spec/containers/${index}/image`, value: image },
    ]);
  }

  async addEphemeralContainers(pod: V1Pod, containers: V1EphemeralContainer[]): Promise<V1Pod> {
    const additions: Operation[] = pod.spec?.ephemeralContainers
      ? containers.map((value) => ({ op: 'add', path: '/spec/ephemeralContainers/-', value }))
      : [{ op: 'add', path: '/spec/ephemeralContainers', value: containers }];
    return this.patch(pod, 'ephemeralcontainers', [...this.sameVersion(pod), ...additions]);
  }

  /**
   * Sets the condition (replacing one of its type), and the phase when given, with the phase-set
   * annotation in the same write: the kubelet then syncs the pod and keeps the phase (names.ts).
   */
  async setStatus(pod: V1Pod, condition: Condition, phase?: 'Succeeded' | 'Failed'): Promise<V1Pod> {
    const conditions = pod.status?.conditions;
    const index = conditions?.findIndex((c) => c.type === condition.type) ?? -1;
    const current = conditions?.[index];
    // The transition time moves only when the status does.
    const lastTransitionTime = current?.status === condition.status && current.lastTransitionTime ? current.lastTransitionTime : new Date().toISOString();
    const value = { ...condition, lastTransitionTime };
    const write: Operation = !conditions
      ? { op: 'add', path: '/status/conditions', value: [value] }
      : index >= 0
        ? { op: 'replace', path: `/status/conditions/${index}`, value }
        : { op: 'add', path: '/status/conditions/-', value };
    const phaseWrite: Operation[] = phase ? [{ op: 'add', path: '/status/phase', value: phase }, annotate(pod, PHASE_SET_ANNOTATION, phase)] : [];
    return this.patch(pod, 'status', [...this.sameVersion(pod), write, ...phaseWrite]);
  }

  /** The uid test, and the resourceVersion read (a mismatch answers 409). */
  private sameVersion(pod: V1Pod): Operation[] {
    return [
      { op: 'test', path: '/metadata/uid', value: pod.metadata?.uid },
      { op: 'add', path: '/metadata/resourceVersion', value: pod.metadata?.resourceVersion },
    ];
  }

  private async patch(pod: V1Pod, subresource: 'metadata' | 'status' | 'ephemeralcontainers', body: Operation[]): Promise<V1Pod> {
    const target = { name: pod.metadata!.name!, namespace: pod.metadata!.namespace!, body };
    try {
      if (subresource === 'status') return await this.core.patchNamespacedPodStatus(target, jsonPatch);
      if (subresource === 'ephemeralcontainers') return await this.core.patchNamespacedPodEphemeralcontainers(target, jsonPatch);
      return await this.core.patchNamespacedPod(target, jsonPatch);
    } catch (error) {
      if (isApiError(error, 404, 409) || isFailedTest(error)) throw new PodChanged(pod, error);
      throw error;
    }
  }
}

/** Adds (or replaces) one annotation of the pod: the map itself where the pod has none (retainedPod keeps whether it has). */
function annotate(pod: V1Pod, key: string, value: string): Operation {
  if (!pod.metadata?.annotations) return { op: 'add', path: '/metadata/annotations', value: { [key]: value } };
  // JSON Pointer escapes: ~ as ~0, / as ~1.
  return { op: 'add', path: `/metadata/annotations/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`, value };
}

/**
 * A JSON patch the API server could not apply to the pod as it is now (a `test` that failed): 422
 * without the object details that a validation error carries.
 */
function isFailedTest(error: unknown): boolean {
  if (!isApiError(error, 422)) return false;
  try {
    const status = JSON.parse(String((error as { body?: unknown }).body)) as { reason?: string; details?: { kind?: string; causes?: unknown[] } };
    return status.reason === 'Invalid' && !status.details?.kind && !status.details?.causes?.length;
  } catch {
    return false;
  }
}
