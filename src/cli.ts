#!/usr/bin/env node
// The sidecar-terminator command. Its commands are one table (COMMANDS), from which the dispatch,
// the usage and `help COMMAND` are derived. The flags of serve come from the table in config.ts,
// which also writes `serve --help`; lint shares some of them. Exit codes: 0 success, 1 lint
// found errors (or serve failed, or status found a pod stuck), 2 usage or input errors; status
// has its own (status --help).
//
// ES modules run their imports first: what this file imports statically must load on an older
// Node.js too (plain code; test/cli/node-lines.test.ts runs it on Node 20), so that the entry point
// at the bottom can refuse one with a clear message. Each command's modules load after that check.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SERVE_FLAGS, defaultText, oneOf, type FlagSpec, type FlagValue } from './config.ts';
import type { LintIO } from './lint.ts';
import { MAX_FILE_BYTES, OUTPUT_FORMATS } from './lint/limits.ts';
import { STATUS_EXIT_CODES, STATUS_FLAGS } from './status/flags.ts';
import { UsageError } from './usage-error.ts';

const PROGRAM = 'sidecar-terminator';

/**
 * The oldest Node.js release the command runs on; older ones are refused at start. Of the 22 line,
 * 22.19: the Kubernetes client's HTTP library (undici 8) needs it, and does not load on earlier
 * releases. The bundle's target (scripts/bundle.ts) and test/cli/node-lines.test.ts read it;
 * package.json's engines says the same.
 */
export const LOWEST_NODE_VERSION = '22.19.0';

type FlagTable = Record<string, FlagSpec>;
export type FlagValues<T extends FlagTable> = { [K in keyof T]: T[K]['default'] };
type Env = Readonly<Record<string, string | undefined>>;
/** Where a command reads and writes: the process's own streams, or a test's. */
export type CliIO = LintIO;
const PROCESS_IO: CliIO = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr };

const LINT_FLAGS = {
  enforcement: SERVE_FLAGS.enforcement,
  quickExitImageAllowlist: SERVE_FLAGS.quickExitImageAllowlist,
  nativeSidecars: {
    ...SERVE_FLAGS.nativeSidecars,
    help: 'labelled or all: also report, as info findings, which sidecars the webhook would move to native sidecars and why others stay (lint cannot see namespace labels, so labelled reports as all). One of: none, labelled, all.',
  },
  output: { ...oneOf('output', 'text: one line per finding and a summary; json: the findings with file, document, object, container, field, rule, severity, message, fix, line and column; sarif: SARIF 2.1.0, for GitHub code scanning and other CI tools.', OUTPUT_FORMATS, 'text'), short: 'o', env: '' },
};

/** remove-webhooks finds the configurations as serve names them. */
const REMOVE_WEBHOOKS_FLAGS = {
  kubeconfig: SERVE_FLAGS.kubeconfig,
  webhookConfigName: SERVE_FLAGS.webhookConfigName,
};

/** One run of a command: the name it was called by, the arguments after it, where it reads and writes. */
interface Invocation {
  name: string;
  args: readonly string[];
  env: Env;
  io: CliIO;
  /** Writes `text` to stdout; returns exit code 0. */
  print: (text: string) => number;
}

/** A command of the CLI, from which its dispatch, the usage and `help COMMAND` are derived. */
interface Command {
  /** The names it answers to; the usage shows the first. */
  names: readonly string[];
  /** What follows its name in the usage. */
  synopsis: string;
  /** What it does, in the usage. */
  summary: string;
  /** Its flags and what it does, for `COMMAND --help` and `help COMMAND`; help and --version have none. */
  help?: () => string;
  run(invocation: Invocation): Promise<number> | number;
}

/** A command that reads flags from `flags`: `--help` prints its help, anything else runs it with the values. */
function withFlags<T extends FlagTable>(
  command: Omit<Command, 'help' | 'run'> & { flags: T; help: () => string; run(parsed: { values: FlagValues<T>; positionals: string[] }, invocation: Invocation): Promise<number> },
): Command {
  return {
    ...command,
    run(invocation) {
      const { values, positionals, help } = parseFlags(invocation.name, command.flags, invocation.args, invocation.env);
      if (help) return invocation.print(command.help());
      return command.run({ values, positionals }, invocation);
    },
  };
}

// Each command loads its modules when it runs: lint does not pay for the Kubernetes client.
const COMMANDS: readonly Command[] = [
  withFlags({
    names: ['serve'],
    synopsis: '[flags]',
    summary: 'run the admission webhook and the watcher',
    flags: SERVE_FLAGS,
    help: serveHelp,
    async run({ values, positionals }) {
      refuseArguments('serve', positionals);
      const { runServe } = await import('./serve.ts');
      await runServe(values);
      return 0;
    },
  }),
  withFlags({
    names: ['lint'],
    synopsis: '[flags] FILE...',
    summary: 'check manifests offline, as the webhook would ("-" reads stdin)',
    flags: LINT_FLAGS,
    help: lintHelp,
    async run({ values, positionals }, { io }) {
      if (positionals.length === 0) throw new UsageError(`lint needs at least one FILE ("-" reads stdin); run "${PROGRAM} lint --help"`);
      const { runLint } = await import('./lint.ts');
      return runLint(positionals, { ...values, toolVersion: packageVersion() }, io);
    },
  }),
  // `status` lists the managed pods; `status pod/NAME` (or `explain pod/NAME`) tells one pod's story.
  withFlags({
    names: ['status', 'explain'],
    synopsis: '[flags] [pod/NAME]',
    summary: "the managed pods and their state, or why one pod's sidecars still run (also the kubectl plugin: kubectl sidecar-terminator)",
    flags: STATUS_FLAGS,
    help: statusHelp,
    async run({ values, positionals }, { name, io }) {
      if (positionals.length > 1) throw new UsageError(`${name} takes at most one pod (pod/NAME), got ${positionals.length} arguments; run "${PROGRAM} status --help"`);
      if (name === 'explain' && positionals.length === 0) throw new UsageError(`explain needs a pod: ${PROGRAM} explain pod/NAME`);
      const { runStatus } = await import('./status/command.ts');
      return runStatus(values, positionals[0], io);
    },
  }),
  withFlags({
    names: ['remove-webhooks'],
    synopsis: '[flags]',
    summary: "delete the webhook configurations (the chart's pre-delete hook)",
    flags: REMOVE_WEBHOOKS_FLAGS,
    help: removeWebhooksHelp,
    async run({ values, positionals }, { io }) {
      refuseArguments('remove-webhooks', positionals);
      const { runRemoveWebhooks } = await import('./kube/remove-webhooks.ts');
      return runRemoveWebhooks(values, io.stdout);
    },
  }),
  {
    names: ['help', '--help', '-h'],
    synopsis: '[COMMAND]',
    summary: 'show this help, or the flags of a command',
    run: ({ name, args, print }) => print(name === 'help' && args[0] !== undefined ? helpOf(args[0]) : usage()),
  },
  {
    names: ['--version'],
    synopsis: '',
    summary: 'print the version',
    run: ({ print }) => print(`${PROGRAM} ${packageVersion()}\n`),
  },
];

export async function main(args: readonly string[], env: Env = process.env, io: CliIO = PROCESS_IO): Promise<number> {
  const [name, ...rest] = args;
  const print = (text: string) => {
    io.stdout.write(text);
    return 0;
  };
  try {
    if (name === undefined) {
      io.stderr.write(usage());
      return 2;
    }
    const command = COMMANDS.find((each) => each.names.includes(name));
    const commandNames = COMMANDS.map((each) => each.names[0]!).filter((each) => !each.startsWith('-'));
    if (!command) throw new UsageError(`unknown command "${name}": the commands are ${listed(commandNames)}; run "${PROGRAM} --help"`);
    return await command.run({ name, args: rest, env, io, print });
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.stderr.write(`${PROGRAM}: ${error.message}\n`);
    return 2;
  }
}

function refuseArguments(command: string, positionals: readonly string[]): void {
  if (positionals.length > 0) throw new UsageError(`${command} takes no arguments, got "${positionals[0]}"; run "${PROGRAM} ${command} --help"`);
}

/** The help of the command named `topic`. */
function helpOf(topic: string): string {
  const withHelp = COMMANDS.filter((command) => command.help);
  const command = withHelp.find((each) => each.names.includes(topic));
  if (!command) throw new UsageError(`no help for "${topic}": the commands are ${listed(withHelp.map((each) => each.names[0]!))}`);
  return command.help!();
}

/** "a, b and c" */
function listed(names: readonly string[]): string {
  return `${names.slice(0, -1).join(', ')} and ${names.at(-1)}`;
}

/**
 * Reads `--name value`, `--name=value`, `--flag` and `--flag=false` (booleans), `--` and
 * positionals. Each value comes from the command line, else its environment variable (unless
 * empty), else the table's default.
 */
export function parseFlags<T extends FlagTable>(
  command: string,
  table: T,
  args: readonly string[],
  env: Env,
): { values: FlagValues<T>; positionals: string[]; help: boolean } {
  const keyOf = new Map(Object.entries(table).map(([key, spec]) => [spec.name, key]));
  const keyOfShort = new Map(Object.entries(table).flatMap(([key, spec]) => (spec.short ? [[spec.short, key]] : [])));
  const given = new Map<string, FlagValue>();
  const positionals: string[] = [];
  let help = false;
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!;
    if (arg === '--') {
      positionals.push(...args.slice(index + 1));
      break;
    }
    if (arg === '--help' || arg === '-h') help = true;
    else if (arg === '-' || !arg.startsWith('-')) positionals.push(arg);
    else {
      const [, name = arg.replace(/^-+/, ''), inline] = /^--([^=]+)(?:=(.*))?$/s.exec(arg) ?? /^-([^-=])=?(.+)?$/s.exec(arg) ?? [];
      const key = arg.startsWith('--') ? keyOf.get(name) : keyOfShort.get(name);
      if (key === undefined) throw new UsageError(unknownFlag(command, name, [...keyOf.keys()]));
      const spec = table[key]!;
      let raw = inline;
      if (raw === undefined && typeof spec.default === 'boolean') raw = 'true';
      else if (raw === undefined) {
        raw = args[++index];
        if (raw === undefined) throw new UsageError(`--${spec.name} needs a value: --${spec.name} VALUE or --${spec.name}=VALUE`);
      }
      given.set(key, parseValue(spec, raw));
    }
  }
  const values = Object.fromEntries(
    Object.entries(table).map(([key, spec]) => {
      if (given.has(key)) return [key, given.get(key)];
      const fromEnv = spec.env ? env[spec.env] : undefined;
      return [key, fromEnv === undefined || fromEnv === '' ? spec.default : parseValue(spec, fromEnv, spec.env)];
    }),
  ) as FlagValues<T>;
  return { values, positionals, help };
}

function parseValue(spec: FlagSpec, raw: string, envVar?: string): FlagValue {
  try {
    return spec.parse(raw);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new UsageError(envVar ? `${message} (from the environment variable ${envVar})` : message);
  }
}

function unknownFlag(command: string, name: string, known: string[]): string {
  const close = known.filter((candidate) => editDistance(name, candidate) <= 2 || candidate.startsWith(name));
  const hint = close.length > 0 ? `did you mean ${close.map((flag) => `--${flag}`).join(' or ')}? ` : '';
  return `unknown flag --${name} for ${command}: ${hint}run "${PROGRAM} ${command} --help" for the list of flags`;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

function usage(): string {
  return `${PROGRAM} ${packageVersion()}: completes Kubernetes Jobs whose pods run long-lived sidecars.

Usage:
${COMMANDS.map(usageLines).join('\n')}

Run "${PROGRAM} COMMAND --help" for the flags of a command.
`;
}

/** Where a summary starts beside its command, and where one starts on the lines under a command too long for that. */
const SUMMARY_COLUMN = 44;
const SUMMARY_UNDER_INDENT = ' '.repeat(36);

function usageLines({ names: [name], synopsis, summary }: Command): string {
  const invocation = `  ${PROGRAM} ${[name, synopsis].filter(Boolean).join(' ')}`;
  if (invocation.length + 2 <= SUMMARY_COLUMN) return invocation.padEnd(SUMMARY_COLUMN) + summary;
  return `${invocation}\n${wrap(summary, SUMMARY_UNDER_INDENT)}`;
}

function serveHelp(): string {
  return `Usage: ${PROGRAM} serve [flags]

Runs the admission webhook (HTTPS: /validate, /mutate, /healthz, /readyz, /metrics) and the
watcher. Every flag can also be set by its environment variable: a flag on the command line
wins over the variable, which wins over the default.

Flags:
${flagsHelp(SERVE_FLAGS)}`;
}

function lintHelp(): string {
  return `Usage: ${PROGRAM} lint [flags] FILE...

Validates the pod specs of the Pods, Jobs, CronJobs and workloads in multi-document YAML
files (List items too) with the admission webhook's rules, and prints one line per finding,
or a JSON or SARIF report (-o) locating each finding's field by line and column.
"-" reads stdin. Files larger than ${MAX_FILE_BYTES / 1024 / 1024} MiB are refused.

Exit status: 0 when there is no error (warnings alone are fine), 1 when there is an error,
2 for a usage error or a file that cannot be read or parsed.

Info findings (--native-sidecars) never change the exit status.

Flags (--enforcement, --quick-exit-image-allowlist and --native-sidecars also set by their environment variables, as for serve):
${flagsHelp(LINT_FLAGS)}`;
}

function statusHelp(): string {
  return `Usage: ${PROGRAM} status [flags]              the managed pods in flight, one line each
       ${PROGRAM} status [flags] pod/NAME     the whole story of one pod (also: ${PROGRAM} explain pod/NAME)
As a kubectl plugin: kubectl sidecar-terminator status ...

Answers "my Job's main container finished, why does its pod still run?": which containers are
sidecars and why, the trigger rule, what the watcher did and when, what it waits for now, and
what you can do; for a pod the add-on does not manage, why not. Reads pods, events, nodes and
ContainerRecreateRequests with your kubeconfig and permissions, never writes; what it may not
read is named, and the rest is shown.

States: waiting for main (the main containers still work), stopping (the sidecars were told to
stop), stopped, failed (a sidecar cannot be stopped, or stopping it failed).

Exit status: ${STATUS_EXIT_CODES}

Flags:
${flagsHelp(STATUS_FLAGS)}`;
}

function removeWebhooksHelp(): string {
  return `Usage: ${PROGRAM} remove-webhooks [flags]

Deletes the MutatingWebhookConfiguration and the ValidatingWebhookConfiguration named
--webhook-config-name, so that the API server stops calling the webhook before it goes: the
Helm chart runs it as a pre-delete hook of \`helm uninstall\`. Configurations already gone are
fine. Exit status: 0 when none is left, 1 when a deletion failed, 2 for a usage error.

Flags:
${flagsHelp(REMOVE_WEBHOOKS_FLAGS)}`;
}

function flagsHelp(table: FlagTable): string {
  return Object.values(table)
    .map((spec) => {
      const form = `${spec.short ? `-${spec.short}, ` : ''}--${spec.name}${typeof spec.default === 'boolean' ? '[=false]' : ' VALUE'}`;
      return `  ${form}\n${wrap(spec.help, '      ')}\n      ${spec.env ? `env ${spec.env}, ` : ''}default: ${defaultText(spec)}\n`;
    })
    .join('\n');
}

function wrap(text: string, indent: string, width = 100): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line !== '' && indent.length + line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  return [...lines, line].map((each) => indent + each).join('\n');
}

/** Written in by builds that carry no package.json: the kubectl plugin's single executable (scripts/bundle.ts). */
declare const SIDECAR_TERMINATOR_VERSION: string | undefined;

/** src/cli.ts runs from the repository, dist/src/cli.js from the built package. */
function packageVersion(): string {
  if (typeof SIDECAR_TERMINATOR_VERSION === 'string') return SIDECAR_TERMINATOR_VERSION;
  for (const path of ['../package.json', '../../package.json']) {
    try {
      const manifest = JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as { name?: unknown; version?: unknown };
      if (manifest.name === PROGRAM && typeof manifest.version === 'string') return manifest.version;
    } catch {
      // not at this level
    }
  }
  return 'unknown';
}

/** Why Node.js `version` (22.19.0) cannot run the command, in one line; undefined when it can. */
export function unsupportedNode(version: string): string | undefined {
  // One number per release, in release order: 22.19.0 is 22019000.
  const ordinal = (release: string) => release.split('.').reduce((sum, part) => sum * 1000 + Number(part), 0);
  if (ordinal(version) >= ordinal(LOWEST_NODE_VERSION)) return undefined;
  return `${PROGRAM}: needs Node.js ${LOWEST_NODE_VERSION} or later, and this is Node.js ${version} (${process.execPath}): install a newer Node.js, or put one first on the PATH`;
}

/**
 * Whether this file is the program, not a module imported by another (a test). Node.js 22.18,
 * 24.2 and later say so in import.meta.main; older releases (24.0 and 24.1 among them) leave it
 * undefined, and then the script is compared with this file (npm's bin links are symlinks to
 * it). The kubectl plugin's single executable is built with import.meta.main defined as true.
 */
function isProgram(): boolean {
  // Typed as always set, which it is only from those releases on.
  const isMain = import.meta.main as boolean | undefined;
  if (isMain !== undefined) return isMain;
  const script = process.argv[1];
  if (!script) return false;
  try {
    // The script as Node.js resolved it to run it: symlinks followed, `.js` added where left out.
    return createRequire(import.meta.url).resolve(resolve(script)) === fileURLToPath(import.meta.url);
  } catch {
    return false;
  }
}

if (isProgram()) {
  const unsupported = unsupportedNode(process.versions.node);
  if (unsupported) {
    process.stderr.write(`${unsupported}\n`);
    process.exitCode = 2;
  } else runProgram();
}

function runProgram(): void {
  // Installed as kubectl-sidecar_terminator, `kubectl sidecar-terminator` alone shows the status.
  const asKubectlPlugin = basename(process.argv[1] ?? '').startsWith('kubectl-');
  const args = process.argv.slice(2);
  main(asKubectlPlugin && args.length === 0 ? ['status'] : args).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`${PROGRAM}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
