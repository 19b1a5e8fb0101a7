// One long-running process of a test cluster (etcd, kube-apiserver, kubelet, containerd,
// kruise-daemon...), its output appended to a log file. No such process can outlive the test
// process: it is started through `setpriv --pdeathsig KILL`, so the kernel kills it when Node
// dies, even on SIGKILL. setpriv execs the command, so the child's pid is the command's own, and a
// signal sent to it (a fault injected by a test) reaches the command itself.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { repoRoot } from './repo.ts';


export interface ManagedProcessOptions {
  env?: NodeJS.ProcessEnv;
  /** Its working directory. Default: the test process's. */
  cwd?: string;
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
    this.child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', log, log], env: options.env ?? process.env, ...(options.cwd ? { cwd: options.cwd } : {}) });
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

  /** The command's pid (setpriv execs it); undefined when it could not be spawned. */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Whether it has not exited yet (a process stopped by SIGSTOP still runs). */
  running(): boolean {
    return this.exitStatus === undefined;
  }

  /** Sends `sig` to the process itself. A no-op once it has exited: its pid may be another's by then. */
  signal(sig: NodeJS.Signals): void {
    if (this.running()) this.child.kill(sig);
  }

  /**
   * Resolves true once it has exited, or false when `timeoutMs` passes first. Its exit is seen
   * on the event loop, so even a SIGKILL just sent needs this before running() turns false.
   */
  async waitExit(timeoutMs = Infinity): Promise<boolean> {
    if (!this.running()) return true;
    if (timeoutMs === Infinity) {
      await this.exited;
      return true;
    }
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolveTimeout) => (timer = setTimeout(() => resolveTimeout(false), timeoutMs)));
    const exited = await Promise.race([this.exited.then(() => true), timedOut]);
    clearTimeout(timer);
    return exited;
  }

  /** SIGTERM, then SIGKILL when it has not exited after `graceMs`. */
  async stop(graceMs = 3000): Promise<void> {
    if (this.exitStatus !== undefined) return;
    this.child.kill('SIGTERM');
    // One stopped by SIGSTOP (a fault a test injected) would otherwise sit on its SIGTERM until the SIGKILL.
    this.child.kill('SIGCONT');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  killNow(): void {
    if (this.exitStatus === undefined) this.child.kill('SIGKILL');
  }

  logTail(lines: number): string {
    return this.log().trimEnd().split('\n').slice(-lines).join('\n') || '(no log)';
  }

  log(): string {
    try {
      return readFileSync(this.logPath, 'utf8');
    } catch {
      return '';
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

export interface WaitOptions {
  intervalMs?: number;
  /** The process whose work `check` waits for: a timeout names it and its log. */
  waitingOn?: ManagedProcess;
}

/**
 * Polls `check` (a throw counts as not yet) until it holds; fails at once, naming it, when one of
 * `processes` has exited meanwhile, and at `deadline` (a Date.now() value). Fails with a
 * ComponentStartError.
 */
export async function waitWhileRunning(what: string, processes: Iterable<ManagedProcess>, deadline: number, check: () => Promise<boolean>, options: WaitOptions = {}): Promise<void> {
  // Taken once: an iterator (a Map's values()) would be empty from the second look on.
  const watched = [...processes];
  for (;;) {
    if (await check().catch(() => false)) return;
    const exited = watched.find((p) => p.exitStatus !== undefined);
    if (exited) throw exitedBeforeReady(exited.name, exited.exitStatus!, what, exited.log(), exited.logPath);
    if (Date.now() > deadline) {
      const { waitingOn } = options;
      throw new ComponentStartError({
        component: waitingOn?.name ?? what,
        reason: `timed out waiting for ${what}${waitingOn ? `; its last log line: ${readableLine(waitingOn.logTail(1))}` : ''}`,
        remedy: 'the machine may be too busy (try again with fewer tests at once); else its log tells what it waited for',
        logPath: waitingOn?.logPath,
      });
    }
    await sleep(options.intervalMs ?? 250);
  }
}

/**
 * Why a component of a test cluster (a process, or serve) did not start: `message` is one line
 * naming it, the cause and what to do, and where its log stays. `portTaken` is set when it could
 * not bind a port (some program outside the port leases took it; see test/support/net.ts).
 */
export class ComponentStartError extends Error {
  readonly component: string;
  readonly reason: string;
  readonly remedy: string;
  readonly logPath: string | undefined;
  readonly portTaken: number | undefined;
  /** The last lines of the logs of the cluster's processes (tap shows them with the failure). */
  logTails: string | undefined;

  constructor(fields: { component: string; reason: string; remedy: string; logPath?: string | undefined; portTaken?: number | undefined; error?: unknown }) {
    super(`${fields.component} did not start: ${fields.reason}. What to do: ${fields.remedy}.${fields.logPath ? ` Its log: ${fields.logPath}` : ''}`, { cause: fields.error });
    this.name = 'ComponentStartError';
    this.component = fields.component;
    this.reason = fields.reason;
    this.remedy = fields.remedy;
    this.logPath = fields.logPath;
    this.portTaken = fields.portTaken;
  }

  /** The same failure, after a second try on new ports. */
  retried(): ComponentStartError {
    const again = new ComponentStartError({
      component: this.component,
      reason: `${this.reason} (also after a second try on new ports)`,
      remedy: this.remedy,
      logPath: this.logPath,
      portTaken: this.portTaken,
    });
    again.logTails = this.logTails;
    return again;
  }
}

/**
 * `err`, from starting `what`, as a ComponentStartError carrying the processes' `logTails`; an
 * error that names no component (a command of the harness failed) is named after `what`.
 */
export function startFailure(what: string, err: unknown, logTails: string): ComponentStartError {
  const failure = err instanceof ComponentStartError
    ? err
    : new ComponentStartError({
      component: what,
      reason: String((err as Error)?.message ?? err).split('\n')[0]!,
      error: err,
      remedy: 'the error names what failed; the logs of its processes are in this error\'s details',
    });
  failure.logTails = logTails;
  return failure;
}

/** The error for a process that exited before it was ready: the cause read from the end of its log. */
export function exitedBeforeReady(component: string, exitStatus: string, what: string, log: string, logPath: string | undefined): ComponentStartError {
  const portTaken = portTakenIn(log);
  if (portTaken) {
    return new ComponentStartError({
      component,
      reason: portTaken.line,
      remedy: `port ${portTaken.port} was taken by a program that does not lease its ports (\`ss -ltnp 'sport = :${portTaken.port}'\` names it); stop it, or run again`,
      logPath,
      portTaken: portTaken.port,
    });
  }
  const cause = lastErrorLine(log);
  return new ComponentStartError({
    component,
    reason: `exited (${exitStatus}) while waiting for ${what}${cause ? `: ${cause}` : ''}`,
    remedy: cause ? 'fix what that error names and run again' : 'read its log for the error before the exit',
    logPath,
  });
}

/**
 * Runs `start` (which leases new ports each time it runs); when a component could not bind one
 * of them, says so through `log` and runs it once more. A second failure is thrown as it is.
 */
export async function retryOnPortTaken<T>(what: string, start: () => Promise<T>, log: (line: string) => void = logLine): Promise<T> {
  try {
    return await start();
  } catch (err) {
    if (!(err instanceof ComponentStartError) || err.portTaken === undefined) throw err;
    log(`${what}: ${err.component} could not bind port ${err.portTaken} (${err.reason}); starting again on new ports${err.logPath ? ` (log of the first try: ${err.logPath})` : ''}`);
  }
  try {
    return await start();
  } catch (err) {
    throw err instanceof ComponentStartError && err.portTaken !== undefined ? err.retried() : err;
  }
}

/**
 * Runs scripts/`script`, which builds (or finds cached) what a cluster runs and prints where it
 * is on its last line. A failed build is a ComponentStartError naming the script.
 */
export async function buildScriptOutput(script: string, args: string[] = []): Promise<string> {
  let stdout: string;
  try {
    ({ stdout } = await promisify(execFile)('bash', [join(repoRoot, 'scripts', script), ...args], { cwd: repoRoot, maxBuffer: 16 * 1024 * 1024 }));
  } catch (err) {
    const stderr = String((err as { stderr?: string }).stderr ?? '').trim();
    throw new ComponentStartError({
      component: `scripts/${script}`,
      reason: `the build failed: ${stderr.split('\n').pop() || (err as Error).message}`,
      remedy: `run \`bash scripts/${[script, ...args].join(' ')}\` to see its whole output`,
      error: err,
    });
  }
  const dir = stdout.trim().split('\n').pop();
  if (!dir) throw new Error(`scripts/${script} printed no directory`);
  return dir;
}

/** Where the harness reports what it does on its own (a retry): one line on stderr, which tap passes through. */
export function logLine(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** Empties `dir` but for its `*.log` files: what a failed start leaves, for the error to point at. */
export function keepOnlyLogs(dir: string): void {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return;
  }
  for (const entry of entries) {
    if (!entry.endsWith('.log')) rmSync(join(dir, entry), { recursive: true, force: true, maxRetries: 3 });
  }
}

/** A bind failure in a log: Go's `listen tcp 127.0.0.1:P: bind: address already in use`, Node's `listen EADDRINUSE: address already in use 127.0.0.1:P`. */
export function portTakenIn(log: string): { port: number; line: string } | undefined {
  const go = /listen tcp[46]? (\S*):(\d+): bind: address already in use/.exec(log);
  if (go) return { port: Number(go[2]), line: go[0] };
  const node = /listen EADDRINUSE: address already in use (\S*):(\d+)/.exec(log);
  if (node) return { port: Number(node[2]), line: node[0] };
  return undefined;
}

/** The last line of a log that reports an error, made readable; undefined when none does. */
function lastErrorLine(log: string): string | undefined {
  const lines = log.trimEnd().split('\n').filter((line) => line.trim() !== '');
  const errorLine = lines.findLast((line) => /\b(error|fatal|failed|panic|unknown flag|invalid|cannot|denied)\b|^[EF]\d{4} /i.test(line));
  return errorLine === undefined ? undefined : readableLine(errorLine);
}

/** One log line, shortened: a JSON line (etcd, zap) by its message and error; a klog line without its header. */
function readableLine(line: string): string {
  let text = line.trim();
  try {
    const entry = JSON.parse(text) as Record<string, unknown>;
    if (entry && typeof entry === 'object' && typeof entry.msg === 'string') {
      text = [entry.msg, entry.error ?? entry.err].filter((part) => typeof part === 'string' && part !== '').join(': ');
    }
  } catch {
    text = text.replace(/^[IWEF]\d{4} [\d:.]+\s+\d+ [^\]]+\] /, '');
  }
  return text.length > 300 ? `${text.slice(0, 297)}...` : text;
}
