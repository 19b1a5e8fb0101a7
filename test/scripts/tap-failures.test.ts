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
  t.ok(lines.includes('not ok: outer > inner > a value that looks like a point'));
  t.match(stdout.replace(/\n\s*/g, ' '), 'dial tcp 10.0.0.12:443: connect: connection refused', 'the message tap folds over several lines, to its end');
  t.notOk(lines.slice(0, -1).some((line) => line.trim() === ''), 'no blank line');
  t.notMatch(stdout, /not ok: .*printed by the test/, 'nothing inside diagnostics is read as a point');
  t.notMatch(stdout, /skipped|later/, 'no skipped or todo test');
  t.match(stdout, /^not ok: outer > inner # time=[\d.]+ms\nnot ok: outer # time=[\d.]+ms\n/m, 'the subtests around them, without their source');
  t.match(stdout, /^4 failed points/m);
});

t.test('at most `max` lines, and how many were left out', async (t) => {
  const { stdout } = digest(log, 3);
  t.equal(stdout.split('\n').filter(Boolean).length, 5);
  t.match(stdout, /^\.\.\. \d+ more lines\n4 failed points/m);
});

t.test('a passing log: nothing', async (t) => {
  t.equal(digest('TAP version 14\nok 1 - fine\n1..1\n').stdout, '');
});
