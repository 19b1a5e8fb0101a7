// The add-on's footprint: the image's compressed size, the time from process start to ready for
// each role, and the memory of the webhook process idle and under the admission load; next to
// OpenKruise's controller (bench/kruise/main.go) where it has a counterpart.
//
//   node bench/footprint/run.ts [--quick] [--managed 2000] [--starts 5] [--load-seconds 20]
//                               [--compare-root NAME=DIR] [--variants 'NAME=--flag --flag;NAME=...'] [--label NAME]
//
// The image: scripts/build-images.ts builds it (or finds it in the cache); its two layers are
// gzipped here (the runtime base and the add-on), whole and in parts: the Node.js runtime (the node binary and the libraries it
// links), and the rest (/app: the bundles, package.json, the license texts; /etc, /tmp).
//
// Against a real control plane with OpenKruise's CRR CRD and `--managed` Running managed pods
// (bench/watcher/pods.ts; nothing finishes, so nothing is acted on):
//  - start to ready: the process is spawned; ready is /readyz answering 200, polled every 10 ms:
//    the watcher once it has listed the managed pods (`serve --no-webhook`), the webhook once it
//    serves HTTPS with its certificates (`serve --no-watcher --cert-dir`), Kruise's controller
//    once its pods, nodes and CRRs are cached. `--starts` fresh processes each, median;
//  - memory: one process of each role, probed (bench/watcher/gc-probe.mjs): RSS 10 s after ready
//    ("idle"), then the live heap and RSS after a full GC. The webhook then takes the admission
//    load of bench/webhook (autocannon, 16 connections, the 5-container pod to /validate and
//    /mutate in turn, `--load-seconds`): its RSS is sampled every 250 ms (peak, and at the end),
//    then heap and RSS after a full GC.
// The add-on runs as the image runs it (bench/lib/addon.ts: the bundles, the Dockerfile's Node
// flags). --compare-root adds another checkout (e.g. the commit before the bundles, run as its
// image ran it: tsc output and node_modules); --variants adds the bundles run with other Node
// flags, e.g. --variants 'none=;semi1=--max-semi-space-size=1'.
// Writes bench/results/footprint[-LABEL].json and .md, prints the markdown.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { gzipSync } from 'node:zlib';
import autocannon from 'autocannon';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { buildImage } from '../../scripts/build-images.ts';
import { startControlPlane } from '../../test/support/control-plane.ts';
import { httpStatus, PortLease } from '../../test/support/net.ts';
import { installCrrCrd } from '../../test/support/stack.ts';
import { addOnArgs, imageEnv, probed, roleEnv, type AfterGc, type Role } from '../lib/addon.ts';
import { kruiseVersion, startKruisePeer } from '../lib/kruise-peer.ts';
import { pooledKubeConfig } from '../lib/kube.ts';
import { admissionLoad } from '../lib/load.ts';
import { machineLoad, memory, residentParts } from '../lib/proc.ts';
import { fmt, median, parseArgs, table } from '../lib/stats.ts';
import { bodies } from '../webhook/reviews.ts';
import { managedPod, runningStatus } from '../watcher/pods.ts';

const NAMESPACE = 'bench-managed';
const log = (message: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${message}\n`);

export interface ImageSize {
  reference: string;
  layerBytes: number;
  layerGzipBytes: number;
  runtimeGzipBytes: number;
  restGzipBytes: number;
  appFiles: number;
  declarationFiles: number;
  sourceMaps: number;
}

/** The add-on image's layer gzipped (level 6, as registries' clients push it), whole and in parts. */
export function imageSize(): ImageSize {
  const { reference, archive } = buildImage('sidecar-terminator');
  const work = mkdtempSync(join(tmpdir(), 'st-bench-image-'));
  try {
    execTar(['-xf', archive, '-C', work]);
    const index = JSON.parse(readFileSync(join(work, 'index.json'), 'utf8')) as { manifests: Array<{ digest: string }> };
    const blob = (digest: string) => join(work, 'blobs/sha256', digest.replace('sha256:', ''));
    const manifest = JSON.parse(readFileSync(blob(index.manifests[0]!.digest), 'utf8')) as { layers: Array<{ digest: string }> };
    // The runtime layer (the base) and the add-on's own, unpacked one over the other.
    const layers = manifest.layers.map((layer) => readFileSync(blob(layer.digest)));
    const rootfs = join(work, 'rootfs');
    mkdirSync(rootfs);
    for (const layer of manifest.layers) execTar(['-xf', blob(layer.digest), '-C', rootfs]);
    const list = [...new Set(manifest.layers.flatMap((layer) => execTar(['-tf', blob(layer.digest)]).split('\n').filter(Boolean)))];
    const isRuntime = (path: string) => /^\.\/(usr\/local\/bin\/node|lib|lib64|usr\/lib)\b/.test(path);
    const gzipOf = (paths: string[]) => gzipSync(tar(['-c', '--no-recursion', '-C', rootfs, ...paths])).length;
    const files = list.filter((path) => !path.endsWith('/'));
    const appFiles = files.filter((path) => path.startsWith('./app/'));
    return {
      reference,
      layerBytes: layers.reduce((sum, layer) => sum + layer.length, 0),
      layerGzipBytes: layers.reduce((sum, layer) => sum + gzipSync(layer).length, 0),
      runtimeGzipBytes: gzipOf(list.filter(isRuntime)),
      restGzipBytes: gzipOf(list.filter((path) => !isRuntime(path))),
      appFiles: appFiles.length,
      declarationFiles: files.filter((path) => path.endsWith('.d.ts')).length,
      sourceMaps: files.filter((path) => path.endsWith('.map')).length,
    };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function execTar(args: string[]): string {
  return tar(args).toString('utf8');
}

function tar(args: string[]): Buffer {
  const result = spawnSync('tar', args, { maxBuffer: 1024 * 1024 * 1024 });
  if (result.status !== 0) throw new Error(`tar ${args.join(' ')} failed: ${result.stderr.toString()}`);
  return result.stdout;
}

interface Started {
  pid: number;
  child: ChildProcess;
  readyMs: number;
  stop(): Promise<void>;
}

/** Spawns `node ARGS` (stdout and stderr to `logFile`) and resolves once `ready()` holds, with the time it took from the spawn. */
async function startTimed(args: string[], logFile: string, ready: () => Promise<boolean>, env: Record<string, string> = {}): Promise<Started> {
  const out = openSync(logFile, 'a');
  const t0 = performance.now();
  const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', process.execPath, ...args], { stdio: ['ignore', out, out], env: { ...process.env, KUBECONFIG: '', ...env } });
  closeSync(out);
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(timer);
  };
  const deadline = Date.now() + 120_000;
  while (!(await ready())) {
    if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited before it was ready; see ${logFile}`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${args.join(' ')} was not ready in 120 s; see ${logFile}`);
    }
    await sleep(10);
  }
  return { pid: child.pid!, child, readyMs: performance.now() - t0, stop };
}

interface Variant {
  name: string;
  /** `node` arguments up to the script's own: Node's flags and the CLI. */
  args: string[];
  /** Environment of each role's process: the chart's (roleEnv), or a variant's (`--variants 'arena2=MALLOC_ARENA_MAX=2'`). */
  env: Record<Role, Record<string, string>>;
}

interface RoleFigures {
  variant: string;
  role: 'watcher' | 'webhook';
  readyMs: number[];
  /** The first start with the image's compile cache empty (a new pod), when the image has one, and its RSS idle. */
  cold?: { readyMs: number; idleRssMiB: number };
  idleRssMiB: number;
  /** The idle RSS in parts: anonymous memory, and file-backed pages (mostly the node binary). */
  idleParts: { anonymousMiB: number; fileMiB: number };
  idle: AfterGc;
  /** The webhook under load. */
  load?: { peakRssMiB: number; endRssMiB: number; afterGc: AfterGc; requests: number; requestsPerSecond: number };
}

interface KruiseFigures {
  readyMs: number[];
  idleRssMiB: number;
  idle: AfterGc;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const quick = args.has('quick');
  const managed = Number(args.get('managed') ?? (quick ? 200 : 2000));
  const starts = Number(args.get('starts') ?? (quick ? 2 : 5));
  const loadSeconds = Number(args.get('load-seconds') ?? (quick ? 5 : 20));
  const label = args.get('label');
  const outDir = join(import.meta.dirname, '../results');
  mkdirSync(outDir, { recursive: true });
  const dir = mkdtempSync(join(tmpdir(), 'st-bench-footprint-'));
  log(`footprint bench: ${managed} managed pods, ${starts} starts per role; ${cpus().length} cores, load ${machineLoad()}; logs in ${dir}`);

  const image = imageSize();
  log(`image ${image.reference}: layer ${fmt(image.layerBytes / 1048576)} MiB, ${fmt(image.layerGzipBytes / 1048576)} MiB gzipped (runtime ${fmt(image.runtimeGzipBytes / 1048576)}, the rest ${fmt(image.restGzipBytes / 1048576)})`);

  const imageArgs = addOnArgs();
  // The image's environment (its compile cache in a directory of the variant's), then the chart's.
  const chartEnv = (name: string, root?: string) => {
    const image = imageEnv(join(dir, `${name}-compile-cache`), root);
    return { webhook: { ...image, ...roleEnv('webhook', root) }, watcher: { ...image, ...roleEnv('watcher', root) } };
  };
  const variants: Variant[] = [{ name: 'image', args: imageArgs, env: chartEnv('image') }];
  for (const entry of (args.get('compare-root') ?? '').split(',').filter(Boolean)) {
    const [name, root] = entry.split('=', 2) as [string, string];
    variants.push({ name, args: addOnArgs(resolve(root)), env: chartEnv(name, resolve(root)) });
  }
  for (const entry of (args.get('variants') ?? '').split(';').filter(Boolean)) {
    const name = entry.slice(0, entry.indexOf('='));
    // NAME=value words are the process's environment (glibc's MALLOC_ARENA_MAX), the rest Node's flags.
    const env: Record<string, string> = {};
    const flags: string[] = [];
    for (const word of entry.slice(entry.indexOf('=') + 1).split(' ').filter(Boolean)) {
      const setting = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(word);
      if (setting) env[setting[1]!] = setting[2]!;
      else flags.push(word);
    }
    // The bundles with these settings only, in both roles (not the chart's).
    variants.push({ name, args: [...flags, imageArgs.at(-1)!], env: { webhook: env, watcher: env } });
  }

  const cp = await startControlPlane({ log });
  const results: RoleFigures[] = [];
  let kruise: KruiseFigures | undefined;
  try {
    await installCrrCrd(cp);
    await cp.createNamespace(NAMESPACE);
    const core = pooledKubeConfig(cp.kubeconfigPath).makeApiClient(CoreV1Api);
    const t0 = performance.now();
    await pool(Array.from({ length: managed }, (_, i) => i), 32, async (i) => {
      const created = await core.createNamespacedPod({ namespace: NAMESPACE, body: managedPod(`job-${i}`, i) });
      await core.patchNamespacedPodStatus({ namespace: NAMESPACE, name: created.metadata!.name!, body: { status: runningStatus(created, i) } }, setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch));
    });
    log(`${managed} managed pods Running in ${fmt((performance.now() - t0) / 1000)} s`);
    const certDir = join(dir, 'certs');
    const ports = new PortLease();

    for (const variant of variants) {
      for (const role of ['watcher', 'webhook'] as const) {
        const port = await ports.take();
        const roleArgs =
          role === 'watcher'
            ? ['serve', '--no-webhook', '--kubeconfig', cp.kubeconfigPath, '--kill-mechanism', 'crr', '--probe-address', `127.0.0.1:${port}`]
            : ['serve', '--no-watcher', '--kubeconfig', cp.kubeconfigPath, '--cert-dir', certDir, '--listen-address', `127.0.0.1:${port}`];
        const readyUrl = `${role === 'watcher' ? 'http' : 'https'}://127.0.0.1:${port}/readyz`;
        const ready = async () => (await httpStatus(readyUrl)) === 200;
        const readyMs: number[] = [];
        // The first start of the webhook writes the certificates: not counted.
        if (role === 'webhook') await (await startTimed([...variant.args, ...roleArgs], join(dir, `${variant.name}-${role}.log`), ready, variant.env[role])).stop();
        // A start with the compile cache empty, as a new pod's, apart; then the starts counted, as a
        // container's restarts. Without the GC probe's --expose-gc: Node keys its compile cache by
        // V8's flags, so the starts counted (run as the image runs) find what this one wrote.
        const cache = variant.env[role].NODE_COMPILE_CACHE;
        let cold: RoleFigures['cold'];
        if (cache) {
          rmSync(cache, { recursive: true, force: true });
          const started = await startTimed([...variant.args, ...roleArgs], join(dir, `${variant.name}-${role}.log`), ready, variant.env[role]);
          try {
            await sleep(quick ? 3000 : 10_000);
            cold = { readyMs: started.readyMs, idleRssMiB: memory(started.pid).rssMiB };
          } finally {
            await started.stop();
          }
          await sleep(500);
        }
        for (let i = 0; i < starts; i++) {
          const started = await startTimed([...variant.args, ...roleArgs], join(dir, `${variant.name}-${role}.log`), ready, variant.env[role]);
          readyMs.push(started.readyMs);
          await started.stop();
          await sleep(500);
        }
        const probe = probed(dir, `${variant.name}-${role}`);
        // The measured process runs with the probe's flags, under which the cache is another: one
        // start first, not counted, writes it, so that the memory measured is a restarted container's.
        if (cache) await (await startTimed([...probe.nodeArgs, ...variant.args, ...roleArgs], join(dir, `${variant.name}-${role}.log`), ready, { ...variant.env[role], ...probe.env })).stop();
        const measured = await startTimed([...probe.nodeArgs, ...variant.args, ...roleArgs], join(dir, `${variant.name}-${role}.log`), ready, { ...variant.env[role], ...probe.env });
        try {
          await sleep(quick ? 3000 : 10_000);
          const idleRssMiB = memory(measured.pid).rssMiB;
          const idleParts = residentParts(measured.pid);
          const idle = await probe.afterGc(measured.pid);
          const figures: RoleFigures = { variant: variant.name, role, readyMs, ...(cold ? { cold } : {}), idleRssMiB, idleParts, idle };
          if (role === 'webhook') figures.load = await underLoad(port, measured.pid, loadSeconds, () => probe.afterGc(measured.pid));
          results.push(figures);
          log(`${variant.name} ${role}: ready in ${readyMs.map((ms) => fmt(ms, 0)).join(', ')} ms${cold ? ` (${fmt(cold.readyMs, 0)} ms with the compile cache empty, then idle RSS ${fmt(cold.idleRssMiB)} MiB)` : ''}; idle RSS ${fmt(idleRssMiB)} MiB, after GC heap ${fmt(idle.heapMiB)} MiB, RSS ${fmt(idle.rssAfterGcMiB)} MiB${figures.load ? `; under load: peak RSS ${fmt(figures.load.peakRssMiB)} MiB, at the end ${fmt(figures.load.endRssMiB)} MiB, after GC heap ${fmt(figures.load.afterGc.heapMiB)} MiB (${fmt(figures.load.requestsPerSecond, 0)} req/s)` : ''} (load ${machineLoad()})`);
        } finally {
          await measured.stop();
        }
      }
    }

    // OpenKruise's controller, as bench/watcher runs it: ready once its caches are synced.
    const kubeconfig = await cp.clientKubeconfig('bench:kruise', ['system:masters']);
    const readyMs: number[] = [];
    for (let i = 0; i <= starts; i++) {
      const probe = probed(dir, 'kruise');
      const t1 = performance.now();
      const peer = await startKruisePeer({ kubeconfig, logFile: join(dir, 'kruise.log'), gcProbeOut: probe.file });
      const elapsed = performance.now() - t1;
      if (i < starts) {
        readyMs.push(elapsed);
        await peer.stop();
        await sleep(500);
        continue;
      }
      await sleep(quick ? 3000 : 10_000);
      const idleRssMiB = memory(peer.pid).rssMiB;
      kruise = { readyMs, idleRssMiB, idle: await probe.afterGc(peer.pid) };
      await peer.stop();
      log(`kruise: ready in ${readyMs.map((ms) => fmt(ms, 0)).join(', ')} ms; idle RSS ${fmt(idleRssMiB)} MiB, after GC heap ${fmt(kruise.idle.heapMiB)} MiB, RSS ${fmt(kruise.idle.rssAfterGcMiB)} MiB`);
    }
  } finally {
    await cp.stop();
    if (!args.has('keep-logs')) rmSync(dir, { recursive: true, force: true });
  }

  const markdown = summarise(image, results, kruise, { managed, starts, loadSeconds, flags: imageArgs.slice(0, -1), env: variants[0]!.env });
  const suffix = label ? `-${label}` : '';
  writeFileSync(join(outDir, `footprint${suffix}.json`), JSON.stringify({ managed, starts, loadSeconds, image, results, kruise, load: machineLoad() }, null, 1));
  writeFileSync(join(outDir, `footprint${suffix}.md`), markdown);
  console.log(markdown);
}

/** The admission load of bench/webhook on the webhook at `port`, its RSS sampled meanwhile. */
async function underLoad(port: number, pid: number, seconds: number, afterGc: () => Promise<AfterGc>): Promise<NonNullable<RoleFigures['load']>> {
  const body = bodies().pod5!;
  let peakRssMiB = 0;
  const sampler = setInterval(() => (peakRssMiB = Math.max(peakRssMiB, memory(pid).rssMiB)), 250);
  let requests = 0;
  const t0 = performance.now();
  try {
    for (const path of ['/validate', '/mutate']) {
      const result = await autocannon(admissionLoad(`https://127.0.0.1:${port}${path}`, body, 16, seconds / 2));
      requests += result.requests.total;
    }
  } finally {
    clearInterval(sampler);
  }
  const requestsPerSecond = requests / ((performance.now() - t0) / 1000);
  const endRssMiB = memory(pid).rssMiB;
  return { peakRssMiB: Math.max(peakRssMiB, endRssMiB), endRssMiB, afterGc: await afterGc(), requests, requestsPerSecond };
}

async function pool<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await work(items[next++]!);
  }));
}

function summarise(image: ImageSize, results: RoleFigures[], kruise: KruiseFigures | undefined, run: { managed: number; starts: number; loadSeconds: number; flags: string[]; env: Record<Role, Record<string, string>> }): string {
  const mib = (bytes: number) => fmt(bytes / 1048576);
  const lines = [
    `Image \`${image.reference}\` (scripts/build-images.ts, the runtime layer and the add-on's): ${mib(image.layerBytes)} MiB, ${mib(image.layerGzipBytes)} MiB gzipped; the Node.js runtime (node and the libraries it links) ${mib(image.runtimeGzipBytes)} MiB gzipped, everything else ${mib(image.restGzipBytes)} MiB gzipped (${image.appFiles} files under /app; ${image.declarationFiles} .d.ts, ${image.sourceMaps} source maps).`,
    '',
    `Each role with ${run.managed} managed pods Running, the add-on run as the image runs it (Node flags: ${run.flags.length > 0 ? `\`${run.flags.join(' ')}\`` : 'none'}; the image's and the chart's environment: ${(['watcher', 'webhook'] as const).map((role) => `${role} ${Object.entries(run.env[role]).map(([k, v]) => `\`${k}=${v}\``).join(' ') || 'none'}`).join(', ')}) and any other variant; start to ready: median of ${run.starts} fresh processes (min-max); memory in MiB; the webhook under ${run.loadSeconds} s of admission load (16 connections, the 5-container pod, /validate then /mutate):`,
    '',
    table(
      ['process', 'start to ready ms', 'first start, compile cache empty: ready ms, idle RSS', 'idle RSS', 'of which anonymous / file-backed', 'idle heap after GC', 'idle RSS after GC', 'under load: peak RSS', 'under load: RSS at the end', 'under load: heap after GC', 'peak RSS / idle RSS'],
      [
        ...results.map((r) => [
          `${r.variant}: ${r.role}`,
          `${fmt(median(r.readyMs), 0)} (${fmt(Math.min(...r.readyMs), 0)}-${fmt(Math.max(...r.readyMs), 0)})`,
          r.cold ? `${fmt(r.cold.readyMs, 0)}, ${fmt(r.cold.idleRssMiB, 0)}` : '',
          fmt(r.idleRssMiB, 0),
          `${fmt(r.idleParts.anonymousMiB, 0)} / ${fmt(r.idleParts.fileMiB, 0)}`,
          fmt(r.idle.heapMiB, 1),
          fmt(r.idle.rssAfterGcMiB, 0),
          r.load ? fmt(r.load.peakRssMiB, 0) : '',
          r.load ? fmt(r.load.endRssMiB, 0) : '',
          r.load ? fmt(r.load.afterGc.heapMiB, 1) : '',
          r.load ? `${fmt(r.load.peakRssMiB / r.idleRssMiB)}x` : '',
        ]),
        ...(kruise
          ? [[`OpenKruise ${kruiseVersion()}: its controller (caches synced)`, `${fmt(median(kruise.readyMs), 0)} (${fmt(Math.min(...kruise.readyMs), 0)}-${fmt(Math.max(...kruise.readyMs), 0)})`, '', fmt(kruise.idleRssMiB, 0), '', fmt(kruise.idle.heapMiB, 1), fmt(kruise.idle.rssAfterGcMiB, 0), '', '', '', '']]
          : []),
      ],
    ),
    '',
  ];
  const spaceNames = ['new_space', 'old_space', 'code_space', 'large_object_space'];
  const partsRows = results.flatMap((r) => [
    ...(r.idle.parts ? [[`${r.variant}: ${r.role}, idle`, r.idle.rssAfterGcMiB, r.idle.parts] as const] : []),
    ...(r.load?.afterGc.parts ? [[`${r.variant}: ${r.role}, after the load`, r.load.afterGc.rssAfterGcMiB, r.load.afterGc.parts] as const] : []),
  ]);
  if (partsRows.length > 0) {
    lines.push(
      'Where the RSS is, right after a full GC (MiB; /proc/PID/smaps_rollup and V8\'s heap statistics, bench/watcher/gc-probe.mjs): file-backed pages (the node binary and the libraries it links, shared by the processes of one node), V8\'s heap as physical memory by space, and the rest of the anonymous memory (malloc of Node, OpenSSL and V8\'s own tables, thread stacks, buffers):',
      '',
      table(
        ['process', 'RSS after GC', 'file-backed', 'V8 heap', ...spaceNames.map((n) => `of which ${n.replace(/_space$/, '').replace(/_/g, ' ')}`), 'V8, other spaces', 'other anonymous'],
        partsRows.map(([name, rss, parts]) => {
          const named = spaceNames.map((n) => parts.v8Spaces[n] ?? 0);
          return [name, fmt(rss, 0), fmt(parts.fileBackedMiB, 1), fmt(parts.v8PhysicalMiB, 1), ...named.map((v) => fmt(v, 1)), fmt(parts.v8PhysicalMiB - named.reduce((a, b) => a + b, 0), 1), fmt(parts.otherAnonymousMiB, 1)];
        }),
      ),
      '',
    );
  }
  const image0 = results.filter((r) => r.variant === 'image');
  const watcher = image0.find((r) => r.role === 'watcher');
  const webhook = image0.find((r) => r.role === 'webhook');
  const verdict = (ok: boolean) => (ok ? 'met' : 'missed');
  lines.push('Targets, in this run:', '');
  lines.push(`- image: everything but the Node.js runtime ${mib(image.restGzipBytes)} MiB gzipped (target <= 3 MB: ${verdict(image.restGzipBytes <= 3_000_000)}), ${image.declarationFiles} .d.ts and ${image.sourceMaps} source maps (target none: ${verdict(image.declarationFiles + image.sourceMaps === 0)})`);
  for (const r of [watcher, webhook]) if (r) lines.push(`- ${r.role}: start to ready ${fmt(median(r.readyMs), 0)} ms (target <= 500 ms: ${verdict(median(r.readyMs) <= 500)})${kruise && r.role === 'watcher' ? `; Kruise's controller ${fmt(median(kruise.readyMs), 0)} ms` : ''}`);
  if (webhook?.load) lines.push(`- webhook: idle RSS ${fmt(webhook.idleRssMiB, 0)} MiB (target <= 100 MiB: ${verdict(webhook.idleRssMiB <= 100)}); peak under load ${fmt(webhook.load.peakRssMiB, 0)} MiB, ${fmt(webhook.load.peakRssMiB / webhook.idleRssMiB)}x idle (target <= 1.5x: ${verdict(webhook.load.peakRssMiB <= 1.5 * webhook.idleRssMiB)})`);
  if (watcher && kruise) lines.push(`- watcher, ${run.managed} managed pods, RSS after GC ${fmt(watcher.idle.rssAfterGcMiB, 0)} MiB against Kruise's controller's ${fmt(kruise.idle.rssAfterGcMiB, 0)} MiB: ${fmt(watcher.idle.rssAfterGcMiB / kruise.idle.rssAfterGcMiB)}x (bench/watcher measures the same with the unmanaged pods)`);
  lines.push('');
  return lines.join('\n');
}

if (import.meta.main) await main();
