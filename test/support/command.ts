// Runs a command to its end, as a person at a terminal would: input on stdin, output collected.
import { spawn } from 'node:child_process';
import { repoRoot } from './repo.ts';

export interface CommandResult {
  /** The exit code; 1 when the command was ended by a signal. */
  code: number;
  stdout: string;
  stderr: string;
}

/** Never throws for a non-zero exit: the caller checks `code` (and says what failed with `stderr`). */
export async function runCommand(
  file: string,
  args: readonly string[],
  options: { input?: string | Buffer; env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Promise<CommandResult> {
  const child = spawn(file, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  // EPIPE when the command stops reading early (an oversized stdin) is expected.
  child.stdin.on('error', () => {});
  child.stdin.end(options.input ?? '');
  const code = await new Promise<number>((resolveCode, reject) => {
    child.on('error', reject);
    child.on('close', (exitCode) => resolveCode(exitCode ?? 1));
  });
  return { code, stdout, stderr };
}

/**
 * `script` run by `bash -c` from the repository's root (or `cwd`), as a user at a terminal there
 * types it. `output` is all it printed, stdout then stderr, as tests compare with what a page
 * shows or quote when it fails.
 */
export async function bash(script: string, options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<CommandResult & { output: string }> {
  const result = await runCommand('bash', ['-c', script], { cwd: options.cwd ?? repoRoot, env: options.env });
  return { ...result, output: result.stdout + result.stderr };
}
