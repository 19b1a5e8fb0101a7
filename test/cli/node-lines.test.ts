// The built command, laid out as npm installs it (dist/ and the bin links), on each Node.js line
// an operator's CI may have: `lint` and `status` answer on 22 (its lowest supported release) and
// 26 exactly as on the project's own 24 (stdout, stderr and exit code), and an older Node.js
// refuses with exit status 2 instead of running, or of passing without having run. The other
// releases' binaries come from the npm registry (test/support/node-binaries.ts): the first run
// downloads about 150 MB, later runs use the cache, and a failed download fails the test with
// npm's reason.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { bundle } from '../../scripts/bundle.ts';
import { LOWEST_NODE_VERSION, unsupportedNode } from '../../src/cli.ts';
import { runCommand, type CommandResult } from '../support/command.ts';
import { nodeBinary } from '../support/node-binaries.ts';
import { jobPod, killSidecar, main, normalNode } from '../support/pods.ts';
import { repoRoot } from '../support/repo.ts';

/**
 * The releases run besides the project's own Node.js 24: the lowest supported (the one a new
 * dependency is likeliest to break) and the newest of the newest line when pinned.
 */
const OTHER_RELEASES = [LOWEST_NODE_VERSION, '26.10.0'];
/** A release of the line below: refused. */
const REFUSED = '20.20.2';

const fixture = (name: string) => `test/fixtures/manifests/${name}.yaml`;
const manifest = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string; bin: Record<string, string>; engines: { node: string } };

// The package as npm installs it: package.json beside dist/, and each bin a symlink to dist/cli.js.
const scratch = mkdtempSync(join(tmpdir(), 'st-node-lines-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
const installed = join(scratch, 'package');
await bundle(['src/cli.ts'], join(installed, 'dist'));
copyFileSync(join(repoRoot, 'package.json'), join(installed, 'package.json'));
mkdirSync(join(installed, 'bin'));
for (const [name, target] of Object.entries(manifest.bin)) symlinkSync(join('..', target), join(installed, 'bin', name));
// A home of its own, so that no kubeconfig of this machine is read.
const home = join(scratch, 'home');
mkdirSync(home);

interface Line {
  version: string;
  node: string;
}
let installing: Promise<Line[]> | undefined;
/** The project's own Node.js first, then the other supported releases, installed once. */
async function supportedLines(): Promise<Line[]> {
  installing ??= Promise.all(OTHER_RELEASES.map(async (version) => ({ version, node: await nodeBinary(version) })));
  return [{ version: process.versions.node, node: process.execPath }, ...(await installing)];
}

interface RunOptions {
  input?: string;
  /** Which of the package's bin links runs (sidecar-terminator by default). */
  bin?: string;
  env?: Record<string, string>;
  /** What differs from one run to the next (a time), replaced by … before the answers are compared. */
  mask?: RegExp;
}

/** The command run by one Node.js binary, from the repository (the fixtures' paths are relative), with none of this process's environment but PATH. */
function run(node: string, args: readonly string[], options: RunOptions = {}): Promise<CommandResult> {
  const env = { PATH: process.env.PATH ?? '', HOME: home, ...options.env };
  return runCommand(node, [join(installed, 'bin', options.bin ?? 'sidecar-terminator'), ...args], { cwd: repoRoot, env, input: options.input });
}

/** The answer with what `pattern` matches replaced by …. */
function mask(result: CommandResult, pattern: RegExp | undefined): CommandResult {
  if (!pattern) return result;
  return { ...result, stdout: result.stdout.replace(pattern, '…'), stderr: result.stderr.replace(pattern, '…') };
}

/** Runs the command on every supported line, checks that each answers as the project's own Node.js, and returns that answer. */
async function sameOnEveryLine(t: Test, args: readonly string[], options: RunOptions = {}): Promise<CommandResult> {
  const lines = await supportedLines();
  const [own, ...others] = await Promise.all(lines.map(async (line) => mask(await run(line.node, args, options), options.mask)));
  others.forEach((result, index) => t.same(result, own, `${options.bin ?? 'sidecar-terminator'} ${args.join(' ')}: Node.js ${lines[index + 1]!.version} answers as ${lines[0]!.version}`));
  return own!;
}

t.test('the releases: refused below the lowest supported, which package.json names and which is run', async (t) => {
  t.equal(manifest.engines.node, `>=${LOWEST_NODE_VERSION}`);
  for (const version of ['18.20.8', REFUSED, '22.0.0', '22.18.9']) t.ok(unsupportedNode(version), `${version} is refused`);
  for (const version of ['22.19.0', '22.23.3', '23.0.0', '24.0.0', process.versions.node, '26.10.0', '100.0.0']) t.equal(unsupportedNode(version), undefined, `${version} runs`);
  for (const line of await supportedLines()) t.equal((await runCommand(line.node, ['--version'])).stdout, `v${line.version}\n`, `${line.node} is Node.js ${line.version}`);
  t.equal((await runCommand(await nodeBinary(REFUSED), ['--version'])).stdout, `v${REFUSED}\n`);
});

t.test('lint: the same report and exit code on every line, in each output format', async (t) => {
  const fixtures = ['valid-job', 'bad-job', 'warning-job', 'multi'].map(fixture);
  const badJob = readFileSync(join(repoRoot, fixture('bad-job')), 'utf8');
  // Each output format on several files at once, and on stdin; each file's exit code in text.
  const cases: Array<{ args: string[]; code: number; input?: string }> = ['text', 'json', 'sarif'].flatMap((output) => [
    { args: ['-o', output, ...fixtures], code: 1 },
    { args: ['-o', output, '-'], code: 1, input: badJob },
  ]);
  cases.push(
    { args: [fixture('valid-job'), fixture('warning-job')], code: 0 },
    { args: ['--native-sidecars', 'all', fixture('native-sidecars')], code: 0 },
    { args: [fixture('valid-job'), 'no-such-file.yaml'], code: 2 },
  );
  for (const { args, code, input } of cases) {
    const own = await sameOnEveryLine(t, ['lint', ...args], { input });
    t.equal(own.code, code, `lint ${args.join(' ')}: exit ${code}`);
  }
});

t.test('lint: a manifest that must be refused fails the gate with its findings on every line', async (t) => {
  for (const line of await supportedLines()) {
    const { code, stdout } = await run(line.node, ['lint', fixture('bad-job')]);
    t.equal(code, 1, `Node.js ${line.version}: exit 1`);
    t.match(stdout, /Job\/backup: error: .*Invalid value: "yes"[\s\S]*2 errors, 1 warning/, `Node.js ${line.version}: the findings`);
  }
});

t.test('--version and help: the same on every line', async (t) => {
  t.same(await sameOnEveryLine(t, ['--version']), { code: 0, stdout: `sidecar-terminator ${manifest.version}\n`, stderr: '' });
  t.equal((await sameOnEveryLine(t, ['status', '--help'])).code, 0);
});

t.test('status: the same on every line, from a fake API server and from none', async (t) => {
  const server = await fakeApiServer();
  t.teardown(() => server.close());
  const kubeconfig = writeKubeconfig('fake', `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  const cases: Array<{ args: string[]; code: number } & RunOptions> = [
    // `kubectl sidecar-terminator` alone: the list, read with $KUBECONFIG.
    { args: [], code: 0, bin: 'kubectl-sidecar_terminator', env: { KUBECONFIG: kubeconfig } },
    { args: ['status', '--kubeconfig', kubeconfig, 'pod/job-abc'], code: 0 },
    // How long the pod has waited is counted to the second.
    { args: ['status', '--kubeconfig', kubeconfig, '-o', 'json', '--fail-after', '1m'], code: 1, mask: /waited \d+s/ },
    { args: ['status', '--kubeconfig', kubeconfig, 'pod/gone'], code: 3 },
    // Port 1: nothing listens there, the connection is refused.
    { args: ['status', '--kubeconfig', writeKubeconfig('unreachable', 'https://127.0.0.1:1')], code: 3 },
  ];
  for (const { args, code, ...options } of cases) {
    const own = await sameOnEveryLine(t, args, options);
    t.equal(own.code, code, `${options.bin ?? 'sidecar-terminator'} ${args.join(' ')}: exit ${code}`);
  }
  t.match((await run(process.execPath, ['status', '--kubeconfig', kubeconfig])).stdout, /job-abc\s+-\s+normal\s+kill\s+stopping/, 'the fake server was read');
});

t.test(`Node.js ${REFUSED}: every command refuses with exit 2 and one line saying what to do`, async (t) => {
  const node = await nodeBinary(REFUSED);
  const expected = `sidecar-terminator: needs Node.js ${LOWEST_NODE_VERSION} or later, and this is Node.js ${REFUSED} (${node}): install a newer Node.js, or put one first on the PATH\n`;
  for (const bin of Object.keys(manifest.bin)) {
    for (const args of [['lint', fixture('bad-job')], ['status'], ['--version'], []]) {
      t.same(await run(node, args, { bin }), { code: 2, stdout: '', stderr: expected }, `${bin} ${args.join(' ')}`);
    }
  }
  for (const script of ['dist/cli.js', 'dist/cli']) {
    t.same(await runCommand(node, [join(installed, script), '--version'], { cwd: repoRoot }), { code: 2, stdout: '', stderr: expected }, `node ${script}`);
  }
});

/** A kubeconfig whose one cluster is `server`, without credentials; returns its path. client-node speaks plain HTTP only with TLS verification off. */
function writeKubeconfig(name: string, server: string): string {
  const path = join(scratch, `${name}.kubeconfig`);
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server, 'insecure-skip-tls-verify': true } }],
    users: [{ name, user: {} }],
    contexts: [{ name, context: { cluster: name, user: name, namespace: 'default' } }],
    'current-context': name,
  };
  // JSON is YAML.
  writeFileSync(path, JSON.stringify(config));
  return path;
}

/** An API server that answers status's reads: one managed pod whose main container is done and whose sidecar still runs, on a normal node, no Kruise. */
async function fakeApiServer() {
  const pod = jobPod([main(), killSidecar()], { main: 0, proxy: 'running' });
  const routes: Record<string, unknown> = {
    '/api/v1/namespaces/default/pods': { kind: 'PodList', apiVersion: 'v1', metadata: {}, items: [pod] },
    '/api/v1/namespaces/default/pods/job-abc': pod,
    '/api/v1/namespaces/default/events': { kind: 'EventList', apiVersion: 'v1', metadata: {}, items: [] },
    '/api/v1/nodes/node-a': normalNode,
    '/apis': { kind: 'APIGroupList', apiVersion: 'v1', groups: [] },
  };
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const body = routes[new URL(request.url ?? '/', 'http://api').pathname];
    const notFound = { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404, message: `${request.url} not found` };
    response.writeHead(body ? 200 : 404, { 'content-type': 'application/json' }).end(JSON.stringify(body ?? notFound));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}
