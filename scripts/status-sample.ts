// Writes the sample output of docs/status-plugin.md: the Jobs of examples/ as the add-on meets them
// in a cluster with OpenKruise, told by status's own functions (src/status: podStory, renderList,
// renderStory) with no cluster. Each example's pod is built from its manifest and run on a clock
// of its own: its main containers exit, the watcher plans the stop (src/policy: planStop) and
// carries it out (src/watcher: Executor, on fake API clients that keep its events and its
// ContainerRecreateRequest), then the sidecars end as the kubelet ends them.
//   node scripts/status-sample.ts [--write | --check]
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { CoreV1Event, V1Container, V1Node, V1Pod } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { parse } from 'yaml';
import { SERVE_FLAGS } from '../src/config.ts';
import { MANAGED_LABEL, SIGNAL_COMMAND, classifyContainers, planStop, type StopSettings } from '../src/policy/index.ts';
import { iso } from '../src/status/readings.ts';
import { renderList, renderStory } from '../src/status/render.ts';
import { podStory, type CrrView, type PodStory } from '../src/status/story.ts';
import { Executor } from '../src/watcher/executor.ts';
import { WatcherMetrics } from '../src/watcher/watcher-metrics.ts';
import { DEMO_MAIN_EXIT_AFTER_MS, DEMO_NODES } from '../test/support/demo.ts';
import { fakeCoreV1Api, fakeCustomObjectsApi } from '../test/support/fake-kube.ts';
import { generatorCli, type GeneratedPart } from './generated-parts.ts';

const root = resolve(import.meta.dirname, '..');
export const PAGE = 'docs/status-plugin.md';
const SCRIPT = 'scripts/status-sample.ts';
const NAMESPACE = 'default';

/** The moment the sample is read, and each example applied before it, in seconds. */
const NOW = Date.parse('2026-11-23T16:32:00Z');
const SCENES = [
  /** Finished: its main container exited, the watcher asked Kruise to stop the shipper, it stopped. */
  { example: 'log-shipper', appliedBefore: 95, phase: 'stopped' },
  /** Finished on a virtual node: the proxy's image replaced in place by its quick-exit image, which exited. */
  { example: 'proxy-on-virtual-node', appliedBefore: 60, phase: 'stopped' },
  /** Its main container still exporting. */
  { example: 'ignore-exit-code', appliedBefore: 3, phase: 'running' },
] as const;
/** The pod whose story the page shows. */
export const STORY_OF = 'proxy-on-virtual-node';

const nodes: Record<'normal' | 'virtual', V1Node> = {
  normal: { metadata: { name: DEMO_NODES.normal, labels: { 'kubernetes.io/hostname': DEMO_NODES.normal } }, spec: {} },
  virtual: {
    metadata: { name: DEMO_NODES.virtual, labels: { type: 'virtual-kubelet' } },
    spec: { taints: [{ key: 'virtual-kubelet.io/provider', value: 'mock', effect: 'NoSchedule' }] },
  },
};

/** The watcher's settings as serve's defaults make them, in a cluster that serves Kruise's ContainerRecreateRequest. */
const settings: StopSettings = {
  killMechanism: 'crr',
  signal: { image: SERVE_FLAGS.signalImage.default, command: [...SIGNAL_COMMAND] },
  quickExitImageAllowlist: [],
  quickExitImage: SERVE_FLAGS.quickExitImage.default,
};

const at = (ms: number) => new Date(ms);
const silent = { debug() {}, info() {}, warn() {}, error() {}, child: () => silent };

interface Job {
  metadata: { name: string };
  spec: { template: { metadata?: { annotations?: Record<string, string> }; spec: V1Pod['spec'] & { containers: V1Container[] } } };
}

/** The pod the Job controller creates from an example, scheduled, its containers started at `started`. */
function podOf(job: Job, started: number, index: number): V1Pod {
  const { spec } = job.spec.template;
  const virtual = spec.nodeSelector?.type === 'virtual-kubelet';
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `${job.metadata.name}-xxxxx`,
      namespace: NAMESPACE,
      uid: `00000000-0000-4000-8000-00000000000${index}`,
      resourceVersion: '1',
      creationTimestamp: at(started - 1000),
      labels: { [MANAGED_LABEL]: 'true', 'batch.kubernetes.io/job-name': job.metadata.name },
      ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: job.metadata.name, uid: `10000000-0000-4000-8000-00000000000${index}`, controller: true }],
    },
    spec: { ...spec, nodeName: virtual ? DEMO_NODES.virtual : DEMO_NODES.normal },
    status: {
      phase: 'Running',
      startTime: at(started - 1000),
      containerStatuses: spec.containers.map((container) => ({
        name: container.name,
        image: container.image ?? '',
        imageID: '',
        ready: true,
        restartCount: 0,
        started: true,
        state: { running: { startedAt: at(started) } },
      })),
    },
  };
}

function exited(pod: V1Pod, name: string, exitCode: number, finished: number, image?: string): void {
  const status = pod.status!.containerStatuses!.find((s) => s.name === name)!;
  const startedAt = status.state?.running?.startedAt;
  if (image) {
    // The kubelet stops the container (the examples' sidecars exit 0 on SIGTERM) and starts it again with the image put in its place.
    status.lastState = { terminated: { exitCode: 0, reason: 'Completed', ...(startedAt ? { startedAt } : {}), finishedAt: at(finished - 1000) } };
    status.restartCount = 1;
    status.image = image;
  }
  status.state = { terminated: { exitCode, reason: exitCode === 0 ? 'Completed' : 'Error', ...(startedAt ? { startedAt } : {}), finishedAt: at(finished) } };
  status.ready = false;
}

/** What status is told of one example at NOW, its pod and the watcher's traces. */
async function scene(example: string, appliedBefore: number, phase: 'stopped' | 'running', index: number): Promise<PodStory> {
  const job = parse(readFileSync(join(root, 'examples', `${example}.yaml`), 'utf8')) as Job;
  const started = NOW - appliedBefore * 1000 + 2000;
  const pod = podOf(job, started, index);
  const node = pod.spec!.nodeName === DEMO_NODES.virtual ? nodes.virtual : nodes.normal;
  const events: CoreV1Event[] = [];
  let crr: CrrView | undefined;
  if (phase === 'stopped') {
    const mainsDone = started + DEMO_MAIN_EXIT_AFTER_MS;
    const mains = classifyContainers(pod.spec!, pod.metadata!.annotations).filter((container) => container.role === 'main');
    for (const main of mains) exited(pod, main.name, 0, mainsDone);
    // The watcher's reconcile a second after: its plan, carried out by its executor.
    const reconciled = mainsDone + 1000;
    const core = fakeCoreV1Api()
      .handle('createNamespacedEvent', ({ body }) => (events.push({ ...body, firstTimestamp: at(reconciled), lastTimestamp: at(reconciled) }), body))
      .handle('patchNamespacedPod', () => pod)
      .handle('patchNamespacedPodStatus', () => pod);
    const custom = fakeCustomObjectsApi().handle('createNamespacedCustomObject', ({ body }) => {
      const request = body as { metadata: { name: string }; spec: { containers: Array<{ name: string }> } };
      crr = { name: request.metadata.name, containers: request.spec.containers.map((c) => c.name), createdAt: iso(at(reconciled)), phase: 'Completed' };
      return {};
    });
    const executor = new Executor({ core: core.api, custom: custom.api, crrVersion: 'v1alpha1', metrics: new WatcherMetrics(new Registry()) });
    const plan = planStop(pod, node, settings, reconciled);
    await executor.execute(pod, plan, silent);
    // The sidecars end: by the kubelet, for a request of Kruise's daemon, or running the quick-exit image.
    for (const step of plan.steps) {
      if (step.type === 'create-crr') for (const name of step.containers) exited(pod, name, 0, reconciled + 1000);
      if (step.type === 'replace-image') {
        pod.spec!.containers.find((container) => container.name === step.container)!.image = step.image;
        exited(pod, step.container, 0, reconciled + 2000, step.image);
      }
    }
    pod.status!.phase = 'Succeeded';
  }
  return podStory({ pod, node: { value: node }, events: { value: events }, crr: { value: crr }, now: at(NOW) });
}

/** The sample: the command's output for every example, and the story of one. */
export async function sample(): Promise<{ list: string; story: string }> {
  const stories = await Promise.all(SCENES.map((s, index) => scene(s.example, s.appliedBefore, s.phase, index + 1)));
  stories.sort((a, b) => a.pod.localeCompare(b.pod));
  return {
    list: renderList({ items: stories, limits: [] }, 'text', at(NOW), false),
    story: renderStory(stories.find((story) => story.pod.startsWith(`${STORY_OF}-`))!, 'text', at(NOW)),
  };
}

/** The commands whose output the page shows. */
export const LIST_COMMAND = 'kubectl sidecar-terminator status --all';
export const STORY_COMMAND = `kubectl sidecar-terminator status pod/${STORY_OF}-xxxxx`;

/** The parts of the page: each command with its output, written together so that one is never shown with another's output. */
export async function sampleParts(): Promise<GeneratedPart[]> {
  const made = await sample();
  return [
    { begin: `<!-- the list: written from examples/ by \`node ${SCRIPT} --write\` -->`, end: '<!-- end of the list -->', make: () => shown(LIST_COMMAND, made.list) },
    { begin: `<!-- one story: written from examples/ by \`node ${SCRIPT} --write\` -->`, end: '<!-- end of the story -->', make: () => shown(STORY_COMMAND, made.story) },
  ];
}

function shown(command: string, output: string): string {
  return `\`\`\`sh\n${command}\n\`\`\`\n\n\`\`\`text\n${output.trimEnd()}\n\`\`\``;
}

if (import.meta.main) process.exitCode = generatorCli(root, PAGE, await sampleParts(), SCRIPT);
