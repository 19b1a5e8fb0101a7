// Watcher scale: reaction latency to bursts of finishing Jobs, API requests and memory as the
// cluster grows, for the slim watcher (`serve --no-webhook`, a watch of the pods the webhook
// labelled), OpenKruise's own SidecarTerminator controller (bench/kruise/main.go, built by
// scripts/build-kruise-peer.sh: Kruise's code, Kruise's manager options), and a watcher written
// here in Kruise's style (bench/watcher/all-pods-watcher.ts: our code, caching every pod).
//
//   node bench/watcher/run.ts [--quick] [--managed 2000] [--unmanaged 10000,20000]
//                             [--bursts 100,500,2000] [--skip-all-pods] [--skip-kruise] [--label NAME]
//                             [--root DIR] [--compare-root [NAME=]DIR[,NAME=DIR]] [--compare-args='ARGS']
//                             [--profile] [--keep-logs]
//
// Against a real control plane (test/support/control-plane.ts) with OpenKruise's CRR CRD, so
// every watcher stops sidecars by ContainerRecreateRequest; the kubelet simulator, in its own
// process, runs the managed pods (and executes the CRRs as kruise-daemon would). The API server
// counts each watcher's requests in its audit log (bench/lib/audit.ts): each runs as a user of
// its own. Steps:
//  1. `--managed` Job pods with a sidecar are created, labelled managed, and run.
//  2. Both watchers start, each in its own process; their RSS is read at 0 unmanaged pods,
//     then after each step of `--unmanaged` pods (created bound and Running by this driver).
//  3. The comparison watcher stops. Bursts: before each, the managed pods are topped up to
//     `--managed` running; then N of them have their main container exit at once (the
//     simulator's exitContainer writes the status). Latency per pod = the moment this
//     driver's watch sees the CRR for the pod minus the moment it sees the pod's main container
//     terminated: both ends through the same kind of watch, in the same process, so the
//     watch delivery delay cancels out (up to its jitter). Then the finished pods are deleted.
//  4. The slim watcher stops; a fresh comparison watcher starts (listing every pod) and gets
//     the same bursts.
// --root runs the slim watcher from another checkout; --compare-root adds slim watchers from
// others (e.g. an earlier commit, extracted by bench/run.ts), each measured the same way after the first
// (--compare-args='--concurrency 64': with these extra serve flags); --profile
// runs the slim watchers under --cpu-prof and summarises where their CPU went.
// CPU seconds and peak RSS come from /proc/PID/stat and /proc/PID/status (VmHWM) of each
// watcher's process, the live heap from a full collection in the process (a Node heap, or
// Kruise's Go heap). Writes bench/results/watcher[-LABEL].json and .md, prints the markdown.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, copyFileSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, CustomObjectsApi, PatchStrategy, Watch, setHeaderOptions, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '../../test/support/control-plane.ts';
import { CRR } from '../../test/support/kubelet-simulator.ts';
import { httpStatus, PortLease } from '../../test/support/net.ts';
import { installCrrCrd } from '../../test/support/stack.ts';
import { waitFor } from '../../test/support/wait.ts';
import { profileTables, summarise as summariseProfile, type CpuProfile } from '../lib/cpuprofile.ts';
import { AuditLog, MEASURED_GROUP, auditFlags, total } from '../lib/audit.ts';
import { addOnArgs, probed, roleEnv, type AfterGc } from '../lib/addon.ts';
import { kruiseVersion, startKruisePeer } from '../lib/kruise-peer.ts';
import { WATCHER_RULES } from './profile-rules.ts';
import { pooledKubeConfig } from '../lib/kube.ts';
import { cpuSeconds, cpuSecondsOf, findPids, machineLoad, memory } from '../lib/proc.ts';
import { fmt, max, median, numberList, parseArgs, quantile, table } from '../lib/stats.ts';
import { managedPod, runningStatus, unmanagedPod } from './pods.ts';

const repoRoot = resolve(import.meta.dirname, '../..');
const MANAGED_NS = 'bench-managed';
const UNMANAGED_NAMESPACES = 10;
const strategicMerge = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

const log = (message: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${message}\n`);

async function pool<T>(items: readonly T[], limit: number, work: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const index = next++;
        await work(items[index]!, index);
      }
    }),
  );
}

/** What the driver's watches saw of one managed pod (performance.now() milliseconds). */
interface Tracked {
  phase?: string;
  mainRunning: boolean;
  sidecarRunning: boolean;
  finishedAt?: number;
  actionAt?: number;
  deleted: boolean;
}

/**
 * List, then watch from the list's resourceVersion; on the end of a watch, watch again from the
 * last resourceVersion seen; on 410 Gone, list again. Never gives up until stopped.
 */
class Observer<T extends { metadata?: { resourceVersion?: string } }> {
  private abort: AbortController | undefined;
  private resourceVersion: string | undefined;
  private stopped = false;
  private readonly kubeConfig: KubeConfig;
  private readonly path: string;
  private readonly list: () => Promise<{ items: T[]; metadata?: { resourceVersion?: string } }>;
  private readonly onEvent: (type: string, object: T) => void;

  constructor(kubeConfig: KubeConfig, path: string, list: Observer<T>['list'], onEvent: Observer<T>['onEvent']) {
    this.kubeConfig = kubeConfig;
    this.path = path;
    this.list = list;
    this.onEvent = onEvent;
  }

  async start(): Promise<void> {
    const listed = await this.list();
    for (const item of listed.items) this.onEvent('ADDED', item);
    this.resourceVersion = listed.metadata?.resourceVersion;
    await this.watch();
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
  }

  private async watch(): Promise<void> {
    if (this.stopped) return;
    let gone = false;
    const again = () => {
      if (this.stopped) return;
      const next = gone ? () => this.start() : () => this.watch();
      setTimeout(() => void next().catch((error: unknown) => log(`observer ${this.path}: ${String(error)}`)), gone ? 0 : 50);
    };
    try {
      this.abort = await new Watch(this.kubeConfig).watch(
        this.path,
        { resourceVersion: this.resourceVersion, allowWatchBookmarks: true, timeoutSeconds: 600 },
        (type: string, object: T & { code?: number }) => {
          if (type === 'ERROR') {
            gone ||= object.code === 410;
            return;
          }
          if (object.metadata?.resourceVersion) this.resourceVersion = object.metadata.resourceVersion;
          if (type !== 'BOOKMARK') this.onEvent(type, object);
        },
        () => again(),
      );
    } catch (error) {
      log(`observer ${this.path}: ${String(error)}; retrying`);
      again();
    }
  }
}

interface Proc {
  name: string;
  pid: number;
  child: ChildProcess;
  stop(): Promise<void>;
}

interface Watcher extends Proc {
  /** The user it runs as: the audit log counts its requests under this name. */
  user: string;
  /** Pods in its cache (the all-pods watcher reports it; the slim one's cache is the managed pods). */
  cached?(): number;
  afterGc(): Promise<AfterGc>;
}

/** A kubeconfig of its own for a measured process: a user in MEASURED_GROUP, with every permission. */
async function identity(cp: ControlPlane, name: string): Promise<{ user: string; kubeconfig: string }> {
  const user = `bench:${name}`;
  return { user, kubeconfig: await cp.clientKubeconfig(user, ['system:masters', MEASURED_GROUP]) };
}

/** A node process; its stderr (and its stdout, unless `pipeStdout`) go to `logFile`. */
function spawnProcess(name: string, args: string[], logFile: string, pipeStdout = true, env: Record<string, string> = {}): Proc {
  const out = openSync(logFile, 'a');
  // setpriv: the child dies with the driver, whatever happens to it.
  const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', process.execPath, ...args], {
    stdio: ['pipe', pipeStdout ? 'pipe' : out, out],
    env: { ...process.env, KUBECONFIG: '', ...env },
  });
  closeSync(out);
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  return {
    name,
    // setpriv execs node in place: the same pid.
    pid: child.pid!,
    child,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** `serve --no-webhook`: the slim watcher as an operator runs it (the image's build and Node flags, the chart's environment, info logs, default concurrency, sweeper on). */
async function startSlimWatcher(cp: ControlPlane, dir: string, name: string, root: string, profileDir?: string, extraArgs: string[] = []): Promise<Watcher> {
  const lease = new PortLease();
  const port = await lease.take();
  const probe = probed(dir, name);
  const { user, kubeconfig } = await identity(cp, name);
  const proc = spawnProcess(
    name,
    [...probe.nodeArgs, ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []), ...addOnArgs(root), 'serve', '--no-webhook', '--kubeconfig', kubeconfig, '--kill-mechanism', 'crr', '--probe-address', `127.0.0.1:${port}`, ...extraArgs],
    join(dir, `${name}-watcher.log`),
    false,
    { ...roleEnv('watcher', root), ...probe.env },
  );
  proc.child.once('exit', () => lease.release());
  await waitFor('the slim watcher to be ready', async () => (await httpStatus(`http://127.0.0.1:${port}/readyz`)) === 200, { timeoutMs: 60_000, intervalMs: 200 });
  return { ...proc, user, afterGc: () => probe.afterGc(proc.pid) };
}

interface WatcherSpec {
  name: string;
  start(): Promise<Watcher>;
}

async function startAllPodsWatcher(cp: ControlPlane, dir: string): Promise<Watcher> {
  const probe = probed(dir, 'all-pods');
  const { user, kubeconfig } = await identity(cp, 'all-pods');
  const proc = spawnProcess(
    'all-pods',
    [...probe.nodeArgs, join(import.meta.dirname, 'all-pods-watcher.ts'), '--kubeconfig', kubeconfig, '--act-namespace', MANAGED_NS],
    join(dir, 'all-pods-watcher.log'),
    true,
    probe.env,
  );
  let state = { cached: 0, synced: false };
  createInterface({ input: proc.child.stdout! }).on('line', (line) => {
    try {
      state = JSON.parse(line) as typeof state;
    } catch {
      // not a status line
    }
  });
  await waitFor('the all-pods watcher to list the pods', () => state.synced, { timeoutMs: 300_000, intervalMs: 200 });
  return { ...proc, user, cached: () => state.cached, afterGc: () => probe.afterGc(proc.pid) };
}

/** OpenKruise's controller, every namespace cached as kruise-manager caches them; ready once its caches are synced. */
async function startKruise(cp: ControlPlane, dir: string): Promise<Watcher> {
  const probe = probed(dir, 'kruise');
  const { user, kubeconfig } = await identity(cp, 'kruise');
  const peer = await startKruisePeer({ kubeconfig, logFile: join(dir, 'kruise.log'), gcProbeOut: probe.file });
  return { name: 'kruise', pid: peer.pid, child: peer.child, stop: () => peer.stop(), user, afterGc: () => probe.afterGc(peer.pid) };
}

class Simulator {
  private readonly proc: Proc;
  private readonly lines: Interface;
  private nextId = 1;
  private readonly waiting = new Map<number, (failed: string[]) => void>();

  private constructor(proc: Proc) {
    this.proc = proc;
    this.lines = createInterface({ input: proc.child.stdout! });
    this.lines.on('line', (line) => {
      const message = JSON.parse(line) as { id?: number; failed?: string[] };
      if (message.id !== undefined) this.waiting.get(message.id)?.(message.failed ?? []);
    });
  }

  static async start(cp: ControlPlane, dir: string): Promise<Simulator> {
    const proc = spawnProcess('sim', [join(import.meta.dirname, 'sim-process.ts'), '--kubeconfig', cp.kubeconfigPath, '--namespaces', MANAGED_NS], join(dir, 'sim.log'));
    const lines = createInterface({ input: proc.child.stdout! });
    await new Promise<void>((resolveReady, reject) => {
      lines.once('line', () => resolveReady());
      proc.child.once('exit', () => reject(new Error(`the simulator exited; see ${dir}/sim.log`)));
    });
    lines.close();
    return new Simulator(proc);
  }

  get pid(): number {
    return this.proc.pid;
  }

  exit(pods: string[]): Promise<string[]> {
    const id = this.nextId++;
    this.proc.child.stdin!.write(`${JSON.stringify({ id, op: 'exit', namespace: MANAGED_NS, pods, container: 'main' })}\n`);
    return new Promise((resolveDone) => this.waiting.set(id, resolveDone));
  }

  stop(): Promise<void> {
    return this.proc.stop();
  }
}

interface MemoryPoint extends AfterGc {
  watcher: string;
  unmanaged: number;
  rssMiB: number;
  hwmMiB: number;
}

interface BurstResult {
  watcher: string;
  burst: number;
  p50: number;
  p99: number;
  max: number;
  missing: number;
  cpuSeconds: number;
  /** From the first main container seen finished to the last action seen. */
  wallSeconds: number;
  /** Each pod's latency, ms (bench/plots.ts draws their distribution). */
  latencies: number[];
  /** From the first main container seen finished to the last: how long the simulator took to write the burst. */
  spreadSeconds: number;
  /** API requests the watcher made per pod of the burst, by verb and resource, as the API server logged them. */
  requestsPerPod: Record<string, number>;
  /** CPU seconds of the rest of the system during the burst: kube-apiserver + etcd (+ kube-controller-manager), and the kubelet simulator. */
  controlPlaneCpuSeconds: number;
  simulatorCpuSeconds: number;
  rssMiB: number;
  hwmMiB: number;
  load: string;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const quick = args.has('quick');
  const managedCount = Number(args.get('managed') ?? (quick ? 200 : 2000));
  const unmanagedSteps = numberList(args.get('unmanaged') ?? (quick ? '1000,2000' : '10000,20000'));
  const bursts = numberList(args.get('bursts') ?? (quick ? '20,50,200' : '100,500,2000')).filter((n) => n <= managedCount);
  const skipAllPods = args.has('skip-all-pods');
  const skipKruise = args.has('skip-kruise');
  const root = resolve(args.get('root') ?? repoRoot);
  // --compare-root DIR or NAME=DIR[,NAME=DIR...]: more slim watchers, from other checkouts.
  const compareArgs = (args.get('compare-args') ?? '').split(' ').filter(Boolean);
  const variants = (args.get('compare-root') ?? '')
    .split(',')
    .filter(Boolean)
    .map((entry, index) => {
      const [name, dir] = entry.includes('=') ? (entry.split('=', 2) as [string, string]) : [index === 0 ? 'other' : `other-${index + 1}`, entry];
      return { name, root: resolve(dir) };
    });
  if (variants.length === 0 && compareArgs.length > 0) variants.push({ name: 'other', root });
  const label = args.get('label');
  const outDir = join(import.meta.dirname, '../results');
  mkdirSync(outDir, { recursive: true });
  const dir = mkdtempSync(join(tmpdir(), 'st-bench-watcher-'));
  const profileRoot = (name: string) => (args.has('profile') && name !== 'all-pods' ? join(dir, `profile-${name}`) : undefined);
  log(`watcher bench: ${managedCount} managed pods, unmanaged ${unmanagedSteps.join('/')}, bursts ${bursts.join('/')}; ${cpus().length} cores, load ${machineLoad()}; logs in ${dir}`);

  const audit = auditFlags(dir);
  const auditLog = new AuditLog(audit.logPath);
  const cp = await startControlPlane({ apiServerArgs: audit.apiServerArgs, log });
  const procs: Array<{ stop(): Promise<void> }> = [];
  const observers: Array<Observer<never>> = [];
  try {
    await installCrrCrd(cp);
    // The harness's requests share keep-alive connections (bench/lib/kube.ts).
    const kubeConfig = pooledKubeConfig(cp.kubeconfigPath);
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const custom = kubeConfig.makeApiClient(CustomObjectsApi);
    await cp.createNamespace(MANAGED_NS);
    for (let i = 0; i < UNMANAGED_NAMESPACES; i++) await cp.createNamespace(`bench-unmanaged-${i}`);
    const sim = await Simulator.start(cp, dir);
    procs.push(sim);
    // etcd, kube-apiserver and kube-controller-manager of this control plane: their arguments name its directory.
    const controlPlanePids = findPids((commandLine) => commandLine.includes(cp.dir) && /\/(etcd|kube-apiserver|kube-controller-manager) /.test(commandLine) && !commandLine.startsWith('setpriv'));

    // The driver's view of the managed namespace: pods and CRRs.
    const tracked = new Map<string, Tracked>();
    const track = (name: string) => {
      let entry = tracked.get(name);
      if (!entry) tracked.set(name, (entry = { mainRunning: false, sidecarRunning: false, deleted: false }));
      return entry;
    };
    const podObserver = new Observer<V1Pod>(
      kubeConfig,
      `/api/v1/namespaces/${MANAGED_NS}/pods`,
      () => core.listNamespacedPod({ namespace: MANAGED_NS }),
      (type, pod) => {
        const now = performance.now();
        const entry = track(pod.metadata!.name!);
        if (type === 'DELETED') {
          entry.deleted = true;
          return;
        }
        entry.phase = pod.status?.phase;
        const state = (name: string) => pod.status?.containerStatuses?.find((s) => s.name === name)?.state;
        entry.mainRunning = !!state('main')?.running;
        entry.sidecarRunning = !!state('proxy')?.running;
        if (state('main')?.terminated && entry.finishedAt === undefined) entry.finishedAt = now;
      },
    );
    const crrObserver = new Observer<{ metadata?: { resourceVersion?: string }; spec?: { podName?: string } }>(
      kubeConfig,
      `/apis/${CRR.group}/${CRR.version}/namespaces/${MANAGED_NS}/${CRR.plural}`,
      async () => (await custom.listNamespacedCustomObject({ ...CRR, namespace: MANAGED_NS })) as { items: [] },
      (type, crr) => {
        const now = performance.now();
        const name = crr.spec?.podName;
        if (type === 'ADDED' && name) {
          const entry = track(name);
          entry.actionAt ??= now;
        }
      },
    );
    await podObserver.start();
    await crrObserver.start();
    observers.push(podObserver as never, crrObserver as never);

    let seq = 0;
    const running = () => [...tracked.entries()].filter(([, t]) => !t.deleted && t.phase === 'Running' && t.mainRunning && t.sidecarRunning && t.finishedAt === undefined).map(([name]) => name);
    const topUp = async () => {
      const missing = managedCount - [...tracked.values()].filter((t) => !t.deleted && t.finishedAt === undefined).length;
      const names = Array.from({ length: Math.max(0, missing) }, () => `job-${++seq}`);
      const t0 = performance.now();
      await pool(names, 32, async (name) => {
        await core.createNamespacedPod({ namespace: MANAGED_NS, body: managedPod(name, seq) });
      });
      await waitFor(`${managedCount} managed pods running`, () => running().length >= managedCount, { timeoutMs: 30 * 60_000, intervalMs: 500 });
      if (names.length > 0) log(`${names.length} managed pods created and running in ${fmt((performance.now() - t0) / 1000)} s`);
    };
    await topUp();

    // The watchers: the slim one, optionally slim ones from other checkouts, Kruise's controller and the all-pods one.
    const specs: WatcherSpec[] = [
      { name: 'slim', start: () => startSlimWatcher(cp, dir, 'slim', root, profileRoot('slim')) },
      ...variants.map((variant) => ({
        name: variant.name,
        start: () => startSlimWatcher(cp, dir, variant.name, variant.root, profileRoot(variant.name), compareArgs),
      })),
      ...(skipKruise ? [] : [{ name: 'kruise', start: () => startKruise(cp, dir) }]),
      ...(skipAllPods ? [] : [{ name: 'all-pods', start: () => startAllPodsWatcher(cp, dir) }]),
    ];
    const live = new Map<string, Watcher>();
    const startWatcher = async (spec: WatcherSpec) => {
      const watcher = await spec.start();
      procs.push(watcher);
      live.set(spec.name, watcher);
      return watcher;
    };
    const stopWatcher = async (name: string) => {
      const watcher = live.get(name);
      live.delete(name);
      await watcher?.stop();
      if (watcher && profileRoot(name)) writeProfile(profileRoot(name)!, join(outDir, `profile-watcher-${name}${label ? `-${label}` : ''}.md`));
    };
    const settled = async (unmanaged: number) => {
      for (const watcher of live.values()) {
        if (watcher.cached) await waitFor(`${watcher.name} to cache every pod`, () => watcher.cached!() >= unmanaged + managedCount, { timeoutMs: 10 * 60_000, intervalMs: 500 });
      }
      await sleep(quick ? 3000 : 10_000); // the watchers' queues drain, allocation stops
    };

    // Memory as the cluster grows, every watcher alive (nothing finishes meanwhile, so none acts).
    for (const spec of specs) await startWatcher(spec);
    const memoryPoints: MemoryPoint[] = [];
    const podSizes: number[] = [];
    let unmanaged = 0;
    const measureMemory = async () => {
      await settled(unmanaged);
      // RSS as the kernel sees it first, then the live heap after a full GC (which disturbs RSS).
      const rss = [...live.values()].map((watcher) => ({ watcher, ...memory(watcher.pid) }));
      for (const { watcher, rssMiB, hwmMiB } of rss) {
        const point = { watcher: watcher.name, unmanaged, rssMiB, hwmMiB, ...(await watcher.afterGc()) };
        memoryPoints.push(point);
        log(`${watcher.name}: ${unmanaged} unmanaged pods: RSS ${fmt(point.rssMiB)} MiB, peak ${fmt(point.hwmMiB)} MiB; after a full GC: heap ${fmt(point.heapMiB)} MiB, RSS ${fmt(point.rssAfterGcMiB)} MiB`);
      }
    };
    await measureMemory();
    for (const step of unmanagedSteps) {
      const t0 = performance.now();
      const indexes = Array.from({ length: Math.max(0, step - unmanaged) }, (_, i) => unmanaged + i);
      await pool(indexes, 48, async (index) => {
        const namespace = `bench-unmanaged-${index % UNMANAGED_NAMESPACES}`;
        const body = unmanagedPod(`pod-${index}`, index);
        const created = await core.createNamespacedPod({ namespace, body });
        const running = await core.patchNamespacedPodStatus({ namespace, name: created.metadata!.name!, body: { status: runningStatus(created, index) } }, strategicMerge);
        if (index % 100 === 0) podSizes.push(JSON.stringify(running).length);
      });
      unmanaged = step;
      log(`${indexes.length} unmanaged pods created and Running in ${fmt((performance.now() - t0) / 1000)} s (load ${machineLoad()}); an unmanaged pod is about ${fmt(median(podSizes) / 1024, 1)} KiB of JSON`);
      await measureMemory();
    }

    // Bursts, one watcher at a time (two would race for the same pods).
    const burstResults: BurstResult[] = [];
    const peaks: Record<string, number> = {};
    const runBursts = async (watcher: Watcher) => {
      for (const burst of bursts) {
        await topUp();
        await sleep(quick ? 2000 : 5000);
        const chosen = running().slice(0, burst);
        const auditFrom = auditLog.mark();
        const cpu0 = cpuSeconds(watcher.pid);
        const cp0 = cpuSecondsOf(controlPlanePids);
        const sim0 = cpuSeconds(sim.pid);
        log(`${watcher.name}: burst of ${burst} (load ${machineLoad()})`);
        const failed = await sim.exit(chosen);
        if (failed.length > 0) log(`  ${failed.length} exits failed, e.g. ${failed[0]}`);
        const entries = chosen.map((name) => tracked.get(name)!);
        const deadline = Math.max(120_000, burst * 500);
        await waitFor(`burst of ${burst}: every action`, () => entries.every((t) => t.actionAt !== undefined), { timeoutMs: deadline, intervalMs: 200 }).catch((error: unknown) => log(String(error)));
        await waitFor(`burst of ${burst}: every pod finished`, () => entries.every((t) => t.phase === 'Succeeded'), { timeoutMs: deadline, intervalMs: 200 }).catch((error: unknown) => log(String(error)));
        const requests = await requestsWhenQuiet(auditLog, watcher.user, auditFrom);
        const cpu = cpuSeconds(watcher.pid) - cpu0;
        const controlPlaneCpuSeconds = cpuSecondsOf(controlPlanePids) - cp0;
        const simulatorCpuSeconds = cpuSeconds(sim.pid) - sim0;
        const requestsPerPod = Object.fromEntries(Object.entries(requests).map(([request, n]) => [request, n / burst]));
        const latencies = entries.filter((t) => t.actionAt !== undefined && t.finishedAt !== undefined).map((t) => t.actionAt! - t.finishedAt!);
        const finishes = entries.map((t) => t.finishedAt).filter((v) => v !== undefined);
        const first = Math.min(...finishes);
        const last = max(entries.map((t) => t.actionAt ?? Number.NaN).filter((v) => !Number.isNaN(v)));
        const result: BurstResult = {
          watcher: watcher.name,
          burst,
          p50: quantile(latencies, 0.5),
          p99: quantile(latencies, 0.99),
          max: max(latencies),
          missing: burst - latencies.length,
          cpuSeconds: cpu,
          wallSeconds: (last - first) / 1000,
          latencies,
          spreadSeconds: (Math.max(...finishes) - first) / 1000,
          requestsPerPod,
          controlPlaneCpuSeconds,
          simulatorCpuSeconds,
          ...memory(watcher.pid),
          load: machineLoad(),
        };
        burstResults.push(result);
        log(`  p50 ${fmt(result.p50)} ms, p99 ${fmt(result.p99)} ms, max ${fmt(result.max)} ms, ${result.missing} missing; CPU ${fmt(cpu)} s (control plane ${fmt(controlPlaneCpuSeconds)} s, simulator ${fmt(simulatorCpuSeconds)} s); requests per pod ${requestsText(result.requestsPerPod)}; finishes spread over ${fmt(result.spreadSeconds)} s, ${fmt(result.wallSeconds)} s from first finish to last action; RSS ${fmt(result.rssMiB)} MiB, peak ${fmt(result.hwmMiB)} MiB`);
        // Finished Jobs go away (a TTL controller would do it); the CRRs go with them (owner references).
        await pool(chosen, 32, async (name) => {
          await core.deleteNamespacedPod({ namespace: MANAGED_NS, name, gracePeriodSeconds: 0 }).catch(() => undefined);
        });
        await waitFor('finished pods deleted', () => entries.every((t) => t.deleted), { timeoutMs: 120_000, intervalMs: 200 });
      }
    };
    const fresh: Record<string, { rssMiB: number } & AfterGc> = {};
    for (const [index, spec] of specs.entries()) {
      // Only this watcher runs: the first keeps running from the growth phase, the others start afresh.
      for (const name of [...live.keys()]) if (name !== spec.name) await stopWatcher(name);
      let watcher = live.get(spec.name);
      if (!watcher) {
        await topUp();
        watcher = await startWatcher(spec);
        await settled(unmanaged);
        const rssMiB = memory(watcher.pid).rssMiB;
        fresh[spec.name] = { rssMiB, ...(await watcher.afterGc()) };
        log(`${spec.name} (fresh process): RSS ${fmt(rssMiB)} MiB with ${unmanaged} unmanaged pods; after a full GC: heap ${fmt(fresh[spec.name]!.heapMiB)} MiB`);
      } else if (index > 0) {
        throw new Error('only the first watcher survives the growth phase');
      }
      await runBursts(watcher);
      peaks[spec.name] = memory(watcher.pid).hwmMiB;
      await stopWatcher(spec.name);
    }

    const markdown = summarise(memoryPoints, burstResults, { peaks, fresh, managedCount, podKiB: median(podSizes) / 1024 });
    const suffix = label ? `-${label}` : '';
    writeFileSync(join(outDir, `watcher${suffix}.json`), JSON.stringify({ managedCount, unmanagedSteps, bursts, memoryPoints, burstResults, peaks, fresh }, null, 1));
    writeFileSync(join(outDir, `watcher${suffix}.md`), markdown);
    console.log(markdown);
  } finally {
    for (const observer of observers) observer.stop();
    for (const proc of procs.reverse()) await proc.stop().catch(() => undefined);
    await cp.stop();
    if (!args.has('keep-logs')) rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The requests `user` made since `from`, once they have stopped for 3 s (at most a minute): what a
 * watcher writes after the pods end (a label, an event sent late) counts too.
 */
async function requestsWhenQuiet(auditLog: AuditLog, user: string, from: number): Promise<Record<string, number>> {
  const deadline = Date.now() + 60_000;
  let requests = auditLog.count(user, from);
  let quietSince = Date.now();
  while (Date.now() - quietSince < 3000 && Date.now() < deadline) {
    await sleep(500);
    const now = auditLog.count(user, from);
    if (total(now) !== total(requests)) quietSince = Date.now();
    requests = now;
  }
  return requests;
}

/** `1.0 create events, 1.0 create containerrecreaterequests`: the requests per pod, most frequent first. */
function requestsText(perPod: Record<string, number>): string {
  return Object.entries(perPod)
    .filter(([, n]) => n >= 0.05)
    .sort(([, a], [, b]) => b - a)
    .map(([request, n]) => `${fmt(n, 2)} ${request}`)
    .join(', ');
}

function writeProfile(profileDir: string, out: string): void {
  // The newest profile (names carry the time): a watcher started twice wrote two.
  const file = readdirSync(profileDir).filter((name) => name.endsWith('.cpuprofile')).sort().pop();
  if (!file) {
    log(`no CPU profile in ${profileDir} (the watcher did not exit cleanly)`);
    return;
  }
  const summary = summariseProfile(JSON.parse(readFileSync(join(profileDir, file), 'utf8')) as CpuProfile, WATCHER_RULES);
  const markdown = `### slim watcher, whole run (${fmt(summary.busyMs / 1000, 1)} CPU s)\n\n${profileTables(summary, 20)}`;
  writeFileSync(out, markdown);
  copyFileSync(join(profileDir, file), out.replace(/\.md$/, '.cpuprofile'));
  rmSync(join(profileDir, file));
  log(`watcher profile: ${out}`);
}

function summarise(
  memoryPoints: MemoryPoint[],
  bursts: BurstResult[],
  extra: { peaks: Record<string, number>; fresh: Record<string, { rssMiB: number } & AfterGc>; managedCount: number; podKiB: number },
): string {
  const steps = [...new Set(memoryPoints.map((p) => p.unmanaged))];
  const watchers = [...new Set(memoryPoints.map((p) => p.watcher))];
  const value = (watcher: string, step: number, field: 'rssMiB' | 'heapMiB' | 'rssAfterGcMiB') =>
    memoryPoints.find((p) => p.watcher === watcher && p.unmanaged === step)?.[field] ?? Number.NaN;
  const names: Record<string, string> = {
    slim: 'sidecar-terminator (`serve --no-webhook`)',
    kruise: `OpenKruise ${kruiseVersion()} (its controller, Go)`,
    'all-pods': 'Kruise-style watcher (ours, caching every pod)',
  };
  for (const name of new Set([...memoryPoints.map((p) => p.watcher), ...bursts.map((b) => b.watcher)])) names[name] ??= `sidecar-terminator, ${name}`;
  const memoryTable = (field: 'rssMiB' | 'heapMiB' | 'rssAfterGcMiB') => {
    const rows = watchers.map((w) => [names[w] ?? w, ...steps.map((s) => fmt(value(w, s, field), 0))]);
    for (const other of ['kruise', 'all-pods']) {
      if (watchers.includes(other)) rows.push([`ratio sidecar-terminator / ${other}`, ...steps.map((s) => `${fmt(value('slim', s, field) / value(other, s, field), 2)}x`)]);
    }
    return table(['watcher', ...steps.map((s) => `${s.toLocaleString('en-US')} unmanaged`)], rows);
  };
  const out = [
    `Memory with ${extra.managedCount} managed pods running, by number of unmanaged pods in the cluster (an unmanaged pod: about ${fmt(extra.podKiB, 1)} KiB of JSON with its status and managedFields). Every watcher process was started before the first unmanaged pod. RSS (MiB), as the kernel sees it:\n`,
    memoryTable('rssMiB'),
    '',
    'Live heap (MiB) right after a full garbage collection (what the process holds, without the garbage RSS also carries; the V8 heap of the Node processes, the Go heap of Kruise\'s):\n',
    memoryTable('heapMiB'),
    '',
    'RSS (MiB) right after that collection:\n',
    memoryTable('rssAfterGcMiB'),
    '',
    'Bursts: latency from a main container seen finished to its ContainerRecreateRequest seen created; the watcher process\'s CPU seconds for the whole burst (until every pod is done and its requests have stopped), and those of the control plane (etcd, kube-apiserver, kube-controller-manager) and of the kubelet simulator meanwhile; its API requests per pod as the API server\'s audit log has them; "finishes spread": from the first main container seen finished to the last (the simulator writing the burst); "last action": from the first finish to the last CRR:\n',
    table(
      ['watcher', 'burst', 'p50 ms', 'p99 ms', 'max ms', 'missing', 'CPU s', 'CPU ms per pod', 'API requests per pod', 'control plane CPU s', 'control plane CPU ms per pod', 'simulator CPU s', 'finishes spread s', 'last action s', 'RSS after MiB', 'peak RSS MiB'],
      bursts.map((b) => [
        names[b.watcher] ?? b.watcher,
        String(b.burst),
        fmt(b.p50, 0),
        fmt(b.p99, 0),
        fmt(b.max, 0),
        String(b.missing),
        fmt(b.cpuSeconds, 1),
        fmt((1000 * b.cpuSeconds) / b.burst, 1),
        `${fmt(total(b.requestsPerPod), 2)}: ${requestsText(b.requestsPerPod)}`,
        fmt(b.controlPlaneCpuSeconds, 1),
        fmt((1000 * b.controlPlaneCpuSeconds) / b.burst, 0),
        fmt(b.simulatorCpuSeconds, 1),
        fmt(b.spreadSeconds, 1),
        fmt(b.wallSeconds, 1),
        fmt(b.rssMiB, 0),
        fmt(b.hwmMiB, 0),
      ]),
    ),
    '',
    `Peak RSS (VmHWM) of the process that ran the bursts: ${Object.entries(extra.peaks)
      .map(([name, peak]) => {
        const fresh = extra.fresh[name];
        return `${name} ${fmt(peak, 0)} MiB${fresh ? ` (started afresh before its bursts: RSS ${fmt(fresh.rssMiB, 0)} MiB, live heap ${fmt(fresh.heapMiB, 0)} MiB once it had listed the pods)` : ''}`;
      })
      .join('; ')}.`,
    '',
    ...targets(memoryPoints, bursts),
  ];
  return out.join('\n');
}

/** The targets against OpenKruise's controller, measured in this run. */
function targets(memoryPoints: MemoryPoint[], bursts: BurstResult[]): string[] {
  const burst = (watcher: string, size: number) => bursts.find((b) => b.watcher === watcher && b.burst === size);
  const lines: string[] = [];
  for (const size of [...new Set(bursts.map((b) => b.burst))].filter((n) => n >= 500)) {
    const [slim, kruise] = [burst('slim', size), burst('kruise', size)];
    if (slim && kruise) lines.push(`- burst of ${size}: p99 ${fmt(slim.p99, 0)} ms against Kruise's ${fmt(kruise.p99, 0)} ms: ${fmt(slim.p99 / kruise.p99, 2)}x (target at most 0.8x: ${slim.p99 <= 0.8 * kruise.p99 ? 'met' : 'missed'})`);
  }
  for (const size of [...new Set(bursts.map((b) => b.burst))]) {
    const [slim, kruise] = [burst('slim', size), burst('kruise', size)];
    if (slim && kruise) lines.push(`- burst of ${size}: ${fmt(total(slim.requestsPerPod), 2)} API requests per pod against Kruise's ${fmt(total(kruise.requestsPerPod), 2)} (target fewer: ${total(slim.requestsPerPod) < total(kruise.requestsPerPod) ? 'met' : 'missed'})`);
  }
  const last = Math.max(...memoryPoints.map((p) => p.unmanaged));
  const at = (watcher: string) => memoryPoints.find((p) => p.watcher === watcher && p.unmanaged === last);
  const [slim, kruise] = [at('slim'), at('kruise')];
  if (slim && kruise) {
    lines.push(`- ${last.toLocaleString('en-US')} unmanaged pods: RSS ${fmt(slim.rssMiB, 0)} MiB against Kruise's ${fmt(kruise.rssMiB, 0)} MiB: ${fmt(slim.rssMiB / kruise.rssMiB, 2)}x (target at most 0.5x: ${slim.rssMiB <= 0.5 * kruise.rssMiB ? 'met' : 'missed'}); live heap ${fmt(slim.heapMiB, 0)} against ${fmt(kruise.heapMiB, 0)} MiB: ${fmt(slim.heapMiB / kruise.heapMiB, 2)}x`);
  }
  return lines.length > 0 ? ['Targets against OpenKruise, in this run:', '', ...lines, ''] : [];
}

await main();
