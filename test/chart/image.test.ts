// The container image without Docker (there is no engine here): the Dockerfile's steps in
// temporary directories. Its build stage (`npm run build`: scripts/bundle.ts on package.json and
// src/ only), then the runtime layout (dist/ and package.json, no node_modules) started as the
// ENTRYPOINT starts it, Node's flags included. And what each role of `serve` loads from the
// bundles: a watcher-only process none of the webhook's, TLS or lint code, a webhook-only
// process none of the watcher's; a large body judged by the webhook's worker thread, whose
// script is a bundle of its own.
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import t from 'tap';
import { addOnEntrypoint, addOnEnv } from '../../scripts/build-images.ts';
import { OFFLOAD_BODY_BYTES } from '../../src/webhook/offload.ts';
import { runCommand } from '../support/command.ts';
import { repoRoot } from '../support/repo.ts';
import { postJson, startServe } from '../support/serve-process.ts';
import { waitFor } from '../support/wait.ts';

const root = mkdtempSync(join(tmpdir(), 'st-image-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
const build = join(root, 'build');
const app = join(root, 'app');
const PATH = `${join(repoRoot, 'node_modules/.bin')}:${process.env.PATH}`;
// Run from elsewhere with no node_modules/.bin on the PATH: only the image's layout counts. The
// image's environment, its compile cache in a directory of this test's.
const IMAGE_ENV = addOnEnv();
const compileCache = join(root, 'node-compile-cache');
const RUNTIME_ENV = { ...IMAGE_ENV, NODE_COMPILE_CACHE: compileCache, PATH: `${join(repoRoot, 'node_modules/node/bin')}:/usr/bin:/bin`, NODE_PATH: '' };
const cachedFiles = (dir: string): string[] => {
  try {
    return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile()).map((entry) => entry.name);
  } catch {
    return [];
  }
};

t.test("the image's environment: production, and Node's compile cache on the pod's writable /tmp", async (t) => {
  t.same(IMAGE_ENV, { NODE_ENV: 'production', NODE_COMPILE_CACHE: '/tmp/node-compile-cache' });
});

const run = (command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}) => runCommand(command, args, { cwd, env: { ...process.env, PATH, ...env } });

const dockerfile = readFileSync(join(repoRoot, 'Dockerfile'), 'utf8');
const dockerignore = readFileSync(join(repoRoot, '.dockerignore'), 'utf8');
const [node, ...entrypointRest] = addOnEntrypoint();
const nodeFlags = entrypointRest.slice(0, -1);
/** The image's command line, with `/app` here. */
const entrypoint = (...args: string[]) => ({ command: 'node', args: [...nodeFlags, join(app, 'dist/cli.js'), ...args] });

t.test('the Dockerfile: a build stage that bundles, a runtime of Node.js and the bundles only, non-root', async (t) => {
  t.match(dockerfile, /^FROM \$\{NODE_IMAGE\} AS build$/m);
  t.match(dockerfile, /^ARG NODE_IMAGE=node:24-[a-z]+-slim$/m, 'Node.js 24, slim');
  t.match(dockerfile, /^RUN npm ci --strict-allow-scripts/m, "the build installs only the install scripts package.json's allowScripts approves");
  t.match(dockerfile, /^RUN npm run build$/m);
  const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  t.notMatch(runtime, /node_modules\b(?!\/npm|\/corepack)/, 'the runtime stage copies no node_modules');
  t.match(runtime, /^COPY --from=build \/src\/dist \.\/dist$/m, 'it copies the bundles');
  t.match(dockerfile, /^USER 1000:1000$/m, 'a numeric non-root user, which runAsNonRoot can check');
  t.equal(node, 'node', 'node on the PATH runs the CLI');
  t.equal(entrypointRest.at(-1), '/app/dist/cli.js');
  t.ok(nodeFlags.every((flag) => flag.startsWith('--')), `Node's flags between node and the script: ${nodeFlags.join(' ') || 'none'}`);
  const removed = [...dockerfile.matchAll(/^RUN rm [^\n]*(?:\\\n[^\n]*)*/gm)].map(([line]) => line).join(' ');
  t.notMatch(removed, /bin\/node\b/, 'node stays on the PATH: the signal container runs `node -e ...` from this image');
  const copied = [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap(([, sources = '']) => sources.split(/\s+/));
  t.same([...new Set(copied)].sort(), ['package-lock.json', 'package.json', 'scripts/bundle.ts', 'src'], 'the build context it uses');
  for (const path of ['package.json', 'package-lock.json', 'scripts/bundle.ts', 'src/']) t.match(dockerignore, `!${path}`, `.dockerignore lets ${path} in`);
  t.match(dockerignore, /^\*$/m, 'and nothing else (no node_modules, certs, .git)');
});

const metafile = join(root, 'meta.json');

t.test('build stage: npm run build bundles package.json and src/ alone into dist/', async (t) => {
  mkdirSync(join(build, 'scripts'), { recursive: true });
  for (const file of ['package.json', 'package-lock.json', 'src', 'scripts/bundle.ts']) cpSync(join(repoRoot, file), join(build, file), { recursive: true });
  // The repository's full install stands in for the stage's `npm ci`.
  symlinkSync(join(repoRoot, 'node_modules'), join(build, 'node_modules'));
  const result = await run('npm', ['run', 'build', '--', '--metafile', metafile], build);
  t.equal(result.code, 0, result.code === 0 ? 'npm run build' : result.stdout + result.stderr);
  const files = (function walk(dir: string): string[] {
    return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? walk(join(dir, entry.name)) : [relative(join(build, 'dist'), join(dir, entry.name))]));
  })(join(build, 'dist'));
  t.ok(files.includes('cli.js'), 'dist/cli.js');
  t.ok(files.includes('judge-worker.js'), "dist/judge-worker.js, the webhook's worker thread, beside the code that starts it");
  t.same(files.filter((file) => !/\.js$/.test(file)), ['THIRD-PARTY-LICENSES.txt'], 'JavaScript and the third-party licenses only: no .d.ts, no source map');
  const licenses = readFileSync(join(build, 'dist/THIRD-PARTY-LICENSES.txt'), 'utf8');
  for (const name of ['@kubernetes/client-node', 'fastify', 'pino', 'prom-client', 'selfsigned', 'ajv', 'yaml']) t.match(licenses, new RegExp(`^${name}@\\d`, 'm'), `the license of ${name}, whose code is bundled`);
  // The runtime stage: the bundles and package.json, nothing else.
  mkdirSync(app);
  cpSync(join(build, 'dist'), join(app, 'dist'), { recursive: true });
  cpSync(join(repoRoot, 'package.json'), join(app, 'package.json'));
});

t.test('runtime: the bundles start, print their help and lint without node_modules, as the ENTRYPOINT runs them', async (t) => {
  const help = await run(entrypoint('--help').command, entrypoint('--help').args, root, RUNTIME_ENV);
  t.equal(help.code, 0, help.stderr);
  t.match(help.stdout, /sidecar-terminator 0\.1\.0: completes Kubernetes Jobs/, "the version comes from the image's package.json");
  const serveHelp = await run(entrypoint('serve', '--help').command, entrypoint('serve', '--help').args, root, RUNTIME_ENV);
  t.equal(serveHelp.code, 0, serveHelp.stderr);
  t.match(serveHelp.stdout, /--kill-mechanism VALUE/);
  t.ok(cachedFiles(compileCache).length > 0, `Node wrote its compile cache, in the directory the image names (${cachedFiles(compileCache).length} files)`);
  t.match(serveHelp.stdout, /--probe-address VALUE/);
  const lint = entrypoint('lint', join(repoRoot, 'examples/misconfigured.yaml'));
  const linted = await run(lint.command, lint.args, root, RUNTIME_ENV);
  t.equal(linted.code, 1, 'lint finds the error');
  t.match(linted.stdout, /Invalid value: "nginx:1\.27": the quick-exit image is the sidecar's own image/);
});

/**
 * The source modules of src/ whose code a command loaded from the bundles: a load hook records
 * each bundle file the process reads, and esbuild's metafile says which sources went into each.
 */
async function sourcesLoadedBy(args: string[]): Promise<{ sources: string[]; output: string }> {
  const hook = join(root, 'record-loads.mjs');
  const record = join(root, `loaded-${args.join('-').replace(/[^\w-]/g, '')}.json`);
  writeFileSync(hook, `import { registerHooks } from 'node:module';
import { writeFileSync } from 'node:fs';
const loaded = new Set();
registerHooks({ load(url, context, next) { loaded.add(url); return next(url, context); } });
process.on('exit', () => writeFileSync(process.env.RECORD_LOADS, JSON.stringify([...loaded])));
`);
  const command = entrypoint(...args);
  const result = await run(command.command, ['--import', hook, ...command.args], root, { ...RUNTIME_ENV, RECORD_LOADS: record });
  const meta = JSON.parse(readFileSync(metafile, 'utf8')) as { outputs: Record<string, { inputs: Record<string, { bytesInOutput: number }> }> };
  const loadedFiles = (JSON.parse(readFileSync(record, 'utf8')) as string[]).filter((url) => url.startsWith('file:')).map((url) => relative(join(app, 'dist'), new URL(url).pathname));
  const sources = new Set<string>();
  for (const [output, { inputs }] of Object.entries(meta.outputs)) {
    if (!loadedFiles.includes(relative(join(build, 'dist'), join(build, output)))) continue;
    for (const [input, { bytesInOutput }] of Object.entries(inputs)) if (input.startsWith('src/') && bytesInOutput > 0) sources.add(input);
  }
  return { sources: [...sources].sort(), output: result.stdout + result.stderr };
}

t.test('each role of serve loads only its own code from the bundles', async (t) => {
  // An API server that is not there: each role loads its modules, then fails to reach it and exits.
  const kubeconfig = join(root, 'kubeconfig');
  writeFileSync(kubeconfig, JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'none', cluster: { server: 'https://127.0.0.1:9' } }],
    users: [{ name: 'none', user: { token: 'none' } }],
    contexts: [{ name: 'none', context: { cluster: 'none', user: 'none', namespace: 'default' } }],
    'current-context': 'none',
  }));
  const component = (dir: string) => (file: string) => file.startsWith(`src/${dir}/`);
  const lintCode = (file: string) => file === 'src/lint.ts' || (file.startsWith('src/lint/') && file !== 'src/lint/limits.ts');

  const watcher = await sourcesLoadedBy(['serve', '--no-webhook', '--kubeconfig', kubeconfig, '--probe-address', '127.0.0.1:0']);
  t.ok(watcher.sources.includes('src/watcher/watcher.ts'), `the watcher role loads the watcher (${watcher.output.slice(-300)})`);
  t.same(watcher.sources.filter(component('webhook')), [], 'and no webhook code');
  t.same(watcher.sources.filter(component('tls')), [], 'no TLS code');
  t.same(watcher.sources.filter(lintCode), [], 'no lint code (src/lint/limits.ts: two constants of the help text)');

  const webhook = await sourcesLoadedBy(['serve', '--no-watcher', '--kubeconfig', kubeconfig, '--cert-dir', join(root, 'certs'), '--listen-address', '127.0.0.1:0']);
  t.ok(webhook.sources.includes('src/webhook/app.ts'), `the webhook role loads the webhook (${webhook.output.slice(-300)})`);
  t.same(webhook.sources.filter(component('watcher')), [], 'and no watcher code');
  t.same(webhook.sources.filter(lintCode), [], 'no lint code');

  const lint = await sourcesLoadedBy(['lint', join(repoRoot, 'examples/misconfigured.yaml')]);
  t.ok(lint.sources.includes('src/lint.ts'), 'lint loads lint');
  t.same(lint.sources.filter((file) => component('watcher')(file) || component('webhook')(file) || component('tls')(file) || file.startsWith('src/serve')), [], 'and none of serve');
});

t.test('runtime: serve judges a large body in its worker thread, the bundle dist/judge-worker.js', async (t) => {
  // An API server that has no webhook configurations, so that the webhook role gets ready.
  const api = createServer((_request, response) => {
    response.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 }));
  });
  await new Promise<void>((listening) => api.listen(0, '127.0.0.1', listening));
  t.teardown(() => api.close());
  const kubeconfig = join(root, 'kubeconfig-404');
  writeFileSync(kubeconfig, JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'api', cluster: { server: `http://127.0.0.1:${(api.address() as AddressInfo).port}`, 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'api', user: { token: 'none' } }],
    contexts: [{ name: 'api', context: { cluster: 'api', user: 'api', namespace: 'default' } }],
    'current-context': 'api',
  }));
  // serve writes the compile cache once started (not only at exit): a container OOM-killed starts from it.
  const serveCache = join(root, 'serve-compile-cache');
  process.env.NODE_COMPILE_CACHE = serveCache;
  const serve = await startServe(['--no-watcher', '--kubeconfig', kubeconfig, '--cert-dir', join(root, 'certs-worker')], { entry: [...nodeFlags, join(app, 'dist/cli.js')] }).finally(() => {
    delete process.env.NODE_COMPILE_CACHE;
  });
  t.teardown(() => serve.stop());
  const cached = await waitFor('the compile cache written', () => cachedFiles(serveCache).length > 3 && cachedFiles(serveCache), { timeoutMs: 10_000, intervalMs: 100 }).catch(() => cachedFiles(serveCache));
  t.ok(cached.length > 3, `the bundles' bytecode is in the compile cache while serve runs, before any exit (${cached.length} files)`);

  const env = Array.from({ length: 5000 }, (_, i) => ({ name: `SETTING_${i}`, value: 'x'.repeat(80) }));
  const object = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { restartPolicy: 'Never', containers: [{ name: 'main', env }] } };
  const review = { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u', kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', object } };
  const bytes = JSON.stringify(review).length;
  t.ok(bytes > OFFLOAD_BODY_BYTES, `a ${bytes}-byte body: over the ${OFFLOAD_BODY_BYTES} bytes judged on the event loop`);
  const answer = (await postJson(`${serve.url}/validate`, review)) as { response?: { uid?: string; allowed?: boolean } };
  // Without its script the worker cannot start, and the review gets a 500.
  t.same(answer.response, { uid: 'u', allowed: true }, 'answered by the worker thread');
  t.notMatch(serve.output(), /admission handler failed/, 'no failure logged');
});
