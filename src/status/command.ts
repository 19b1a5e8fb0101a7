// `sidecar-terminator status [pod/NAME]`, also the kubectl plugin `kubectl sidecar-terminator`:
// reads with the user's kubeconfig, tells each pod's story, prints, and exits 1 when a pod has
// waited for its sidecars longer than --fail-after.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { apiErrorMessage, isApiError } from '../kube/api-errors.ts';
import { MANAGED_LABEL, crrName } from '../policy/index.ts';
import { ClusterError, ClusterReader, type Scope } from './cluster.ts';
import { EXIT, type StatusFlags } from './flags.ts';
import { limitsNote, renderList, renderStory } from './render.ts';
import { podStory } from './story.ts';
import type { PodStory, Readable } from './story-types.ts';

export interface StatusIO {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

const PROGRAM = 'sidecar-terminator status';

/** A mistake in the command line or the kubeconfig: exit 2. */
class StatusUsageError extends Error {}

export async function runStatus(flags: StatusFlags, target: string | undefined, io: StatusIO): Promise<number> {
  const fail = (code: number, message: string) => {
    io.stderr.write(`${PROGRAM}: ${message}\n`);
    return code;
  };
  let kubeConfig: KubeConfig;
  let server = '';
  try {
    kubeConfig = loadKubeConfig(flags);
    server = kubeConfig.getCurrentCluster()?.server ?? '';
    const podName = target === undefined ? undefined : podNameOf(target);
    if (podName !== undefined && flags.allNamespaces) throw new StatusUsageError('a pod is in one namespace: use -n NAMESPACE with pod/NAME, not -A');
    const namespace = flags.namespace || kubeConfig.getContextObject(kubeConfig.getCurrentContext())?.namespace || 'default';
    const reader = new ClusterReader(kubeConfig);
    const now = new Date();
    if (podName !== undefined) {
      const story = await storyOfPod(reader, namespace, podName, now);
      io.stdout.write(renderStory(story, flags.output, now));
      return stuckCheck([story], flags.failAfter, now, io);
    }
    const scope: Scope = flags.allNamespaces ? { allNamespaces: true } : { namespace };
    const list = await storiesOf(reader, scope, flags.selector, flags.all, now);
    if (list.items.length === 0 && (flags.output === 'text' || flags.output === 'wide')) {
      io.stderr.write(`No managed pods ${flags.all ? '' : 'in flight '}${'namespace' in scope ? `in namespace ${scope.namespace}` : 'in any namespace'}.\n`);
    } else io.stdout.write(renderList(list, flags.output, now, !('namespace' in scope)));
    if (list.limits.length > 0 && (flags.output === 'text' || flags.output === 'wide')) io.stderr.write(`${limitsNote(list.limits)}\n`);
    return stuckCheck(list.items, flags.failAfter, now, io);
  } catch (error) {
    if (error instanceof StatusUsageError) return fail(EXIT.usage, `${error.message}; run "sidecar-terminator status --help"`);
    if (error instanceof ClusterError) return fail(EXIT.unreadable, error.message);
    if (isApiError(error, 400)) return fail(EXIT.usage, `the API server refused the request: ${apiErrorMessage(error)}`);
    if (isApiError(error, 401)) return fail(EXIT.unreadable, `the API server ${server} did not accept the credentials of the kubeconfig`);
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'number') return fail(EXIT.unreadable, `the API server answered ${code}: ${apiErrorMessage(error)}`);
    return fail(EXIT.unreadable, `cannot reach the API server ${server}: ${causeOf(error)}`);
  }
}

function loadKubeConfig(flags: StatusFlags): KubeConfig {
  const kubeConfig = new KubeConfig();
  // Without any, client-node would fall back to http://localhost:8080.
  const none = !flags.kubeconfig && !process.env.KUBECONFIG && !process.env.KUBERNETES_SERVICE_HOST && !existsSync(join(homedir(), '.kube', 'config'));
  if (none) throw new StatusUsageError('no kubeconfig: set $KUBECONFIG, pass --kubeconfig, or create ~/.kube/config');
  try {
    if (flags.kubeconfig) kubeConfig.loadFromFile(flags.kubeconfig);
    else kubeConfig.loadFromDefault();
  } catch (error) {
    throw new StatusUsageError(`cannot load the kubeconfig${flags.kubeconfig ? ` ${flags.kubeconfig}` : ''}: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (flags.context) {
    if (!kubeConfig.getContextObject(flags.context)) {
      throw new StatusUsageError(`context "${flags.context}" is not in the kubeconfig; its contexts are: ${kubeConfig.getContexts().map((c) => c.name).join(', ') || 'none'}`);
    }
    kubeConfig.setCurrentContext(flags.context);
  }
  if (!kubeConfig.getCurrentCluster()) throw new StatusUsageError('no cluster in the kubeconfig: pass --kubeconfig or set $KUBECONFIG');
  return kubeConfig;
}

/** `pod/NAME` (or `pods/NAME`, `po/NAME`, or a bare NAME). */
function podNameOf(target: string): string {
  const match = /^(?:(pods?|po)\/)?([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/.exec(target);
  if (!match) throw new StatusUsageError(`"${target}" is not a pod: write pod/NAME`);
  return match[2]!;
}

async function storyOfPod(reader: ClusterReader, namespace: string, name: string, now: Date): Promise<PodStory> {
  const pod = await reader.pod(namespace, name);
  const scope = { namespace };
  const [events, crrs, node] = await Promise.all([reader.events(scope, name), reader.crrs(scope), reader.node(pod.spec?.nodeName)]);
  const managed = pod.metadata?.labels?.[MANAGED_LABEL] !== undefined;
  return podStory({
    pod,
    node,
    events: pick(events, (byPod) => byPod.get(pod.metadata?.uid ?? '') ?? []),
    crr: pick(crrs, (byName) => byName.get(`${namespace}/${crrName(pod.metadata?.uid ?? '')}`)),
    ...(managed ? {} : { webhook: await reader.webhook(namespace) }),
    now,
  });
}

async function storiesOf(reader: ClusterReader, scope: Scope, selector: string, includeFinished: boolean, now: Date) {
  const pods = await reader.managedPods(scope, selector, includeFinished);
  const [events, crrs] = pods.length > 0 ? await Promise.all([reader.events(scope), reader.crrs(scope)]) : [{ value: new Map() }, { value: new Map() }];
  const items = await Promise.all(
    pods.map(async (pod: V1Pod) =>
      podStory({
        pod,
        node: await reader.node(pod.spec?.nodeName),
        events: pick(events, (byPod) => byPod.get(pod.metadata?.uid ?? '') ?? []),
        crr: pick(crrs, (byName) => byName.get(`${pod.metadata?.namespace}/${crrName(pod.metadata?.uid ?? '')}`)),
        now,
      }),
    ),
  );
  items.sort((a, b) => a.namespace.localeCompare(b.namespace) || a.pod.localeCompare(b.pod));
  return { items, limits: [...new Set(items.flatMap((item) => item.limits))] };
}

function pick<T, U>(read: Readable<T>, select: (value: T) => U): Readable<U> {
  return 'value' in read ? { value: select(read.value) } : read;
}

/** A pod whose main containers are done but whose sidecars still run, for longer than the threshold. */
function stuckCheck(stories: PodStory[], failAfterMs: number, now: Date, io: StatusIO): number {
  if (failAfterMs <= 0) return EXIT.ok;
  const stuck = stories.filter((s) => (s.state === 'stopping' || s.state === 'failed') && s.since && now.getTime() - new Date(s.since).getTime() > failAfterMs);
  for (const story of stuck) {
    io.stderr.write(`${PROGRAM}: pod ${story.namespace}/${story.pod} has waited ${Math.round((now.getTime() - new Date(story.since!).getTime()) / 1000)}s for its sidecars to stop (--fail-after ${failAfterMs / 1000}s): ${story.state}, waiting for ${story.waitingFor}\n`);
  }
  return stuck.length > 0 ? EXIT.stuck : EXIT.ok;
}

function causeOf(error: unknown): string {
  const cause = (error as { cause?: unknown }).cause;
  const text = (value: unknown) => (value instanceof Error ? value.message : String(value));
  return cause ? `${text(error)} (${text(cause)})` : text(error);
}
