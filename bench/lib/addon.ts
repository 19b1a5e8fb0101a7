// The add-on as the benchmarks start it: what the image runs (the bundles of scripts/bundle.ts,
// with the Node flags of the Dockerfile's ENTRYPOINT) in the environment the chart gives each role
// (`webhook.env`, `watcher.env` of its values.yaml), built once per checkout and run. A checkout
// from before the bundles (an earlier commit extracted by bench/run.ts) runs as its own image ran
// it: its sources compiled by tsc, next to the repository's node_modules, without flags.
// Also the GC probe each measured Node process carries (bench/watcher/gc-probe.mjs).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, relative, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse as parseYaml } from 'yaml';
import { addOnEnv, addOnNodeFlags } from '../../scripts/build-images.ts';
import { bundle } from '../../scripts/bundle.ts';

const repoRoot = resolve(import.meta.dirname, '../..');
const built = new Map<string, string[]>();

/**
 * `node` arguments that run the CLI of the checkout at `root` as its image runs it: Node's flags,
 * then the script. The first call per checkout builds it into a temporary directory.
 */
export function addOnArgs(root: string = repoRoot): string[] {
  let args = built.get(root);
  if (!args) {
    const out = mkdtempSync(join(tmpdir(), 'st-bench-addon-'));
    process.on('exit', () => rmSync(out, { recursive: true, force: true }));
    if (existsSync(join(root, 'scripts/bundle.ts'))) {
      execFileSync(process.execPath, [join(root, 'scripts/bundle.ts'), '--out', join(out, 'dist')], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
      // The bundles are ES modules: package.json says so beside them, as in the image.
      execFileSync('cp', [join(root, 'package.json'), join(out, 'package.json')]);
      args = [...addOnNodeFlags(join(root, 'Dockerfile')), join(out, 'dist/cli.js')];
    } else {
      // Inside the checkout, whose node_modules its imports resolve to.
      const compiled = mkdtempSync(join(root, 'bench-dist-'));
      process.on('exit', () => rmSync(compiled, { recursive: true, force: true }));
      // Type errors in files of the checkout that src/ does not use (its scripts import test
      // support it lacks) do not stop tsc from writing the JavaScript.
      spawnSync(process.execPath, [join(repoRoot, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.json'), '--outDir', compiled], { cwd: root, stdio: 'ignore' });
      if (!existsSync(join(compiled, 'src/cli.js'))) throw new Error(`tsc wrote no src/cli.js for ${root}`);
      args = [join(compiled, 'src/cli.js')];
    }
    built.set(root, args);
  }
  return args;
}

/**
 * `node` arguments that run a harness script of bench/ (say bench/webhook/server.ts) bundled with
 * the add-on's code as the image's bundles are, with the image's Node flags (and to be run with
 * the environment of its role, roleEnv()).
 */
export async function bundledArgs(script: string): Promise<string[]> {
  const out = mkdtempSync(join(tmpdir(), 'st-bench-bundled-'));
  process.on('exit', () => rmSync(out, { recursive: true, force: true }));
  await bundle([relative(repoRoot, resolve(script))], join(out, 'dist'));
  execFileSync('cp', [join(repoRoot, 'package.json'), join(out, 'package.json')]);
  return [...addOnNodeFlags(), join(out, 'dist', `${basename(script, '.ts')}.js`)];
}

export type Role = 'webhook' | 'watcher';

/**
 * The environment the chart of the checkout at `root` gives a role's container (its default
 * values' `<role>.env`: Node's and glibc's memory settings), empty for a checkout without one.
 */
export function roleEnv(role: Role, root: string = repoRoot): Record<string, string> {
  const values = join(root, 'charts/sidecar-terminator/values.yaml');
  if (!existsSync(values)) return {};
  const env = (parseYaml(readFileSync(values, 'utf8')) as Record<Role, { env?: Record<string, string> } | undefined>)[role]?.env;
  return { ...env };
}

/**
 * The environment the image of the checkout at `root` sets (its Dockerfile's ENV), with Node's
 * compile cache, if it names one, in `cacheDir` instead: one directory per measured variant, so
 * that its starts after the first find the cache as a container started again finds it on /tmp.
 */
export function imageEnv(cacheDir: string, root: string = repoRoot): Record<string, string> {
  const env = addOnEnv(join(root, 'Dockerfile'));
  if (env.NODE_COMPILE_CACHE) env.NODE_COMPILE_CACHE = cacheDir;
  return env;
}

/** The live heap and RSS right after a full garbage collection (bench/watcher/gc-probe.mjs, bench/kruise/main.go). */
export interface AfterGc {
  heapMiB: number;
  rssAfterGcMiB: number;
  /** Where that RSS is (Node processes only): file-backed pages, V8's heap (physical, by space), the rest of the anonymous memory. */
  parts?: ResidentParts;
}

export interface ResidentParts {
  fileBackedMiB: number;
  anonymousMiB: number;
  /** V8's heap, physical, by space (new, old, code, large objects, ...), and all of it. */
  v8Spaces: Record<string, number>;
  v8PhysicalMiB: number;
  /** Anonymous memory outside V8's heap: malloc (Node, OpenSSL, V8's own tables), thread stacks, ArrayBuffers. */
  otherAnonymousMiB: number;
}

const gcProbe = join(import.meta.dirname, '../watcher/gc-probe.mjs');

/** Node flags and environment that preload the GC probe into a measured process; `afterGc` asks it. */
export function probed(dir: string, name: string): { nodeArgs: string[]; env: Record<string, string>; file: string; afterGc: (pid: number) => Promise<AfterGc> } {
  const file = join(dir, `${name}.gc.json`);
  return {
    nodeArgs: ['--expose-gc', '--import', gcProbe],
    env: { BENCH_GC_PROBE_OUT: file },
    file,
    async afterGc(pid) {
      rmSync(file, { force: true });
      process.kill(pid, 'SIGUSR2');
      const deadline = Date.now() + 60_000;
      for (;;) {
        try {
          const text = readFileSync(file, 'utf8');
          if (text.endsWith('}')) {
            const usage = JSON.parse(text) as { heapUsed: number; rss: number; anonymous?: number; fileBacked?: number; v8?: { physical: number; spaces: Record<string, { physical: number }> } };
            const mib = (bytes: number) => bytes / 1048576;
            const parts: ResidentParts | undefined =
              usage.v8 && usage.anonymous !== undefined && usage.fileBacked !== undefined
                ? {
                    fileBackedMiB: mib(usage.fileBacked),
                    anonymousMiB: mib(usage.anonymous),
                    v8Spaces: Object.fromEntries(Object.entries(usage.v8.spaces).map(([name, space]) => [name, mib(space.physical)])),
                    v8PhysicalMiB: mib(usage.v8.physical),
                    otherAnonymousMiB: mib(usage.anonymous - usage.v8.physical),
                  }
                : undefined;
            return { heapMiB: mib(usage.heapUsed), rssAfterGcMiB: mib(usage.rss), ...(parts ? { parts } : {}) };
          }
        } catch {
          // not written yet
        }
        if (Date.now() > deadline) throw new Error(`${name}'s GC probe did not answer within 60 s`);
        await sleep(100);
      }
    },
  };
}
