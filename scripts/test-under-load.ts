// Runs test files on a loaded machine, to find the tests that pass alone and fail where CI is slow
// (a fresh machine building its caches, a neighbour's job): the files as `npm test -- FILES` runs
// them, while CPU hogs spin beside them, or while a second copy of the same run competes for the
// machine. Prints each run's failed files, with the failing tests' names (the whole TAP output of
// each run is kept in a file it names), and exits 1 if any failed.
// Not part of `make test`; docs/development.md says when to run it.
//
//   node scripts/test-under-load.ts [--hogs N] [--twice] [FILE...]
//
// FILE...    the test files; default every end-to-end file (test/e2e/*.test.ts)
// --hogs N   N busy processes beside the run, at the tests' own priority (default: one per core)
// --twice    the same files run twice at once, each as `npm test -- FILES` would (jobs: 2 each)
// --help     this text
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, createWriteStream, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const repoRoot = resolve(import.meta.dirname, '..');

const { values: options, positionals } = parseArgs({
  allowPositionals: true,
  options: { hogs: { type: 'string' }, twice: { type: 'boolean', default: false }, help: { type: 'boolean', default: false } },
});

interface RunResult {
  label: string;
  code: number;
  /** Each failed file with the names of its failing tests. */
  failed: Map<string, string[]>;
  seconds: number;
}

const say = (line: string) => process.stderr.write(`[under-load ${new Date().toISOString().slice(11, 19)}] ${line}\n`);

if (options.help) {
  process.stdout.write(usage());
} else {
  process.exitCode = await main();
}

async function main(): Promise<number> {
  const hogCount = options.hogs === undefined ? availableParallelism() : Number(options.hogs);
  if (!Number.isInteger(hogCount) || hogCount < 0) throw new Error(`--hogs: expected a whole number, got ${JSON.stringify(options.hogs)}`);
  const files = positionals.length > 0 ? positionals : readdirSync(join(repoRoot, 'test/e2e')).filter((name) => name.endsWith('.test.ts')).sort().map((name) => `test/e2e/${name}`);
  const hogs = Array.from({ length: hogCount }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
  const stopHogs = () => hogs.forEach((hog) => hog.kill('SIGKILL'));
  process.on('exit', stopHogs);
  say(`${files.length} files, ${options.twice ? 'two runs at once' : 'one run'}, ${hogCount} CPU hog${hogCount === 1 ? '' : 's'} beside ${options.twice ? 'them' : 'it'}`);
  try {
    // The second run works in a copy of the checkout: tap keeps its state in the checkout (.tap/).
    const roots = options.twice ? [repoRoot, copyOfCheckout()] : [repoRoot];
    const runs = await Promise.all(roots.map((root, index) => runTests(roots.length > 1 ? `run ${index + 1}` : 'run', root, files)));
    for (const root of roots.slice(1)) removeCopy(root);
    for (const run of runs) {
      say(`${run.label}: exit ${run.code} in ${run.seconds.toFixed(0)} s; ${run.failed.size === 0 ? 'no file failed' : `failed: ${[...run.failed.keys()].join(', ')}`}`);
      for (const [file, tests] of run.failed) for (const test of tests) say(`  ${file}: not ok - ${test}`);
    }
    return runs.every((run) => run.code === 0) ? 0 : 1;
  } finally {
    stopHogs();
  }
}

/** `npm test -- FILES`: the type-check, the cached binaries, then tap; its TAP output read for failures. */
function runTests(label: string, root: string, files: string[]): Promise<RunResult> {
  const started = Date.now();
  const child: ChildProcess = spawn('bash', ['scripts/test.sh', ...files], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  // The whole TAP output, for the failures' details.
  const log = join(tmpdir(), `test-under-load-${label.replace(' ', '-')}-${process.pid}.tap`);
  const output = createWriteStream(log);
  say(`${label}: its output goes to ${log}`);
  const failed = new Map<string, string[]>();
  // tap prints a file's failing tests (`    not ok N - NAME`, indented) before the file's own line (`not ok N - test/...`).
  let failing: string[] = [];
  let pending = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    output.write(chunk);
    const lines = (pending + chunk.toString('utf8')).split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      const test = /^ {4}not ok \d+ - (.*?)(?: # time=\S+)?$/.exec(line)?.[1];
      if (test !== undefined) failing.push(test);
      const file = /^(ok|not ok) \d+ - (test\/\S+)/.exec(line);
      if (!file) continue;
      if (file[1] === 'not ok') failed.set(file[2]!, failing);
      failing = [];
    }
  });
  return new Promise((resolveRun, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      output.end();
      resolveRun({ label, code: code ?? 1, failed, seconds: (Date.now() - started) / 1000 });
    });
  });
}

/**
 * A worktree of the checkout's commit with its uncommitted changes copied in (some tests read git,
 * as `make release` does), and its packages linked one by one: node_modules/.cache (the
 * type-check's incremental state) stays the copy's own.
 */
function copyOfCheckout(): string {
  const copy = join(mkdtempSync(join(tmpdir(), 'st-under-load-')), 'checkout');
  execFileSync('git', ['worktree', 'add', '--quiet', '--detach', copy, 'HEAD'], { cwd: repoRoot });
  const changed = execFileSync('git', ['ls-files', '-z', '--modified', '--others', '--exclude-standard'], { cwd: repoRoot, encoding: 'utf8' }).split('\0').filter((file) => file !== '' && existsSync(join(repoRoot, file)));
  for (const file of changed) cpSync(join(repoRoot, file), join(copy, file), { recursive: true });
  mkdirSync(join(copy, 'node_modules'));
  for (const entry of readdirSync(join(repoRoot, 'node_modules'))) {
    if (entry !== '.cache') symlinkSync(join(repoRoot, 'node_modules', entry), join(copy, 'node_modules', entry));
  }
  return copy;
}

function removeCopy(copy: string): void {
  execFileSync('git', ['worktree', 'remove', '--force', copy], { cwd: repoRoot });
  rmSync(dirname(copy), { recursive: true, force: true });
}

function usage(): string {
  return `node scripts/test-under-load.ts [--hogs N] [--twice] [FILE...]

Runs test files (default test/e2e/*.test.ts) on a loaded machine: N busy processes beside the run
(--hogs, default one per core), or two runs of the same files at once (--twice). Prints each run's
failed files and failing tests; exits 1 if any failed.
`;
}
