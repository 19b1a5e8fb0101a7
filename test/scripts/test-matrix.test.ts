// The version matrix's bookkeeping: what it reads from tap's output and the table of
// docs/installation.md it writes.
import t from 'tap';
import { MATRIX, TABLE_BEGIN, TABLE_END, matrixTable, parseTapOutput, withMatrixTable, type MatrixResult } from '../../scripts/test-matrix.ts';

const TAP_OUTPUT = `# Subtest: test/e2e/watcher.test.ts
ok 1 - test/e2e/watcher.test.ts # time=1000ms
# Subtest: test/e2e/native-sidecars-feature-gate.test.ts
ok 2 - test/e2e/native-sidecars-feature-gate.test.ts # SKIP skipped: the gate is locked on
# Subtest: test/e2e/real-node-crr.test.ts
not ok 3 - test/e2e/real-node-crr.test.ts # time=2000ms
# { total: 40, pass: 30, fail: 1, skip: 9 }
`;

const result = (over: Partial<MatrixResult>): MatrixResult => ({
  version: 'v1.37.2', date: '2026-11-23T20:00:00.000Z', suite: ['--jobs=1', 'test/e2e/*.test.ts', 'test/chart/cluster.test.ts'],
  files: 28, pass: 200, fail: 0, skip: 3, minutes: 25, failedFiles: [], skippedFiles: [], ...over,
});

t.test("tap's summary and each file's outcome", async (t) => {
  t.same(parseTapOutput(TAP_OUTPUT), {
    files: 3, pass: 30, fail: 1, skip: 9,
    failedFiles: ['test/e2e/real-node-crr.test.ts'],
    skippedFiles: ['test/e2e/native-sidecars-feature-gate.test.ts'],
  });
  t.same(parseTapOutput(''), { files: 0, pass: 0, fail: 0, skip: 0, failedFiles: [], skippedFiles: [] }, 'no output, nothing passed');
});

t.test('one row per version: not run, passed (tap options do not narrow the suite), failed, a subset', async (t) => {
  const table = matrixTable({
    'v1.33.4': result({ version: 'v1.33.4', suite: ['test/e2e/native-sidecars.test.ts'], files: 1, pass: 28, skip: 0 }),
    'v1.37.2': result({ fail: 2, failedFiles: ['test/e2e/a.test.ts'], skippedFiles: ['test/e2e/b.test.ts'] }),
  }).split('\n');
  t.equal(table.length, 2 + MATRIX.length);
  t.equal(table[2], '| v1.29.15 | not run yet | | | |');
  t.equal(table[3], '| v1.33.4 | passed | 28 passed, 0 failed, 0 skipped in 1 files (test/e2e/native-sidecars.test.ts) | 25 min | 2026-11-23 |');
  t.equal(table[4], '| v1.37.2 | **2 failed** (test/e2e/a.test.ts) | 200 passed, 2 failed, 3 skipped in 28 files (the end-to-end suite; skipped: test/e2e/b.test.ts) | 25 min | 2026-11-23 |');
});

t.test('the table goes between the markers, and a page without them is an error', async (t) => {
  const page = `# x\n${TABLE_BEGIN}\nold\n${TABLE_END}\nafter\n`;
  t.equal(withMatrixTable(page, {}), `# x\n${TABLE_BEGIN}\n${matrixTable({})}\n${TABLE_END}\nafter\n`);
  t.throws(() => withMatrixTable('# x\n', {}), /lacks the markers/);
});
