// The robustness run's smoke (bench/robustness/run.ts --smoke): Jobs on the simulator and on a real
// node while every kind of fault is injected once, in a seeded order, then the ledger of what the
// cluster recorded, checked rule by rule. The full runs (thirty minutes each) are bench/README.md's;
// this keeps the harness, and the add-on under every fault, honest in every test run.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { FAULTS } from '../../bench/robustness/faults.ts';
import type { Violation } from '../../bench/robustness/ledger.ts';
import { canRunRealNode } from '../support/real-node.ts';
import { repoRoot } from '../support/repo.ts';

const SEED = 20261129;

if (canRunRealNode(t)) {
  const out = mkdtempSync(join(tmpdir(), 'st-robustness-smoke-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));

  t.test('every fault once, with Jobs on the simulator and the real node: every Job ends as its main containers say, and no rule of the ledger is broken', async (t) => {
    let output = '';
    // Its cluster ends with it, and it with this test, whatever ends the test.
    const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', process.execPath, join(repoRoot, 'bench/robustness/run.ts'), '--smoke', '--seed', String(SEED), '--out', out], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    t.teardown(() => child.kill('SIGKILL'));
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    const code = await new Promise<number | null>((resolveExit) => child.on('close', resolveExit));
    if (code !== 0) t.comment(output.split('\n').slice(-80).join('\n'));
    const report = JSON.parse(readFileSync(join(out, `robustness-${SEED}-smoke.json`), 'utf8')) as {
      jobs: number;
      byKind: Record<string, { created: number }>;
      faults: Array<{ kind: string; error?: string }>;
      harnessErrors: string[];
      violations: Violation[];
    };
    t.same(report.faults.map((fault) => fault.kind).sort(), FAULTS.map((fault) => fault.kind).sort(), 'every kind of fault was injected once');
    t.same(report.harnessErrors, [], 'no fault failed to heal');
    t.ok(report.jobs >= 50, `${report.jobs} Jobs created meanwhile`);
    t.ok(Object.keys(report.byKind).some((kind) => kind.startsWith('real-')), 'some on the real node');
    t.same(report.violations, [], 'no violation of the ledger');
    t.equal(code, 0, 'the run exited 0');
  });
}
