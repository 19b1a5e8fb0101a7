// scripts/install-packages.sh (make node_modules): a dependency's install script that
// package.json's allowScripts does not approve fails `npm ci` and never runs; approved, it runs.
// Shown on a throwaway project in a temporary directory whose one dependency, a local tarball,
// has a preinstall script; no registry is needed. And the project's own allowScripts decides on
// exactly the packages of its lock file that have install scripts.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { runCommand } from '../support/command.ts';
import { repoRoot } from '../support/repo.ts';

const scratch = mkdtempSync(join(tmpdir(), 'st-install-scripts-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

// The dependency: its preinstall leaves a file in the directory npm was run in.
const name = 'unreviewed-install-script';
const source = join(scratch, 'source/package');
mkdirSync(source, { recursive: true });
writeFileSync(join(source, 'package.json'), JSON.stringify({
  name,
  version: '1.0.0',
  scripts: { preinstall: `node -e "require('fs').writeFileSync(require('path').join(process.env.INIT_CWD, 'preinstall-ran'), '')"` },
}));
const tarball = `${name}-1.0.0.tgz`;

/** A project depending on the tarball, with its lock file, and `allowScripts` when given. */
async function project(dirName: string, allowScripts?: Record<string, boolean>, npmrc?: string): Promise<string> {
  const dir = join(scratch, dirName);
  mkdirSync(dir);
  const packed = await runCommand('tar', ['-czf', join(dir, tarball), '-C', join(scratch, 'source'), 'package']);
  if (packed.code !== 0) throw new Error(`tar failed: ${packed.stderr}`);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({
    name: 'throwaway',
    version: '1.0.0',
    private: true,
    dependencies: { [name]: `file:${tarball}` },
    ...(allowScripts ? { allowScripts } : {}),
  }, null, 2));
  if (npmrc !== undefined) writeFileSync(join(dir, '.npmrc'), npmrc);
  const locked = await runCommand('npm', ['install', '--package-lock-only', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: dir });
  if (locked.code !== 0) throw new Error(`npm install --package-lock-only failed: ${locked.stderr}`);
  return dir;
}

const installPackages = (cwd: string) => runCommand('bash', [join(repoRoot, 'scripts/install-packages.sh')], { cwd });

t.test('an install script allowScripts does not list fails the install, and does not run', async (t) => {
  const dir = await project('unlisted');
  const { code, stderr } = await installPackages(dir);
  t.not(code, 0, 'npm ci fails');
  t.match(stderr, 'ESTRICTALLOWSCRIPTS');
  t.match(stderr, `${name}@1.0.0`, 'naming the package');
  t.match(stderr, 'npm install-scripts approve', 'and how to approve it');
  t.notOk(existsSync(join(dir, 'preinstall-ran')), 'its preinstall did not run');
  t.notOk(existsSync(join(dir, 'node_modules', name)), 'nothing was installed');
});

t.test('listed, it runs', async (t) => {
  // A local tarball is approved by its path (a registry package by its name, as `node` is).
  const dir = await project('listed', { [`file:${join(scratch, 'listed', tarball)}`]: true });
  const { code, stderr } = await installPackages(dir);
  t.equal(code, 0, stderr);
  t.ok(existsSync(join(dir, 'preinstall-ran')), 'its preinstall ran');
});

t.test("the project's .npmrc makes a plain `npm ci` just as strict", async (t) => {
  const version = (await runCommand('npm', ['--version'])).stdout.trim();
  const [major = 0, minor = 0] = version.split('.').map(Number);
  if (major < 11 || (major === 11 && minor < 16)) {
    t.plan(0, `skipped: npm ${version} on the PATH ignores strict-allow-scripts (npm 11.16 and later enforce it; make installs through scripts/install-packages.sh either way)`);
    return;
  }
  const dir = await project('plain-npm-ci', undefined, readFileSync(join(repoRoot, '.npmrc'), 'utf8'));
  const { code, stderr } = await runCommand('npm', ['ci', '--no-audit', '--no-fund'], { cwd: dir });
  t.not(code, 0, 'npm ci fails');
  t.match(stderr, 'ESTRICTALLOWSCRIPTS');
  t.notOk(existsSync(join(dir, 'preinstall-ran')), 'its preinstall did not run');
});

t.test('an npm too old to enforce allowScripts installs through the pinned npm, saying so', async (t) => {
  // A stand-in npm that reports an old version and fails any install: the install must not use it.
  const bin = join(scratch, 'old-npm-bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'npm'), '#!/bin/sh\n[ "$1" = --version ] && { echo 10.9.2; exit 0; }\necho "the old npm was asked to $*" >&2; exit 3\n');
  chmodSync(join(bin, 'npm'), 0o755);
  const dir = await project('old-npm');
  const pinned = /NPM_VERSION:=([\d.]+)/.exec(readFileSync(join(repoRoot, 'scripts/versions.sh'), 'utf8'))?.[1];
  // `npx --yes npm@X` needs the registry (or npm's cache): the pinned npm then refuses the script as above.
  const { code, stderr } = await runCommand('bash', [join(repoRoot, 'scripts/install-packages.sh')], { cwd: dir, env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
  t.match(stderr, `npm 10.9.2 does not enforce package.json's allowScripts (npm 11.16 and later do): installing with npm ${pinned}, through npx`);
  t.notMatch(stderr, 'the old npm was asked', 'the old npm installs nothing');
  t.not(code, 0);
  t.match(stderr, 'ESTRICTALLOWSCRIPTS', `npm ${pinned} refused the unlisted script`);
  t.notOk(existsSync(join(dir, 'preinstall-ran')));
});

t.test("the project's allowScripts approves exactly the locked packages that have install scripts", async (t) => {
  const manifest = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { allowScripts?: Record<string, boolean> };
  const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as { packages: Record<string, { hasInstallScript?: boolean }> };
  const withScripts = Object.entries(lock.packages)
    .filter(([, entry]) => entry.hasInstallScript)
    .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length));
  t.same(Object.keys(manifest.allowScripts ?? {}).sort(), [...new Set(withScripts)].sort(), 'by name: the lock file records no resolved URL, so npm cannot verify a version pin');
  const approved = Object.entries(manifest.allowScripts ?? {}).filter(([, allowed]) => allowed === true).map(([name]) => name);
  const refused = Object.entries(manifest.allowScripts ?? {}).filter(([, allowed]) => allowed === false).map(([name]) => name);
  t.same(approved, ['node'], 'approved: the Node.js 24 the scripts run on');
  t.same(refused, ['esbuild'], "refused: esbuild's postinstall, which only swaps its CLI's launcher for the native binary (scripts/bundle.ts calls its API, which finds the binary itself)");
});
