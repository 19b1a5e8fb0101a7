// The unit loop's runner (scripts/test.sh --unit): each test file in a process of its own, as tap
// runs it, `--jobs` at a time, the slowest first, started with tap's mock loader only (t.mockImport needs it). tap's
// runner also starts every file with its process-info loader and source maps, which take two
// thirds more CPU (29 CPU-seconds for 32 of the unit files, where the mock loader alone takes
// 17.5) and give the loop nothing; so the loop runs the files itself.
//   node scripts/unit-runner.ts [--jobs N] [--cover DIR]... [--grep PATTERN --invert] FILE...
// A passing file prints one line; a failing one all it printed. The last line is tap's summary
// line, summed: `# { total: N, pass: N, fail: N, skip: N }` (scripts/test.sh counts it).
// --cover DIR: the files under DIR run under V8's coverage, reported for src/ as tap reports it,
// into .tap/report/coverage-summary.json (what scripts/coverage-floor.ts reads); the others with
// V8's compiled code cached on disk (a fifth of a file's start), which coverage would bypass.
// Each file's time is kept in node_modules/.cache, so that the next run starts the slowest first
// and does not end waiting for one.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parse } from 'yaml';

const root = resolve(import.meta.dirname, '..');
const mockLoader = import.meta.resolve('@tapjs/mock/import');
/** .taprc's timeout (seconds), which tap gives each file. */
const taprcTimeout = (parse(readFileSync(join(root, '.taprc'), 'utf8')) as { timeout?: number }).timeout ?? 30;
const cache = join(root, 'node_modules/.cache/sidecar-terminator');
const timesFile = join(cache, 'unit-times.json');

const COUNTS = ['total', 'pass', 'fail', 'skip', 'todo'] as const;
type Counts = Record<(typeof COUNTS)[number], number>;

interface FileRun {
  file: string;
  ok: boolean;
  counts: Counts;
  output: string;
  seconds: number;
}

/** tap's closing line, e.g. `# { total: 12, pass: 10, fail: 1, skip: 1 }`; zeros where a count is absent. */
export function summaryOf(output: string): Counts | undefined {
  const line = output.split('\n').findLast((l) => /^# \{ total: \d+/.test(l));
  if (!line) return undefined;
  const count = (name: string) => Number(new RegExp(`\\b${name}: (\\d+)`).exec(line)?.[1] ?? 0);
  return Object.fromEntries(COUNTS.map((name) => [name, count(name)])) as Counts;
}

export function summaryLine(counts: Counts): string {
  return `# { ${COUNTS.filter((name) => name === 'total' || counts[name] > 0).map((name) => `${name}: ${counts[name]}`).join(', ')} }`;
}

function runFile(file: string, env: NodeJS.ProcessEnv): Promise<FileRun> {
  const started = performance.now();
  return new Promise((done) => {
    const child = spawn(process.execPath, [`--import=${mockLoader}`, file], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => chunks.push(chunk));
    // tap's own timeout ends a stuck file from inside; this one ends a file that cannot end itself.
    const killer = setTimeout(() => child.kill('SIGKILL'), (taprcTimeout + 30) * 1000);
    // The output ends when every holder of the pipes has closed them: a process the file started
    // and left running holds them too. Once the file has exited, its output is not waited for long.
    let lingering: NodeJS.Timeout | undefined;
    child.on('exit', () => {
      lingering = setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
      }, 2000);
    });
    child.on('close', (code, signal) => {
      clearTimeout(killer);
      clearTimeout(lingering);
      const output = Buffer.concat(chunks).toString('utf8');
      const summary = summaryOf(output);
      const ok = code === 0 && summary !== undefined && summary.fail === 0;
      // A file that failed without saying how many of its tests failed counts as one failure.
      const counts = summary && (ok || summary.fail > 0) ? summary : { total: 1, pass: 0, fail: 1, skip: 0, todo: 0 };
      const ending = signal ? `killed by ${signal}` : `exit code ${code}`;
      done({ file, ok, counts, output: ok ? output : `${output}\n# ${file}: ${ending}\n`, seconds: (performance.now() - started) / 1000 });
    });
  });
}

/**
 * The environment less what tap's runner gives its children (this runner may itself run under
 * tap, in its own test): a file that sees TAP=1 leaves out the closing line the counts come from.
 */
function withoutTapRunner(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const kept = Object.entries(env).filter(([name]) => !/^(TAP$|TAP_|_TAPJS_)/.test(name));
  const nodeOptions = (env.NODE_OPTIONS ?? '').split(/\s+/).filter((option) => option && !option.includes('@tapjs/'));
  return { ...Object.fromEntries(kept), NODE_OPTIONS: nodeOptions.join(' ') };
}

/** The seconds each file took last time; none for a file not seen yet. */
function lastTimes(): Record<string, number> {
  try {
    return JSON.parse(readFileSync(timesFile, 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

async function main(): Promise<number> {
  const { values, positionals: files } = parseArgs({
    allowPositionals: true,
    options: { jobs: { type: 'string' }, cover: { type: 'string', multiple: true }, grep: { type: 'string', multiple: true }, invert: { type: 'boolean' } },
  });
  const jobs = Number(values.jobs ?? availableParallelism());
  const covered = (file: string) => (values.cover ?? []).some((dir) => file.startsWith(dir.endsWith('/') ? dir : `${dir}/`));
  const coverageDir = values.cover ? mkdtempSync(join(tmpdir(), 'unit-coverage-')) : undefined;
  const env: NodeJS.ProcessEnv = {
    ...withoutTapRunner(process.env),
    TAP_TIMEOUT: String(taprcTimeout),
    ...(values.grep ? { TAP_GREP: values.grep.join('\n') } : {}),
    ...(values.invert ? { TAP_INVERT: '1' } : {}),
  };
  const envOf = (file: string): NodeJS.ProcessEnv =>
    coverageDir && covered(file) ? { ...env, NODE_V8_COVERAGE: coverageDir } : { ...env, NODE_COMPILE_CACHE: join(cache, 'compile') };

  const began = performance.now();
  const times = lastTimes();
  // The slowest first (a file not seen yet counts as slow): the run ends on short files.
  const queue = [...files].sort((a, b) => (times[b] ?? 1e9) - (times[a] ?? 1e9));
  const runs: FileRun[] = [];
  const worker = async () => {
    for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
      const run = await runFile(file, envOf(file));
      runs.push(run);
      if (run.ok) console.log(`ok ${run.file} (${run.counts.pass} passed${run.counts.skip ? `, ${run.counts.skip} skipped` : ''}, ${run.seconds.toFixed(1)} s)`);
      else console.log(`not ok ${run.file} (${run.seconds.toFixed(1)} s)\n${run.output}`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, files.length) }, worker));

  const failed = runs.filter((run) => !run.ok).map((run) => run.file);
  if (failed.length > 0) console.log(`# failed: ${failed.join(' ')}`);
  const total = Object.fromEntries(COUNTS.map((name) => [name, runs.reduce((sum, run) => sum + run.counts[name], 0)])) as Counts;
  console.log(summaryLine(total));
  console.log(`# ${runs.length} files in ${((performance.now() - began) / 1000).toFixed(1)} s, ${jobs} at a time`);
  mkdirSync(cache, { recursive: true });
  writeFileSync(timesFile, JSON.stringify({ ...times, ...Object.fromEntries(runs.map((run) => [run.file, Number(run.seconds.toFixed(2))])) }));

  if (coverageDir) {
    try {
      await reportCoverage(coverageDir);
    } finally {
      rmSync(coverageDir, { recursive: true, force: true });
    }
  }
  return failed.length > 0 ? 1 : 0;
}

/** V8's coverage of the files under src/, as the json-summary tap's `--coverage-report=json-summary` writes. */
async function reportCoverage(tempDirectory: string): Promise<void> {
  // Gone first, so that a report that fails leaves no earlier run's summary to be read as this one's.
  rmSync(join(root, '.tap/report/coverage-summary.json'), { force: true });
  // c8 is what tap reports coverage with; loaded only when asked.
  const { Report } = (await import('c8')) as unknown as { Report: new (options: object) => { run(): Promise<void> } };
  const previous = process.cwd();
  process.chdir(root);
  try {
    await new Report({
      include: ['src/**'],
      reporter: ['json-summary'],
      reportsDirectory: join(root, '.tap/report'),
      tempDirectory,
      excludeNodeModules: true,
      skipFull: false,
    }).run();
  } finally {
    process.chdir(previous);
  }
}

if (import.meta.main) process.exitCode = await main();
