// Runs the sidecar-terminator command as a person or a CI job would, and collects what it prints.
// By default in this test process: `main` with the arguments, the environment and the streams the
// entry point would give it (a child process costs half a second of CPU per run, and the unit
// tests run the command about fifty times). As a child process (`node src/cli.ts ...`) for
// `serve`, for an environment the command reads beyond what `main` is given (KUBECONFIG, HOME),
// and wherever a test asks for the process itself.
import { Readable } from 'node:stream';
import { main } from '../../src/cli.ts';
import { runCommand, type CommandResult } from '../support/command.ts';

const CLI = new URL('../../src/cli.ts', import.meta.url).pathname;
const ROOT = new URL('../../', import.meta.url).pathname;
const OWN_PREFIX = 'SIDECAR_TERMINATOR_';

export interface RunCliOptions {
  env?: Record<string, string>;
  input?: string | Buffer;
  /** Run `node src/cli.ts` as a child process. */
  asProcess?: boolean;
}

/** The environment is the test's minus every SIDECAR_TERMINATOR_* variable, plus `env`. */
export function runCli(args: readonly string[], options: RunCliOptions = {}): Promise<CommandResult> {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith(OWN_PREFIX)));
  const env = { ...inherited, ...options.env };
  const readsProcessEnv = Object.keys(options.env ?? {}).some((name) => !name.startsWith(OWN_PREFIX));
  if (options.asProcess || args[0] === 'serve' || readsProcessEnv) return runCommand(process.execPath, [CLI, ...args], { cwd: ROOT, env, input: options.input });
  return runInProcess(args, env, options.input ?? '');
}

async function runInProcess(args: readonly string[], env: NodeJS.ProcessEnv, input: string | Buffer): Promise<CommandResult> {
  let stdout = '';
  let stderr = '';
  const io = {
    stdin: Readable.from([Buffer.from(input)]),
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
  };
  // As the entry point does: an error main lets through ends the command with 1 and its stack.
  const code = await main(args, env, io).catch((error: unknown) => {
    stderr += `sidecar-terminator: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`;
    return 1;
  });
  return { code, stdout, stderr };
}
