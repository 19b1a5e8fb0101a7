// Admission latency and throughput of the webhook over HTTPS, next to the framework's limit.
//
//   node bench/webhook/run.ts [--quick] [--duration S] [--repeats N] [--concurrency 1,16,64]
//                             [--only pod5] [--root DIR] [--before-root DIR] [--label NAME]
//                             [--log devnull|stdout|off]
//
// Two server processes (bench/webhook/server.ts, bundled and run as the image runs the add-on) listen on 127.0.0.1 with a certificate issued
// by src/tls/certificates.ts: the webhook's buildApp, and a stock fastify HTTPS route returning
// a constant AdmissionReview ("empty"). autocannon runs here, in this process, at fixed
// concurrency levels; each webhook run is paired with an empty-route run of the same body at
// the same concurrency, right before it, so the ratios compare like with like even when the
// machine's speed drifts. Latencies are taken from autocannon's per-response timings (float
// milliseconds; its own histogram rounds to whole milliseconds), without the first response
// of each connection (it carries the TLS handshake). Besides req/s, each run reports requests
// per second of server CPU time (from /proc/PID/stat): on a shared machine the server does not
// always get its core, and this capacity figure is much steadier than req/s. --root builds the webhook from another
// checkout; --before-root adds a third server built from one (an earlier commit, extracted by
// bench/run.ts), measured in the same pairs, for before/after figures of a change.
//
// Writes bench/results/webhook[-LABEL].json and .md, prints the markdown.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import { issueWithNewCa } from '../../src/tls/certificates.ts';
import { bundledArgs, roleEnv } from '../lib/addon.ts';
import { admissionLoad } from '../lib/load.ts';
import { cpuSeconds, machineLoad } from '../lib/proc.ts';
import { Samples, fmt, median, numberList, parseArgs, pct, sortedQuantile, table } from '../lib/stats.ts';
import { bodies, scenarios, type Scenario } from './reviews.ts';

export interface LoadResult {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  p999: number;
  mean: number;
  responses: number;
  non2xx: number;
  errors: number;
  /** Server CPU seconds per second of the run (1 = one core busy). */
  serverCpu: number;
  /** Requests answered per second of server CPU time: the server's capacity, much less sensitive than req/s to other load on the machine. */
  perCpuSecond: number;
  /** This process's (autocannon's) CPU seconds per second of the run. */
  loadgenCpu: number;
}

export interface Server {
  name: string;
  port: number;
  pid: number;
  child: ChildProcess;
  stop(): Promise<void>;
}

const serverScript = join(import.meta.dirname, 'server.ts');

export async function writeCertificates(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'st-bench-certs-'));
  const bundle = await issueWithNewCa({ hosts: ['localhost', '127.0.0.1'], validityMs: 24 * 3600_000, now: new Date() });
  writeFileSync(join(dir, 'key.pem'), bundle.key);
  writeFileSync(join(dir, 'cert.pem'), bundle.cert);
  return dir;
}

let bundledServer: Promise<string[]> | undefined;

/**
 * Starts bench/webhook/server.ts; resolves once it prints its port. Bundled as the image's code is,
 * with the image's Node flags (bench/lib/addon.ts), unless `sources` (the profiler names the
 * modules a sample comes from by their source files).
 */
export async function startServer(name: string, args: string[], nodeArgs: string[] = [], sources = false): Promise<Server> {
  const script = sources ? [serverScript] : await (bundledServer ??= bundledArgs(serverScript));
  // setpriv: the server dies with this process, whatever happens to it.
  // Both servers, the webhook and the empty route, in the environment the chart gives the webhook.
  const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', process.execPath, ...nodeArgs, ...script, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...roleEnv('webhook') },
  });
  const lines = createInterface({ input: child.stdout });
  const first = await new Promise<string>((resolve, reject) => {
    lines.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`server ${name} exited (${code}) before listening`)));
  });
  lines.close();
  child.stdout.resume();
  const { port, pid } = JSON.parse(first) as { port: number; pid: number };
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    name,
    port,
    pid,
    child,
    async stop() {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** One request, for the pre-flight check of what a server answers. */
export function post(port: number, path: string, body: string): Promise<{ status: number; json: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method: 'POST', rejectUnauthorized: false, headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) as Record<string, unknown> }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** autocannon at a fixed number of connections (no pipelining) for `durationS` seconds. */
export async function load(server: Server, path: string, body: string, connections: number, durationS: number): Promise<LoadResult> {
  const latencies = new Samples();
  const seen = new WeakSet<object>();
  let responses = 0;
  let non2xx = 0;
  const cpu0 = cpuSeconds(server.pid);
  const own0 = process.cpuUsage();
  const t0 = performance.now();
  const instance = autocannon(admissionLoad(`https://127.0.0.1:${server.port}${path}`, body, connections, durationS));
  instance.on('response', (client: object, statusCode: number, _bytes: number, responseTime: number) => {
    responses++;
    if (statusCode !== 200) non2xx++;
    // The first response of a connection waited for the TLS handshake: not admission latency.
    if (!seen.has(client)) {
      seen.add(client);
      return;
    }
    if (statusCode === 200) latencies.push(responseTime);
  });
  const result = await instance;
  const elapsed = (performance.now() - t0) / 1000;
  const own = process.cpuUsage(own0);
  const sorted = latencies.sorted();
  let sum = 0;
  for (const value of sorted) sum += value;
  return {
    requestsPerSecond: (responses - non2xx) / elapsed,
    p50: sortedQuantile(sorted, 0.5),
    p99: sortedQuantile(sorted, 0.99),
    p999: sortedQuantile(sorted, 0.999),
    mean: sum / sorted.length,
    responses,
    non2xx,
    errors: result.errors + result.timeouts,
    serverCpu: (cpuSeconds(server.pid) - cpu0) / elapsed,
    perCpuSecond: responses / Math.max(0.01, cpuSeconds(server.pid) - cpu0),
    loadgenCpu: (own.user + own.system) / 1e6 / elapsed,
  };
}

interface Row {
  repeat: number;
  concurrency: number;
  server: string;
  scenario: string;
  bodyId: string;
  result: LoadResult;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const quick = args.has('quick');
  // Short runs, many rounds: each webhook run is paired with an empty-route run seconds before it.
  const durationS = Number(args.get('duration') ?? 3);
  const repeats = Number(args.get('repeats') ?? (quick ? 1 : 5));
  const levels = numberList(args.get('concurrency') ?? '1,16,64');
  const only = args.get('only')?.split(',');
  const label = args.get('label');
  const root = args.get('root');
  const beforeRoot = args.get('before-root');
  const log = args.get('log') ?? 'devnull';
  const outDir = join(import.meta.dirname, '../results');
  mkdirSync(outDir, { recursive: true });

  const all = scenarios().filter((s) => !only || only.includes(s.bodyId) || only.includes(s.id));
  const bodyIds = [...new Set(all.map((s) => s.bodyId))];
  const bodyText = bodies();
  const certDir = await writeCertificates();
  const servers: Server[] = [];
  try {
    const app = await startServer('app', ['--mode', 'app', '--cert-dir', certDir, '--log', log, ...(root ? ['--root', root] : [])]);
    servers.push(app);
    const empty = await startServer('empty', ['--mode', 'empty', '--cert-dir', certDir]);
    servers.push(empty);
    const before = beforeRoot ? await startServer('before', ['--mode', 'app', '--cert-dir', certDir, '--log', log, '--root', beforeRoot]) : undefined;
    if (before) servers.push(before);
    const targets = [app, ...(before ? [before] : [])];

    for (const scenario of all) for (const server of targets) await preflight(server, scenario);
    console.error(`# webhook bench: ${all.length} scenarios x ${levels.join('/')} connections x ${repeats} repeats, ${durationS} s each; ${cpus().length} cores, load ${machineLoad()}`);
    for (const s of all) console.error(`#   ${s.id}: POST ${s.path}, ${(s.body.length / 1024).toFixed(1)} KiB body`);

    // Warm-up: JIT, caches, ajv's compiled validator, TLS session machinery.
    for (const bodyId of bodyIds) {
      await load(empty, '/validate', bodyText[bodyId]!, 16, quick ? 1 : 2);
      for (const scenario of all.filter((s) => s.bodyId === bodyId)) for (const server of targets) await load(server, scenario.path, scenario.body, 16, quick ? 1 : 2);
    }

    const rows: Row[] = [];
    for (let repeat = 1; repeat <= repeats; repeat++) {
      for (const concurrency of levels) {
        console.error(`# repeat ${repeat}/${repeats}, ${concurrency} connections, load ${machineLoad()}`);
        for (const bodyId of bodyIds) {
          const base = await load(empty, '/validate', bodyText[bodyId]!, concurrency, durationS);
          rows.push({ repeat, concurrency, server: 'empty', scenario: `${bodyId}-empty`, bodyId, result: base });
          report('empty', `${bodyId}-empty`, concurrency, base);
          for (const scenario of all.filter((s) => s.bodyId === bodyId)) {
            for (const server of targets) {
              const result = await load(server, scenario.path, scenario.body, concurrency, durationS);
              rows.push({ repeat, concurrency, server: server.name, scenario: scenario.id, bodyId, result });
              report(server.name, scenario.id, concurrency, result);
            }
          }
        }
      }
    }
    const markdown = summarise(rows, levels, all, targets.map((s) => s.name));
    const suffix = label ? `-${label}` : '';
    writeFileSync(join(outDir, `webhook${suffix}.json`), JSON.stringify({ durationS, repeats, levels, rows }, null, 1));
    writeFileSync(join(outDir, `webhook${suffix}.md`), markdown);
    console.log(markdown);
  } finally {
    for (const server of servers) await server.stop();
    rmSync(certDir, { recursive: true, force: true });
  }
}

async function preflight(server: Server, scenario: Scenario): Promise<void> {
  const { status, json } = await post(server.port, scenario.path, scenario.body);
  const response = json.response as { allowed?: boolean; patch?: string; warnings?: string[] } | undefined;
  const ok = status === 200 && response?.allowed === scenario.expect.allowed && Boolean(response?.patch) === scenario.expect.patched && !response?.warnings;
  if (!ok) throw new Error(`${server.name} ${scenario.id}: unexpected answer ${status} ${JSON.stringify(json).slice(0, 500)}`);
}

function report(server: string, scenario: string, concurrency: number, r: LoadResult): void {
  console.error(
    `  ${server.padEnd(8)} ${scenario.padEnd(18)} c=${String(concurrency).padEnd(3)} ${fmt(r.requestsPerSecond).padStart(7)} req/s  p50 ${fmt(r.p50)}  p99 ${fmt(r.p99)}  p99.9 ${fmt(r.p999)} ms  server cpu ${fmt(r.serverCpu)} (${fmt(r.perCpuSecond)} req per CPU-s)  loadgen cpu ${fmt(r.loadgenCpu)}${r.non2xx || r.errors ? `  non2xx ${r.non2xx} errors ${r.errors}` : ''}`,
  );
}

/** Medians over the repeats; ratios are taken pair by pair (same repeat, concurrency and body) and then their median. */
function summarise(rows: Row[], levels: number[], all: Scenario[], serverNames: string[]): string {
  const pick = (server: string, scenario: string, concurrency: number) => rows.filter((r) => r.server === server && r.scenario === scenario && r.concurrency === concurrency);
  const spread = (values: number[]) => (values.length > 1 ? ` (${fmt(Math.min(...values))}-${fmt(Math.max(...values))})` : '');
  const out: string[] = [];
  const bodyIds = [...new Set(all.map((s) => s.bodyId))];
  for (const concurrency of levels) {
    const tableRows: string[][] = [];
    for (const bodyId of bodyIds) {
      const baseRows = pick('empty', `${bodyId}-empty`, concurrency);
      const line = (name: string, these: Row[], vs?: Row[]) => {
        const m = (f: (r: LoadResult) => number) => median(these.map((r) => f(r.result)));
        const rps = these.map((r) => r.result.requestsPerSecond);
        const ratio = (f: (a: LoadResult, b: LoadResult) => number) =>
          vs ? median(these.map((r) => f(r.result, vs.find((b) => b.repeat === r.repeat)!.result))) : Number.NaN;
        return [
          name,
          `${fmt(m((r) => r.requestsPerSecond))}${spread(rps)}`,
          fmt(m((r) => r.p50)),
          fmt(m((r) => r.p99)),
          fmt(m((r) => r.p999)),
          fmt(m((r) => r.serverCpu)),
          fmt(m((r) => r.perCpuSecond)),
          vs ? pct(ratio((a, b) => a.requestsPerSecond / b.requestsPerSecond)) : '',
          vs ? pct(ratio((a, b) => a.perCpuSecond / b.perCpuSecond)) : '',
          vs ? `${fmt(ratio((a, b) => a.p99 / b.p99))}x` : '',
        ];
      };
      tableRows.push(line(`empty route, ${bodyId} body`, baseRows));
      for (const scenario of all.filter((s) => s.bodyId === bodyId)) {
        for (const server of serverNames) {
          const name = `${server === 'app' ? '' : `${server}: `}${scenario.id} (${scenario.path})`;
          tableRows.push(line(name, pick(server, scenario.id, concurrency), baseRows));
        }
      }
    }
    out.push(`### ${concurrency} connection${concurrency === 1 ? '' : 's'}\n`);
    out.push(
      table(['run', 'req/s (min-max)', 'p50 ms', 'p99 ms', 'p99.9 ms', 'server CPU', 'req per CPU-s', 'req/s vs empty', 'req per CPU-s vs empty', 'p99 vs empty'], tableRows),
    );
    out.push('');
  }
  // The targets: the 5-container pod at 16 connections.
  const verdicts: string[] = [];
  for (const server of serverNames) {
    for (const scenario of all.filter((s) => s.bodyId === 'pod5')) {
      const these = pick(server, scenario.id, 16);
      const base = pick('empty', 'pod5-empty', 16);
      if (these.length === 0 || base.length === 0) continue;
      const paired = (f: (a: LoadResult, b: LoadResult) => number) => median(these.map((r) => f(r.result, base.find((b) => b.repeat === r.repeat)!.result)));
      const p99Ratio = paired((a, b) => a.p99 / b.p99);
      const rpsRatio = paired((a, b) => a.requestsPerSecond / b.requestsPerSecond);
      const capacityRatio = paired((a, b) => a.perCpuSecond / b.perCpuSecond);
      const p99Verdict = p99Ratio <= 1.5 ? 'met' : `missed by ${fmt(p99Ratio - 1.5)}x`;
      const rpsVerdict = (ratio: number) => (ratio >= 0.7 ? 'met' : `missed by ${Math.round((0.7 - ratio) * 100)} points`);
      verdicts.push(
        `- ${server === 'app' ? '' : `${server}: `}${scenario.id}, 16 connections: p99 ${fmt(p99Ratio)}x the empty route's (target <= 1.5x: ${p99Verdict}); throughput ${pct(rpsRatio)} of it (target >= 70%: ${rpsVerdict(rpsRatio)}), by server CPU per request ${pct(capacityRatio)} (${rpsVerdict(capacityRatio)})`,
      );
    }
  }
  if (verdicts.length > 0) out.push('Targets:\n', ...verdicts, '');
  return out.join('\n');
}

if (import.meta.main) {
  await main();
  await sleep(0);
}
