// Prometheus and promtool, Debian's build, for the alert tests: scripts/install-prometheus.sh
// finds them on the PATH or fetches the package into the cache once, and prints their directory.
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const repoRoot = resolve(import.meta.dirname, '../..');

let binDir: Promise<string> | undefined;

/** The directory holding `prometheus` and `promtool`. */
export function prometheusBinDir(): Promise<string> {
  binDir ??= run('bash', [join(repoRoot, 'scripts/install-prometheus.sh')], { cwd: repoRoot, maxBuffer: 16 * 1024 * 1024 }).then(({ stdout }) => {
    const dir = stdout.trim().split('\n').pop();
    if (!dir) throw new Error('scripts/install-prometheus.sh printed no directory');
    return dir;
  });
  return binDir;
}
