// The kubectl plugin as a user gets it: the package packed (which builds dist/) and installed
// with npm into a fresh prefix, its bin directory on the PATH, and `kubectl sidecar-terminator`
// run by bash through the real kubectl against the real API server, with OpenKruise's CRD so
// the watcher stops sidecars by ContainerRecreateRequest. The commands of docs/status-plugin.md
// are run as written, and print what the page shows in the shape the page shows it: the page's
// sample itself is written from examples/ by status's own code (scripts/status-sample.ts, held to
// the page by test/docs/drift.test.ts).
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import t from 'tap';
import { ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE, publishedImage } from '../../src/policy/index.ts';
import { bash, type CommandResult } from '../support/command.ts';
import { simAnnotations } from '../support/kubelet-simulator.ts';
import { waitFor } from '../support/wait.ts';
import { commandBlocks } from '../support/markdown.ts';
import { repoRoot } from '../support/repo.ts';
import { apply, finishedByWatcher, podOfJob, startStack, waitForJob } from '../support/stack.ts';
import { expectJobStoppedBy } from '../support/endings.ts';
import { jobYaml } from '../support/pods.ts';

const PAGE = 'docs/status-plugin.md';
const JOBS = ['log-shipper', 'report', 'proxy-on-virtual-node'];

const work = mkdtempSync(join(tmpdir(), 'st-plugin-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
// Node 24 first: npm, the package's scripts and the installed commands run on it.
const basePath = `${dirname(process.execPath)}:${process.env.PATH}`;

/** A command line at a terminal whose PATH starts with Node 24's directory. */
const sh = (command: string, env: NodeJS.ProcessEnv = {}): Promise<CommandResult> => bash(command, { env: { ...process.env, PATH: basePath, ...env } });

/** `npm pack`, then `npm install -g` of the tarball into a prefix of its own: the page's install, minus the global directory. */
async function installPackage(): Promise<string> {
  const packed = await sh(`npm pack --pack-destination ${work} | tail -n 1`);
  if (packed.code !== 0) throw new Error(`npm pack failed: ${packed.stderr}`);
  // A global prefix has lib/node_modules on every machine; npm's strict-allow-scripts check (the repo's .npmrc) reads it first.
  const prefix = join(work, 'prefix');
  mkdirSync(join(prefix, 'lib', 'node_modules'), { recursive: true });
  const installed = await sh(`npm install -g --prefix ${prefix} --prefer-offline --no-audit --no-fund ${join(work, packed.stdout.trim())}`);
  if (installed.code !== 0) throw new Error(`npm install -g failed: ${installed.stderr}`);
  return join(prefix, 'bin');
}

const [stack, binDir] = await Promise.all([startStack(t, { installCrrCrd: true }), installPackage()]);
const { cp, core } = stack;
// What a user has: the installed commands, then kubectl, on the PATH; the kubeconfig in $KUBECONFIG.
const userEnv = { PATH: `${binDir}:${cp.binDir}:${basePath}`, KUBECONFIG: cp.kubeconfigPath };
const namespace = 'default';

const containers = (sidecarEnv = '') => `        - name: main
          image: busybox:1.36
        - name: proxy
          image: envoyproxy/envoy:v1.31.0
          env:
            - name: ${ENV_WHEN_JOB_EXIT}
              value: "true"${sidecarEnv}`;
await apply(cp, namespace, jobYaml('log-shipper', { annotations: { [simAnnotations.exitAfter('main')]: '1s' }, containers: containers() }));
await apply(cp, namespace, jobYaml('report', { annotations: { [simAnnotations.exitAfter('main')]: 'never' }, containers: containers() }));
await apply(cp, namespace, jobYaml('proxy-on-virtual-node', {
  annotations: { [simAnnotations.exitAfter('main')]: '1s' },
  spec: '\n      nodeSelector:\n        type: virtual-kubelet\n      tolerations:\n        - key: virtual-kubelet.io/provider\n          operator: Exists',
  // As examples/proxy-on-virtual-node.yaml: the proxy names its quick-exit image.
  containers: containers(`\n            - name: ${ENV_WITH_IMAGE}\n              value: ${publishedImage('quick-exit')}`),
}));
const podNames = Object.fromEntries(await Promise.all(JOBS.map(async (job) => [job, (await podOfJob(stack, namespace, job)).metadata!.name!] as const)));
await waitForJob(stack, namespace, 'log-shipper', 'Complete');
await waitFor('the watcher to be finished with the log-shipper pod', async () => finishedByWatcher(stack, [await core.readNamespacedPod({ name: podNames['log-shipper']!, namespace })]));
await waitFor('the watcher to be finished with the proxy-on-virtual-node pod', async () => finishedByWatcher(stack, [await core.readNamespacedPod({ name: podNames['proxy-on-virtual-node']!, namespace })]));
await waitFor('the report pod to run', async () => (await core.readNamespacedPod({ name: podNames.report!, namespace })).status?.phase === 'Running');

/** Generated names as the page writes them: `JOB-xxxxx`, and the CRR's pod uid. */
function withStableNames(text: string): string {
  let out = text;
  for (const [job, pod] of Object.entries(podNames)) out = out.replaceAll(pod, `${job}-xxxxx`);
  return out;
}

/** The list's header, and the story's headings (`Pod:`, `Containers:`, ...): the shape of each output, whatever the pods. */
function shape(text: string): string[] {
  const lines = text.split('\n');
  return [lines[0]!.trim().split(/\s{2,}/).join(' '), ...lines.slice(1).map((line) => /^([A-Z][\w ]*:)/.exec(line)?.[1]).filter((label) => label !== undefined)];
}

t.test('kubectl finds the plugin, and the package puts both commands on the PATH', async (t) => {
  const plugins = await sh('kubectl plugin list', userEnv);
  t.match(plugins.stdout, `${binDir}/kubectl-sidecar_terminator`);
  const version = await sh('sidecar-terminator --version', userEnv);
  t.equal(version.stdout, `sidecar-terminator ${(JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version}\n`);
  const help = await sh('kubectl sidecar-terminator status --help', userEnv);
  t.equal(help.code, 0);
  t.match(help.stdout, /--fail-after VALUE[\s\S]*--kubeconfig VALUE[\s\S]*--context VALUE/);
  const bare = await sh('kubectl sidecar-terminator', userEnv);
  t.match(bare.stdout, /^POD\s+JOB\s+NODE/, 'the plugin alone lists the pods in flight');
});

t.test('the ContainerRecreateRequest in the story of a pod stopped by crr', async (t) => {
  const story = await sh(`kubectl sidecar-terminator status pod/${podNames['log-shipper']} -o json`, userEnv);
  t.equal(story.code, 0, story.stderr);
  const parsed = JSON.parse(story.stdout) as { state: string; mechanism: string; actions: Array<{ what: string }>; result?: unknown };
  t.match(parsed, { state: 'stopped', mechanism: 'crr' });
  t.match(parsed.result, { mains: [{ name: 'main', exitCode: 0 }], sidecars: [{ name: 'proxy', stoppedBy: ['crr'] }] }, 'its result: how the main container ended and how the sidecar was stopped');
  t.match(parsed.actions.map((a) => a.what), [/event Normal SidecarTermina\w+: stopping sidecars: proxy \(ContainerRecreateRequest\)/, /ContainerRecreateRequest sidecar-termination-[0-9a-f-]+ for proxy/]);
  await expectJobStoppedBy(t, stack, namespace, 'log-shipper', { proxy: 'crr' });
});

t.test("the page's commands, through kubectl, print what the page shows, in its shape", async (t) => {
  const page = readFileSync(join(repoRoot, PAGE), 'utf8');
  const blocks = commandBlocks(page).map((block) => ({ command: block.commands.body.trim(), output: block.output }));
  const shown = blocks.filter((block) => block.command.startsWith('kubectl sidecar-terminator status') && block.output);
  t.equal(shown.length, 2, 'the list and one story');
  for (const block of shown) {
    const command = block.command.replace(/(\w[\w-]*)-xxxxx/g, (name, job: string) => podNames[job] ?? name);
    const run = await sh(command, userEnv);
    t.equal(run.code, 0, `${block.command}: ${run.stderr}`);
    t.same(shape(withStableNames(run.stdout)), shape(block.output!.body), `${block.command}: the page's columns and headings`);
    for (const job of Object.keys(podNames).filter((job) => block.output!.body.includes(`${job}-xxxxx`))) {
      t.match(withStableNames(run.stdout), `${job}-xxxxx`, `${block.command}: the pod of ${job}, as on the page`);
    }
  }
  const install = blocks.find((block) => block.command.includes('npm pack'));
  t.equal(install?.command, 'npm ci --strict-allow-scripts && npm install -g "./$(npm pack | tail -n 1)"', 'the install line this test follows (npm pack, then npm install -g of the tarball)');
});
