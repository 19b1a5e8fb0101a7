// The comparison for the watcher benchmark: a watcher that caches EVERY pod of the cluster, as
// OpenKruise's SidecarTerminator controller does (its controller-runtime informer holds all
// pods; a predicate then picks the ones with sidecar markers). Everything else is ours: the
// same reflector code (src/watcher/reflector.ts) with an empty label selector instead of
// `sidecar-terminator.io/managed=true`, the same work queue and concurrency, the same policy
// decision (src/policy decide) and the same stop request (ContainerRecreateRequest), followed by
// the event and the SidecarTerminated condition. So the memory difference is the cache of all
// pods, measured. It makes one request per pod fewer than the add-on, and one fewer before the
// stop request: the add-on records its event first (a restart between the two cannot lose it)
// and labels finished pods `done`, which takes them out of its watch.
//
//   node bench/watcher/all-pods-watcher.ts --kubeconfig FILE [--act-namespace NS] [--concurrency 16]
//
// It acts on pods with sidecar markers (label or not) in --act-namespace only (all when unset),
// and prints `{"cached":N,"synced":bool}` on stdout every second for the bench driver.
import { CoreV1Api, CustomObjectsApi, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { isApiError } from '../../src/kube/api-errors.ts';
import { loadKubeConfig } from '../../src/kube/client.ts';
import { CONDITION_REASONS, EVENT_REASONS, TERMINATED_CONDITION, classifyContainers, decide } from '../../src/policy/index.ts';
import { createCrr } from '../../src/watcher/crr.ts';
import { servedCrrVersion } from '../../src/kube/discovery.ts';
import { EventRecorder } from '../../src/watcher/event-recorder.ts';
import { PodWriter } from '../../src/watcher/pod-writes.ts';
import { WorkQueue } from '../../src/watcher/queue.ts';
import { PodReflector, podKey } from '../../src/watcher/reflector.ts';
import { parseArgs } from '../lib/stats.ts';

const args = parseArgs(process.argv.slice(2));
// The add-on's own client wiring, as the slim watcher has it.
const kubeConfig = loadKubeConfig(args.get('kubeconfig') ?? '');
const actNamespace = args.get('act-namespace');
const concurrency = Number(args.get('concurrency') ?? 16); // serve's --concurrency default

const crrVersion = await servedCrrVersion(kubeConfig);
if (!crrVersion) throw new Error('the cluster does not serve ContainerRecreateRequest');
const clients = { core: kubeConfig.makeApiClient(CoreV1Api), custom: kubeConfig.makeApiClient(CustomObjectsApi) };
const events = new EventRecorder(clients.core);
/** The events recorded per pod uid, as the slim watcher's executor keeps them. */
const sent = new Map<string, Set<string>>();
const writer = new PodWriter(clients.core);
const nodes = new Map<string, V1Node | undefined>();
let synced = false;

// Kruise's predicate: only pods with a sidecar marker reach the queue; the cache holds them all.
const hasSidecar = (pod: V1Pod) => classifyContainers(pod.spec ?? {}).some((role) => role.role === 'sidecar');
const inScope = (pod: V1Pod) => !actNamespace || pod.metadata?.namespace === actNamespace;

const queue = new WorkQueue<string>({ concurrency, process: reconcile, onError: (key, error) => process.stderr.write(`reconcile ${key}: ${String(error)}\n`) });
const reflector = new PodReflector({
  kubeConfig,
  labelSelector: '',
  onEvent: (event, pod) => {
    if (event === 'deleted') sent.delete(pod.metadata?.uid ?? '');
    else if (inScope(pod) && hasSidecar(pod)) queue.add(podKey(pod));
  },
  onSynced: () => (synced = true),
  onError: (error) => process.stderr.write(`watch: ${String(error)}\n`),
});

async function nodeOf(pod: V1Pod): Promise<V1Node | undefined> {
  const name = pod.spec?.nodeName;
  if (!name) return undefined;
  if (nodes.has(name)) return nodes.get(name);
  let node: V1Node | undefined;
  try {
    node = await clients.core.readNode({ name });
  } catch (error) {
    if (!isApiError(error, 404)) throw error;
  }
  nodes.set(name, node);
  return node;
}

async function reconcile(key: string): Promise<void> {
  const pod = reflector.cache.get(key);
  if (!pod) return;
  const decision = decide(pod, await nodeOf(pod));
  if (decision.outcome !== 'act') return;
  const containers = decision.actions.flatMap((action) => (action.type === 'kill' ? [action.container] : []));
  if (containers.length === 0) return;
  await createCrr(clients.custom, crrVersion!, pod, containers);
  const message = `stopping sidecars: ${containers.map((c) => `${c} (ContainerRecreateRequest)`).join(', ')}`;
  const uid = pod.metadata?.uid ?? '';
  if (!sent.has(uid)) sent.set(uid, new Set());
  await events.record(pod, { type: 'Normal', reason: EVENT_REASONS.stopping, code: 'stop-requested', message }, sent.get(uid)!);
  const conditionSet = pod.status?.conditions?.some((c) => c.type === TERMINATED_CONDITION && c.status === 'True');
  if (!conditionSet) await writer.setStatus(pod, { type: TERMINATED_CONDITION, status: 'True', reason: CONDITION_REASONS.stopping, message });
}

reflector.start();
const report = setInterval(() => process.stdout.write(`${JSON.stringify({ cached: reflector.cache.size, synced })}\n`), 1000);
process.once('SIGTERM', () => {
  clearInterval(report);
  reflector.stop();
  void queue.shutDown().then(() => process.exit(0));
});
