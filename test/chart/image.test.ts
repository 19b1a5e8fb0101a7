// The container image without Docker (there is no engine here): the Dockerfile's steps in
// temporary directories. Its build stage (`npm run build` on package.json, tsconfig.json and
// src/ only), its deps stage (`npm ci --omit=dev --ignore-scripts`), then the runtime layout
// (node_modules, dist/src, package.json) started as the ENTRYPOINT starts it.
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { runCommand } from '../support/command.ts';
import { repoRoot } from './helm.ts';

const root = mkdtempSync(join(tmpdir(), 'st-image-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
const build = join(root, 'build');
const app = join(root, 'app');
const PATH = `${join(repoRoot, 'node_modules/.bin')}:${process.env.PATH}`;

const run = (command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}) => runCommand(command, args, { cwd, env: { ...process.env, PATH, ...env } });

const dockerfile = readFileSync(join(repoRoot, 'Dockerfile'), 'utf8');
const dockerignore = readFileSync(join(repoRoot, '.dockerignore'), 'utf8');

t.test('the Dockerfile: multi-stage, non-root, production dependencies, the same entrypoint as tested here', async (t) => {
  t.match(dockerfile, /^FROM \$\{NODE_IMAGE\} AS build$/m);
  t.match(dockerfile, /^ARG NODE_IMAGE=node:24-[a-z]+-slim$/m, 'Node.js 24, slim');
  t.match(dockerfile, /^RUN npm run build$/m);
  t.match(dockerfile, /^RUN npm ci --omit=dev --ignore-scripts/m);
  t.match(dockerfile, /^USER 1000:1000$/m, 'a numeric non-root user, which runAsNonRoot can check');
  t.match(dockerfile, /^ENTRYPOINT \["node", "\/app\/dist\/src\/cli\.js"\]$/m, 'node on the PATH runs dist/src/cli.js');
  const removed = [...dockerfile.matchAll(/^RUN rm [^\n]*(?:\\\n[^\n]*)*/gm)].map(([line]) => line).join(' ');
  t.notMatch(removed, /bin\/node\b/, 'node stays on the PATH: the signal container runs `node -e ...` from this image');
  const copied = [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap(([, sources = '']) => sources.split(/\s+/));
  t.same([...new Set(copied)].sort(), ['package-lock.json', 'package.json', 'src', 'tsconfig.json'], 'the build context it uses');
  for (const path of ['package.json', 'package-lock.json', 'tsconfig.json', 'src/']) t.match(dockerignore, `!${path}`, `.dockerignore lets ${path} in`);
  t.match(dockerignore, /^\*$/m, 'and nothing else (no node_modules, certs, .git)');
});

t.test('build stage: npm run build on package.json, tsconfig.json and src/ alone', async (t) => {
  mkdirSync(build);
  for (const file of ['package.json', 'package-lock.json', 'tsconfig.json', 'src']) cpSync(join(repoRoot, file), join(build, file), { recursive: true });
  // The repository's full install stands in for the stage's `npm ci`.
  symlinkSync(join(repoRoot, 'node_modules'), join(build, 'node_modules'));
  const result = await run('npm', ['run', 'build'], build);
  t.equal(result.code, 0, result.code === 0 ? 'npm run build' : result.stdout + result.stderr);
  t.ok(readdirSync(join(build, 'dist/src')).includes('cli.js'), 'dist/src/cli.js');
});

t.test('deps stage: npm ci --omit=dev installs the runtime dependencies only', async (t) => {
  mkdirSync(app);
  for (const file of ['package.json', 'package-lock.json']) cpSync(join(repoRoot, file), join(app, file));
  const result = await run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], app);
  t.equal(result.code, 0, result.code === 0 ? 'npm ci --omit=dev' : result.stdout + result.stderr);
  const manifest = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
  const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
  const installed = new Set(readdirSync(join(app, 'node_modules')).flatMap((name) => (name.startsWith('@') ? readdirSync(join(app, 'node_modules', name)).map((scoped) => `${name}/${scoped}`) : [name])));
  for (const name of Object.keys(manifest.dependencies)) t.ok(installed.has(name), `${name} is installed`);
  for (const name of ['tap', 'typescript', 'node']) t.notOk(installed.has(name), `${name} (a devDependency) is not`);
  const devOnly = [...installed].filter((name) => lock.packages[`node_modules/${name}`]?.dev === true);
  t.same(devOnly, [], 'nothing the lock file marks as needed for development only');
  cpSync(join(build, 'dist/src'), join(app, 'dist/src'), { recursive: true });
});

t.test('runtime: the production tree starts, prints its help and lints, as the ENTRYPOINT runs it', async (t) => {
  const cli = join(app, 'dist/src/cli.js');
  // Run from elsewhere with no node_modules/.bin on the PATH: only the image's layout counts.
  const env = { PATH: `${join(repoRoot, 'node_modules/node/bin')}:/usr/bin:/bin`, NODE_ENV: 'production' };
  const help = await run('node', [cli, '--help'], root, env);
  t.equal(help.code, 0, help.stderr);
  t.match(help.stdout, /sidecar-terminator 0\.1\.0: completes Kubernetes Jobs/, 'the version comes from the image\'s package.json');
  const serveHelp = await run('node', [cli, 'serve', '--help'], root, env);
  t.equal(serveHelp.code, 0, serveHelp.stderr);
  t.match(serveHelp.stdout, /--kill-mechanism VALUE/);
  t.match(serveHelp.stdout, /--probe-address VALUE/);
  const lint = await run('node', [cli, 'lint', join(repoRoot, 'examples/misconfigured.yaml')], root, env);
  t.equal(lint.code, 1, 'lint finds the error');
  t.match(lint.stdout, /Invalid value: "nginx:1\.27": the quick-exit image is the sidecar's own image/);
});

t.test('runtime: every compiled module loads from the production node_modules (serve loads lazily, --help does not)', async (t) => {
  const modules = (function walk(dir: string): string[] {
    return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? walk(join(dir, entry.name)) : entry.name.endsWith('.js') ? [join(dir, entry.name)] : []));
  })(join(app, 'dist/src'));
  t.ok(modules.length > 20, `${modules.length} modules`);
  const script = `for (const url of ${JSON.stringify(modules.map((file) => pathToFileURL(file).href))}) await import(url); console.log('loaded');`;
  const result = await run('node', ['--input-type=module', '-e', script], app, { PATH: `${join(repoRoot, 'node_modules/node/bin')}:/usr/bin:/bin`, NODE_PATH: '' });
  t.equal(result.code, 0, result.stderr);
  t.equal(result.stdout.trim(), 'loaded');
  t.notOk(modules.some((file) => relative(app, file).startsWith('dist/test')), 'no test code in the image');
});

t.test('runtime: a large body is judged by the compiled worker thread (dist/src/webhook/judge-worker.js)', async (t) => {
  const appModule = pathToFileURL(join(app, 'dist/src/webhook/app.js')).href;
  const value = 'x'.repeat(80);
  const script = [
    `const { buildApp } = await import(${JSON.stringify(appModule)});`,
    "const app = buildApp({ enforcement: 'deny', quickExitImageAllowlist: [], bodyLimit: 8 << 20, logger: false, readiness: () => ({ ready: true }) });",
    `const env = Array.from({ length: 5000 }, (_, i) => ({ name: 'SETTING_' + i, value: ${JSON.stringify(value)} }));`,
    "const object = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { restartPolicy: 'Never', containers: [{ name: 'main', env }] } };",
    "const payload = JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u', kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', object } });",
    "const response = await app.inject({ method: 'POST', url: '/validate', headers: { 'content-type': 'application/json' }, payload });",
    'console.log(payload.length, response.statusCode, JSON.parse(response.body).response.allowed);',
    'await app.close();',
  ].join('\n');
  const result = await run('node', ['--input-type=module', '-e', script], app, { PATH: `${join(repoRoot, 'node_modules/node/bin')}:/usr/bin:/bin`, NODE_PATH: '' });
  t.equal(result.code, 0, result.stderr);
  const [bytes, status, allowed] = result.stdout.trim().split(' ');
  t.ok(Number(bytes) > 64 * 1024, `a ${bytes}-byte body: over the size judged on the event loop`);
  t.same([status, allowed], ['200', 'true'], 'answered from the worker thread');
});
