// One long-running process of a test cluster (etcd, kube-apiserver, kubelet, containerd,
// kruise-daemon...), its output appended to a log file. No such process can outlive the test
// process: it is started through `setpriv --pdeathsig KILL`, so the kernel kills it when Node
// dies, even on SIGKILL.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

export interface ManagedProcessOptions {
  env?: NodeJS.ProcessEnv;
  /** The command sets the parent-death signal itself (it ends by exec'ing setpriv); nothing is put in front. */
  setsPdeathsig?: boolean;
}

export class ManagedProcess {
  readonly name: string;
  readonly logPath: string;
  exitStatus: string | undefined;
  private readonly child: ChildProcess;
  private readonly exited: Promise<void>;

  constructor(name: string, command: readonly string[], logPath: string, options: ManagedProcessOptions = {}) {
    this.name = name;
    this.logPath = logPath;
    const argv = options.setsPdeathsig ? [...command] : ['setpriv', '--pdeathsig', 'KILL', '--', ...command];
    const log = openSync(logPath, 'a');
    this.child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', log, log], env: options.env ?? process.env });
    closeSync(log);
    this.exited = new Promise((resolveExit) => {
      this.child.on('exit', (code, signal) => {
        this.exitStatus = signal ?? `code ${code}`;
        resolveExit();
      });
      this.child.on('error', (err) => {
        this.exitStatus = err.message;
        resolveExit();
      });
    });
  }

  /** SIGTERM, then SIGKILL when it has not exited after `graceMs`. */
  async stop(graceMs = 3000): Promise<void> {
    if (this.exitStatus !== undefined) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  killNow(): void {
    if (this.exitStatus === undefined) this.child.kill('SIGKILL');
  }

  logTail(lines: number): string {
    try {
      return readFileSync(this.logPath, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }
}

/** The last lines of each process's log, to explain a failure. */
export function logTails(processes: Iterable<ManagedProcess>, lines = 30): string {
  return [...processes].map((p) => `--- ${p.name} (${p.logPath}) ---\n${p.logTail(lines)}`).join('\n');
}

/** Something that can be torn down synchronously when the test process ends. */
export interface KillableNow {
  killNow(): void;
}

const live = new Set<KillableNow>();
const exitSignals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
let exitHandlersInstalled = false;

/**
 * Tears `thing` down (killNow) if the test process ends without stopping it: on exit, and on
 * SIGINT/SIGTERM/SIGHUP, after which the signal is raised again so the process ends as it would
 * have. Returns the function that forgets it once it is stopped.
 */
export function killOnExit(thing: KillableNow): () => void {
  if (!exitHandlersInstalled) {
    exitHandlersInstalled = true;
    process.on('exit', killAll);
    for (const signal of exitSignals) process.on(signal, onSignal);
  }
  live.add(thing);
  return () => live.delete(thing);
}

function killAll(): void {
  for (const thing of live) thing.killNow();
  live.clear();
}

function onSignal(signal: NodeJS.Signals): void {
  killAll();
  for (const s of exitSignals) process.removeListener(s, onSignal);
  process.kill(process.pid, signal);
}

/**
 * Polls `check` (a throw counts as not yet) until it holds; fails at once, naming it, when one of
 * `processes` has exited meanwhile, and at `deadline` (a Date.now() value).
 */
export async function waitWhileRunning(what: string, processes: Iterable<ManagedProcess>, deadline: number, check: () => Promise<boolean>, intervalMs = 250): Promise<void> {
  // Taken once: an iterator (a Map's values()) would be empty from the second look on.
  const watched = [...processes];
  for (;;) {
    if (await check().catch(() => false)) return;
    const exited = watched.find((p) => p.exitStatus !== undefined);
    if (exited) throw new Error(`${exited.name} exited (${exited.exitStatus}) while waiting for ${what}`);
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}
