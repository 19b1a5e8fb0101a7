// OpenKruise's SidecarTerminator controller as a process next to a control plane: the peer of the
// benchmarks and of the parity table (bench/kruise/main.go, built by scripts/build-kruise-peer.sh).
// Its readiness says that its pods, nodes and ContainerRecreateRequests are cached.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { httpStatus, PortLease } from '../../test/support/net.ts';

const repoRoot = resolve(import.meta.dirname, '../..');

export interface KruisePeerOptions {
  kubeconfig: string;
  logFile: string;
  /** Cache (and act on) this namespace only, as kruise-manager's --namespace; all when unset. */
  namespace?: string;
  /** Where a SIGUSR2 makes it write its live heap and RSS (bench/kruise/main.go). */
  gcProbeOut?: string;
  readyTimeoutMs?: number;
}

export interface KruisePeer {
  pid: number;
  child: ChildProcess;
  logTail(lines?: number): string;
  stop(): Promise<void>;
}

/** The OpenKruise version the peer is built from (scripts/versions.sh, or $KRUISE_VERSION), e.g. `v1.9.0`. */
export function kruiseVersion(): string {
  return process.env.KRUISE_VERSION || (/KRUISE_VERSION:=(v[\w.-]+)/.exec(readFileSync(resolve(repoRoot, 'scripts/versions.sh'), 'utf8'))?.[1] ?? 'unknown');
}

/** Builds the peer once (then cached); its binary's path. */
export async function buildKruisePeer(): Promise<string> {
  const { stdout } = await promisify(execFile)('bash', [resolve(repoRoot, 'scripts/build-kruise-peer.sh')], { cwd: repoRoot, maxBuffer: 16 * 1024 * 1024 });
  const binary = stdout.trim().split('\n').pop();
  if (!binary) throw new Error('scripts/build-kruise-peer.sh printed no binary');
  return binary;
}

export async function startKruisePeer(options: KruisePeerOptions): Promise<KruisePeer> {
  const binary = await buildKruisePeer();
  const lease = new PortLease();
  const healthPort = await lease.take();
  const log = openSync(options.logFile, 'a');
  // setpriv: the peer dies with the process that started it, whatever happens to that one.
  const child = spawn(
    'setpriv',
    ['--pdeathsig', 'KILL', '--', binary, `--kubeconfig=${options.kubeconfig}`, `--health-probe-addr=127.0.0.1:${healthPort}`, '--metrics-addr=0', ...(options.namespace ? [`--namespace=${options.namespace}`] : [])],
    { stdio: ['ignore', log, log], env: { ...process.env, ...(options.gcProbeOut ? { BENCH_GC_PROBE_OUT: options.gcProbeOut } : {}) } },
  );
  closeSync(log);
  let exit: string | undefined;
  const exited = new Promise<void>((resolveExit) => child.once('exit', (code, signal) => resolveExit(void (exit = signal ?? `code ${code}`))));
  void exited.then(() => lease.release());
  const logTail = (lines = 30) => readFileSync(options.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  const peer: KruisePeer = {
    pid: child.pid!,
    child,
    logTail,
    async stop() {
      if (exit !== undefined) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
    },
  };
  const deadline = Date.now() + (options.readyTimeoutMs ?? 300_000);
  while ((await httpStatus(`http://127.0.0.1:${healthPort}/readyz`)) !== 200) {
    if (exit !== undefined) throw new Error(`the Kruise peer exited (${exit}) before it was ready:\n${logTail()}`);
    if (Date.now() > deadline) {
      await peer.stop();
      throw new Error(`the Kruise peer was not ready in time:\n${logTail()}`);
    }
    await sleep(200);
  }
  return peer;
}

