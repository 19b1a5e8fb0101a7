// The sweeper: pods admitted while the webhook was unavailable (failurePolicy Ignore) carry no
// label, so the watcher never sees them. Now and then it lists the running pods the trigger
// can apply to that have no label yet, page by page, and labels those the webhook would have.
import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { MANAGED, MANAGED_LABEL, shouldManage } from '../policy/index.ts';
import { isApiError } from '../kube/api-errors.ts';

export interface SweepOptions {
  core: CoreV1Api;
  /** Namespaces to sweep; every namespace when empty. */
  namespaces: readonly string[];
  /** Namespaces the webhook does not serve, left alone here too. */
  excludedNamespaces: readonly string[];
  quickExitImageAllowlist: readonly string[];
  pageSize?: number;
}

const FIELD_SELECTOR = 'status.phase=Running,spec.restartPolicy!=Always';
const LABEL_SELECTOR = `!${MANAGED_LABEL}`;

/** One sweep; returns the keys (namespace/name) of the pods it labelled. */
export async function sweep(options: SweepOptions): Promise<string[]> {
  const labelled: string[] = [];
  const namespaces = options.namespaces.length > 0 ? options.namespaces : [undefined];
  for (const namespace of namespaces) {
    let continueToken: string | undefined;
    do {
      const query = { fieldSelector: FIELD_SELECTOR, labelSelector: LABEL_SELECTOR, limit: options.pageSize ?? 100, _continue: continueToken };
      const page = namespace
        ? await options.core.listNamespacedPod({ namespace, ...query })
        : await options.core.listPodForAllNamespaces(query);
      for (const pod of page.items) {
        if (options.excludedNamespaces.includes(pod.metadata?.namespace ?? '')) continue;
        if (shouldManage({ ...pod, apiVersion: 'v1', kind: 'Pod' }, options.quickExitImageAllowlist) && (await label(options.core, pod))) {
          labelled.push(`${pod.metadata?.namespace}/${pod.metadata?.name}`);
        }
      }
      continueToken = page.metadata?._continue || undefined;
    } while (continueToken);
  }
  return labelled;
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
