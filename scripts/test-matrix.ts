// `make test-matrix`: the end-to-end suite (test/e2e, real-node files included, and the chart's
// install under its own RBAC) on the oldest and newest supported Kubernetes releases and one in
// between, each built once into the cache like the default control plane. Records each run in
// scripts/test-matrix-results.json and writes the table of docs/installation.md, "Kubernetes versions", from it.
//
//   node scripts/test-matrix.ts                    every version of MATRIX
//   node scripts/test-matrix.ts v1.29.15           only these (the others keep their last result)
//   node scripts/test-matrix.ts --docs             rewrite the docs table from the results, run nothing
//   TAP_ARGS="test/e2e/native-sidecars.test.ts" node scripts/test-matrix.ts v1.33.4   a subset, recorded as such
//   TAP_ARGS="--jobs=1" node scripts/test-matrix.ts v1.37.2   the whole suite, one file at a time (a busy machine)
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { withParts } from './generated-parts.ts';

/** The oldest supported release (native sidecars on by default), one in between (native sidecars GA), the newest. */
export const MATRIX = ['v1.29.15', 'v1.33.4', 'v1.37.2'] as const;
const SUITE = ['test/e2e/*.test.ts', 'test/chart/cluster.test.ts'];

const root = resolve(import.meta.dirname, '..');
const resultsPath = resolve(root, 'scripts/test-matrix-results.json');
const pagePath = resolve(root, 'docs/installation.md');
export const TABLE_BEGIN = '<!-- matrix results: generated from scripts/test-matrix-results.json by `make test-matrix`; do not edit -->';
export const TABLE_END = '<!-- end of matrix results -->';

export interface MatrixResult {
  version: string;
  /** When the run ended, ISO 8601. */
  date: string;
  /** The tap arguments: the whole suite unless TAP_ARGS narrowed it. */
  suite: string[];
  files: number;
  pass: number;
  fail: number;
  skip: number;
  minutes: number;
  /** The test files that failed, or were skipped entirely (a real node this machine cannot run). */
  failedFiles: string[];
  skippedFiles: string[];
}

export type Results = Record<string, MatrixResult>;

export function readResults(): Results {
  try {
    return JSON.parse(readFileSync(resultsPath, 'utf8')) as Results;
  } catch {
    return {};
  }
}

/** Runs a command with K8S_VERSION set, its output passed through; resolves with the exit code and what it printed. */
function run(command: string, args: string[], version: string): Promise<{ code: number; output: string }> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(command, args, { cwd: root, env: { ...process.env, K8S_VERSION: version, PATH: `${root}/node_modules/.bin:${process.env.PATH}` } });
    let output = '';
    const pass = (target: NodeJS.WriteStream) => (chunk: Buffer) => {
      output += chunk.toString('utf8');
      target.write(chunk);
    };
    child.stdout.on('data', pass(process.stdout));
    child.stderr.on('data', pass(process.stderr));
    child.on('error', reject);
    child.on('close', (code) => resolveRun({ code: code ?? 1, output }));
  });
}

/** The counts of tap's last summary line and the outcome of each top-level test file. */
export function parseTapOutput(output: string): Pick<MatrixResult, 'files' | 'pass' | 'fail' | 'skip' | 'failedFiles' | 'skippedFiles'> {
  const summary = [...output.matchAll(/^# \{ total: \d+(.*)\}$/gm)].at(-1)?.[1] ?? '';
  const count = (name: string) => Number(new RegExp(`${name}: (\\d+)`).exec(summary)?.[1] ?? 0);
  const files = [...output.matchAll(/^(not )?ok \d+ - (\S+\.test\.ts)(.*)$/gm)];
  return {
    files: files.length,
    pass: count('pass'),
    fail: count('fail'),
    skip: count('skip'),
    failedFiles: files.filter(([, not]) => not).map(([, , file]) => file!),
    skippedFiles: files.filter(([, not, , rest]) => !not && /# SKIP/.test(rest ?? '')).map(([, , file]) => file!),
  };
}

async function runVersion(version: string): Promise<MatrixResult> {
  const started = Date.now();
  process.stdout.write(`\n== Kubernetes ${version}: binaries (built once, then cached)\n`);
  for (const script of ['build-control-plane.sh', 'build-node.sh', 'build-kruise.sh', 'build-helm.sh']) {
    const built = await run('bash', [`scripts/${script}`], version);
    if (built.code !== 0) throw new Error(`scripts/${script} failed for ${version}`);
  }
  const images = await run('node', ['scripts/build-images.ts'], version);
  if (images.code !== 0) throw new Error('scripts/build-images.ts failed');
  const tapArgs = (process.env.TAP_ARGS ?? '').split(/\s+/).filter(Boolean);
  // Options alone (e.g. --jobs=1) keep the whole suite; files narrow it.
  const suite = tapArgs.some((arg) => !arg.startsWith('-')) ? tapArgs : [...tapArgs, ...SUITE];
  process.stdout.write(`\n== Kubernetes ${version}: tap ${suite.join(' ')}\n`);
  const tap = await run('sh', ['-c', `exec tap ${suite.join(' ')}`], version);
  return { version, date: new Date().toISOString(), suite, ...parseTapOutput(tap.output), minutes: Math.round((Date.now() - started) / 60_000) };
}

/** The table of docs/installation.md, one row per version of MATRIX. */
export function matrixTable(results: Results): string {
  const rows = MATRIX.map((version) => {
    const result = results[version];
    if (!result) return `| ${version} | not run yet | | | |`;
    const verdict = result.fail > 0 ? `**${result.fail} failed** (${result.failedFiles.join(', ')})` : 'passed';
    const files = result.suite.filter((arg) => !arg.startsWith('-'));
    const scope = files.join(' ') === SUITE.join(' ') ? 'the end-to-end suite' : files.join(' ');
    const skipped = result.skippedFiles.length > 0 ? `; skipped: ${result.skippedFiles.join(', ')}` : '';
    return `| ${version} | ${verdict} | ${result.pass} passed, ${result.fail} failed, ${result.skip} skipped in ${result.files} files (${scope}${skipped}) | ${result.minutes} min | ${result.date.slice(0, 10)} |`;
  });
  return ['| Kubernetes | result | tests | time | run on |', '|---|---|---|---|---|', ...rows].join('\n');
}

export function withMatrixTable(page: string, results: Results): string {
  return withParts(page, [{ begin: TABLE_BEGIN, end: TABLE_END, make: () => matrixTable(results) }], 'docs/installation.md');
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const results = readResults();
  const versions = args.includes('--docs') ? [] : args.length > 0 ? args : [...MATRIX];
  for (const version of versions) {
    if (!MATRIX.includes(version as (typeof MATRIX)[number])) throw new Error(`${version} is not in the matrix (${MATRIX.join(', ')})`);
  }
  for (const version of versions) {
    results[version] = await runVersion(version);
    writeFileSync(resultsPath, `${JSON.stringify(results, null, 2)}\n`);
  }
  writeFileSync(pagePath, withMatrixTable(readFileSync(pagePath, 'utf8'), results));
  process.stdout.write(`\n${matrixTable(results)}\n`);
  process.exitCode = versions.some((version) => results[version]!.fail > 0) ? 1 : 0;
}
