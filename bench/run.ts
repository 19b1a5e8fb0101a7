// Reproduces every figure of bench/README.md (`make bench` runs this).
//
//   node bench/run.ts [--quick] [--only webhook,profile,watcher,client] [--no-patches]
//
// webhook: admission latency/throughput next to the empty fastify route (bench/webhook/run.ts)
// profile: where admission time goes (bench/webhook/profile.ts)
// watcher: burst latency and memory, slim vs all-pods watcher (bench/watcher/run.ts)
// client:  cost of one API request through src/kube/client.ts (bench/watcher/client-requests.ts)
//
// Unless --no-patches, the proposed src/ changes (bench/patches/*.diff) are applied to a copy
// of the repository under /tmp and measured in the same runs, next to the current code: that
// gives the before/after figures. A patch that no longer applies (src/ moved on) is reported and
// its comparison skipped. Results: bench/results/*.md and *.json. --quick: short runs, smaller
// cluster (minutes instead of about an hour); its figures are for checking the harness, not for
// the README.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { machineLoad } from './lib/proc.ts';
import { parseArgs } from './lib/stats.ts';

const repoRoot = resolve(import.meta.dirname, '..');
const args = parseArgs(process.argv.slice(2));
const quick = args.has('quick') ? ['--quick'] : [];
const only = (args.get('only') ?? 'webhook,profile,watcher,client').split(',');

function node(script: string, scriptArgs: string[]): void {
  const started = Date.now();
  process.stderr.write(`\n== node ${script} ${scriptArgs.join(' ')} (load ${machineLoad()})\n`);
  const result = spawnSync(process.execPath, [join(repoRoot, script), ...scriptArgs], { stdio: 'inherit' });
  if (result.status !== 0) throw new Error(`${script} failed (${result.status ?? result.signal})`);
  process.stderr.write(`== ${script}: ${Math.round((Date.now() - started) / 1000)} s\n`);
}

/** A copy of src/ (and what it needs to run) with the given patches applied; undefined if one does not apply. */
function patchedCopy(patches: string[]): string | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'st-bench-patched-'));
  for (const entry of ['src', 'package.json', 'tsconfig.json']) cpSync(join(repoRoot, entry), join(dir, entry), { recursive: true });
  symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'));
  for (const patch of patches) {
    const applied = spawnSync('patch', ['-p1', '--forward', '--batch', '-d', dir, '-i', patch], { encoding: 'utf8' });
    if (applied.status !== 0) {
      process.stderr.write(`the patch ${patch} does not apply to the current src/ (skipping its comparison):\n${applied.stdout}${applied.stderr}\n`);
      rmSync(dir, { recursive: true, force: true });
      return undefined;
    }
  }
  return dir;
}

const patchDir = join(repoRoot, 'bench/patches');
const patch = (names: string[]) => (args.has('no-patches') ? undefined : patchedCopy(names.map((name) => join(patchDir, name))));
const copies: string[] = [];
try {
  if (only.includes('webhook') || only.includes('profile')) {
    const webhookCopy = patch(['webhook-admission-hot-paths.diff']);
    if (webhookCopy) copies.push(webhookCopy);
    if (only.includes('webhook')) node('bench/webhook/run.ts', [...quick, ...(webhookCopy ? ['--patched-root', webhookCopy] : [])]);
    if (only.includes('profile')) {
      node('bench/webhook/profile.ts', quick);
      if (webhookCopy) node('bench/webhook/profile.ts', [...quick, '--root', webhookCopy, '--label', 'patched']);
    }
  }
  if (only.includes('client') || only.includes('watcher')) {
    const clientCopy = patch(['kube-client-reuse-connections.diff']);
    const watcherCopy = only.includes('watcher') ? patch(['kube-client-reuse-connections.diff', 'watcher-fewer-requests.diff']) : undefined;
    copies.push(...[clientCopy, watcherCopy].filter((dir) => dir !== undefined));
    if (only.includes('client')) node('bench/watcher/client-requests.ts', [...quick, ...(clientCopy ? ['--compare-root', clientCopy] : [])]);
    const variants = [...(clientCopy ? [`client-fix=${clientCopy}`] : []), ...(watcherCopy ? [`client+watcher-fix=${watcherCopy}`] : [])];
    if (only.includes('watcher')) node('bench/watcher/run.ts', [...quick, '--profile', ...(variants.length > 0 ? ['--compare-root', variants.join(',')] : [])]);
  }
  process.stderr.write(`\nResults: ${readdirSync(join(repoRoot, 'bench/results')).filter((f) => f.endsWith('.md')).map((f) => `bench/results/${f}`).join(', ')}\n`);
} finally {
  for (const dir of copies) rmSync(dir, { recursive: true, force: true });
}
