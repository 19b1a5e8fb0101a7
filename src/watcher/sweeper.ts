// The sweeper: pods admitted while the webhook was unavailable (failurePolicy Ignore) carry no
// label, so the watcher never sees them. Now and then it lists the running pods the trigger
// can apply to that have no label yet, page by page, and labels those the webhook would have:
// in the namespaces the webhook serves only (not excluded, and carrying --namespace-labels).
// Labelling a pod the webhook would not have seen makes the watcher stop its sidecars: a
// namespace that never opted in is left alone. A pod that changed between the list and the
// label (the kubelet writes its status often) is read again, judged again and labelled at once;
// a sweep that fails is tried again after a short backoff rather than a whole interval later.
// It judges a pod by its own markers only, and writes only the label: the fence lets the watcher
// change nothing else of a pod, so that it cannot name a container a sidecar and then stop it. A
// pod the injected-sidecar policy would have given annotations to is therefore not labelled here.
import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../logger.ts';
import { MANAGED, MANAGED_LABEL, shouldManageObject } from '../policy/index.ts';
import { isApiError } from '../kube/api-errors.ts';
import { retryDelay } from './retries.ts';

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

export interface SweepResult {
  /** The keys (namespace/name) of the pods labelled. */
  labelled: string[];
  /** Those still changing after LABEL_ATTEMPTS conflicts in a row, left to the next sweep. */
  conflicted: string[];
}

/** What became of a pod to label; left: gone, replaced, or no longer one the webhook would label. */
type LabelOutcome = 'labelled' | 'conflicted' | 'left';

const FIELD_SELECTOR = 'status.phase=Running,spec.restartPolicy!=Always';
const LABEL_SELECTOR = `!${MANAGED_LABEL}`;

/**
 * Patches of one pod per sweep. A conflict is mostly the kubelet writing the pod's status, and a
 * patch sent right after a fresh read usually gets in first; but a pod written to without pause
 * would hold the sweep (and the pods after it) forever, so after this many it waits for the next.
 */
export const LABEL_ATTEMPTS = 5;

/** One sweep: lists the unlabelled running pods and labels those the webhook would have. */
export async function sweep(options: SweepOptions): Promise<SweepResult> {
  const result: SweepResult = { labelled: [], conflicted: [] };
  const namespaces = options.namespaces.length > 0 ? options.namespaces : [undefined];
  const served = options.namespaceLabels?.length ? await namespacesLabelled(options.core, options.namespaceLabels) : undefined;
  const qualifies = (pod: V1Pod) => wouldLabel(pod, options, served);
  for (const namespace of namespaces) {
    let continueToken: string | undefined;
    do {
      const query = { fieldSelector: FIELD_SELECTOR, labelSelector: LABEL_SELECTOR, limit: options.pageSize ?? 100, _continue: continueToken };
      const page = namespace
        ? await options.core.listNamespacedPod({ namespace, ...query })
        : await options.core.listPodForAllNamespaces(query);
      for (const pod of page.items) {
        if (!qualifies(pod)) continue;
        const outcome = await label(options.core, pod, qualifies);
        if (outcome !== 'left') result[outcome].push(`${pod.metadata?.namespace}/${pod.metadata?.name}`);
      }
      continueToken = page.metadata?._continue || undefined;
    } while (continueToken);
  }
  return result;
}

/**
 * Whether the webhook would have labelled the pod and it still needs the label: running, not
 * labelled, in a namespace the webhook serves, and managed by the webhook's own rule.
 */
function wouldLabel(pod: V1Pod, options: SweepOptions, served: Set<string> | undefined): boolean {
  const namespace = pod.metadata?.namespace ?? '';
  if (options.excludedNamespaces.includes(namespace) || (served !== undefined && !served.has(namespace))) return false;
  if (pod.status?.phase !== 'Running' || pod.metadata?.labels?.[MANAGED_LABEL] !== undefined) return false;
  return shouldManageObject({ ...pod, apiVersion: 'v1', kind: 'Pod' }, options.quickExitImageAllowlist);
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

/**
 * Labels the pod as judged: its resourceVersion is the patch's precondition. On a conflict the pod
 * is read again and, if it still qualifies, patched again with its new resourceVersion; a pod
 * gone, replaced or no longer qualifying is left alone.
 */
async function label(core: CoreV1Api, listed: V1Pod, qualifies: (pod: V1Pod) => boolean): Promise<LabelOutcome> {
  let pod = listed;
  for (let attempt = 1; ; attempt++) {
    const outcome = await patchLabel(core, pod);
    if (outcome !== 'conflicted' || attempt === LABEL_ATTEMPTS) return outcome;
    const current = await readAgain(core, pod);
    if (!current || current.metadata?.uid !== listed.metadata?.uid || !qualifies(current)) return 'left';
    pod = current;
  }
}

async function patchLabel(core: CoreV1Api, pod: V1Pod): Promise<LabelOutcome> {
  const body = { metadata: { resourceVersion: pod.metadata?.resourceVersion, labels: { [MANAGED_LABEL]: MANAGED } } };
  try {
    await core.patchNamespacedPod({ name: pod.metadata!.name!, namespace: pod.metadata!.namespace!, body }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    return 'labelled';
  } catch (error) {
    if (isApiError(error, 404)) return 'left';
    if (isApiError(error, 409)) return 'conflicted';
    throw error;
  }
}

/** The pod as it is now; undefined once it is gone. */
async function readAgain(core: CoreV1Api, pod: V1Pod): Promise<V1Pod | undefined> {
  try {
    return await core.readNamespacedPod({ name: pod.metadata!.name!, namespace: pod.metadata!.namespace! });
  } catch (error) {
    if (isApiError(error, 404)) return undefined;
    throw error;
  }
}

export interface SweeperOptions extends SweepOptions {
  /** Between two sweeps, once the last one succeeded. */
  intervalMs: number;
  logger: Logger;
}

/**
 * Sweeps at start, then every intervalMs, one sweep at a time. A sweep that fails (the API server
 * slow or briefly away) is tried again with the backoff of a failed reconcile (retries.ts), but
 * never later than the interval: the pods it missed are Jobs kept waiting meanwhile. A refusal
 * (RBAC) gets that backoff's long delay, so it is tried again about once an interval, as before.
 */
export class Sweeper {
  private readonly options: SweeperOptions;
  private timer: NodeJS.Timeout | undefined;
  /** Failed sweeps in a row. */
  private failures = 0;
  private stopped = false;

  constructor(options: SweeperOptions) {
    this.options = options;
  }

  start(): void {
    this.schedule(0);
  }

  /** No sweep after this one; a sweep running now finishes. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.run().then((nextInMs) => this.schedule(nextInMs)), delayMs);
  }

  /** One sweep, logged; answers how long until the next. */
  private async run(): Promise<number> {
    const { logger, intervalMs } = this.options;
    try {
      const { labelled, conflicted } = await sweep(this.options);
      this.failures = 0;
      if (labelled.length > 0) logger.info({ pods: labelled }, 'sweeper labelled pods the webhook missed');
      if (conflicted.length > 0) logger.info({ pods: conflicted, attempts: LABEL_ATTEMPTS }, 'sweeper: pods changed at every attempt to label them; trying them again at the next sweep');
      return intervalMs;
    } catch (error) {
      this.failures++;
      const retryInMs = Math.min(intervalMs, retryDelay(this.failures, error));
      logger.warn({ err: error, attempt: this.failures, retryInMs }, 'sweep failed, will retry');
      return retryInMs;
    }
  }
}
