// A rolling restart of the webhook under admission load: does any request get lost?
//
//   node bench/rolling-restart/run.ts [--client autocannon|node] [--duration 30] [--connections 16]
//        [--path /mutate] [--body pod5] [--endpoint-lag 0] [--pre-stop 0] [--shutdown-grace 20s] [--root DIR] [--label NAME]
//
// A real control plane (serve needs an API server), two `serve --no-watcher` replicas sharing a
// certificate directory, and the loopback round-robin TCP proxy of test/support/tcp-balancer.ts
// in front of them, standing for the Service. autocannon sends AdmissionReviews (the realistic
// bodies of bench/webhook/reviews.ts) through the proxy for the whole run: with autocannon, or
// with Node's keep-alive agent (--client node), which like Go's HTTP client (the API server's)
// honours `Connection: close` and reports a request lost with its connection. Meanwhile each
// replica is replaced in turn, as a Deployment's rolling update does with maxSurge 1 and
// maxUnavailable 0: the new replica is started and, once /readyz answers, added to the proxy;
// then the old one is taken out of the proxy (its endpoint removed) `--endpoint-lag` ms after
// Kubernetes decides to stop it, which sends SIGTERM at once, or `--pre-stop` ms later (the
// chart's preStop sleep: it serves as usual meanwhile), and the run waits for it to exit. Connections already open to the old
// replica stay with it until it closes them, as conntrack keeps established flows.
//
// Reported: requests sent, 2xx, non-2xx (by status), requests lost without an answer (a
// connection closed under them; autocannon re-sends those silently, so they are counted per
// connection here), errors (by code), timeouts, and for each
// old replica how long it took to exit after SIGTERM and whether it used up its grace period.
// The replicas run as the image runs them (bench/lib/addon.ts); --root runs them from another
// checkout (e.g. an earlier commit, extracted by bench/run.ts, as its image ran it), to compare.
// Writes bench/results/rolling-restart[-LABEL].json and .md, prints the markdown.
import { spawn, type ChildProcess } from 'node:child_process';
import type { EventEmitter } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon, { type Options } from 'autocannon';
import { startControlPlane } from '../../test/support/control-plane.ts';
import { httpStatus, PortLease } from '../../test/support/net.ts';
import { startTcpBalancer, type Backend } from '../../test/support/tcp-balancer.ts';
import { addOnArgs, roleEnv } from '../lib/addon.ts';
import { admissionLoad } from '../lib/load.ts';
import { machineLoad } from '../lib/proc.ts';
import { parseArgs, table } from '../lib/stats.ts';
import { bodies } from '../webhook/reviews.ts';

const args = parseArgs(process.argv.slice(2));
const durationS = Number(args.get('duration') ?? 30);
const connections = Number(args.get('connections') ?? 16);
const path = args.get('path') ?? '/mutate';
const bodyId = args.get('body') ?? 'pod5';
const endpointLagMs = Number(args.get('endpoint-lag') ?? 0);
const preStopMs = Number(args.get('pre-stop') ?? 0);
const shutdownGrace = args.get('shutdown-grace') ?? '20s';
const root = resolve(args.get('root') ?? join(import.meta.dirname, '../..'));
const label = args.get('label');
const client = args.get('client') ?? 'autocannon';
if (client !== 'autocannon' && client !== 'node') throw new Error('--client: autocannon or node');
const body: string = bodies()[bodyId] ?? usage(`--body: one of ${Object.keys(bodies()).join(', ')}`);

function usage(message: string): never {
  throw new Error(message);
}

interface Replica {
  name: string;
  port: number;
  child: ChildProcess;
  /** Warnings and errors it logged, and the moment it exited. */
  warnings: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
}

let replicaCount = 0;

async function startReplica(kubeconfig: string, certDir: string): Promise<Replica> {
  const lease = new PortLease();
  const port = await lease.take();
  const name = `replica-${++replicaCount}`;
  const child = spawn(
    'setpriv',
    ['--pdeathsig', 'KILL', '--', process.execPath, ...addOnArgs(root), 'serve', '--no-watcher', '--kubeconfig', kubeconfig, '--cert-dir', certDir, '--listen-address', `127.0.0.1:${port}`, '--shutdown-grace', shutdownGrace],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, KUBECONFIG: '', ...roleEnv('webhook', root) } },
  );
  const warnings: string[] = [];
  // One log line per decision: read and dropped, keeping only warnings and errors.
  let partial = '';
  const onData = (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) if (/"level":(40|50|60)/.test(line) || !line.startsWith('{')) warnings.push(line.slice(0, 300));
  };
  child.stdout.setEncoding('utf8').on('data', onData);
  child.stderr.setEncoding('utf8').on('data', onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolveExit) =>
    child.on('close', (code, signal) => resolveExit({ code, signal, at: performance.now() })),
  );
  void exited.then(() => lease.release());
  const deadline = Date.now() + 30_000;
  while ((await httpStatus(`https://127.0.0.1:${port}/readyz`)) !== 200) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`${name} did not get ready: ${warnings.join('\n')}`);
    await sleep(100);
  }
  return { name, port, child, warnings, exited };
}

const backendOf = (replica: Replica): Backend => ({ host: '127.0.0.1', port: replica.port });

const certDir = mkdtempSync(join(tmpdir(), 'st-bench-rolling-'));
const cp = await startControlPlane();
const replicas: Replica[] = [];
try {
  replicas.push(await startReplica(cp.kubeconfigPath, certDir)); // creates the certificates
  replicas.push(await startReplica(cp.kubeconfigPath, certDir));
  const balancer = await startTcpBalancer(replicas.map(backendOf));

  const statuses = new Map<number, number>();
  const errors = new Map<string, number>();
  const count = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
  let sent = 0;
  let lost = 0;
  let inFlightAtEnd = 0;
  let timeouts = 0;
  const t0 = performance.now();
  const load = client === 'autocannon' ? autocannonLoad() : nodeLoad();

  /**
   * autocannon: as fast as each connection goes. It writes the next request the moment a
   * response is in, ignoring `Connection: close`, and re-sends on a new connection when one
   * closes under a request without reporting the request it lost: each connection's unanswered
   * requests are counted here.
   */
  async function autocannonLoad(): Promise<void> {
    const outstanding = new Map<EventEmitter, number>();
    const setupClient = (connection: EventEmitter) => {
      outstanding.set(connection, 0);
      connection.on('request', () => {
        sent++;
        const waiting = outstanding.get(connection) ?? 0;
        if (waiting > 0) lost += waiting; // a new request before the answer to the previous one
        outstanding.set(connection, 1);
      });
      connection.on('response', () => outstanding.set(connection, 0));
      connection.on('connError', (error: NodeJS.ErrnoException) => count(errors, `connection ${error.code ?? error.message}`));
    };
    // setupClient is not in bench/types/autocannon.d.ts: the options are typed here with it.
    const options: Options & { setupClient: typeof setupClient } = { ...admissionLoad(`https://127.0.0.1:${balancer.port}${path}`, body, connections, durationS), setupClient, timeout: 10 };
    const instance = autocannon(options);
    instance.on('response', (_client: object, statusCode: number) => statuses.set(statusCode, (statuses.get(statusCode) ?? 0) + 1));
    instance.on('reqError', (error: NodeJS.ErrnoException) => count(errors, error.code ?? error.message));
    const result = await instance;
    timeouts = result.timeouts;
    // Requests still waiting when the run's time was up were cut by autocannon, not by a restart.
    inFlightAtEnd = [...outstanding.values()].reduce((a, b) => a + b, 0);
  }

  /**
   * Node's keep-alive agent, `connections` requests at a time: like Go's HTTP client (the API
   * server's), it honours `Connection: close` and reports a request lost with its connection
   * (ECONNRESET, socket hang up) instead of re-sending it.
   */
  async function nodeLoad(): Promise<void> {
    const agent = new Agent({ keepAlive: true, maxSockets: connections, rejectUnauthorized: false });
    const deadline = t0 + durationS * 1000;
    const post = () =>
      new Promise<void>((resolvePost) => {
        sent++;
        const req = request(
          { host: '127.0.0.1', port: balancer.port, path, method: 'POST', agent, timeout: 10_000, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
          (res) => {
            res.resume();
            res.on('end', () => {
              statuses.set(res.statusCode ?? 0, (statuses.get(res.statusCode ?? 0) ?? 0) + 1);
              resolvePost();
            });
            res.on('error', () => resolvePost());
          },
        );
        req.on('timeout', () => {
          timeouts++;
          req.destroy(new Error('timeout'));
        });
        req.on('error', (error: NodeJS.ErrnoException) => {
          lost++;
          count(errors, error.code ?? error.message);
          resolvePost();
        });
        req.end(body);
      });
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (performance.now() < deadline) await post();
      }),
    );
    agent.destroy();
  }

  const restarts: Array<{ old: string; new: string; at: number; exitAfterMs: number; exit: string; gracePeriodUsedUp: boolean }> = [];
  const roll = async (slot: number) => {
    const old = replicas[slot]!;
    const fresh = await startReplica(cp.kubeconfigPath, certDir);
    balancer.add(backendOf(fresh));
    replicas[slot] = fresh;
    const at = performance.now();
    const removed = sleep(endpointLagMs).then(() => balancer.remove(backendOf(old)));
    if (preStopMs > 0) await sleep(preStopMs);
    old.child.kill('SIGTERM');
    await removed;
    const exit = await old.exited;
    restarts.push({
      old: old.name,
      new: fresh.name,
      at: Math.round((at - t0) / 100) / 10,
      exitAfterMs: Math.round(exit.at - at),
      exit: exit.signal ?? `code ${exit.code}`,
      gracePeriodUsedUp: old.warnings.some((line) => line.includes('shutdown grace period over')),
    });
  };
  const rolling = (async () => {
    await sleep(durationS * 250);
    await roll(0);
    await sleep(Math.max(0, t0 + durationS * 600 - performance.now()));
    await roll(1);
  })();
  await load;
  await rolling;
  const proxy = balancer.stats();
  await balancer.stop();

  const responses = [...statuses.values()].reduce((a, b) => a + b, 0);
  const non2xx = [...statuses].filter(([status]) => status < 200 || status >= 300).reduce((sum, [, n]) => sum + n, 0);
  const errorCount = [...errors.values()].reduce((a, b) => a + b, 0);
  const summary = {
    date: new Date().toISOString(),
    command: `node bench/rolling-restart/run.ts ${process.argv.slice(2).join(' ')}`.trim(),
    root,
    settings: { client, durationS, connections, path, bodyId, bodyBytes: Buffer.byteLength(body), endpointLagMs, preStopMs, shutdownGrace },
    load: machineLoad(),
    sent,
    responses,
    lost,
    inFlightAtEnd,
    '2xx': responses - non2xx,
    non2xx,
    statuses: Object.fromEntries(statuses),
    errors: errorCount,
    errorCodes: Object.fromEntries(errors),
    timeouts,
    // New connections a replica refused (its listener closed) that the proxy retried on the other:
    // a Service does not retry, so each would be a failed webhook call there.
    refusedConnections: proxy.refused,
    restarts,
    warnings: Object.fromEntries(replicas.map((r) => [r.name, r.warnings.slice(0, 5)])),
    elapsedS: Math.round((performance.now() - t0) / 100) / 10,
  };
  const markdown = [
    `## Rolling restart under load${label ? ` (${label})` : ''}`,
    '',
    `\`${summary.command}\`, ${summary.date}; client ${client}, ${durationS} s, ${connections} connections, POST ${path} (${bodyId}, ${summary.settings.bodyBytes} bytes), endpoint removed ${endpointLagMs} ms after the stop began, SIGTERM ${preStopMs} ms after it (preStop), --shutdown-grace ${shutdownGrace}; load average ${summary.load}.`,
    '',
    table(
      ['sent', '2xx', 'non-2xx', 'lost (connection closed under it)', 'errors', 'timeouts', 'cut at the end of the run', 'connections refused (retried by the proxy)'],
      [[
        String(sent),
        String(summary['2xx']),
        `${non2xx}${non2xx ? ` ${JSON.stringify(Object.fromEntries([...statuses].filter(([s]) => s >= 300 || s < 200)))}` : ''}`,
        String(lost),
        `${errorCount}${errorCount ? ` ${JSON.stringify(summary.errorCodes)}` : ''}`,
        String(timeouts),
        String(inFlightAtEnd),
        String(proxy.refused),
      ]],
    ),
    '',
    table(
      ['replaced', 'by', 'stop began at', 'exited after', 'exit', 'grace period used up'],
      restarts.map((r) => [r.old, r.new, `${r.at} s`, `${r.exitAfterMs} ms`, r.exit, r.gracePeriodUsedUp ? 'yes' : 'no']),
    ),
    '',
  ].join('\n');
  const out = join(import.meta.dirname, '../results');
  mkdirSync(out, { recursive: true });
  const name = `rolling-restart${label ? `-${label}` : ''}`;
  writeFileSync(join(out, `${name}.json`), `${JSON.stringify(summary, null, 2)}\n`);
  writeFileSync(join(out, `${name}.md`), markdown);
  process.stdout.write(markdown);
} finally {
  for (const replica of replicas) replica.child.kill('SIGKILL');
  await cp.stop();
  rmSync(certDir, { recursive: true, force: true });
}
