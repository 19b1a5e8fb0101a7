// A robustness run: Jobs at a steady rate while faults are injected one after another, then a
// ledger of what the cluster recorded, checked against the rules the docs promise
// (bench/robustness/ledger.ts). Not part of `make test`; test/e2e/robustness-smoke.test.ts runs
// its --smoke.
//
//   node bench/robustness/run.ts [--seed N] [--duration 1800] [--rate 1] [--real-share 0.1]
//        [--gap 15-35] [--sweep-interval 5m] [--smoke | --quick] [--out bench/results]
//   node bench/robustness/run.ts --recheck bench/results/robustness-SEED-record.json
//
// The cluster: a control plane (kube-apiserver with an audit log of the add-on's requests and of
// every pod creation), one real node (containerd, runc, kubelet), the kubelet simulator's normal
// and virtual-kubelet nodes, and the add-on (bench/robustness/addon.ts: two webhook replicas behind
// a Service, two watcher replicas electing a leader, kill mechanism auto, the chart's failure
// policy Ignore). Jobs (bench/robustness/traffic.ts) go to the simulator and, --real-share of them,
// to the real node, applied with kubectl every few seconds. Faults (bench/robustness/faults.ts)
// start after a short warm-up, one at a time, --gap seconds apart; --smoke runs each kind once
// instead, in a seeded order, with a short gap. The seed is printed and in the report; the same
// seed gives the same Jobs and the same schedule (not the same timing: the machine decides that).
//
// At the end the run stops creating Jobs and faults, waits until every Job finished or the bound
// passed (the last fault healed, or the last Job created, plus the watcher's sweep interval and two
// minutes), lists every Job, pod and event of its namespaces, reads the audit log and checks the
// ledger. Writes bench/results/robustness-SEED.md and .json, and what the cluster recorded in
// robustness-SEED-record.json (for --recheck); exits 1 on any violation.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BatchV1Api, CoreV1Api, type CoreV1Event, type V1Job, type V1Pod } from '@kubernetes/client-node';
import { SERVE_FLAGS } from '../../src/config.ts';
import { parseDuration } from '../../src/duration.ts';
import { auditEvents, auditPolicyFlags } from '../../test/support/audit.ts';
import { apiFeatures, kubernetesVersion, startControlPlane } from '../../test/support/control-plane.ts';
import { KubeletSimulator } from '../../test/support/kubelet-simulator.ts';
import { startRealNode } from '../../test/support/real-node.ts';
import { waitForWebhooksInEffect } from '../../test/support/stack.ts';
import { waitFor } from '../../test/support/wait.ts';
import { median, parseArgs, seededRandom, table } from '../lib/stats.ts';
import { ADDON_GROUP, AddOn, WEBHOOK_CONFIG } from './addon.ts';
import { FAULTS, injectFault, pickFault, type FaultTarget, type InjectedFault } from './faults.ts';
import { auditRules, checkLedger, lateAdmissions, RULES, type Expectation, type Recorded, type Violation } from './ledger.ts';
import { jobKinds, jobManifest, type JobKind } from './traffic.ts';

const args = parseArgs(process.argv.slice(2));
const recheck = args.get('recheck');
if (recheck) {
  // A recorded run checked again: its violations by rule, and exit 1 if any.
  const found = checkLedger(JSON.parse(readFileSync(recheck, 'utf8')) as Recorded);
  for (const violation of found) process.stdout.write(`${violation.rule} ${violation.object}: ${violation.detail}\n`);
  process.stdout.write(`${found.length} violations\n`);
  process.exit(found.length === 0 ? 0 : 1);
}
// --quick, as every bench script takes it, is the smoke.
const smoke = args.has('smoke') || args.has('quick');
const seed = Number(args.get('seed') ?? Math.floor(Math.random() * 2 ** 31));
const durationS = Number(args.get('duration') ?? (smoke ? 0 : 1800));
const rate = Number(args.get('rate') ?? (smoke ? 0.5 : 1));
const realShare = Number(args.get('real-share') ?? 0.1);
const [gapMin, gapMax] = (args.get('gap') ?? (smoke ? '3-6' : '15-35')).split('-').map(Number) as [number, number];
const outDir = resolve(args.get('out') ?? join(import.meta.dirname, '../results'));
const APPLY_EVERY_MS = 5000;
/** A Job the API server refuses this many times in a row is given up (a harness error). */
const APPLY_ATTEMPTS = 24;
const WARM_UP_MS = 20_000;
// The chart's sweep interval; the smoke's is shorter, so that a pod admitted without the webhook does not hold it for minutes.
const sweepInterval = args.get('sweep-interval') ?? (smoke ? '30s' : `${SERVE_FLAGS.sweepInterval.default / 1000}s`);
const BOUND_MS = parseDuration(sweepInterval)! + 120_000;
const command = `node bench/robustness/run.ts ${process.argv.slice(2).join(' ')}`.trim();
const started = Date.now();
const log = (line: string) => process.stdout.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(5)} s] ${line}\n`);
log(`seed ${seed}; ${smoke ? 'smoke: each fault once' : `${durationS} s`}, ${rate} Jobs a second, ${realShare * 100}% on the real node; load ${loadavg()[0]!.toFixed(2)}`);

// Two streams, so that the Jobs and the faults each replay whatever the other drew meanwhile.
const trafficDraw = seededRandom(seed);
const faultDraw = seededRandom(seed ^ 0x9e3779b9);
const dir = mkdtempSync(join(tmpdir(), 'st-robustness-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

// The audit log: every request of the add-on's users (their bodies say what each patch changed),
// and every creation of a pod, Job or CronJob (its annotations say when the API server admitted
// it without a webhook's answer): the ledger's auditRules.
const audited = auditPolicyFlags(dir, auditRules(ADDON_GROUP));
const cp = await startControlPlane({ scheduler: true, apiServerArgs: audited.apiServerArgs });
const teardown: Array<() => Promise<unknown>> = [() => cp.stop()];
async function tearDown(): Promise<void> {
  for (const step of teardown.reverse()) await step().catch((error: unknown) => log(`teardown: ${String(error)}`));
}

const node = await startRealNode(cp, { images: ['test-container'] });
teardown.push(() => node.stop());
const [addonNamespace, simNamespace, realNamespace] = [await cp.createNamespace('st-system'), await cp.createNamespace('rb-sim'), await cp.createNamespace('rb-real')];
// The simulator's watches retry through every API server fault: those lines are left out.
const sim = new KubeletSimulator(cp.kubeConfig, { namespaces: [simNamespace], restartDelayMs: 200, log: (line) => /; retrying$/.test(line) || log(`simulator: ${line}`) });
await sim.start();
teardown.push(() => sim.stop());
const addon = await AddOn.start(cp, addonNamespace, dir, { sweepInterval });
teardown.push(() => addon.stop());
await waitForWebhooksInEffect(cp, simNamespace);
log(`cluster ready: ${node.name}, ${sim.normalNodes.join(', ')}, ${sim.virtualNodes.join(', ')}; add-on ${addon.users.join(', ')}`);

const kinds = jobKinds({ sim: sim.normalNodes[0]!, virtual: sim.virtualNodes[0]!, real: node.name }, apiFeatures(await kubernetesVersion(cp.binDir)).containerRestartRules);
const target: FaultTarget = { cp, node, addon, kruise: undefined, kruiseDaemon: false, log };
teardown.push(async () => target.kruise?.stop());

// ---- traffic ----
const expectations: Expectation[] = [];
const applyErrors: Array<{ at: number; message: string }> = [];
let lastCreatedAt = 0;
let trafficOn = true;
/** What kept the run from doing what it meant to: a fault that did not heal, a Job the API server kept refusing. */
const harnessErrors: string[] = [];

function pick(place: JobKind['place']): JobKind {
  const ofPlace = kinds.filter((kind) => kind.place === place);
  let at = trafficDraw() * ofPlace.reduce((sum, kind) => sum + kind.weight, 0);
  return ofPlace.find((kind) => (at -= kind.weight) < 0) ?? ofPlace.at(-1)!;
}

interface PendingJob {
  expectation: Expectation;
  manifest: string;
  refusals: number;
}

/** Applies the pending Jobs of a namespace, all at once, or one by one when the API server refuses the lot; returns those still pending. */
async function applyJobs(namespace: string, jobs: PendingJob[]): Promise<PendingJob[]> {
  const tryApply = async (batch: PendingJob[]) => (await cp.kubectl(['apply', '-f', '-'], { namespace, input: batch.map((job) => job.manifest).join('\n---\n') }));
  const all = await tryApply(jobs);
  if (all.code === 0) {
    created(jobs);
    return [];
  }
  applyErrors.push({ at: Date.now(), message: all.stderr.trim().split('\n').at(-1) ?? '' });
  const left: PendingJob[] = [];
  for (const job of jobs) {
    const one = jobs.length === 1 ? all : await tryApply([job]);
    if (one.code === 0) created([job]);
    else if (++job.refusals < APPLY_ATTEMPTS) left.push(job);
    else harnessErrors.push(`${namespace}/${job.expectation.name}: refused ${APPLY_ATTEMPTS} times: ${one.stderr.trim()}`);
  }
  return left;
}

function created(jobs: PendingJob[]): void {
  expectations.push(...jobs.map((job) => job.expectation));
  lastCreatedAt = Date.now();
}

async function traffic(): Promise<void> {
  let owed = 0;
  let serial = 0;
  const pending = new Map<string, PendingJob[]>([[simNamespace, []], [realNamespace, []]]);
  // Owed by the time passed, not by the loop's turns: a slow apply does not lower the rate.
  let last = Date.now();
  while (trafficOn) {
    const now = Date.now();
    owed += (rate * (now - last)) / 1000;
    last = now;
    for (; owed >= 1; owed--) {
      const kind = pick(trafficDraw() < realShare ? 'real' : 'sim');
      const namespace = kind.place === 'real' ? realNamespace : simNamespace;
      const name = `${kind.name}-${++serial}`;
      pending.get(namespace)!.push({ expectation: { namespace, name, outcome: kind.outcome, kind: kind.name }, manifest: jobManifest(kind, name, trafficDraw()), refusals: 0 });
    }
    await Promise.all([...pending].map(async ([namespace, jobs]) => {
      if (jobs.length === 0) return;
      try {
        pending.set(namespace, await applyJobs(namespace, jobs));
      } catch (error) {
        // kubectl could not be run at all: the Jobs stay pending.
        applyErrors.push({ at: Date.now(), message: (error as Error).message });
      }
    }));
    await sleep(APPLY_EVERY_MS);
  }
}

// ---- faults ----
const faults: InjectedFault[] = [];
let faultsOn = true;

async function faultSchedule(): Promise<void> {
  await sleep(WARM_UP_MS);
  // The smoke: every kind once, in a seeded order (each Kruise fault where it can run: install first).
  const queue = smoke ? [...FAULTS].sort(() => faultDraw() - 0.5).sort((a, b) => Number(a.kind === 'kruise-uninstall') - Number(b.kind === 'kruise-uninstall')) : [];
  const pause = () => sleep(Math.round((gapMin + (gapMax - gapMin) * faultDraw()) * 1000));
  while (faultsOn && (!smoke || queue.length > 0)) {
    const fault = smoke ? queue.splice(queue.findIndex((each) => each.possible?.(target) ?? true), 1)[0]! : pickFault(target, faultDraw);
    log(`fault ${faults.length + 1}: ${fault.kind}`);
    const window = await injectFault(fault, target, faultDraw);
    faults.push(window);
    if (window.error === undefined) log(`  healed after ${window.healedAt - window.startedAt} ms: ${window.what}`);
    else {
      harnessErrors.push(`${fault.kind}: ${window.error}`);
      log(`  ${fault.kind} did not heal: ${window.error}`);
    }
    await pause();
    if (!smoke && Date.now() - trafficStarted > durationS * 1000) break;
  }
}

const core = cp.kubeConfig.makeApiClient(CoreV1Api);
const batch = cp.kubeConfig.makeApiClient(BatchV1Api);
const finished = (job: V1Job) => job.status?.conditions?.some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True') ?? false;

const progress = setInterval(() => {
  void batch.listNamespacedJob({ namespace: simNamespace }).then(async (simJobs) => {
    const realJobs = await batch.listNamespacedJob({ namespace: realNamespace });
    const all = [...simJobs.items, ...realJobs.items];
    log(`${expectations.length} Jobs created, ${all.filter(finished).length} finished; ${faults.length} faults; load ${loadavg()[0]!.toFixed(2)}`);
  }).catch(() => log('progress: the API server did not answer'));
}, 60_000);

const trafficStarted = Date.now();
const trafficDone = traffic();
await faultSchedule();
faultsOn = false;
if (!smoke) {
  while (Date.now() - trafficStarted < durationS * 1000) await sleep(1000);
}
// The smoke keeps its traffic a little beyond the last fault, so Jobs start after it too.
if (smoke) await sleep(15_000);
trafficOn = false;
await trafficDone;
clearInterval(progress);

const lastHealedAt = Math.max(0, ...faults.map((fault) => fault.healedAt));
const finishBy = Math.max(lastHealedAt, lastCreatedAt) + BOUND_MS;
log(`traffic stopped: ${expectations.length} Jobs; waiting for them to finish (at the latest ${((finishBy - Date.now()) / 1000).toFixed(0)} s from now)`);
const listAll = async <T>(list: (namespace: string) => Promise<{ items: T[] }>): Promise<T[]> => (await Promise.all([simNamespace, realNamespace].map(list))).flatMap((each) => each.items);
for (;;) {
  const jobs = await listAll((namespace) => batch.listNamespacedJob({ namespace })).catch(() => undefined);
  const open = jobs?.filter((job) => !finished(job)).length;
  if (open === 0 || Date.now() > finishBy) break;
  await sleep(5000);
}

// ---- the ledger ----
const [jobs, pods, events] = await waitFor('the final lists', () => Promise.all([
  listAll<V1Job>((namespace) => batch.listNamespacedJob({ namespace })),
  listAll<V1Pod>((namespace) => core.listNamespacedPod({ namespace })),
  listAll<CoreV1Event>((namespace) => core.listNamespacedEvent({ namespace })),
]), { timeoutMs: 120_000, intervalMs: 2000 });
harnessErrors.push(...addon.crashes.map((crash) => `add-on replica crashed: ${crash}`));
const audit = auditEvents(readFileSync(audited.logPath, 'utf8'));
const recorded: Recorded = {
  expectations, jobs, pods, events, audit,
  addonUsers: addon.users, addonNamespace, webhookConfigNames: [WEBHOOK_CONFIG], faults, finishBy,
};
// Kept beside the report: `--recheck FILE` checks it again, with the ledger as it is then.
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, `robustness-${seed}${smoke ? '-smoke' : ''}-record.json`), JSON.stringify(recorded));
const violations: Violation[] = checkLedger(recorded);
const late = lateAdmissions(recorded);
// Not evidence for the ledger (the add-on's own side of a failed call is not recorded), but why
// each call failed, as the API server logged it: EOF, a reset, a timeout.
const failingOpen = readFileSync(join(cp.dir, 'kube-apiserver.log'), 'utf8').split('\n').filter((line) => line.includes('failing open'));
const endedAt = Date.now();
await tearDown();

// ---- the report ----
const byKind = new Map<string, { created: number; complete: number; failed: number; expected: string }>();
const jobByKey = new Map(jobs.map((job) => [`${job.metadata?.namespace}/${job.metadata?.name}`, job]));
for (const expectation of expectations) {
  const row = byKind.get(expectation.kind) ?? { created: 0, complete: 0, failed: 0, expected: expectation.outcome };
  row.created++;
  const conditions = jobByKey.get(`${expectation.namespace}/${expectation.name}`)?.status?.conditions ?? [];
  if (conditions.some((c) => c.type === 'Complete' && c.status === 'True')) row.complete++;
  if (conditions.some((c) => c.type === 'Failed' && c.status === 'True')) row.failed++;
  byKind.set(expectation.kind, row);
}
const faultKinds = [...new Set(faults.map((fault) => fault.kind))].sort();
const healMs = (kind: string) => faults.filter((fault) => fault.kind === kind).map((fault) => fault.healedAt - fault.startedAt);
const rules = Object.keys(RULES) as Array<keyof typeof RULES>;
const report = [
  `# Robustness run, seed ${seed}`,
  '',
  `\`${command}\`: ${new Date(started).toISOString()}, ${((endedAt - started) / 60_000).toFixed(1)} minutes (traffic and faults ${smoke ? 'until each fault ran once' : `${durationS} s`}); load average at the end ${loadavg().map((l) => l.toFixed(2)).join(' ')}. Replay with \`--seed ${seed}\`.`,
  '',
  `**${expectations.length} Jobs, ${faults.length} faults, ${violations.length} violations${harnessErrors.length ? `, ${harnessErrors.length} faults that did not heal` : ''}.**`,
  '',
  '## Jobs',
  '',
  table(['kind', 'created', 'Complete', 'Failed', 'expected'], [...byKind].sort().map(([kind, row]) => [kind, String(row.created), String(row.complete), String(row.failed), row.expected])),
  '',
  `kubectl apply refused ${applyErrors.length} times (applied again 5 s later)${applyErrors.length ? `; the last: ${applyErrors.at(-1)!.message}` : ''}.`,
  '',
  '## Faults',
  '',
  table(['fault', 'times', 'healed after (median, max)'], faultKinds.map((kind) => [kind, String(healMs(kind).length), `${(median(healMs(kind)) / 1000).toFixed(1)} s, ${(Math.max(...healMs(kind)) / 1000).toFixed(1)} s`])),
  ...(harnessErrors.length ? ['', 'Did not heal:', '', ...harnessErrors.map((error) => `- ${error}`)] : []),
  '',
  `Webhook calls that failed outside the faults that excuse them and outside any rolling restart or rotation (late answers on a loaded machine; not violations): ${late.length}${late.length ? `: ${late.slice(0, 5).map((each) => `${each.object} (${each.detail})`).join('; ')}` : ''}.`,
  '',
  `The API server's log of webhook calls that failed open: ${failingOpen.length} lines${failingOpen.length ? `; the first five:\n\n${failingOpen.slice(0, 5).map((line) => `    ${line.slice(0, 600)}`).join('\n')}` : ''}.`,
  '',
  '## Violations, by rule',
  '',
  table(['rule', 'violations', 'objects (the first five)'], rules.map((rule) => {
    const found = violations.filter((violation) => violation.rule === rule);
    return [`${rule}: ${RULES[rule]}`, String(found.length), found.slice(0, 5).map((violation) => `${violation.object} (${violation.detail})`).join('; ')];
  })),
  '',
].join('\n');
mkdirSync(outDir, { recursive: true });
const base = join(outDir, `robustness-${seed}${smoke ? '-smoke' : ''}`);
writeFileSync(`${base}.md`, report);
writeFileSync(`${base}.json`, JSON.stringify({ seed, command, smoke, startedAt: started, endedAt, jobs: expectations.length, byKind: Object.fromEntries(byKind), faults, harnessErrors, applyErrors, violations, lateAdmissions: late, failingOpen }, null, 2));
process.stdout.write(`\n${report}\nwritten to ${base}.md and .json\n`);
process.exit(violations.length === 0 && harnessErrors.length === 0 ? 0 : 1);
