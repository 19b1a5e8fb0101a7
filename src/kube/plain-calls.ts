// The calls the watcher makes for every pod it stops, sent and answered as plain JSON: the same
// method names and parameters as client-node's generated API, whose other methods they leave as
// they are. The generated methods turn every field of the object sent, and of the object
// answered, into and out of its model class (ObjectSerializer), which costs a pod read or patch
// about a third of its CPU; the watcher's pods arrive as plain JSON from its watch in any case,
// and its decisions read them so.
import type { CoreV1Api, CustomObjectsApi, KubeConfig, V1Pod } from '@kubernetes/client-node';
import { requestJson, type JsonRequest } from './client.ts';

/** A generated method's parameters: the object's name and namespace, its body, and the request's query (dryRun, fieldManager, pretty...). */
type Parameters = { name?: string; namespace: string; body?: unknown } & Record<string, unknown>;
type Options = JsonRequest['options'];

const segment = (value: unknown) => encodeURIComponent(String(value));
const podPath = ({ name, namespace }: Parameters, subresource = '') => `/api/v1/namespaces/${segment(namespace)}/pods/${segment(name)}${subresource}`;

/** The parameters that are neither in the path nor the body go in the query, by the same names (the API's own). */
function queryOf(parameters: Parameters, inPath: readonly string[]): JsonRequest['query'] {
  const query: NonNullable<JsonRequest['query']> = {};
  for (const [key, value] of Object.entries(parameters)) if (key !== 'body' && !inPath.includes(key) && (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean')) query[key] = value;
  return query;
}

const request = (parameters: Parameters, inPath: readonly string[], options: Options): JsonRequest => ({
  query: queryOf(parameters, inPath),
  ...(parameters.body !== undefined ? { body: parameters.body } : {}),
  ...(options ? { options } : {}),
});

/** `core`, whose pod reads, pod patches and event creations go as plain JSON. */
export function withPlainPodCalls(core: CoreV1Api, kubeConfig: KubeConfig): CoreV1Api {
  const pod = ['name', 'namespace'];
  const patch = (subresource: string) => (parameters: Parameters, options?: Options) => requestJson<V1Pod>(kubeConfig, 'PATCH', podPath(parameters, subresource), request(parameters, pod, options));
  const plain = {
    readNamespacedPod: (parameters: Parameters, options?: Options) => requestJson<V1Pod>(kubeConfig, 'GET', podPath(parameters), request(parameters, pod, options)),
    patchNamespacedPod: patch(''),
    patchNamespacedPodStatus: patch('/status'),
    patchNamespacedPodEphemeralcontainers: patch('/ephemeralcontainers'),
    createNamespacedEvent: (parameters: Parameters, options?: Options) =>
      requestJson(kubeConfig, 'POST', `/api/v1/namespaces/${segment(parameters.namespace)}/events`, request(parameters, ['namespace'], options)),
  };
  return Object.assign(Object.create(core) as CoreV1Api, plain as unknown as Partial<CoreV1Api>);
}

/** `custom`, whose object creations go as plain JSON (the ContainerRecreateRequests). */
export function withPlainCustomObjectCalls(custom: CustomObjectsApi, kubeConfig: KubeConfig): CustomObjectsApi {
  const plain = {
    createNamespacedCustomObject: (parameters: Parameters, options?: Options) => {
      const { group, version, namespace, plural } = parameters;
      const path = `/apis/${segment(group)}/${segment(version)}/namespaces/${segment(namespace)}/${segment(plural)}`;
      return requestJson(kubeConfig, 'POST', path, request(parameters, ['group', 'version', 'namespace', 'plural'], options));
    },
  };
  return Object.assign(Object.create(custom) as CustomObjectsApi, plain as unknown as Partial<CustomObjectsApi>);
}
