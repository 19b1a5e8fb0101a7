// `make dev` as a user runs it: scripts/dev.ts starts the demo, prints where the kubeconfig and
// kubectl are and how to use them (which work), shows serve's logs, runs the README's example the
// way the README says it runs (the signal container stops the sidecar, with no warning), and on
// Ctrl-C (SIGINT) stops everything, deletes the cluster and the published kubeconfig, and exits 0.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import t from 'tap';
import { repoRoot } from '../support/repo.ts';
import { bash } from '../support/command.ts';
import { endedPodsOfJob, expectStoppedBy } from '../support/endings.ts';
import { commandBlocks, readDoc, section } from '../support/markdown.ts';
import { apiClients } from '../support/stack.ts';
import { waitFor } from '../support/wait.ts';
import { realNodeUnavailable } from '../support/real-node.ts';

// Real nodes where the machine can run them (as on CI), the simulator's otherwise: either way the demo says which.
const realNodes = realNodeUnavailable() === undefined;

const scratch = mkdtempSync(join(tmpdir(), 'st-dev-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
const devDir = join(scratch, 'dev');
const certDir = join(scratch, 'certs');

const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', process.execPath, join(repoRoot, 'scripts/dev.ts'), '--cert-dir', certDir], {
  cwd: repoRoot,
  env: { ...process.env, SIDECAR_TERMINATOR_DEV_DIR: devDir, KUBECONFIG: '' },
  stdio: ['ignore', 'pipe', 'pipe'],
});
let output = '';
child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
const exited = new Promise<number | null>((resolveExit) => child.on('close', (code) => resolveExit(code)));
let running = true;
void exited.then(() => (running = false));
t.teardown(() => {
  if (running) child.kill('SIGKILL');
});

// A user's shell, where only the export line the demo prints sets KUBECONFIG (none of this machine's).
const shellEnv = { ...process.env, KUBECONFIG: '' };

await waitFor('make dev to be up', () => {
  if (!running) throw new Error(`scripts/dev.ts exited:\n${output}`);
  return /^Ctrl-C stops everything/m.test(output);
}, { timeoutMs: 180_000 });
const line = (pattern: RegExp) => pattern.exec(output)?.[1];
const exportLine = line(/^ {2}(export KUBECONFIG=.*)$/m)!;
const controlPlaneDir = line(/logs: (\S+)\/\*\.log/)!;

t.test('it prints the kubeconfig, the kubectl and an export line that work', async (t) => {
  t.comment(`came up in ${line(/demo is up \((\S+ s)\)/)} (cached binaries)`);
  t.equal(line(/^ {2}kubeconfig +(\S+)$/m), join(devDir, 'kubeconfig'));
  t.equal(exportLine, `export KUBECONFIG=${join(devDir, 'kubeconfig')} PATH=${join(devDir, 'bin')}:$PATH`);
  const kubectl = line(/^ {2}kubectl +(\S+)$/m)!;
  t.equal(readlinkSync(join(devDir, 'bin/kubectl')), kubectl, 'bin/kubectl links to the kubectl built with the control plane');
  t.match(readFileSync(join(devDir, 'env.sh'), 'utf8'), `export KUBECONFIG=${join(devDir, 'kubeconfig')}`);
  const nodes = await bash(`${exportLine}\nkubectl get nodes -o name`, { env: shellEnv });
  t.equal(nodes.code, 0, nodes.code === 0 ? 'kubectl get nodes' : nodes.output);
  t.equal(nodes.output.trim(), realNodes ? 'node/node-1\nnode/virtual-node-1' : 'node/sim-node\nnode/sim-virtual-node', 'a normal and a virtual node');
  t.match(output, realNodes ? /real kubelets with containerd and runc/ : /played by the kubelet simulator/, 'it says who runs the pods');
  t.ok(existsSync(join(certDir, 'ca.crt')), 'serve keeps its CA in --cert-dir');
  for (const example of ['ignore-exit-code', 'log-shipper', 'misconfigured', 'proxy-on-virtual-node']) t.match(output, `kubectl apply -f examples/${example}.yaml`);
});

t.test("serve's logs follow, made readable", async (t) => {
  const refused = await bash(`${exportLine}\nkubectl apply -f examples/misconfigured.yaml`, { env: shellEnv });
  t.not(refused.code, 0);
  const denial = await waitFor('the denial in the demo output', () => output.split('\n').find((line) => /INFO +admission decision .*kind=Job/.test(line) && line.includes('name=misconfigured')));
  t.match(denial, /\d\d:\d\d:\d\d INFO +admission decision /, 'one readable line per admission decision, time and level first');
  t.match(denial, /result=denied/, 'saying the Job was denied');
});

t.test("the README's example: the signal container stops the shipper, the watcher says so, and nothing warns", async (t) => {
  const [block] = commandBlocks(section(readDoc('README.md'), 'An example'));
  const commands = block!.commands.body.trim().split('\n');
  t.same(commands.map((command) => command.split(' ').slice(0, 2).join(' ')), ['kubectl apply', 'kubectl wait', 'kubectl get'], "the README's three commands");
  const run = await bash(`${exportLine}\nset -e\n${commands.join('\n')}`, { env: shellEnv });
  t.equal(run.code, 0, run.output);
  t.match(run.stdout, /condition met/, 'the Job completed');
  t.match(run.stdout, /Normal +SidecarTerminator +pod\/log-shipper-\S+ +stopping sidecars: log-shipper/, 'the event the README points to');

  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(join(devDir, 'kubeconfig'));
  const [pod] = await endedPodsOfJob(apiClients(kubeConfig), 'default', 'log-shipper');
  const ending = await expectStoppedBy(t, apiClients(kubeConfig), pod!, { 'log-shipper': 'signal' });
  const signal = ending.sidecars[0]?.signal;
  // It writes its SIGTERM before sending it: at exit 137 the shipper's exit ended the PID namespace
  // they share before it wrote more (expectStoppedBy accepts 0 and 137).
  if (realNodes) t.match(signal?.message, /^.*Z sending SIGTERM to PID 1 \(.*\)\n/, `the signal container's own account (exit code ${signal?.exitCode})`);
  const told = await waitFor("the watcher's log line", () => output.split('\n').find((line) => / INFO +stopping sidecars .*pod=default\/log-shipper-/.test(line)));
  t.match(told, /steps=\["add-signal-containers"\]/, 'the watcher logged how it told the shipper to stop');
  t.same(output.split('\n').filter((line) => / (WARN|ERROR) .*log-shipper/.test(line)), [], 'and logged no warning about it');
});

t.test('Ctrl-C stops everything and deletes the cluster', async (t) => {
  child.kill('SIGINT');
  t.equal(await exited, 0, 'exit 0');
  t.match(output, /\[dev\] SIGINT: stopping serve, the nodes and the control plane\n(?:.*\n)*\[dev\] stopped; the cluster is gone/);
  t.notOk(existsSync(controlPlaneDir), 'the control plane directory is gone');
  t.notOk(existsSync(join(devDir, 'kubeconfig')), 'and the published kubeconfig with it');
  t.notOk(existsSync(join(devDir, 'env.sh')));
  const after = await bash(`${exportLine}\nkubectl get nodes --request-timeout=5s`, { env: shellEnv });
  t.not(after.code, 0, 'nothing answers any more');
});
