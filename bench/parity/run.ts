// The parity table: every Job of bench/parity/scenarios.ts run under OpenKruise's own
// SidecarTerminator controller (the version of scripts/versions.sh, bench/kruise/main.go) and under sidecar-terminator (`serve`:
// webhook and watcher, kill mechanism crr), on one real control plane with the kubelet simulator
// playing kubelet and kruise-daemon. Each in a namespace of its own, at the same time: Kruise's
// controller caches only its namespace, the add-on's webhook skips it. For each Job, what came
// out: admission, the Job's outcome, the pod's end, how the sidecars were stopped, and the objects
// each wrote (the ContainerRecreateRequest, the events, the pod condition, the label).
// A Job that needs what the control plane's release lacks (Scenario.requires) is left out.
//
//   node bench/parity/run.ts [--timeout 60] [--out bench/parity.md]
//
// Writes bench/parity.md (and bench/results/parity.json). Exits 1 when the two differ in an aspect
// that the scenario (or EVERY_JOB below, for every scenario) does not explain: the
// docs/migrating-from-openkruise.md lists the same reasons.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BatchV1Api, CoreV1Api, CustomObjectsApi, type CoreV1Event, type KubeConfig, type V1Job, type V1Pod } from '@kubernetes/client-node';
import { MANAGED_LABEL, describeStopRecord, readStopRecord } from '../../src/policy/index.ts';
import { apiFeatures, kubernetesVersion, startControlPlane } from '../../test/support/control-plane.ts';
import { CRR, KubeletSimulator } from '../../test/support/kubelet-simulator.ts';
import { registeringWebhooks, startServe } from '../../test/support/serve-process.ts';
import { installCrrCrd } from '../../test/support/stack.ts';
import { addOnArgs } from '../lib/addon.ts';
import { kruiseVersion, startKruisePeer } from '../lib/kruise-peer.ts';
import { machineLoad } from '../lib/proc.ts';
import { parseArgs } from '../lib/stats.ts';
import { SCENARIOS, jobManifest, type Aspect, type Scenario } from './scenarios.ts';

const repoRoot = resolve(import.meta.dirname, '../..');
const args = parseArgs(process.argv.slice(2));
const timeoutMs = Number(args.get('timeout') ?? 60) * 1000;
const out = resolve(args.get('out') ?? join(repoRoot, 'bench/parity.md'));
const log = (message: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${message}\n`);

const IMPLEMENTATIONS = [
  { id: 'kruise', name: `OpenKruise ${kruiseVersion()}`, namespace: 'parity-kruise' },
  { id: 'addon', name: 'sidecar-terminator', namespace: 'parity-addon' },
] as const;
type Implementation = (typeof IMPLEMENTATIONS)[number]['id'];

/**
 * Differences any Job may show, and why (docs/migrating-from-openkruise.md says the same):
 * each applies when the two differ only as described.
 */
const EVERY_JOB: Partial<Record<Aspect, { why: string; applies(kruise: string, addon: string): boolean }>> = {
  admission: {
    why: "sidecar-terminator's webhook warns at `kubectl apply` about configurations that work but may not do what was meant (docs/admission-rules.md)",
    applies: (kruise, addon) => kruise.startsWith('admitted') && addon.startsWith('admitted with'),
  },
  events: {
    why: "the same type and reason (Kruise's `SidecarTerminator`); the message is sidecar-terminator's own words, naming how each sidecar is stopped",
    applies: (kruise, addon) => typesAndReasons(kruise) === typesAndReasons(addon),
  },
  condition: {
    why: 'Kruise writes `SidecarTerminated` only with the terminal phase it sets (`..._IGNORE_EXIT_CODE`); sidecar-terminator writes it there too, and once the pod has ended, on every pod whose sidecars it stopped, puts its stop record in the message (each container\'s exit code, how each sidecar was stopped: docs/operations.md, "The stop record")',
    applies: (kruise, addon) => (kruise === 'none' || kruise.startsWith('True')) && addon.startsWith('True SidecarsStopped: stop record: '),
  },
  label: {
    why: 'the webhook labels the pods to manage (the watcher watches only those, while their phase is not terminal); the watcher writes no label of its own',
    applies: (kruise, addon) => kruise === 'none' && addon === 'true',
  },
};

type Observation = Record<Aspect, string>;

const ASPECTS: Record<Aspect, string> = {
  admission: 'admission',
  job: 'Job',
  pod: 'pod at the end',
  stop: 'how the sidecars were stopped',
  crr: 'ContainerRecreateRequest',
  events: 'events on the pod',
  condition: 'pod condition `SidecarTerminated`',
  label: `label \`${MANAGED_LABEL}\``,
};

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'st-parity-'));
  const cp = await startControlPlane();
  const stops: Array<() => Promise<unknown>> = [() => cp.stop()];
  try {
    const version = await kubernetesVersion(cp.binDir);
    const features = apiFeatures(version);
    const scenarios = SCENARIOS.filter((scenario) => !scenario.requires || features[scenario.requires]);
    for (const skipped of SCENARIOS.filter((scenario) => !scenarios.includes(scenario))) {
      log(`parity: ${skipped.id} skipped: Kubernetes ${version.gitVersion} drops what it needs (${skipped.requires})`);
    }
    log(`parity: ${scenarios.length} Jobs under each implementation on Kubernetes ${version.gitVersion}; load ${machineLoad()}; logs in ${dir}`);
    await installCrrCrd(cp);
    for (const { namespace } of IMPLEMENTATIONS) await cp.createNamespace(namespace);
    const sim = new KubeletSimulator(cp.kubeConfig, { namespaces: IMPLEMENTATIONS.map((i) => i.namespace), log: (m) => log(`[sim] ${m}`) });
    await sim.start();
    stops.unshift(() => sim.stop());
    const kruise = await startKruisePeer({ kubeconfig: cp.kubeconfigPath, namespace: 'parity-kruise', logFile: join(dir, 'kruise.log') });
    stops.unshift(() => kruise.stop());
    const certDir = join(dir, 'certs');
    mkdirSync(certDir);
    const serve = await startServe((port) => [
      '--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, ...registeringWebhooks(port, 'Fail'),
      '--kill-mechanism', 'crr', '--namespaces', 'parity-addon', '--excluded-namespaces', 'parity-kruise',
    ], { entry: addOnArgs() });
    stops.unshift(() => serve.stop());

    const admission = new Map<string, string>();
    for (const scenario of scenarios) {
      for (const impl of IMPLEMENTATIONS) {
        const applied = await cp.kubectl(['apply', '-f', '-'], { namespace: impl.namespace, input: JSON.stringify(jobManifest(scenario)) });
        admission.set(`${impl.id}/${scenario.id}`, applied.code === 0 ? admitted(applied.stderr) : `refused: ${clip(applied.stderr.trim())}`);
      }
    }
    const batch = cp.kubeConfig.makeApiClient(BatchV1Api);
    const started = Date.now();
    const ended = (job: V1Job | undefined) => job?.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
    for (;;) {
      const jobs = (await Promise.all(IMPLEMENTATIONS.map((impl) => batch.listNamespacedJob({ namespace: impl.namespace })))).flatMap((list) => list.items);
      const open = jobs.filter((job) => !ended(job)).map((job) => `${job.metadata?.namespace}/${job.metadata?.name}`);
      if (open.length === 0 || Date.now() - started > timeoutMs) break;
      await sleep(1000);
    }
    await sleep(5000); // events are recorded after the requests (Kruise's asynchronously)
    const observed: Record<string, Record<Implementation, Observation>> = {};
    for (const scenario of scenarios) {
      const kruiseObservation = await observe(cp.kubeConfig, 'parity-kruise', scenario, admission.get(`kruise/${scenario.id}`)!, timeoutMs);
      const addonObservation = await observe(cp.kubeConfig, 'parity-addon', scenario, admission.get(`addon/${scenario.id}`)!, timeoutMs);
      observed[scenario.id] = { kruise: kruiseObservation, addon: addonObservation };
    }
    const { markdown, unexplained } = render(scenarios, observed);
    writeFileSync(out, markdown);
    mkdirSync(join(repoRoot, 'bench/results'), { recursive: true });
    writeFileSync(join(repoRoot, 'bench/results/parity.json'), JSON.stringify(observed, null, 1));
    log(`wrote ${out}`);
    if (unexplained.length > 0) {
      log(`differences without a reason in bench/parity/scenarios.ts:\n${unexplained.join('\n')}`);
      process.exitCode = 1;
    }
  } finally {
    for (const stop of stops) await stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

function admitted(stderr: string): string {
  const warnings = stderr.split('\n').filter((line) => line.startsWith('Warning: ')).map((line) => line.slice('Warning: '.length));
  return warnings.length === 0 ? 'admitted' : `admitted with ${warnings.length} warning${warnings.length > 1 ? 's' : ''}: ${clip(warnings.join('; '))}`;
}

function clip(text: string, length = 240): string {
  const line = text.replace(/\s+/g, ' ');
  return line.length > length ? `${line.slice(0, length - 3)}...` : line;
}

async function observe(kubeConfig: KubeConfig, namespace: string, scenario: Scenario, admission: string, waitedMs: number): Promise<Observation> {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const batch = kubeConfig.makeApiClient(BatchV1Api);
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const none: Observation = { admission, job: 'not created', pod: 'none', stop: 'nothing', crr: 'none', events: 'none', condition: 'none', label: 'none' };
  let job: V1Job;
  try {
    job = await batch.readNamespacedJob({ name: scenario.id, namespace });
  } catch {
    return none;
  }
  const pods = (await core.listNamespacedPod({ namespace, labelSelector: `job-name=${scenario.id}` })).items;
  let pod = pods[0];
  const jobOutcome = job.status?.conditions?.find((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
  const jobText = jobOutcome ? `${jobOutcome.type}${jobOutcome.type === 'Failed' && jobOutcome.reason ? ` (${jobOutcome.reason})` : ''}` : `still running after ${Math.round(waitedMs / 1000)} s`;
  if (!pod) return { ...none, job: `${jobText}, no pod` };
  const uid = pod.metadata!.uid!;
  // The watcher writes the stop record once the pod has ended, in the background: waited for where it told the sidecars to stop.
  const told = (await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${pod.metadata!.name}` })).items.some((e) => e.reason === 'SidecarTerminator');
  for (let waited = 0; namespace === 'parity-addon' && told && !readStopRecord(pod) && waited < 60; waited++) {
    await sleep(1000);
    pod = await core.readNamespacedPod({ namespace, name: pod.metadata!.name! });
  }
  const normalise = (text: string) => sortBracketLists(text.replaceAll(uid, '<uid>').replaceAll(pod.metadata!.name!, '<pod>'));

  const crrs = ((await custom.listNamespacedCustomObject({ ...CRR, namespace })) as { items: Array<Record<string, unknown> & { spec?: { podName?: string } }> }).items.filter((crr) => crr.spec?.podName === pod.metadata?.name);
  const events = (await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${pod.metadata!.name}` })).items.filter(isTerminatorEvent);
  const condition = pod.status?.conditions?.find((c) => c.type === 'SidecarTerminated');
  const spec = new Map((scenario.containers ?? []).map((c) => [c.name, c.image]));
  const replaced = (pod.spec?.containers ?? []).filter((c) => spec.get(c.name) !== c.image).map((c) => `${c.name} image replaced by ${c.image}`);
  const stop = [
    ...crrs.map((crr) => `ContainerRecreateRequest for ${((crr.spec as { containers?: Array<{ name: string }> }).containers ?? []).map((c) => c.name).sort().join(', ')}`),
    ...replaced,
    ...(pod.spec?.ephemeralContainers ?? []).map((c) => `ephemeral container ${c.name}`),
  ];
  return {
    admission,
    job: jobText,
    pod: `${pod.status?.phase}; ${(pod.status?.containerStatuses ?? [])
      .slice()
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((s) => (s.restartCount > RESTART_LOOP ? `${s.name} in a restart loop (over ${RESTART_LOOP} restarts)` : `${s.name} ${s.state?.terminated ? `exited ${s.state.terminated.exitCode}` : s.state?.running ? 'running' : 'waiting'}${s.restartCount > 0 ? ` (${s.restartCount} restart${s.restartCount > 1 ? 's' : ''})` : ''}`))
      .join(', ')}`,
    stop: stop.length > 0 ? stop.join('; ') : 'nothing',
    crr: crrs.length === 0 ? 'none' : crrs.map((crr) => normalise(JSON.stringify(crrShape(crr)))).join(' '),
    events: events.length === 0 ? 'none' : events.map((e) => `${e.type} ${e.reason}: ${normalise(e.message ?? '')}`).sort().join(' / '),
    condition: condition ? `${condition.status}${condition.reason ? ` ${condition.reason}` : ''}: ${conditionWords(pod)}` : 'none',
    label: pod.metadata?.labels?.[MANAGED_LABEL] ?? 'none',
  };
}

/** The condition's message; a stop record in words, its seconds left out (they differ from run to run). */
function conditionWords(pod: V1Pod): string {
  const record = readStopRecord(pod);
  const message = pod.status?.conditions?.find((c) => c.type === 'SidecarTerminated')?.message ?? '';
  return record ? `stop record: ${describeStopRecord({ ...record, sidecars: record.sidecars.map((sidecar) => ({ ...sidecar, secondsAfterMains: undefined })) })}` : sortBracketLists(message);
}

/**
 * Restarts beyond this many are a container the kubelet restarts again and again (each run fails):
 * its state and count are only a snapshot of the moment the pod was read, so the table says no more.
 */
const RESTART_LOOP = 3;

/** The events a sidecar terminator records: Kruise's controller and ours share the Normal reason. */
function isTerminatorEvent(event: CoreV1Event): boolean {
  return event.reason === 'SidecarTerminator' || event.reason === 'SidecarTerminationFailed';
}

/** What a CRR says, without what the API server adds (uid, resourceVersion, times, status). */
function crrShape(crr: Record<string, unknown>): unknown {
  const metadata = crr.metadata as { name: string; labels?: unknown; annotations?: unknown; ownerReferences?: unknown };
  const spec = crr.spec as { containers?: Array<{ name: string }> };
  return {
    name: metadata.name,
    ...(metadata.labels ? { labels: metadata.labels } : {}),
    ownerReferences: metadata.ownerReferences,
    spec: { ...spec, containers: [...(spec.containers ?? [])].sort((a, b) => a.name.localeCompare(b.name)) },
  };
}

/** Go's `%v` of a set is in random order: `[sql proxy]` becomes `[proxy sql]`. */
function sortBracketLists(text: string): string {
  return text.replace(/\[([^\]]*)\]/g, (_, list: string) => `[${list.split(' ').sort().join(' ')}]`);
}

function render(scenarios: Scenario[], observed: Record<string, Record<Implementation, Observation>>): { markdown: string; unexplained: string[] } {
  const unexplained: string[] = [];
  const cell = (text: string) => text.replaceAll('|', '\\|');
  const lines = [
    '# Behaviour parity with OpenKruise',
    '',
    `Generated by \`node bench/parity/run.ts\` (${new Date().toISOString().slice(0, 10)}): each Job below ran once under OpenKruise ${kruiseVersion()}'s own SidecarTerminator controller (\`bench/kruise/main.go\` around its \`pkg/controller/sidecarterminator\`, built by \`scripts/build-kruise-peer.sh\`) and once under sidecar-terminator (\`serve\`: webhook and watcher, \`--kill-mechanism crr\`), on the same real control plane, with the kubelet simulator of \`test/support\` playing kubelet and kruise-daemon. Where the two differ, the last column says why; docs/migrating-from-openkruise.md lists the same.`,
    '',
    `| Job | aspect | OpenKruise ${kruiseVersion()} | sidecar-terminator | why they differ |`,
    '| --- | --- | --- | --- | --- |',
  ];
  const summary: string[] = [];
  for (const scenario of scenarios) {
    const pair = observed[scenario.id]!;
    let first = true;
    const differing: Aspect[] = [];
    for (const aspect of Object.keys(ASPECTS) as Aspect[]) {
      const kruise = pair.kruise[aspect];
      const addon = pair.addon[aspect];
      const same = kruise === addon;
      const why = same ? '' : scenario.difference?.aspects.includes(aspect) ? scenario.difference.why : EVERY_JOB[aspect]?.applies(kruise, addon) ? EVERY_JOB[aspect].why : undefined;
      if (!same) {
        differing.push(aspect);
        if (!why) unexplained.push(`${scenario.id}: ${aspect}: Kruise "${kruise}", sidecar-terminator "${addon}"`);
      }
      lines.push(`| ${first ? `\`${scenario.id}\`: ${cell(scenario.title)}` : ''} | ${ASPECTS[aspect]} | ${cell(kruise)} | ${same ? 'the same' : cell(addon)} | ${same ? '' : cell(why ?? '**unexplained**')} |`);
      first = false;
    }
    summary.push(`| \`${scenario.id}\` | ${cell(pair.kruise.job)} | ${cell(pair.addon.job)} | ${differing.length === 0 ? 'none' : differing.map((a) => ASPECTS[a]).join(', ')} |`);
  }
  const head = [
    lines.slice(0, 3).join('\n'),
    '',
    '## Summary',
    '',
    `| Job | OpenKruise ${kruiseVersion()} | sidecar-terminator | aspects that differ |`,
    '| --- | --- | --- | --- |',
    ...summary,
    '',
    '## Every aspect',
    '',
  ].join('\n');
  return { markdown: `${head}\n${lines.slice(4).join('\n')}\n`, unexplained };
}

/** `Normal SidecarTerminator: message / ...` without the messages. */
function typesAndReasons(events: string): string {
  return events.split(' / ').map((event) => event.split(':')[0]).join(' / ');
}

await main();
