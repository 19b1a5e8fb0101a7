// Runs `node src/cli.ts ...` as a child process, as a person or a CI job would.
import { runCommand, type CommandResult } from '../support/command.ts';

const CLI = new URL('../../src/cli.ts', import.meta.url).pathname;
const ROOT = new URL('../../', import.meta.url).pathname;

/** The environment is the test's minus every SIDECAR_TERMINATOR_* variable, plus `env`. */
export function runCli(args: readonly string[], options: { env?: Record<string, string>; input?: string | Buffer } = {}): Promise<CommandResult> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('SIDECAR_TERMINATOR_')));
  return runCommand(process.execPath, [CLI, ...args], { cwd: ROOT, env: { ...env, ...options.env }, input: options.input });
}
