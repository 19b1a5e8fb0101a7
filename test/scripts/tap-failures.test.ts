import { spawnSync } from 'node:child_process';
import t from 'tap';

/** The digest of a TAP log, as make test prints it at the end of a failed run. */
const digest = (log: string, max?: number) =>
  spawnSync('awk', [...(max ? ['-v', `max=${max}`] : []), '-f', 'scripts/tap-failures.awk'], { input: log, encoding: 'utf8' });

const log = spawnSync(process.execPath, ['test/fixtures/tap-failures/fails.ts'], { encoding: 'utf8' }).stdout;

t.test('each failed point with the subtests it sits in, its whole message, no blank line', async (t) => {
  const { stdout, status } = digest(log);
  t.equal(status, 0);
  const lines = stdout.split('\n');
  t.ok(lines.includes('not ok: outer > inner > no admission failed'), stdout);
  t.ok(lines.includes('not ok: outer > inner > a point with output that looks like a point'));
  t.match(stdout.replace(/\n\s*/g, ' '), 'dial tcp 10.0.0.12:443: connect: connection refused', 'the message tap folds over several lines, to its end');
  t.notOk(lines.slice(0, -1).some((line) => line.trim() === ''), 'no blank line');
  t.notMatch(stdout, /not ok: .*printed by the test/, 'nothing inside diagnostics is read as a point');
  t.notOk(lines.some((line) => /^not ok: .*(skipped|later)/.test(line)), 'no skipped or todo test');
  t.match(stdout, /^not ok: outer > inner # time=[\d.]+ms\nnot ok: outer > inner\n/m, 'a subtest around them, without its source');
  t.match(stdout, /^not ok: outer > inner\n {4}found: an assertion named as the subtest before it$/m, 'an assertion named as a subtest, with its diagnostics');
  t.match(stdout, /^not ok: outer # time=[\d.]+ms\n5 failed points/m);
});

t.test('at most `max` lines of diagnostics, how many were left out, and every failed point named', async (t) => {
  const { stdout } = digest(log, 3);
  const lines = stdout.split('\n').filter(Boolean);
  t.equal(lines.filter((line) => line.startsWith('    ')).length, 3);
  t.equal(lines.filter((line) => line.startsWith('not ok: ')).length, 5);
  t.match(stdout, /^\.\.\. \d+ more lines of diagnostics\n5 failed points/m);
});

t.test('a passing log: nothing', async (t) => {
  t.equal(digest('TAP version 14\nok 1 - fine\n1..1\n').stdout, '');
});
