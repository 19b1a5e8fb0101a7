// "Try it" of docs/getting-started.md, done as written: the demo `make dev` starts (startDemo,
// shared with scripts/dev.ts) on real nodes, as the page shows it, then every command of the section's ```sh blocks run by bash from the
// repository, with the example files as they are. A ```text block right after a ```sh block is
// the output those commands print (stdout and stderr, in order), compared exactly. Commands must
// succeed, except the last one of a block whose output is an error kubectl prints (a refusal).
// Only `make dev` (the demo is already running) and the `export` line (replaced by the same
// variables for this demo) are not run; anything else but kubectl fails the test.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BatchV1Api } from '@kubernetes/client-node';
import t from 'tap';
import { startDemo } from '../support/demo.ts';
import { expectJobStoppedBy, type StopPath } from '../support/endings.ts';
import { apiClients } from '../support/stack.ts';
import { commandBlocks, readDoc, section } from '../support/markdown.ts';
import { repoRoot } from '../support/repo.ts';
import { bash } from '../support/command.ts';
import { canRunRealNode } from '../support/real-node.ts';

/** The ```sh blocks of "Try it": each its command lines, and the output shown after them, if any. */
const blocks = commandBlocks(section(readDoc('docs/getting-started.md'), 'Try it')).map((block) => ({
  commands: block.commands.body.split('\n').filter((line) => line.trim() !== '' && !line.trim().startsWith('#')),
  expected: block.output?.body,
}));

// The page shows what real containers print: no real node here, no test (.ci/run requires one).
if (canRunRealNode(t)) {
  const certDir = mkdtempSync(join(tmpdir(), 'st-examples-certs-'));
  t.teardown(() => rmSync(certDir, { recursive: true, force: true }));
  const demo = await startDemo({ certDir });
  t.equal(demo.nodes.kind, 'real', 'the demo runs real nodes');
  t.teardown(() => demo.stop());

  // What the page's export line sets, for this demo: its kubeconfig, and its kubectl first on the PATH.
  const env = { ...process.env, KUBECONFIG: demo.cp.kubeconfigPath, PATH: `${demo.cp.binDir}:${process.env.PATH}` };

  const isRefusal = (output: string) => /^(Error from server|The request is invalid|error:)/.test(output);

  t.test('the section has the demo, the export line and kubectl commands only', async (t) => {
    const lines = blocks.flatMap((block) => block.commands);
    t.ok(lines.includes('make dev'), 'it starts with make dev');
    const exports = lines.filter((line) => line.startsWith('export '));
    t.same(exports, ['export KUBECONFIG=$HOME/.cache/sidecar-terminator/dev/kubeconfig PATH=$HOME/.cache/sidecar-terminator/dev/bin:$PATH'], 'the paths make dev publishes (test/support/demo.ts devDir)');
    for (const line of lines.filter((each) => each !== 'make dev' && !each.startsWith('export '))) t.match(line, /^kubectl /, `runnable here: ${line}`);
    t.equal(demo.killMechanism, 'signal', 'the demo has no OpenKruise: the page says the kill mechanism is signal');
  });

  for (const [index, block] of blocks.entries()) {
    const commands = block.commands.filter((line) => line.startsWith('kubectl '));
    if (commands.length === 0) continue;
    t.test(`block ${index + 1}: ${commands.join(' && ')}`, async (t) => {
      const refusal = block.expected !== undefined && isRefusal(block.expected);
      let output = '';
      for (const [position, command] of commands.entries()) {
        const result = await bash(command, { env });
        output += result.output;
        const mustFail = refusal && position === commands.length - 1;
        t.equal(result.code !== 0, mustFail, `${command}: ${mustFail ? 'refused' : 'succeeds'}${result.code !== 0 && !mustFail ? `\n${result.output}` : ''}`);
      }
      if (block.expected !== undefined) t.equal(output.trimEnd(), block.expected.trimEnd(), 'prints what the page shows');
    });
  }

  t.test('every example is in the section, and ends as it promises', async (t) => {
    const applied = blocks.flatMap((block) => block.commands).flatMap((line) => /^kubectl apply -f (examples\/\S+)$/.exec(line)?.[1] ?? []);
    const examples = readdirSync(join(repoRoot, 'examples')).filter((file) => file.endsWith('.yaml')).map((file) => `examples/${file}`);
    t.same([...applied].sort(), examples.sort(), 'each file in examples/ is tried');
    const batch = demo.cp.kubeConfig.makeApiClient(BatchV1Api);
    const jobs = (await batch.listNamespacedJob({ namespace: 'default' })).items;
    const complete = Object.fromEntries(jobs.map((job) => [job.metadata!.name!, job.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True') ?? false]));
    t.same(complete, { 'log-shipper': true, 'proxy-on-virtual-node': true, 'ignore-exit-code': true }, 'three Jobs complete; the misconfigured one was never created');
    // And each the way its paragraph says, with no warning: a stop that fell back would still complete.
    const clients = apiClients(demo.cp.kubeConfig);
    const paths: Record<string, Record<string, StopPath | StopPath[]>> = {
      'log-shipper': { 'log-shipper': 'signal' },
      'proxy-on-virtual-node': { proxy: 'image' },
      'ignore-exit-code': { 'sql-proxy': 'phase' },
    };
    for (const [job, expected] of Object.entries(paths)) await expectJobStoppedBy(t, clients, 'default', job, expected);
  });
}
