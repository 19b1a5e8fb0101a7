// The sweeper: pods admitted while the webhook was unavailable (failurePolicy Ignore) carry no
// label, so the watcher never sees them. Now and then it lists the running pods the trigger
// can apply to that have no label yet, page by page, and labels those the webhook would have:
// in the namespaces the webhook serves only (not excluded, and carrying --namespace-labels).
// Labelling a pod the webhook would not have seen makes the watcher stop its sidecars: a
// namespace that never opted in is left alone. A pod that changed between the list and the
// label (the kubelet writes its status often) is read again, judged again and labelled at once;
// a sweep that fails is tried again after a short backoff rather than a whole interval later.
// With an injected-sidecar policy, a pod is judged as the webhook would have mutated it: with the
// annotations the policy adds, which go into the same patch as the label.
import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../logger.ts';
import { MANAGED, MANAGED_LABEL, injectedSidecarAnnotations, policyNeedsNamespaceLabels, shouldManageObject, type InjectedSidecarPolicy } from '../policy/index.ts';
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
  /** The injected-sidecar policy in force, read at each sweep; none: pods are judged as they are. */
  injectedSidecars?: () => InjectedSidecarPolicy;
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

/** What the sweep writes on a pod besides the label: the annotations the injected-sidecar policy adds to it, if any. */
interface Labelling {
  annotations?: Record<string, string>;
}

/** The pod's Labelling when the webhook would have labelled it, else undefined. */
type Judge = (pod: V1Pod) => Labelling | undefined;

/** What one sweep judges every pod with. */
interface SweepContext {
  options: SweepOptions;
  /** The injected-sidecar policy, when it has entries. */
  policy: InjectedSidecarPolicy | undefined;
  /** The namespaces listed for this sweep, with their labels; undefined when none was needed. */
  namespaces: ReadonlyMap<string, Record<string, string>> | undefined;
  /** Only the listed namespaces are served (--namespace-labels). */
  servedOnly: boolean;
}

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
  const policy = options.injectedSidecars?.();
  const applied = policy && policy.entries.length > 0 ? policy : undefined;
  const servedOnly = (options.namespaceLabels?.length ?? 0) > 0;
  // The namespaces are listed when only those carrying --namespace-labels are served, or when the policy matches their labels.
  const listed = servedOnly || (applied && policyNeedsNamespaceLabels(applied)) ? await namespaceLabels(options.core, options.namespaceLabels ?? []) : undefined;
  const judge: Judge = (pod) => labelling(pod, { options, policy: applied, namespaces: listed, servedOnly });
  for (const namespace of namespaces) {
    let continueToken: string | undefined;
    do {
      const query = { fieldSelector: FIELD_SELECTOR, labelSelector: LABEL_SELECTOR, limit: options.pageSize ?? 100, _continue: continueToken };
      const page = namespace
        ? await options.core.listNamespacedPod({ namespace, ...query })
        : await options.core.listPodForAllNamespaces(query);
      for (const pod of page.items) {
        const judged = judge(pod);
        if (!judged) continue;
        const outcome = await label(options.core, pod, judged, judge);
        if (outcome !== 'left') result[outcome].push(`${pod.metadata?.namespace}/${pod.metadata?.name}`);
      }
      continueToken = page.metadata?._continue || undefined;
    } while (continueToken);
  }
  return result;
}

/**
 * Whether the webhook would have labelled the pod and it still needs the label: running, not
 * labelled, in a namespace the webhook serves, and managed by the webhook's own rule once the
 * injected-sidecar policy's annotations are on it. Undefined when not; else what to write.
 */
function labelling(pod: V1Pod, { options, policy, namespaces, servedOnly }: SweepContext): Labelling | undefined {
  const namespace = pod.metadata?.namespace ?? '';
  if (options.excludedNamespaces.includes(namespace) || (servedOnly && !namespaces?.has(namespace))) return undefined;
  if (pod.status?.phase !== 'Running' || pod.metadata?.labels?.[MANAGED_LABEL] !== undefined) return undefined;
  const added = policy ? injectedSidecarAnnotations(pod, namespaces?.get(namespace), policy) : undefined;
  const metadata = added ? { ...pod.metadata, annotations: { ...pod.metadata?.annotations, ...added.annotations } } : pod.metadata;
  if (!shouldManageObject({ ...pod, metadata, apiVersion: 'v1', kind: 'Pod' }, options.quickExitImageAllowlist)) return undefined;
  return added ? { annotations: added.annotations } : {};
}

/**
 * The labels of the namespaces carrying every one of `selected` (all namespaces when it is
 * empty), by name: those the webhooks' namespaceSelector picks, with what the policy matches.
 */
async function namespaceLabels(core: CoreV1Api, selected: readonly string[]): Promise<Map<string, Record<string, string>>> {
  const labels = new Map<string, Record<string, string>>();
  let continueToken: string | undefined;
  do {
    const page = await core.listNamespace({ ...(selected.length > 0 ? { labelSelector: selected.join(',') } : {}), limit: 500, _continue: continueToken });
    for (const namespace of page.items) if (namespace.metadata?.name) labels.set(namespace.metadata.name, namespace.metadata.labels ?? {});
    continueToken = page.metadata?._continue || undefined;
  } while (continueToken);
  return labels;
}

/**
 * Labels the pod as judged: its resourceVersion is the patch's precondition. On a conflict the pod
 * is read again and, if it still qualifies, judged and patched again with its new resourceVersion;
 * a pod gone, replaced or no longer qualifying is left alone.
 */
async function label(core: CoreV1Api, listed: V1Pod, judged: Labelling, judge: Judge): Promise<LabelOutcome> {
  let [pod, writes] = [listed, judged];
  for (let attempt = 1; ; attempt++) {
    const outcome = await patchLabel(core, pod, writes);
    if (outcome !== 'conflicted' || attempt === LABEL_ATTEMPTS) return outcome;
    const current = await readAgain(core, pod);
    const again = current && current.metadata?.uid === listed.metadata?.uid ? judge(current) : undefined;
    if (!current || !again) return 'left';
    [pod, writes] = [current, again];
  }
}

async function patchLabel(core: CoreV1Api, pod: V1Pod, { annotations }: Labelling): Promise<LabelOutcome> {
  const body = { metadata: { resourceVersion: pod.metadata?.resourceVersion, labels: { [MANAGED_LABEL]: MANAGED }, ...(annotations ? { annotations } : {}) } };
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
