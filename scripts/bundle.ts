// `npm run build`: bundles the command line (src/cli.ts) and everything it loads into dist/, with
// esbuild. What the image and the npm package ship: no node_modules, no .d.ts, no source map
// unless asked for.
//
//   node scripts/bundle.ts [--out DIR] [--sourcemap] [--metafile FILE]
//
// Split at every dynamic import: the CLI loads each command's modules on demand, and `serve` each
// component's (src/serve/composition.ts), so a watcher-only process never reads the webhook's,
// TLS or lint code, nor a webhook-only one the watcher's. The webhook's worker thread
// (src/webhook/judge-worker.ts) is an entry point of its own, and the chunks lie beside the entry
// points, so that the code starting the worker finds it as ./judge-worker.js wherever it lands. Tree shaking keeps, of
// @kubernetes/client-node's generated API, the API groups the code uses (CoreV1, CustomObjects,
// Coordination, Admissionregistration, Apis, Version), not the other sixty. Minified, names kept:
// logs and stack traces name the classes and functions as in the sources (pino logs an error's
// constructor name as its type). dist/THIRD-PARTY-LICENSES.txt carries the license of every
// package whose code is in the bundles. --sourcemap writes .map files beside them, for
// `node --enable-source-maps`; --metafile writes esbuild's account of which input went where.
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { build, type Metafile } from 'esbuild';
import { LOWEST_NODE_VERSION } from '../src/cli.ts';

const repoRoot = resolve(import.meta.dirname, '..');

/** The scripts of the worker threads, started by file name: an entry point of every bundle. */
export const WORKER_ENTRY_POINTS = ['src/webhook/judge-worker.ts'];

/**
 * Bundles `entryPoints` (paths relative to the repository) and the worker threads into `out` as
 * the image's bundles are made; the benchmarks bundle their own harness around the add-on's code
 * the same way.
 */
export async function bundle(entryPoints: string[], out: string, options: { sourcemap?: boolean } = {}): Promise<Metafile> {
  rmSync(out, { recursive: true, force: true });
  const result = await build({
    absWorkingDir: repoRoot,
    entryPoints: [...entryPoints, ...WORKER_ENTRY_POINTS],
    outdir: out,
    entryNames: '[name]',
    chunkNames: '[name]-[hash]',
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    // The npm package's command runs on every supported Node.js release, the oldest included.
    target: `node${LOWEST_NODE_VERSION}`,
    minify: true,
    keepNames: true,
    legalComments: 'none',
    sourcemap: options.sourcemap ? 'linked' : false,
    metafile: true,
    logLevel: 'warning',
    // The CommonJS packages in the bundle (fastify, pino, prom-client...) call require() for
    // Node's built-in modules; an ES module has no require of its own.
    banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
  });
  writeFileSync(join(out, 'THIRD-PARTY-LICENSES.txt'), thirdPartyLicenses(result.metafile));
  return result.metafile;
}

/**
 * The command line as one CommonJS file, for a Node.js single executable application (the kubectl
 * plugin of a release, scripts/release.ts): Node 24 runs only a CommonJS script as its entry, from
 * memory, so nothing is split; dynamic imports are inlined. It carries no package.json: the
 * version it prints is written in (SIDECAR_TERMINATOR_VERSION, read by src/cli.ts), and
 * `import.meta.main` is true (the file is the program).
 */
export async function bundleExecutable(outfile: string, version: string): Promise<Metafile> {
  const result = await build({
    absWorkingDir: repoRoot,
    entryPoints: ['src/cli.ts'],
    outfile,
    bundle: true,
    format: 'cjs',
    platform: 'node',
    // It runs on the Node.js it is embedded in, the project's own.
    target: 'node24',
    minify: true,
    keepNames: true,
    legalComments: 'none',
    metafile: true,
    logLevel: 'warning',
    define: { 'import.meta.main': 'true', SIDECAR_TERMINATOR_VERSION: JSON.stringify(version) },
  });
  writeFileSync(join(dirname(outfile), 'THIRD-PARTY-LICENSES.txt'), thirdPartyLicenses(result.metafile));
  return result.metafile;
}

if (import.meta.main) {
  const { values: options } = parseArgs({ options: { out: { type: 'string' }, sourcemap: { type: 'boolean' }, metafile: { type: 'string' } } });
  const out = resolve(options.out ?? join(repoRoot, 'dist'));
  const metafile = await bundle(['src/cli.ts'], out, { sourcemap: options.sourcemap });
  if (options.metafile) writeFileSync(resolve(options.metafile), JSON.stringify(metafile));
  const bytes = Object.values(metafile.outputs).reduce((sum, output) => sum + output.bytes, 0);
  process.stderr.write(`[bundle] ${relative(repoRoot, out) || out}: ${Object.keys(metafile.outputs).length} files, ${(bytes / 1048576).toFixed(1)} MiB\n`);
}

/** The directory (relative to the repository, e.g. node_modules/fastify) of each package whose code went into the bundles. */
export function bundledPackages(meta: Metafile): string[] {
  const packages = new Set<string>();
  for (const output of Object.values(meta.outputs)) {
    for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
      const match = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input);
      if (match && bytesInOutput > 0) packages.add(match[1]!);
    }
  }
  return [...packages].sort();
}

/** Each package whose code went into the bundles: its name, version, license and license text. */
function thirdPartyLicenses(meta: Metafile): string {
  const sections = bundledPackages(meta)
    .map((dir) => join(repoRoot, dir))
    .map((dir) => {
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name: string; version: string; license?: string };
      const file = readdirSync(dir).find((name) => /^(licen[cs]e|copying)(\.|$)/i.test(name));
      const text = file ? readFileSync(join(dir, file), 'utf8').trim() : `(the package ships no license file; its package.json says ${manifest.license ?? 'nothing'})`;
      return { id: `${manifest.name}@${manifest.version}`, text: `${manifest.name}@${manifest.version} (${manifest.license ?? 'no license field'})\n\n${text}\n` };
    })
    // One section per package and version (a package nested twice at one version is one).
    .filter((section, index, all) => all.findIndex((other) => other.id === section.id) === index)
    .sort((a, b) => a.id.localeCompare(b.id));
  return `Third-party software in sidecar-terminator's bundles, with the license of each package.\n\n${sections.map((section) => section.text).join(`\n${'-'.repeat(78)}\n\n`)}`;
}
