// Where the pod specs are inside the objects the webhook admits and the lint command reads.
import { STRICT_VALIDATION_ANNOTATION } from './names.ts';
import { isRecord } from './types.ts';

export interface PodSpecLocation {
  spec: unknown;
  /** Field path of the pod spec inside the object. */
  fieldPrefix: string;
  /** Job and CronJob templates, and pods that ask for it, must not carry markers with restartPolicy Always. */
  strictRestartPolicy: boolean;
  /**
   * Long-running workloads (Deployment & co) may share a container template with a Job: their
   * findings are reported as warnings, never denials, so such a workload is never broken.
   */
  advisory: boolean;
  /** The Job spec the template is part of (a Job's, or a CronJob's jobTemplate): its podFailurePolicy judges the pods' exit codes. */
  job?: JobSpecLocation;
}

export interface JobSpecLocation {
  spec: unknown;
  /** Field path of the Job spec inside the object: `spec`, or `spec.jobTemplate.spec`. */
  fieldPrefix: string;
}

/** Workload kinds whose pod template sits at spec.template (Job/CronJob handled apart). */
const TEMPLATE_KINDS = new Set(['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'ReplicationController']);

/**
 * The pod spec of a Pod, Job, CronJob, PodTemplate or workload object, or undefined when the
 * object carries none this project knows.
 */
export function podSpecOf(object: unknown): PodSpecLocation | undefined {
  if (!isRecord(object)) return undefined;
  const kind = object.kind;
  const apiVersion = object.apiVersion;
  const at = (path: string[]) => path.reduce<unknown>((node, key) => (isRecord(node) ? node[key] : undefined), object);

  if (kind === 'Pod' && apiVersion === 'v1') {
    const annotations = at(['metadata', 'annotations']);
    const strict = isRecord(annotations) && annotations[STRICT_VALIDATION_ANNOTATION] === 'strict';
    return { spec: at(['spec']), fieldPrefix: 'spec', strictRestartPolicy: strict, advisory: false };
  }
  if (kind === 'Job' && apiVersion === 'batch/v1') {
    return { spec: at(['spec', 'template', 'spec']), fieldPrefix: 'spec.template.spec', strictRestartPolicy: true, advisory: false, job: { spec: at(['spec']), fieldPrefix: 'spec' } };
  }
  if (kind === 'CronJob' && apiVersion === 'batch/v1') {
    return {
      spec: at(['spec', 'jobTemplate', 'spec', 'template', 'spec']),
      fieldPrefix: 'spec.jobTemplate.spec.template.spec',
      strictRestartPolicy: true,
      advisory: false,
      job: { spec: at(['spec', 'jobTemplate', 'spec']), fieldPrefix: 'spec.jobTemplate.spec' },
    };
  }
  if (kind === 'PodTemplate' && apiVersion === 'v1') {
    return { spec: at(['template', 'spec']), fieldPrefix: 'template.spec', strictRestartPolicy: false, advisory: true };
  }
  if (typeof kind === 'string' && TEMPLATE_KINDS.has(kind)) {
    return { spec: at(['spec', 'template', 'spec']), fieldPrefix: 'spec.template.spec', strictRestartPolicy: false, advisory: true };
  }
  return undefined;
}

/** Path of the metadata next to a pod spec: `spec` -> `metadata`, `spec.template.spec` -> `spec.template.metadata`. */
export function podMetadataPrefix(fieldPrefix: string): string {
  return [...fieldPrefix.split('.').slice(0, -1), 'metadata'].join('.');
}

/** The annotations of the pod, or of the template its pods are made from, next to the spec podSpecOf found. */
export function podAnnotationsOf(object: unknown, location: PodSpecLocation): Record<string, unknown> {
  const path = [...podMetadataPrefix(location.fieldPrefix).split('.'), 'annotations'];
  const annotations = path.reduce<unknown>((node, key) => (isRecord(node) ? node[key] : undefined), object);
  return isRecord(annotations) ? annotations : {};
}

/** The object whose controller created this one: an ownerReference with `controller: true`. */
export interface ControllerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
}

/**
 * The controller of an object: a Job's for its pods, a CronJob's for its Jobs, any operator's
 * for what it creates. Such an object is written by a program from a template that already
 * exists, so denying it only makes the controller retry; see inspectObject.
 */
export function controllerOf(object: unknown): ControllerReference | undefined {
  const metadata = isRecord(object) ? object.metadata : undefined;
  const references = isRecord(metadata) && Array.isArray(metadata.ownerReferences) ? metadata.ownerReferences : [];
  for (const reference of references) {
    if (!isRecord(reference) || reference.controller !== true) continue;
    const { apiVersion, kind, name, uid } = reference;
    if (typeof apiVersion === 'string' && typeof kind === 'string' && typeof name === 'string' && typeof uid === 'string') return { apiVersion, kind, name, uid };
  }
  return undefined;
}
