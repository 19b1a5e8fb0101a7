// Runs `node src/cli.ts ...` as a child process, as a person or a CI job would.
import { spawn } from 'node:child_process';

const CLI = new URL('../../src/cli.ts', import.meta.url).pathname;
const ROOT = new URL('../../', import.meta.url).pathname;

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment is the test's minus every SIDECAR_TERMINATOR_* variable, plus `env`. */
export function runCli(args: readonly string[], options: { env?: Record<string, string>; input?: string | Buffer } = {}): Promise<Run> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('SIDECAR_TERMINATOR_')));
  const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env: { ...env, ...options.env } });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  // EPIPE when the command stops reading early (an oversized stdin) is expected.
  child.stdin.on('error', () => {});
  child.stdin.end(options.input ?? '');
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
