// The side effects of a decision, one small function per mechanism. Each is idempotent: created
// objects have deterministic names, and a repeated call finds its work already done.
import { createHash } from 'node:crypto';
import {
  PatchStrategy,
  setHeaderOptions,
  type CoreV1Api,
  type CustomObjectsApi,
  type V1Container,
  type V1EphemeralContainer,
  type V1Pod,
} from '@kubernetes/client-node';
import { isApiError } from '../kube/api-errors.ts';

export type KillMechanism = 'crr' | 'signal';

export const TERMINATED_CONDITION = 'SidecarTerminated';
const CRR_GROUP = 'apps.kruise.io';
const CRR_PLURAL = 'containerrecreaterequests';

export interface ActionClients {
  core: CoreV1Api;
  custom: CustomObjectsApi;
}

const strategicMerge = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

const nameOf = (pod: V1Pod) => ({ name: pod.metadata!.name!, namespace: pod.metadata!.namespace! });

export const crrName = (pod: V1Pod) => `sidecar-termination-${pod.metadata!.uid}`;

/** Asks kruise-daemon to stop the containers through a ContainerRecreateRequest. */
export async function killByCrr(clients: ActionClients, crrVersion: string, pod: V1Pod, containers: string[]): Promise<'created' | 'exists'> {
  const { name, namespace } = nameOf(pod);
  const body = {
    apiVersion: `${CRR_GROUP}/${crrVersion}`,
    kind: 'ContainerRecreateRequest',
    metadata: {
      name: crrName(pod),
      namespace,
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name, uid: pod.metadata!.uid!, blockOwnerDeletion: false }],
    },
    spec: {
      podName: name,
      containers: containers.map((container) => ({ name: container })),
      strategy: { forceRecreate: true, failurePolicy: 'Ignore' },
    },
  };
  try {
    await clients.custom.createNamespacedCustomObject({ group: CRR_GROUP, version: crrVersion, namespace, plural: CRR_PLURAL, body });
    return 'created';
  } catch (error) {
    if (isApiError(error, 409)) return 'exists';
    throw error;
  }
}

/** The ephemeral container that signals one sidecar: a deterministic, valid container name. */
export function signalContainerName(container: string): string {
  const name = `stop-${container}`;
  if (name.length <= 63) return name;
  return `${name.slice(0, 50)}-${createHash('sha256').update(container).digest('hex').slice(0, 12)}`;
}

export interface SignalSettings {
  image: string;
  command: string[];
}

/**
 * Adds an ephemeral container in the sidecar's PID namespace that sends SIGTERM to its PID 1.
 * It runs as the sidecar's user with nothing more, so a restricted Pod Security level admits it.
 */
export async function killBySignal(clients: ActionClients, settings: SignalSettings, pod: V1Pod, container: string): Promise<'created' | 'exists'> {
  const name = signalContainerName(container);
  if (pod.spec?.ephemeralContainers?.some((existing) => existing.name === name)) return 'exists';
  const target = pod.spec?.containers.find((c) => c.name === container);
  const ephemeral: V1EphemeralContainer = {
    name,
    image: settings.image,
    command: settings.command,
    targetContainerName: container,
    terminationMessagePolicy: 'FallbackToLogsOnError',
    securityContext: {
      ...userOf(pod, target),
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
  };
  await clients.core.patchNamespacedPodEphemeralcontainers(
    { ...nameOf(pod), body: { spec: { ephemeralContainers: [ephemeral] } } },
    strategicMerge,
  );
  return 'created';
}

/** The sidecar's user: its own securityContext first, then the pod's. */
function userOf(pod: V1Pod, container: V1Container | undefined) {
  const own = container?.securityContext;
  const podLevel = pod.spec?.securityContext;
  const pick = <K extends 'runAsUser' | 'runAsGroup' | 'runAsNonRoot'>(key: K) => own?.[key] ?? podLevel?.[key];
  const user = { runAsUser: pick('runAsUser'), runAsGroup: pick('runAsGroup'), runAsNonRoot: pick('runAsNonRoot') };
  return Object.fromEntries(Object.entries(user).filter(([, value]) => value !== undefined));
}

/** Replaces a running container's image in place; kubelet restarts it with the quick-exit image. */
export async function replaceImage(clients: ActionClients, pod: V1Pod, container: string, image: string): Promise<void> {
  // A strategic merge patch keyed by container name cannot hit the wrong container.
  await clients.core.patchNamespacedPod({ ...nameOf(pod), body: { spec: { containers: [{ name: container, image }] } } }, strategicMerge);
}

const terminatedCondition = (message: string) => ({
  type: TERMINATED_CONDITION,
  status: 'True',
  reason: 'SidecarsStopped',
  message,
  lastTransitionTime: new Date().toISOString(),
});

export function hasTerminatedCondition(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((c) => c.type === TERMINATED_CONDITION && c.status === 'True') ?? false;
}

/** Moves the pod to its terminal phase; kubelet keeps it there and stops what still runs. */
export async function markTerminal(clients: ActionClients, pod: V1Pod, phase: 'Succeeded' | 'Failed'): Promise<void> {
  const body = { status: { phase, conditions: [terminatedCondition(`phase set to ${phase}: the main containers are done, sidecar exit codes are ignored`)] } };
  await clients.core.patchNamespacedPodStatus({ ...nameOf(pod), body }, strategicMerge);
}

export async function setTerminatedCondition(clients: ActionClients, pod: V1Pod, message: string): Promise<void> {
  await clients.core.patchNamespacedPodStatus({ ...nameOf(pod), body: { status: { conditions: [terminatedCondition(message)] } } }, strategicMerge);
}

/** Sets a label; used to move a finished pod out of the watch. */
export async function setLabel(clients: ActionClients, pod: V1Pod, key: string, value: string): Promise<void> {
  await clients.core.patchNamespacedPod({ ...nameOf(pod), body: { metadata: { labels: { [key]: value } } } }, mergePatch);
}
