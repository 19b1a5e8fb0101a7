// The pods and containers of the tests, built one way: containers marked as OpenKruise's Job
// Sidecar Terminator marks them, pods with their container states written as the kubelet writes
// them, and nodes. Unit tests use the objects as they are; end-to-end tests give the same
// containers to jobYaml, which writes the Job a user would `kubectl apply` (cronJobYaml and
// podYaml the CronJob and the bare pod; barePod the same pod as an object, for the API).
import type { V1Container, V1ContainerStatus, V1CronJobSpec, V1JobSpec, V1Node, V1ObjectMeta, V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, MANAGED, MANAGED_LABEL } from '../../src/policy/index.ts';

export const QUICK_EXIT = 'registry.example.com/quick-exit:1.0';

/** A main container. */
export const main = (name = 'main', image = 'busybox:1.36', extra: Partial<V1Container> = {}): V1Container => ({ name, image, ...extra });

/** A container with KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT set to `value` (a sidecar when "true"; "yes" is a configuration error), then `extra.env`. */
export const sidecarMarked = (value: string, name = 'proxy', extra: Partial<V1Container> = {}): V1Container => ({
  name,
  image: 'envoyproxy/envoy:v1.31.0',
  ...extra,
  env: [{ name: ENV_WHEN_JOB_EXIT, value }, ...(extra.env ?? [])],
});

/** A sidecar stopped by the kill mechanism: KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true, then `extra.env`; the rest of `extra` as given. */
export const killSidecar = (name = 'proxy', extra: Partial<V1Container> = {}): V1Container => sidecarMarked('true', name, extra);

/** A kill sidecar whose exit code is ignored (KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE=true). */
export const ignoreExitCodeSidecar = (name = 'sql', extra: Partial<V1Container> = {}): V1Container =>
  killSidecar(name, { ...extra, env: [{ name: ENV_IGNORE_EXIT_CODE, value: 'true' }, ...(extra.env ?? [])] });

/** A sidecar stopped by replacing its image with `quickExit`: KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE, then `extra.env`. */
export const imageSidecar = (name = 'logs', quickExit = QUICK_EXIT, extra: Partial<V1Container> = {}): V1Container => ({
  name,
  image: 'fluent/fluent-bit:3.1',
  ...extra,
  env: [{ name: ENV_WITH_IMAGE, value: quickExit }, ...(extra.env ?? [])],
});

/** A pod spec with these containers, as validation reads it from a pod or a template. */
export function podSpec(containers: V1Container[], restartPolicy = 'Never', extra: Partial<V1PodSpec> = {}): Partial<V1PodSpec> & { containers: V1Container[] } {
  return { restartPolicy, containers, ...extra };
}

/** A container's state: its exit code once terminated, running, waiting to be created, or waiting for a reason. */
export type State = number | 'running' | 'waiting' | { waiting: string; message?: string };

export const STARTED = '2026-01-01T00:00:00Z';
export const FINISHED = '2026-01-01T00:01:00Z';
/** When the main containers of jobPod finished, in epoch milliseconds. */
export const MAINS_FINISHED_AT = Date.parse(FINISHED);

/** A container's status as the kubelet writes it (times as Dates, as client-node reads them). */
export function containerStatus(name: string, state: State, extra: Partial<V1ContainerStatus> = {}): V1ContainerStatus {
  const common = { name, image: '', imageID: '', ready: state === 'running', restartCount: 0 };
  if (state === 'running') return { ...common, state: { running: { startedAt: new Date(STARTED) } }, ...extra };
  if (typeof state === 'number') return { ...common, state: { terminated: { exitCode: state, finishedAt: new Date(FINISHED) } }, ...extra };
  const waiting = state === 'waiting' ? { reason: 'ContainerCreating' } : { reason: state.waiting, message: state.message };
  return { ...common, state: { waiting }, ...extra };
}

export interface PodOptions {
  /** Merged into the spec: restartPolicy (Never by default), nodeName, securityContext, ... */
  spec?: Partial<V1PodSpec>;
  /** Merged into the metadata (name job-abc, namespace default, uid uid-1, the managed label). */
  metadata?: Partial<V1ObjectMeta>;
  phase?: string;
}

/** A Job's pod, labelled managed, on node-a, with these containers in these states (by name; no entry: no status yet). */
export function jobPod(containers: V1Container[], states: Record<string, State>, options: PodOptions = {}): V1Pod {
  return {
    metadata: { name: 'job-abc', namespace: 'default', uid: 'uid-1', resourceVersion: '100', labels: { [MANAGED_LABEL]: MANAGED }, ...options.metadata },
    spec: { restartPolicy: 'Never', nodeName: 'node-a', containers, ...options.spec },
    status: {
      phase: options.phase ?? 'Running',
      startTime: new Date(STARTED),
      containerStatuses: Object.entries(states).map(([name, state]) => containerStatus(name, state)),
    },
  };
}

/** Whether the signal mechanism has acted on a pod: it has an ephemeral container. */
export const signalled = (pod: V1Pod): boolean => (pod.spec?.ephemeralContainers?.length ?? 0) > 0;

export const normalNode: V1Node = { metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } }, spec: {} };
/** A virtual-kubelet node by its label, as OpenKruise recognises one. */
export const virtualNode: V1Node = { metadata: { name: 'vk', labels: { type: 'virtual-kubelet' } }, spec: {} };
/** A virtual-kubelet node by its taint, as providers mark them more often. */
export const virtualNodeByTaint: V1Node = {
  metadata: { name: 'vk-2', labels: {} },
  spec: { taints: [{ key: 'virtual-kubelet.io/provider', value: 'eci', effect: 'NoSchedule' }] },
};

/** The pod spec fields that send a pod to virtual-kubelet nodes. */
export const onVirtualNode: Partial<V1PodSpec> = {
  nodeSelector: { type: 'virtual-kubelet' },
  tolerations: [{ key: 'virtual-kubelet.io/provider', operator: 'Exists' }],
};

export interface JobOptions {
  restartPolicy?: 'Never' | 'OnFailure';
  /** The pod template's annotations (the kubelet simulator reads its instructions there). */
  annotations?: Record<string, string>;
  /** The containers, or YAML for the list, indented as the template's. */
  containers: V1Container[] | string;
  /** More of the pod spec, or YAML for it, starting with a newline and indented as the template's. */
  spec?: Partial<V1PodSpec> | string;
  /** More of the Job's spec (its podFailurePolicy, a backoffLimit of its own). */
  jobSpec?: Partial<Omit<V1JobSpec, 'template'>>;
}

/** YAML as kubectl reads it: YAML 1.1, where `yes`, `on` and `08` are no strings unless quoted. */
const toYaml = (value: unknown) => stringify(value, { version: '1.1' });

/** The YAML of `value` indented by `spaces`, each line on its own. */
const indented = (value: unknown, spaces: number) =>
  toYaml(value).trimEnd().split('\n').map((line) => `${' '.repeat(spaces)}${line}`).join('\n');

/** A Job manifest, as a user writes it for `kubectl apply`. */
export function jobYaml(name: string, options: JobOptions): string {
  const annotations = Object.entries(options.annotations ?? {})
    .map(([key, value]) => `\n        ${key}: ${JSON.stringify(value)}`)
    .join('');
  const containers = typeof options.containers === 'string' ? options.containers : indented(options.containers, 8);
  const spec = options.spec === undefined ? '' : typeof options.spec === 'string' ? options.spec : `\n${indented(options.spec, 6)}`;
  const jobSpec = { backoffLimit: options.restartPolicy === 'OnFailure' ? 3 : 0, ...options.jobSpec };
  return `apiVersion: batch/v1
kind: Job
metadata:
  name: ${name}
spec:
${indented(jobSpec, 2)}
  template:
    metadata:
      annotations:${annotations || ' {}'}
    spec:
      restartPolicy: ${options.restartPolicy ?? 'Never'}${spec}
      containers:
${containers}`;
}

/**
 * A CronJob manifest whose Jobs are those jobYaml writes with `job` (the name is the CronJob's),
 * and `cron` its own fields: schedule, suspend, concurrencyPolicy, ...
 */
export function cronJobYaml(name: string, cron: Partial<V1CronJobSpec> & { schedule: string }, job: JobOptions): string {
  // The Job's spec as jobYaml writes it, moved under jobTemplate: the same lines four spaces deeper.
  const jobSpec = jobYaml(name, job).split('\nspec:\n')[1]!;
  return `apiVersion: batch/v1
kind: CronJob
metadata:
  name: ${name}
spec:
${indented(cron, 2)}
  jobTemplate:
    spec:
${jobSpec.split('\n').map((line) => `    ${line}`).join('\n')}`;
}

export interface BarePodOptions {
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** Merged into the spec (restartPolicy Never unless given). */
  spec?: Partial<V1PodSpec>;
}

/** A bare pod (no controller) with these containers, as the API takes it; podYaml writes the same for kubectl. */
export function barePod(name: string, containers: V1Container[], options: BarePodOptions = {}): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, ...(options.labels ? { labels: options.labels } : {}), ...(options.annotations ? { annotations: options.annotations } : {}) },
    spec: { restartPolicy: 'Never', ...options.spec, containers },
  };
}

/** A bare pod manifest with these containers. */
export function podYaml(name: string, containers: V1Container[], options: BarePodOptions = {}): string {
  return toYaml(barePod(name, containers, options));
}
