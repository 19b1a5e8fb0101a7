// The command line: help generated from the flag table, flag parsing and precedence, errors.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { parseFlags } from '../../src/cli.ts';
import { SERVE_FLAGS } from '../../src/config.ts';
import { runCli } from './run.ts';

t.test('serve --help lists every flag of the table with its variable, default and help', async (t) => {
  const { code, stdout } = await runCli(['serve', '--help']);
  t.equal(code, 0);
  for (const spec of Object.values(SERVE_FLAGS)) {
    const block = stdout.split(/\n(?= {2}--)/).find((part) => part.startsWith(`  --${spec.name} `) || part.startsWith(`  --${spec.name}[`));
    t.ok(block, `--${spec.name} is listed`);
    t.match(block, `env ${spec.env}, default: `, `--${spec.name}: its variable`);
    t.match(block?.replace(/\s+/g, ' '), spec.help.replace(/\s+/g, ' '), `--${spec.name}: its help`);
  }
  t.same((await runCli(['help', 'serve'])).stdout, stdout, '"help serve" is the same');
});

t.test('defaults are shown as one would type them', async (t) => {
  const { stdout } = await runCli(['serve', '--help']);
  const defaultOf = (name: string) => new RegExp(`--${name}[^\\n]*\\n(?:.*\\n)*?.*default: (.*)`).exec(stdout)?.[1];
  t.equal(defaultOf('shutdown-grace'), '20s');
  t.equal(defaultOf('cert-validity'), '365d');
  t.equal(defaultOf('body-limit'), '8Mi');
  t.equal(defaultOf('log-level'), 'info');
  t.equal(defaultOf('no-webhook'), 'false');
  t.equal(defaultOf('kubeconfig'), 'none');
});

t.test('top-level help, version, unknown commands', async (t) => {
  for (const args of [['--help'], ['-h'], ['help']]) {
    const run = await runCli(args);
    t.equal(run.code, 0, args.join(' '));
    t.match(run.stdout, /sidecar-terminator serve \[flags\][\s\S]*sidecar-terminator lint \[flags\] FILE\.\.\./);
  }
  const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  t.same(await runCli(['--version']), { code: 0, stdout: `sidecar-terminator ${version}\n`, stderr: '' });
  t.same(await runCli(['--version'], { asProcess: true }), { code: 0, stdout: `sidecar-terminator ${version}\n`, stderr: '' }, 'the same from node src/cli.ts');
  const none = await runCli([]);
  t.equal(none.code, 2, 'no command is a usage error');
  t.match(none.stderr, /Usage:/);
  const unknown = await runCli(['server'], { asProcess: true });
  t.equal(unknown.code, 2, 'the exit code of the process');
  t.match(unknown.stderr, /unknown command "server": the commands are serve, lint, status, remove-webhooks and help/);
});

t.test('remove-webhooks: its help, and a usage error for an argument', async (t) => {
  const help = await runCli(['remove-webhooks', '--help']);
  t.equal(help.code, 0);
  t.match(help.stdout, /Deletes the MutatingWebhookConfiguration and the ValidatingWebhookConfiguration named\s+--webhook-config-name/);
  t.match(help.stdout, /--webhook-config-name VALUE[\s\S]*default: sidecar-terminator/);
  const extra = await runCli(['remove-webhooks', 'now']);
  t.equal(extra.code, 2);
  t.match(extra.stderr, /remove-webhooks takes no arguments, got "now"/);
  t.match((await runCli(['help', 'remove-webhooks'])).stdout, /Usage: sidecar-terminator remove-webhooks/);
});

t.test('unknown flags and bad values: exit 2, naming the flag and the fix', async (t) => {
  const unknown = await runCli(['serve', '--log-levl=debug']);
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /unknown flag --log-levl for serve: did you mean --log-level\? run "sidecar-terminator serve --help"/);
  const far = await runCli(['serve', '--frobnicate']);
  t.match(far.stderr, /unknown flag --frobnicate for serve: run "sidecar-terminator serve --help" for the list of flags/);
  const value = await runCli(['serve', '--shutdown-grace', 'soon']);
  t.equal(value.code, 2);
  t.match(value.stderr, /--shutdown-grace: expected a duration such as 90s/);
  const env = await runCli(['serve'], { env: { SIDECAR_TERMINATOR_BODY_LIMIT: 'lots' } });
  t.equal(env.code, 2);
  t.match(env.stderr, /--body-limit: expected a size such as 8Mi, got "lots" \(from the environment variable SIDECAR_TERMINATOR_BODY_LIMIT\)/);
  const extra = await runCli(['serve', 'now']);
  t.equal(extra.code, 2);
  t.match(extra.stderr, /serve takes no arguments, got "now"/);
});

t.test('parseFlags: a flag beats its variable, which beats the default', async (t) => {
  const parse = (args: string[], env: Record<string, string> = {}) => parseFlags('serve', SERVE_FLAGS, args, env).values;
  t.equal(parse([]).logLevel, 'info', 'default');
  t.equal(parse([], { SIDECAR_TERMINATOR_LOG_LEVEL: 'warn' }).logLevel, 'warn', 'variable');
  t.equal(parse(['--log-level=debug'], { SIDECAR_TERMINATOR_LOG_LEVEL: 'warn' }).logLevel, 'debug', 'flag, --name=value');
  t.equal(parse(['--log-level', 'error'], { SIDECAR_TERMINATOR_LOG_LEVEL: 'warn' }).logLevel, 'error', 'flag, --name value');
  t.equal(parse([], { SIDECAR_TERMINATOR_LOG_LEVEL: '' }).logLevel, 'info', 'an empty variable is unset');

  t.equal(parse(['--no-webhook']).noWebhook, true, 'a bare boolean flag');
  t.equal(parse(['--no-webhook=false'], { SIDECAR_TERMINATOR_NO_WEBHOOK: 'true' }).noWebhook, false, '--flag=false beats the variable');
  t.equal(parse([], { SIDECAR_TERMINATOR_NO_WATCHER: 'true' }).noWatcher, true);

  t.same(parse(['--cert-hosts', 'a.example.com, 10.0.0.1']).certHosts, ['a.example.com', '10.0.0.1'], 'lists');
  t.equal(parse(['--shutdown-grace=1m30s']).shutdownGrace, 90_000, 'durations in milliseconds');
  t.equal(parse(['--body-limit=16Mi']).bodyLimit, 16 * 1024 * 1024);
  t.equal(parse(['--log-level=warn', '--log-level=error']).logLevel, 'error', 'the last occurrence wins');

  const all = parseFlags('lint', { enforcement: SERVE_FLAGS.enforcement }, ['a.yaml', '-', '--enforcement=warn', '--', '--not-a-flag.yaml'], {});
  t.same(all, { values: { enforcement: 'warn' }, positionals: ['a.yaml', '-', '--not-a-flag.yaml'], help: false }, 'positionals, - and --');
  t.equal(parseFlags('serve', SERVE_FLAGS, ['-h'], {}).help, true);

  t.throws(() => parse(['--log-level']), { message: '--log-level needs a value: --log-level VALUE or --log-level=VALUE' });
  t.throws(() => parse(['-x']), { message: /unknown flag --x for serve/ });
  t.throws(() => parse([], { SIDECAR_TERMINATOR_ENFORCEMENT: 'audit' }), { message: /--enforcement: expected one of deny, warn, got "audit" \(from the environment variable SIDECAR_TERMINATOR_ENFORCEMENT\)/ });
});
