// The calls the watcher makes for every pod it stops, sent and answered as plain JSON: the same
// method names and parameters as client-node's generated API, whose other methods they leave as
// they are. The generated methods turn every field of the object sent, and of the object
// answered, into and out of its model class (ObjectSerializer), which costs a pod read or patch
// about a third of its CPU; the watcher's pods arrive as plain JSON from its watch in any case,
// and its decisions read them so.
import type { CoreV1Api, CustomObjectsApi, KubeConfig, V1Pod } from '@kubernetes/client-node';
import { requestJson, type JsonRequest } from './client.ts';

type PodTarget = { name: string; namespace: string };
type PodPatch = PodTarget & { body: unknown };

const podPath = ({ name, namespace }: PodTarget, subresource = '') => `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}${subresource}`;

/** `core`, whose pod reads, pod patches and event creations go as plain JSON. */
export function withPlainPodCalls(core: CoreV1Api, kubeConfig: KubeConfig): CoreV1Api {
  const patch = (subresource: string) => (target: PodPatch, options?: JsonRequest['options']) =>
    requestJson<V1Pod>(kubeConfig, 'PATCH', podPath(target, subresource), { body: target.body, ...(options ? { options } : {}) });
  const plain: Partial<CoreV1Api> = {
    readNamespacedPod: (target: PodTarget) => requestJson<V1Pod>(kubeConfig, 'GET', podPath(target)),
    patchNamespacedPod: patch(''),
    patchNamespacedPodStatus: patch('/status'),
    patchNamespacedPodEphemeralcontainers: patch('/ephemeralcontainers'),
    createNamespacedEvent: ({ namespace, body }) => requestJson(kubeConfig, 'POST', `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`, { body }),
  };
  return Object.assign(Object.create(core) as CoreV1Api, plain);
}

/** `custom`, whose object creations go as plain JSON (the ContainerRecreateRequests). */
export function withPlainCustomObjectCalls(custom: CustomObjectsApi, kubeConfig: KubeConfig): CustomObjectsApi {
  const plain: Partial<CustomObjectsApi> = {
    createNamespacedCustomObject: ({ group, version, namespace, plural, body }) =>
      requestJson(kubeConfig, 'POST', `/apis/${encodeURIComponent(group)}/${encodeURIComponent(version)}/namespaces/${encodeURIComponent(namespace)}/${encodeURIComponent(plural)}`, { body }),
  };
  return Object.assign(Object.create(custom) as CustomObjectsApi, plain);
}
