// Starts and stops test clusters back to back while a load of outgoing TCP connections holds
// ephemeral ports on the machine, and counts the failures: the check that the harness's ports
// (test/support/net.ts) cannot collide. Not part of `make test`.
//
//   node scripts/stress-clusters.ts [--control-planes 100] [--workers 2] [--real-clusters 20] [--rate 500] [--hold 20] [--warm-up 60] [--own-network]
//
// --control-planes N  control planes (etcd, kube-apiserver, kube-controller-manager), each started,
//                     checked (a namespace and its default ServiceAccount) and stopped; by --workers
//                     processes at once, so their port leases meet.
// --real-clusters N   then, one after another: a control plane with kube-scheduler, a real node
//                     (kubelet, containerd, kube-proxy), `serve` registered as the webhook, and a
//                     Job run to completion on the node; stopped. Needs root.
// --rate N            outgoing connections per second of the load, half to 127.0.0.1, half to
// --hold S            this host's address, each held open S seconds and then closed by the client
//                     (its port then stays in TIME_WAIT a minute); --warm-up seconds of it run
//                     before the first cluster.
// --own-network       run everything in a new network namespace (loopback, and a veth pair with
//                     the default route for the node's address): the load then takes no
//                     ephemeral port from the machine's other users.
// It ends with the counts, the failures (the one-line error of each) and the time. --help: this text.
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { hostAddress, startControlPlane } from '../test/support/control-plane.ts';
import { ephemeralPortRange } from '../test/support/net.ts';
import { realNodeUnavailable, startRealNode } from '../test/support/real-node.ts';
import { registeringWebhooks, startServe } from '../test/support/serve-process.ts';
import { jobYaml } from '../test/support/pods.ts';
import { apply, waitForJob } from '../test/support/stack.ts';
import { BatchV1Api, CoreV1Api } from '@kubernetes/client-node';

const script = resolve(import.meta.dirname, 'stress-clusters.ts');
const OWN_NETWORK_ENV = 'SIDECAR_TERMINATOR_STRESS_OWN_NETWORK';

const { values: options } = parseArgs({
  options: {
    'control-planes': { type: 'string', default: '100' },
    workers: { type: 'string', default: '2' },
    'real-clusters': { type: 'string', default: '20' },
    rate: { type: 'string', default: '500' },
    hold: { type: 'string', default: '20' },
    'warm-up': { type: 'string', default: '60' },
    'own-network': { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
    // Internal: the roles of the child processes.
    'connection-load': { type: 'string' },
    'load-listener': { type: 'boolean', default: false },
    'control-plane-worker': { type: 'string' },
  },
});

interface Outcome {
  ok: number;
  failures: string[];
  retries: string[];
  seconds: number[];
}

const say = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);

if (options.help) process.stdout.write(usage());
else if (options['connection-load'] !== undefined) await connectionLoad(Number(options['connection-load']), Number(options.hold));
else if (options['load-listener']) await loadListener();
else if (options['control-plane-worker'] !== undefined) process.stdout.write(`${JSON.stringify(await controlPlanes(Number(options['control-plane-worker'])))}\n`);
else if (options['own-network'] && !process.env[OWN_NETWORK_ENV]) process.exitCode = await inOwnNetwork();
else process.exitCode = await main();

async function main(): Promise<number> {
  const controlPlaneCount = Number(options['control-planes']);
  const workers = Math.max(1, Math.min(Number(options.workers), controlPlaneCount || 1));
  const realClusterCount = Number(options['real-clusters']);
  if (realClusterCount > 0 && realNodeUnavailable()) throw new Error(`--real-clusters needs a real node: ${realNodeUnavailable()}`);
  const started = Date.now();
  const load = startConnectionLoad(Number(options.rate), Number(options.hold));
  // Load first: the ephemeral range fills with TIME_WAIT ports (kept a minute) before the first cluster.
  say(`connection load: ${options.rate} connections/s, each held ${options.hold} s${process.env[OWN_NETWORK_ENV] ? ', in a network namespace of its own' : ''}; ${options['warm-up']} s before the first cluster`);
  await sleep(Number(options['warm-up']) * 1000);

  const controlPlaneStart = Date.now();
  const perWorker = Array.from({ length: workers }, (_, index) => Math.floor(controlPlaneCount / workers) + (index < controlPlaneCount % workers ? 1 : 0));
  const controlPlaneOutcomes = await Promise.all(perWorker.filter((count) => count > 0).map((count) => runWorker(count)));
  const cp = merge(controlPlaneOutcomes);
  const controlPlaneSeconds = (Date.now() - controlPlaneStart) / 1000;

  const realStart = Date.now();
  const real = await realClusters(realClusterCount);
  const realSeconds = (Date.now() - realStart) / 1000;

  const loadReport = await load.stop();
  const ephemeral = ephemeralPortRange();
  const lines = [
    '',
    `control planes: ${cp.ok} of ${controlPlaneCount} started, checked and stopped, ${cp.failures.length} failed, ${cp.retries.length} tried again on new ports; ${workers} processes at once, ${formatSeconds(controlPlaneSeconds)} in all, start to stop ${spread(cp.seconds)}`,
    `clusters with a real node: ${real.ok} of ${realClusterCount} started (control plane, node with kube-proxy, serve), ran a Job, stopped; ${real.failures.length} failed, ${real.retries.length} tried again on new ports; ${formatSeconds(realSeconds)} in all, each ${spread(real.seconds)}`,
    `connection load: ${loadReport.made} connections (${(loadReport.made / loadReport.seconds).toFixed(0)}/s), ${loadReport.failed} failed; ports of the ephemeral range (${ephemeral.low}-${ephemeral.high}, ${ephemeral.high - ephemeral.low + 1} ports) in use: up to ${loadReport.peakPortsInUse}, ${loadReport.meanPortsInUse} on average`,
    ...[...cp.retries, ...real.retries].map((line) => `retry: ${line}`),
    ...[...cp.failures, ...real.failures].map((line) => `failure: ${line}`),
    `total: ${cp.failures.length + real.failures.length} failures in ${cp.ok + real.ok + cp.failures.length + real.failures.length} starts, ${formatSeconds((Date.now() - started) / 1000)}`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  return cp.failures.length + real.failures.length === 0 ? 0 : 1;
}

/** Control planes one after another in this process: start, a namespace with its ServiceAccount, stop. */
async function controlPlanes(count: number): Promise<Outcome> {
  const outcome: Outcome = { ok: 0, failures: [], retries: [], seconds: [] };
  for (let index = 0; index < count; index++) {
    const begin = Date.now();
    try {
      const cp = await startControlPlane({ log: (line) => outcome.retries.push(line) });
      try {
        await cp.createNamespace();
      } finally {
        await cp.stop();
      }
      outcome.ok++;
      outcome.seconds.push((Date.now() - begin) / 1000);
    } catch (error) {
      outcome.failures.push((error as Error).message.split('\n')[0]!);
    }
    if ((index + 1) % 10 === 0) say(`control planes (process ${process.pid}): ${index + 1} of ${count}, ${outcome.failures.length} failed`);
  }
  return outcome;
}

/** Clusters with a real node, one after another: control plane, node with kube-proxy, serve, one Job. */
async function realClusters(count: number): Promise<Outcome> {
  const outcome: Outcome = { ok: 0, failures: [], retries: [], seconds: [] };
  const log = (line: string) => outcome.retries.push(line);
  for (let index = 0; index < count; index++) {
    const begin = Date.now();
    const stops: Array<() => Promise<unknown>> = [];
    try {
      const cp = await startControlPlane({ scheduler: true, reachableFromPods: true, log });
      stops.push(() => cp.stop());
      const node = await startRealNode(cp, { kubeProxy: true, images: ['busybox'], log });
      stops.push(() => node.stop());
      const serve = await startServe((port) => ['--kubeconfig', cp.kubeconfigPath, '--cert-dir', join(cp.dir, 'serve-certs'), ...registeringWebhooks(port, 'Fail')], { log });
      stops.push(() => serve.stop());
      const namespace = await cp.createNamespace();
      await apply(cp, namespace, jobYaml('stress', { containers: `        - name: main\n          image: ${node.images.busybox}\n          command: ["sh", "-c", "exit 0"]` }));
      await waitForJob({ core: cp.kubeConfig.makeApiClient(CoreV1Api), batch: cp.kubeConfig.makeApiClient(BatchV1Api) }, namespace, 'stress', 'Complete', 120_000);
      outcome.ok++;
      outcome.seconds.push((Date.now() - begin) / 1000);
    } catch (error) {
      outcome.failures.push((error as Error).message.split('\n')[0]!);
    } finally {
      for (const stop of stops.reverse()) await stop().catch((error: unknown) => outcome.failures.push(`stopping: ${String(error)}`));
    }
    say(`clusters with a real node: ${index + 1} of ${count}, ${outcome.failures.length} failed`);
  }
  return outcome;
}

function runWorker(count: number): Promise<Outcome> {
  return new Promise((resolveRun, reject) => {
    const child = spawnSelf(['--control-plane-worker', String(count)]);
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      try {
        resolveRun(JSON.parse(out) as Outcome);
      } catch {
        reject(new Error(`a control plane worker exited (${code}) without its counts: ${out}`));
      }
    });
  });
}

function merge(outcomes: Outcome[]): Outcome {
  return {
    ok: outcomes.reduce((sum, each) => sum + each.ok, 0),
    failures: outcomes.flatMap((each) => each.failures),
    retries: outcomes.flatMap((each) => each.retries),
    seconds: outcomes.flatMap((each) => each.seconds),
  };
}

interface LoadReport {
  made: number;
  failed: number;
  seconds: number;
  peakPortsInUse: number;
  meanPortsInUse: number;
}

/** The load in a child process; its counts, and how many ephemeral ports are in use (sampled every 2 s). */
function startConnectionLoad(rate: number, holdSeconds: number): { stop(): Promise<LoadReport> } {
  const begin = Date.now();
  const child = spawnSelf(['--connection-load', String(rate), '--hold', String(holdSeconds)]);
  let last = { made: 0, failed: 0 };
  readLines(child, (line) => (last = JSON.parse(line) as typeof last));
  const samples: number[] = [];
  const sampler = setInterval(() => samples.push(ephemeralPortsInUse()), 2000);
  return {
    async stop() {
      clearInterval(sampler);
      child.kill('SIGTERM');
      await new Promise((resolveExit) => child.once('close', resolveExit));
      return {
        ...last,
        seconds: (Date.now() - begin) / 1000,
        peakPortsInUse: Math.max(0, ...samples),
        meanPortsInUse: samples.length ? Math.round(samples.reduce((a, b) => a + b, 0) / samples.length) : 0,
      };
    },
  };
}

/**
 * The load itself: `rate` connections a second to a listener of another process, each held open
 * `holdSeconds`, then closed by the client (whose port then stays in TIME_WAIT for a minute). Half
 * go to 127.0.0.1, half to this host's address: a port held on either conflicts with a later
 * bind on that address or on every address. (Held open, as connections of a busy machine are:
 * Linux reuses a loopback connection's TIME_WAIT port at once, net.ipv4.tcp_tw_reuse=2.)
 */
async function connectionLoad(rate: number, holdSeconds: number): Promise<void> {
  const listener = spawnSelf(['--load-listener']);
  const port = await new Promise<number>((resolvePort) => readLines(listener, (line) => resolvePort(Number(line))));
  const hosts = ['127.0.0.1', hostAddress()];
  const counts = { made: 0, failed: 0 };
  const perTick = Math.max(1, Math.round(rate / 50));
  let tick = 0;
  setInterval(() => {
    for (let i = 0; i < perTick; i++) {
      const socket = connect(port, hosts[tick++ % hosts.length]);
      socket.on('connect', () => {
        counts.made++;
        setTimeout(() => socket.end(), holdSeconds * 1000);
      });
      socket.on('error', () => counts.failed++);
    }
  }, 20);
  setInterval(() => process.stdout.write(`${JSON.stringify(counts)}\n`), 1000);
  process.on('SIGTERM', () => {
    process.stdout.write(`${JSON.stringify(counts)}\n`);
    process.exit(0);
  });
}

/** The load's listener, in a process of its own (a process holds 20,000 descriptors at most here and there): prints its port. */
async function loadListener(): Promise<void> {
  // It waits for the client's FIN: the client closes first and keeps the TIME_WAIT.
  const server = createServer((socket) => {
    socket.on('error', () => {});
    socket.on('end', () => socket.end());
  });
  await new Promise<void>((resolveListen) => server.listen(0, '0.0.0.0', resolveListen));
  process.stdout.write(`${(server.address() as { port: number }).port}\n`);
}

function spawnSelf(args: string[]): ChildProcessByStdio<null, Readable, null> {
  return spawn('setpriv', ['--pdeathsig', 'KILL', '--', process.execPath, script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
}

function readLines(child: ChildProcessByStdio<null, Readable, null>, onLine: (line: string) => void): void {
  let partial = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) onLine(line);
  });
}

/** How many of the ephemeral range's port numbers a TCP socket of this network namespace uses as its local port. */
function ephemeralPortsInUse(): number {
  const { low, high } = ephemeralPortRange();
  const used = new Set<number>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const local = line.trim().split(/\s+/)[1];
      if (!local) continue;
      const port = parseInt(local.slice(local.lastIndexOf(':') + 1), 16);
      if (port >= low && port <= high) used.add(port);
    }
  }
  return used.size;
}

/** Runs this script again in a new network namespace: loopback up, and a veth pair (the kernel's CNI bridges use it too) holding the default route. */
async function inOwnNetwork(): Promise<number> {
  const setup = [
    'ip link set lo up',
    'ip link add st-stress0 type veth peer name st-stress1',
    'ip addr add 192.0.2.1/24 dev st-stress0',
    'ip link set st-stress0 up',
    'ip link set st-stress1 up',
    'ip route add default dev st-stress0',
    'exec "$@"',
  ].join(' && ');
  const child = spawn('unshare', ['--net', '--', 'sh', '-c', setup, 'sh', process.execPath, script, ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...process.env, [OWN_NETWORK_ENV]: '1' },
  });
  return await new Promise((resolveExit) => child.on('close', (code) => resolveExit(code ?? 1)));
}

/** The comment this file opens with. */
function usage(): string {
  const lines = readFileSync(script, 'utf8').split('\n');
  return `${lines.slice(0, lines.findIndex((line) => !line.startsWith('//'))).map((line) => line.replace(/^\/\/ ?/, '')).join('\n')}\n`;
}

function spread(seconds: number[]): string {
  if (seconds.length === 0) return 'n/a';
  const sorted = [...seconds].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return `median ${at(0.5).toFixed(1)} s, max ${sorted.at(-1)!.toFixed(1)} s`;
}

function formatSeconds(seconds: number): string {
  return seconds >= 120 ? `${(seconds / 60).toFixed(1)} min` : `${seconds.toFixed(0)} s`;
}
