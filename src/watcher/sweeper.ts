// The sweeper: pods admitted while the webhook was unavailable (failurePolicy Ignore) carry no
// label, so the watcher never sees them. Now and then it lists the running pods the trigger
// can apply to that have no label yet, page by page, and labels those the webhook would have:
// in the namespaces the webhook serves only (not excluded, and carrying --namespace-labels).
// Labelling a pod the webhook would not have seen makes the watcher stop its sidecars: a
// namespace that never opted in is left alone.
import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { MANAGED, MANAGED_LABEL, shouldManage } from '../policy/index.ts';
import { isApiError } from '../kube/api-errors.ts';

export interface SweepOptions {
  core: CoreV1Api;
  /** Namespaces to sweep; every namespace when empty. */
  namespaces: readonly string[];
  /** Namespaces the webhook does not serve, left alone here too. */
  excludedNamespaces: readonly string[];
  /** Labels (key=value) a namespace must carry for the webhook to serve it; none: every namespace. */
  namespaceLabels?: readonly string[];
  quickExitImageAllowlist: readonly string[];
  pageSize?: number;
}

const FIELD_SELECTOR = 'status.phase=Running,spec.restartPolicy!=Always';
const LABEL_SELECTOR = `!${MANAGED_LABEL}`;

/** One sweep; returns the keys (namespace/name) of the pods it labelled. */
export async function sweep(options: SweepOptions): Promise<string[]> {
  const labelled: string[] = [];
  const namespaces = options.namespaces.length > 0 ? options.namespaces : [undefined];
  const served = options.namespaceLabels?.length ? await namespacesLabelled(options.core, options.namespaceLabels) : undefined;
  const skipped = (namespace: string) => options.excludedNamespaces.includes(namespace) || (served !== undefined && !served.has(namespace));
  for (const namespace of namespaces) {
    let continueToken: string | undefined;
    do {
      const query = { fieldSelector: FIELD_SELECTOR, labelSelector: LABEL_SELECTOR, limit: options.pageSize ?? 100, _continue: continueToken };
      const page = namespace
        ? await options.core.listNamespacedPod({ namespace, ...query })
        : await options.core.listPodForAllNamespaces(query);
      for (const pod of page.items) {
        if (skipped(pod.metadata?.namespace ?? '')) continue;
        if (shouldManage({ ...pod, apiVersion: 'v1', kind: 'Pod' }, options.quickExitImageAllowlist) && (await label(options.core, pod))) {
          labelled.push(`${pod.metadata?.namespace}/${pod.metadata?.name}`);
        }
      }
      continueToken = page.metadata?._continue || undefined;
    } while (continueToken);
  }
  return labelled;
}

/** The names of the namespaces carrying every one of `labels`, as the webhooks' namespaceSelector picks them. */
async function namespacesLabelled(core: CoreV1Api, labels: readonly string[]): Promise<Set<string>> {
  const names = new Set<string>();
  let continueToken: string | undefined;
  do {
    const page = await core.listNamespace({ labelSelector: labels.join(','), limit: 500, _continue: continueToken });
    for (const namespace of page.items) if (namespace.metadata?.name) names.add(namespace.metadata.name);
    continueToken = page.metadata?._continue || undefined;
  } while (continueToken);
  return names;
}

/** Labels the pod unless it changed meanwhile (the resourceVersion precondition) or is gone. */
async function label(core: CoreV1Api, pod: V1Pod): Promise<boolean> {
  const body = { metadata: { resourceVersion: pod.metadata?.resourceVersion, labels: { [MANAGED_LABEL]: MANAGED } } };
  try {
    await core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: pod.metadata!.namespace!, body }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    return true;
  } catch (error) {
    if (isApiError(error, 404, 409)) return false;
    throw error;
  }
}
