// Namespaces as src/kube/namespace-labels.ts lists and watches them, for its tests and for those
// of the webhook's wiring of it: scripted lists, and watches the test writes events to.
import type { KubernetesListObject, V1Namespace } from '@kubernetes/client-node';
import type { NamespaceListWatch } from '../../src/kube/namespace-labels.ts';
import { FakePodListWatch, apiError } from '../support/fake-kube.ts';

/** A namespace, for a list or a watch event (FakeWatch.send takes plain objects). */
export const namespace = (name: string, labels: Record<string, string> = {}, resourceVersion = '1'): V1Namespace & Record<string, unknown> => ({ metadata: { name, labels, resourceVersion } });

export const namespaceList = (items: V1Namespace[], resourceVersion: string): KubernetesListObject<V1Namespace> => ({ apiVersion: 'v1', kind: 'NamespaceList', items, metadata: { resourceVersion } });

/**
 * Namespace lists answering with these lists, errors or promises in turn, watches opened on a
 * FakePodListWatch, and reads of one namespace answered by `answerGet` (404 until it is set).
 */
export function fakeNamespaces(...lists: Array<KubernetesListObject<V1Namespace> | Error | Promise<KubernetesListObject<V1Namespace>>>) {
  const watches = new FakePodListWatch();
  let listed = 0;
  const gets: Array<{ name: string; timeoutMs: number }> = [];
  let answer: (name: string) => Promise<V1Namespace> = async (name) => {
    throw apiError(404, `namespaces "${name}" not found`);
  };
  const listWatch: NamespaceListWatch = {
    list: async () => {
      listed++;
      const next = lists.shift();
      if (!next) throw new Error('no list scripted');
      if (next instanceof Error) throw next;
      return next;
    },
    watch: watches,
    get: (name, timeoutMs) => {
      gets.push({ name, timeoutMs });
      return answer(name);
    },
  };
  return { listWatch, watches, lists: () => listed, gets, answerGet: (get: (name: string) => Promise<V1Namespace>) => (answer = get) };
}
