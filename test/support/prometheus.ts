// Prometheus and promtool, Debian's build, for the alert tests: scripts/install-prometheus.sh
// finds them on the PATH or fetches the package into the cache once, and prints their directory;
// and a Prometheus server of the tests' own, scraping what they point it at.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { buildScriptOutput, ManagedProcess } from './managed-process.ts';
import { httpStatus, PortLease } from './net.ts';
import { waitFor } from './wait.ts';


let binDir: Promise<string> | undefined;

/** The directory holding `prometheus` and `promtool`. */
export function prometheusBinDir(): Promise<string> {
  binDir ??= buildScriptOutput('install-prometheus.sh');
  return binDir;
}

export interface Prometheus {
  url: string;
  /** The alerts Prometheus has now (pending and firing), from its HTTP API. */
  alerts(): Promise<Array<{ labels: Record<string, string>; state: string; value: string }>>;
  /** An instant query: each series' labels and value. */
  query(expr: string): Promise<Array<{ metric: Record<string, string>; value: [number, string] }>>;
  /** Its log, for a test that fails. */
  logTail(lines: number): string;
  stop(): Promise<void>;
}

/**
 * Runs Prometheus on a free loopback port with this configuration (`rule_files` may name
 * `rules.yaml`, written from `rules`), its data in a temporary directory; resolves once it is ready.
 */
export async function startPrometheus(config: object, rules: object): Promise<Prometheus> {
  const bin = await prometheusBinDir();
  const dir = mkdtempSync(join(tmpdir(), 'st-prometheus-'));
  writeFileSync(join(dir, 'prometheus.yaml'), stringify(config));
  writeFileSync(join(dir, 'rules.yaml'), stringify(rules));
  const lease = new PortLease();
  const port = await lease.take();
  const url = `http://127.0.0.1:${port}`;
  const process = new ManagedProcess('prometheus', [
    join(bin, 'prometheus'),
    `--config.file=${join(dir, 'prometheus.yaml')}`,
    `--storage.tsdb.path=${join(dir, 'data')}`,
    `--web.listen-address=127.0.0.1:${port}`,
  ], join(dir, 'prometheus.log'));
  const stop = async () => {
    await process.stop();
    lease.release();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor('Prometheus to be ready', async () => {
      if (process.exitStatus !== undefined) return { exited: process.logTail(20) };
      return (await httpStatus(`${url}/-/ready`)) === 200 && { exited: undefined };
    }, { timeoutMs: 60_000 }).then(({ exited }) => {
      if (exited !== undefined) throw new Error(`prometheus exited: ${exited}`);
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    url,
    async alerts() {
      const response = await fetch(`${url}/api/v1/alerts`);
      return ((await response.json()) as { data: { alerts: Array<{ labels: Record<string, string>; state: string; value: string }> } }).data.alerts;
    },
    async query(expr) {
      const response = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(expr)}`);
      return ((await response.json()) as { data: { result: Array<{ metric: Record<string, string>; value: [number, string] }> } }).data.result;
    },
    logTail: (lines) => process.logTail(lines),
    stop,
  };
}
