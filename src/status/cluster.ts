// What status reads from the cluster, read-only, with the user's permissions: the managed pods,
// the add-on's events about them, their ContainerRecreateRequests, their nodes and the webhook
// registration. A refused read (403) becomes the permission it lacked; pods are the one read
// status cannot do without.
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type CoreV1Event,
  type KubeConfig,
  type V1LabelSelector,
  type V1Node,
  type V1Pod,
} from '@kubernetes/client-node';
import { isApiError } from '../kube/api-errors.ts';
import { servedCrrVersion } from '../kube/discovery.ts';
import { COMPONENT, CRR, DONE, IN_FLIGHT_FIELD_SELECTOR, MANAGED, MANAGED_LABEL, WEBHOOK_NAMES, labelSelectorMatches } from '../policy/index.ts';
import { iso } from './readings.ts';
import type { CrrView, Readable, WebhookView } from './story-types.ts';

/** The cluster cannot be read for the pods themselves: status exits 3 with this message. */
export class ClusterError extends Error {}

/** Namespace scope: one namespace, or every namespace. */
export type Scope = { namespace: string } | { allNamespaces: true };

const where = (scope: Scope) => ('namespace' in scope ? `in namespace ${scope.namespace}` : 'cluster-wide');

export class ClusterReader {
  private readonly core: CoreV1Api;
  private readonly custom: CustomObjectsApi;
  private readonly kubeConfig: KubeConfig;
  private readonly nodes = new Map<string, Promise<Readable<V1Node | undefined>>>();
  private crrVersion: Promise<string | undefined> | undefined;

  constructor(kubeConfig: KubeConfig) {
    this.kubeConfig = kubeConfig;
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.custom = kubeConfig.makeApiClient(CustomObjectsApi);
  }

  /**
   * The pods carrying the managed label, matching the user's selector: those in flight, as the
   * watcher watches them; with includeFinished also those that ended (and those earlier versions
   * labelled `done`).
   */
  async managedPods(scope: Scope, selector: string, includeFinished: boolean): Promise<V1Pod[]> {
    const managed = includeFinished ? `${MANAGED_LABEL} in (${MANAGED},${DONE})` : `${MANAGED_LABEL}=${MANAGED}`;
    const query = { labelSelector: [managed, selector].filter(Boolean).join(','), ...(includeFinished ? {} : { fieldSelector: IN_FLIGHT_FIELD_SELECTOR }) };
    const list = await this.pods(`list pods ${where(scope)}`, () =>
      'namespace' in scope ? this.core.listNamespacedPod({ namespace: scope.namespace, ...query }) : this.core.listPodForAllNamespaces(query),
    );
    return list.items;
  }

  async pod(namespace: string, name: string): Promise<V1Pod> {
    try {
      return await this.pods(`get pods in namespace ${namespace}`, () => this.core.readNamespacedPod({ namespace, name }));
    } catch (error) {
      if (isApiError(error, 404)) throw new ClusterError(`pod ${name} not found in namespace ${namespace}`);
      throw error;
    }
  }

  /** The add-on's events about pods, by pod uid. */
  async events(scope: Scope, podName?: string): Promise<Readable<Map<string, CoreV1Event[]>>> {
    const fieldSelector = ['involvedObject.kind=Pod', ...(podName ? [`involvedObject.name=${podName}`] : [])].join(',');
    const read = await readable(`list events ${where(scope)}`, () =>
      'namespace' in scope ? this.core.listNamespacedEvent({ namespace: scope.namespace, fieldSelector }) : this.core.listEventForAllNamespaces({ fieldSelector }),
    );
    if ('missing' in read) return read;
    const byPod = new Map<string, CoreV1Event[]>();
    for (const event of read.value.items) {
      if (event.source?.component !== COMPONENT && event.reportingComponent !== COMPONENT) continue;
      const uid = event.involvedObject.uid ?? '';
      byPod.set(uid, [...(byPod.get(uid) ?? []), event]);
    }
    return { value: byPod };
  }

  /** The ContainerRecreateRequests of the scope by name; an empty map when the cluster has no Kruise. */
  async crrs(scope: Scope): Promise<Readable<Map<string, CrrView>>> {
    this.crrVersion ??= servedCrrVersion(this.kubeConfig).catch(() => undefined);
    const version = await this.crrVersion;
    if (!version) return { value: new Map() };
    const read = await readable(`list ${CRR.plural}.${CRR.group} ${where(scope)}`, () =>
      'namespace' in scope
        ? this.custom.listNamespacedCustomObject({ group: CRR.group, version, namespace: scope.namespace, plural: CRR.plural })
        : this.custom.listClusterCustomObject({ group: CRR.group, version, plural: CRR.plural }),
    );
    if ('missing' in read) return read;
    const items = ((read.value as { items?: unknown[] }).items ?? []) as Array<{
      metadata?: { name?: string; namespace?: string; creationTimestamp?: string };
      spec?: { containers?: Array<{ name?: string }> };
      status?: { phase?: string };
    }>;
    return {
      value: new Map(
        items.map((crr) => [
          `${crr.metadata?.namespace}/${crr.metadata?.name}`,
          {
            name: crr.metadata?.name ?? '',
            containers: (crr.spec?.containers ?? []).map((c) => c.name ?? ''),
            ...(crr.metadata?.creationTimestamp ? { createdAt: iso(crr.metadata.creationTimestamp) } : {}),
            ...(crr.status?.phase ? { phase: crr.status.phase } : {}),
          },
        ]),
      ),
    };
  }

  /** A node, read once per run; undefined when it is gone. */
  node(name: string | undefined): Promise<Readable<V1Node | undefined>> {
    if (!name) return Promise.resolve({ value: undefined });
    let read = this.nodes.get(name);
    if (!read) {
      read = readable('get nodes', async () => {
        try {
          return await this.core.readNode({ name });
        } catch (error) {
          if (isApiError(error, 404)) return undefined;
          throw error;
        }
      });
      this.nodes.set(name, read);
    }
    return read;
  }

  /** Whether the add-on's mutating webhook is registered, and whether it serves the namespace. */
  async webhook(namespace: string): Promise<Readable<WebhookView>> {
    const api = this.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    const read = await readable('list mutatingwebhookconfigurations', () => api.listMutatingWebhookConfiguration());
    if ('missing' in read) return read;
    const webhook = read.value.items.flatMap((c) => c.webhooks ?? []).find((w) => w.name === WEBHOOK_NAMES.mutate);
    if (!webhook) return { value: { registered: false, namespaceExcluded: false } };
    // Every namespace carries its name as a label, which is what the add-on's selector uses.
    const labels = await readable('get namespaces', () => this.core.readNamespace({ name: namespace }));
    const namespaceLabels = 'value' in labels ? (labels.value.metadata?.labels ?? {}) : { 'kubernetes.io/metadata.name': namespace };
    return { value: { registered: true, namespaceExcluded: !selectorMatches(webhook.namespaceSelector, namespaceLabels) } };
  }

  private async pods<T>(what: string, read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (error) {
      if (isApiError(error, 401, 403)) throw new ClusterError(`cannot ${what}: ${isApiError(error, 401) ? 'not authenticated' : 'forbidden'}; status needs at least permission to ${what}`);
      throw error;
    }
  }
}

async function readable<T>(what: string, read: () => Promise<T>): Promise<Readable<T>> {
  try {
    return { value: await read() };
  } catch (error) {
    if (isApiError(error, 403)) return { missing: what };
    throw error;
  }
}

/** A Kubernetes label selector against labels; an absent selector matches everything. */
export function selectorMatches(selector: V1LabelSelector | undefined, labels: Record<string, string>): boolean {
  return selector === undefined || labelSelectorMatches(selector, labels);
}
