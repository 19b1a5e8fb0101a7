// Runs `node src/cli.ts serve ...` as a child process, the way an operator would, on a loopback
// port leased host-wide (test/support/net.ts): waits for /readyz, keeps its output, stops it with
// SIGTERM. A start that fails because some other program took the port is tried once more on a
// new one.
import { spawn } from 'node:child_process';
import { randomBytes, X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:tls';
import { ComponentStartError, exitedBeforeReady, retryOnPortTaken } from './managed-process.ts';
import { httpStatus, PortLease } from './net.ts';

// Its home is net.ts; re-exported for the files that import it from here.
export { httpStatus };

const cli = resolve(import.meta.dirname, '../../src/cli.ts');

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ServeProcess {
  pid: number;
  port: number;
  /** https://127.0.0.1:PORT, the value for --webhook-url. */
  url: string;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** The JSON log lines written so far. */
  logs(): Record<string, unknown>[];
  /** Settles when the process exits. */
  exited: Promise<Exit>;
  running(): boolean;
  /** SIGTERM, then waits for the exit (SIGKILL after `graceMs`). */
  stop(graceMs?: number): Promise<Exit>;
}

export interface StartOptions {
  readyTimeoutMs?: number;
  /** Options for node itself, e.g. a heap limit. */
  nodeArgs?: string[];
  /** What node runs: the CLI's sources by default; the benchmarks pass the image's build and flags (bench/lib/addon.ts), which come before nodeArgs' script. */
  entry?: string[];
  /** Wait for /readyz to answer 200 (default); false resolves once the process is started. */
  waitReady?: boolean;
  /** Where a second try on a new port is reported. Default: a line on stderr. */
  log?: (line: string) => void;
}

const SERVE = 'sidecar-terminator serve';

/**
 * Starts `serve` with `--listen-address 127.0.0.1:PORT` plus `args` (a function receives the
 * port, for flags such as --webhook-url) and resolves once /readyz answers 200.
 */
export async function startServe(args: string[] | ((port: number) => string[]), options: StartOptions = {}): Promise<ServeProcess> {
  return startOnLeasedPort(options, (port) => {
    const extra = typeof args === 'function' ? args(port) : args;
    return spawnServe(['--listen-address', `127.0.0.1:${port}`, ...extra], port, 'https', options.nodeArgs, options.entry);
  });
}

/** Starts `serve --no-webhook` with a plain-HTTP probe listener on a leased port; resolves once its /readyz answers 200. */
export async function startWatcherProcess(args: string[], options: StartOptions = {}): Promise<ServeProcess> {
  return startOnLeasedPort(options, (port) => spawnServe(['--no-webhook', '--probe-address', `127.0.0.1:${port}`, ...args], port, 'http', options.nodeArgs, options.entry));
}

/** Leases a port, spawns serve on it, waits until it is ready; the port is released when serve exits. */
function startOnLeasedPort(options: StartOptions, spawnOn: (port: number) => ServeProcess): Promise<ServeProcess> {
  return retryOnPortTaken(SERVE, async () => {
    const lease = new PortLease();
    const serve = spawnOn(await lease.take());
    void serve.exited.then(() => lease.release());
    return options.waitReady === false ? serve : await readyOrStopped(serve, options.readyTimeoutMs);
  }, options.log);
}

async function readyOrStopped(serve: ServeProcess, timeoutMs = 30_000): Promise<ServeProcess> {
  const deadline = Date.now() + timeoutMs;
  let status: number | undefined;
  let exited: Exit | undefined;
  void serve.exited.then((exit) => (exited = exit));
  while ((status = await httpStatus(`${serve.url}/readyz`)) !== 200) {
    if (exited) {
      throw withOutput(exitedBeforeReady(SERVE, exited.signal ?? `code ${exited.code}`, `${serve.url}/readyz`, serve.output(), saveOutput(serve)), serve);
    }
    if (Date.now() > deadline) {
      await serve.stop();
      throw withOutput(new ComponentStartError({
        component: SERVE,
        reason: `/readyz did not answer 200 within ${timeoutMs / 1000} s (last: ${status ?? 'no answer'})`,
        remedy: 'its log says what it waited for (the API server, its certificate Secret, the webhook registration)',
        logPath: saveOutput(serve),
      }), serve);
    }
    await sleep(100);
  }
  return serve;
}

/** The error with the last lines of serve's output, which tap shows with the failure. */
function withOutput(error: ComponentStartError, serve: ServeProcess): ComponentStartError {
  error.logTails = serve.output().trimEnd().split('\n').slice(-30).join('\n');
  return error;
}

/** serve's output so far in a file of its own (it is kept in memory otherwise): where a failed start points. */
function saveOutput(serve: ServeProcess): string {
  const path = join(tmpdir(), `sidecar-terminator-serve-${randomBytes(4).toString('hex')}.log`);
  writeFileSync(path, serve.output());
  return path;
}

/** The flags with which serve registers its webhooks with the API server, reached at 127.0.0.1:`port`. */
export function registeringWebhooks(port: number, failurePolicy: 'Fail' | 'Ignore', configName?: string): string[] {
  return [
    '--register-webhooks',
    '--webhook-url', `https://127.0.0.1:${port}`,
    '--failure-policy', failurePolicy,
    ...(configName ? ['--webhook-config-name', configName] : []),
  ];
}

/** Runs `serve` with `args` to its end (for runs expected to exit by themselves). */
export async function runServe(args: string[]): Promise<Exit & { output: string }> {
  const serve = spawnServe(args, 0, 'https');
  return { ...(await serve.exited), output: serve.output() };
}

function spawnServe(args: string[], port: number, scheme: 'http' | 'https', nodeArgs: string[] = [], entry: string[] = [cli]): ServeProcess {
  // setpriv gives the child a parent-death signal: it cannot outlive the test process. Through
  // `sh` so that the NODE_OPTIONS the test runner adds to every child (its process tracking)
  // stay out of the measured process.
  const command = ['setpriv', '--pdeathsig', 'KILL', '--', process.execPath, ...nodeArgs, ...entry, 'serve', ...args];
  const child = spawn('sh', ['-c', 'unset NODE_OPTIONS; exec "$@"', 'sh', ...command], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, KUBECONFIG: '' },
  });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<Exit>((resolveExit) => child.on('close', (code, signal) => resolveExit({ code, signal })));
  let exit: Exit | undefined;
  void exited.then((value) => (exit = value));
  return {
    pid: child.pid!,
    port,
    url: `${scheme}://127.0.0.1:${port}`,
    output: () => output,
    logs: () =>
      output.split('\n').flatMap((line): Record<string, unknown>[] => {
        try {
          const parsed: unknown = JSON.parse(line);
          return parsed !== null && typeof parsed === 'object' ? [parsed as Record<string, unknown>] : [];
        } catch {
          return [];
        }
      }),
    exited,
    running: () => exit === undefined,
    async stop(graceMs = 30_000) {
      if (exit) return exit;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
}

/** The certificate a TLS client is served on a fresh connection to 127.0.0.1:port. */
export function servedCertificate(port: number): Promise<X509Certificate> {
  return new Promise((resolveCert, reject) => {
    const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      resolveCert(socket.getPeerX509Certificate()!);
      socket.destroy();
    });
    socket.on('error', reject);
  });
}

/** POSTs `body` as JSON to serve's HTTPS `url` directly, as a caller other than the API server could, and resolves with the parsed answer. */
export function postJson(url: string, body: object): Promise<unknown> {
  return new Promise((resolveBody, reject) => {
    const request = httpsRequest(url, { method: 'POST', rejectUnauthorized: false, headers: { 'content-type': 'application/json' } }, (response) => {
      let text = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolveBody(JSON.parse(text)));
    });
    request.on('error', reject);
    request.end(JSON.stringify(body));
  });
}
