import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import t from 'tap';
import { summaryLine, summaryOf } from '../../scripts/unit-runner.ts';


const fixture = (name: string) => `test/fixtures/unit-runner/${name}.ts`;
const run = (...args: string[]) => spawnSync(process.execPath, ['scripts/unit-runner.ts', '--jobs', '2', ...args], { encoding: 'utf8' });

t.test("tap's closing line read and written back", async (t) => {
  t.same(summaryOf('ok 1 - x\n# { total: 12, pass: 10, fail: 1, skip: 1 }\n# time=3ms\n'), { total: 12, pass: 10, fail: 1, skip: 1, todo: 0 });
  t.equal(summaryOf('ok 1 - x\n'), undefined, 'no closing line: the file did not finish');
  t.equal(summaryLine({ total: 3, pass: 2, fail: 0, skip: 1, todo: 0 }), '# { total: 3, pass: 2, skip: 1 }');
});

t.test('passing files: one line each, with the mock loader, the grep passed on, and the sum', async (t) => {
  const result = run('--grep', '^a stress test', '--invert', fixture('passes'));
  t.equal(result.status, 0, result.stdout);
  t.match(result.stdout, /^ok test\/fixtures\/unit-runner\/passes\.ts \(2 passed, 2 skipped, [\d.]+ s\)$/m);
  t.match(result.stdout, /^# \{ total: 4, pass: 2, skip: 2 \}$/m);
  t.notMatch(result.stdout, /one is not two|# Subtest/, 'a passing file prints one line');
});

t.test('a failing file: its whole output, its name among the failed, and exit status 1', async (t) => {
  const result = run(fixture('passes'), fixture('fails'), fixture('crashes'));
  t.equal(result.status, 1);
  t.match(result.stdout, /^not ok test\/fixtures\/unit-runner\/fails\.ts/m);
  t.match(result.stdout, /one is not two/, "the failing test's diagnostics");
  t.match(result.stdout, /broken before any test[\s\S]*# test\/fixtures\/unit-runner\/crashes\.ts: exit code 1/, 'a file that crashed counts as a failure');
  t.match(result.stdout, /^# failed: .*fails\.ts/m);
  t.match(result.stdout, /^# \{ total: 7, pass: 3, fail: 3, skip: 1 \}$/m, 'the crashed file counts as one failed test');
});

t.test('a file that leaves a process holding its output open: its result once it has exited, while that process still runs', async (t) => {
  const pidFile = join(mkdtempSync(join(tmpdir(), 'unit-runner-')), 'pid');
  const result = spawnSync(process.execPath, ['scripts/unit-runner.ts', fixture('leaves-a-process')], { encoding: 'utf8', env: { ...process.env, LEFTOVER_PID_FILE: pidFile } });
  const pid = Number(readFileSync(pidFile, 'utf8'));
  t.teardown(() => {
    rmSync(dirname(pidFile), { recursive: true, force: true });
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  });
  t.equal(result.status, 0, result.stdout);
  t.match(result.stdout, /^ok test\/fixtures\/unit-runner\/leaves-a-process\.ts \(1 passed/m);
  t.doesNotThrow(() => process.kill(pid, 0), 'the runner answered while the process holding the output was still there');
});
