// What the native-sidecars webhook reads of the cluster while migration is on, in the background
// (periodic-read.ts): the other mutating webhooks for pods, named when a pod that lost its native
// sidecars is refused, and the kubelets that run no native sidecars, where no pod is migrated.
import type { AdmissionregistrationV1Api, CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from '../logger.ts';
import { kubeletsWithoutNativeSidecars, podMutatingWebhooks, type OldKubelet, type PodMutatingWebhook } from '../policy/index.ts';
import { PeriodicRead } from './periodic-read.ts';

/** How often the webhook configurations are read again. */
export const POD_MUTATING_WEBHOOKS_REFRESH_MS = 60_000;
/** How often the nodes are read again: a list of every node costs more, and kubelets change slowly. */
export const KUBELETS_REFRESH_MS = 5 * 60_000;
/** Nodes per page of the list. */
const NODES_PAGE = 500;

export function podMutatingWebhookList(admission: Pick<AdmissionregistrationV1Api, 'listMutatingWebhookConfiguration'>, ownConfiguration: string, logger: Logger, everyMs = POD_MUTATING_WEBHOOKS_REFRESH_MS): PeriodicRead<readonly PodMutatingWebhook[]> {
  return new PeriodicRead({
    read: async () => podMutatingWebhooks((await admission.listMutatingWebhookConfiguration()).items, ownConfiguration),
    everyMs,
    what: 'the mutating webhook configurations',
    meanwhile: 'a pod refused for lost native sidecars names no webhook until they can be read',
    logger,
  });
}

/** The nodes whose kubelets run no native sidecars; until the first read succeeds they are unknown, and no pod is migrated. */
export function oldKubeletList(core: Pick<CoreV1Api, 'listNode'>, logger: Logger, everyMs = KUBELETS_REFRESH_MS): PeriodicRead<readonly OldKubelet[]> {
  return new PeriodicRead({
    read: async () => {
      const old: OldKubelet[] = [];
      let page: string | undefined;
      do {
        const list = await core.listNode({ limit: NODES_PAGE, ...(page ? { _continue: page } : {}) });
        old.push(...kubeletsWithoutNativeSidecars(list.items));
        page = list.metadata?._continue || undefined;
      } while (page);
      return old;
    },
    everyMs,
    what: 'the nodes',
    meanwhile: 'no pod is migrated to native sidecars until their kubelets can be read',
    logger,
  });
}
