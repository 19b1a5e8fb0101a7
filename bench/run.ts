// Reproduces every figure of bench/README.md (`make bench` runs this).
//
//   node bench/run.ts [--quick] [--only footprint,webhook,profile,watcher,client,rolling,parity,hostile,reach]
//                     [--before REV] [--watcher-before REV] [--hostile-before REV] [--no-before]
//
// footprint: the image's size, start to ready per role, the webhook's memory idle and under load (bench/footprint/run.ts)
// webhook: admission latency/throughput next to the empty fastify route (bench/webhook/run.ts)
// profile: where admission time goes (bench/webhook/profile.ts)
// watcher: burst latency, API requests and memory: the add-on, OpenKruise's own controller and
//          the Kruise-style watcher (bench/watcher/run.ts); then its plots (bench/plots.ts: bench/*.svg)
// client:  cost of one API request through src/kube/client.ts (bench/watcher/client-requests.ts)
// rolling: requests lost by a rolling restart of the webhook under load (bench/rolling-restart/run.ts)
// parity:  the same Jobs under OpenKruise's controller and the add-on (bench/parity/run.ts, bench/parity.md)
// hostile: hostile reviews alone, ordinary reviews with one in flight, 10,000 half-open TLS
//          connections (bench/webhook/hostile.ts), next to the webhook before it judged large
//          bodies off the event loop (--hostile-before)
// reach:   which pod creations reach the webhook, and their latency with and without it (bench/reach/run.ts)
//
// The before/after figures: unless --no-before, src/ as it was at --before (by default the
// commit before the changes the profiles suggested) is extracted to /tmp and measured in the
// same runs, next to the current code; the watcher is compared with its own state at
// --watcher-before (by default the commit before it stopped writing a label and a condition per
// pod). Results: bench/results/*.md and *.json. --quick: short runs, smaller cluster (minutes
// instead of about 50); its figures are for checking the harness (and that OpenKruise's
// controller still builds and runs), not for the README.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { machineLoad } from './lib/proc.ts';
import { parseArgs } from './lib/stats.ts';

const repoRoot = resolve(import.meta.dirname, '..');
const args = parseArgs(process.argv.slice(2));
const quick = args.has('quick') ? ['--quick'] : [];
const only = (args.get('only') ?? 'footprint,webhook,profile,watcher,client,rolling,parity,hostile,reach').split(',');

function node(script: string, scriptArgs: string[]): void {
  const started = Date.now();
  process.stderr.write(`\n== node ${script} ${scriptArgs.join(' ')} (load ${machineLoad()})\n`);
  const result = spawnSync(process.execPath, [join(repoRoot, script), ...scriptArgs], { stdio: 'inherit' });
  if (result.status !== 0) throw new Error(`${script} failed (${result.status ?? result.signal})`);
  process.stderr.write(`== ${script}: ${Math.round((Date.now() - started) / 1000)} s\n`);
}

/** The commit before the admission hot-path and connection-reuse changes (bench/README.md, "Before and after"). */
const DEFAULT_BEFORE = 'd90bacfb7f3a4e4a0ca56f97092ac77b285f6ce8';
/** The add-on before the bundles, the lazy component loading and the image's Node flags (the footprint part's "before"). */
const DEFAULT_FOOTPRINT_BEFORE = '0e8300d8f4c572b2cbbdff2965c06b6944ac0b33';
/** The watcher before it left finished pods to a field selector and wrote the condition only when it says more than the event. */
const DEFAULT_WATCHER_BEFORE = '9895f5dbd196a2b1de9df2edf096b6ce6d4ced20';
/** The webhook before hostile bodies were judged in linear time, off the event loop, and its connections bounded. */
const DEFAULT_HOSTILE_BEFORE = 'e754425a3fa58273568cc2d24771ce0fb628cbaa';

/** src/ (and what it needs to run) as it was at `revision`, in a new directory under /tmp. */
function checkoutOf(revision: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'st-bench-before-'));
  const archive = spawnSync('sh', ['-c', 'git -C "$1" archive "$2" src scripts package.json tsconfig.json Dockerfile | tar -x -C "$3"', 'sh', repoRoot, revision, dir], { encoding: 'utf8' });
  if (archive.status !== 0) throw new Error(`cannot extract ${revision} (a clone with its history is needed, or pass --no-before): ${archive.stderr}`);
  symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

const before = args.has('no-before') ? undefined : checkoutOf(args.get('before') ?? DEFAULT_BEFORE);
const footprintBefore = args.has('no-before') || !only.includes('footprint') ? undefined : checkoutOf(args.get('footprint-before') ?? DEFAULT_FOOTPRINT_BEFORE);
const watcherBefore = args.has('no-before') || !only.includes('watcher') ? undefined : checkoutOf(args.get('watcher-before') ?? DEFAULT_WATCHER_BEFORE);
const hostileBefore = args.has('no-before') || !only.includes('hostile') ? undefined : checkoutOf(args.get('hostile-before') ?? DEFAULT_HOSTILE_BEFORE);
try {
  if (only.includes('footprint')) node('bench/footprint/run.ts', [...quick, ...(footprintBefore ? ['--compare-root', `before=${footprintBefore}`] : [])]);
  if (only.includes('webhook')) node('bench/webhook/run.ts', [...quick, ...(before ? ['--before-root', before] : [])]);
  if (only.includes('profile')) {
    node('bench/webhook/profile.ts', quick);
    if (before) node('bench/webhook/profile.ts', [...quick, '--root', before, '--label', 'before']);
  }
  if (only.includes('client')) node('bench/watcher/client-requests.ts', [...quick, ...(before ? ['--compare-root', before, '--compare-name', 'before'] : [])]);
  // No --cpu-prof here: the slim watcher is timed next to OpenKruise's controller, which runs unprofiled.
  if (only.includes('watcher')) {
    node('bench/watcher/run.ts', [...quick, ...(watcherBefore ? ['--compare-root', `before=${watcherBefore}`] : [])]);
    // A quick run's pictures stay in bench/results; a full run's replace those of bench/README.md.
    node('bench/plots.ts', quick.length > 0 ? ['--out', join(repoRoot, 'bench/results')] : []);
  }
  if (only.includes('rolling')) {
    // Node's client honours `Connection: close` as the API server's Go client does; the Service
    // drops the stopping replica's endpoint at once, or a second late.
    for (const lag of ['0', '1000']) {
      const common = ['--client', 'node', '--duration', quick.length > 0 ? '15' : '60', '--endpoint-lag', lag];
      const suffix = lag === '0' ? '' : '-lag';
      node('bench/rolling-restart/run.ts', [...common, '--label', `after${suffix}`]);
      if (before) node('bench/rolling-restart/run.ts', [...common, '--root', before, '--label', `before${suffix}`]);
    }
  }
  if (only.includes('parity')) node('bench/parity/run.ts', []);
  if (only.includes('hostile')) node('bench/webhook/hostile.ts', [...quick, ...(hostileBefore ? ['--before-root', hostileBefore] : [])]);
  if (only.includes('reach')) node('bench/reach/run.ts', quick);
  process.stderr.write(`\nResults: ${readdirSync(join(repoRoot, 'bench/results')).filter((f) => f.endsWith('.md')).map((f) => `bench/results/${f}`).join(', ')}\n`);
} finally {
  for (const dir of [before, footprintBefore, watcherBefore, hostileBefore]) if (dir) rmSync(dir, { recursive: true, force: true });
}
