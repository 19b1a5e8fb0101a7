// The cost of one Kubernetes API request through the add-on's client wiring (src/kube/client.ts
// loadKubeConfig + @kubernetes/client-node), before and after a proposed change: requests per
// second, latency, CPU milliseconds per request in this process, and TCP+TLS connections opened
// (undici's `undici:client:connected` diagnostics channel).
//
//   node bench/watcher/client-requests.ts [--quick] [--root DIR] [--compare-root DIR] [--compare-name NAME] [--rounds 3]
//
// A real control plane; the two clients (this checkout's or --root's, and --compare-root's) run
// in turn, round after round, sequentially (one request at a time) and at 16 in flight (the
// watcher's default --concurrency). The request: GET the `default` namespace.
import { subscribe } from 'node:diagnostics_channel';
import { writeFileSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { startControlPlane } from '../../test/support/control-plane.ts';
import { machineLoad } from '../lib/proc.ts';
import { fmt, median, parseArgs, quantile, table } from '../lib/stats.ts';

type ClientModule = typeof import('../../src/kube/client.ts');

let connections = 0;
subscribe('undici:client:connected', () => connections++);

interface Figures {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  cpuMsPerRequest: number;
  connections: number;
}

async function measure(kubeConfig: KubeConfig, count: number, inFlight: number): Promise<Figures> {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const latencies: number[] = [];
  const connected0 = connections;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next++ < count) {
        const start = performance.now();
        await core.readNamespace({ name: 'default' });
        latencies.push(performance.now() - start);
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return {
    requestsPerSecond: count / elapsed,
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    cpuMsPerRequest: (cpu.user + cpu.system) / 1000 / count,
    connections: connections - connected0,
  };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const quick = args.has('quick');
  const rounds = Number(args.get('rounds') ?? (quick ? 1 : 3));
  const count = quick ? 300 : 1000;
  const roots: Array<[string, string]> = [['current', resolve(args.get('root') ?? join(import.meta.dirname, '../..'))]];
  if (args.get('compare-root')) roots.push([args.get('compare-name') ?? 'other', resolve(args.get('compare-root')!)]);
  const cp = await startControlPlane();
  const rows: Array<{ client: string; inFlight: number; round: number; figures: Figures }> = [];
  try {
    const clients = await Promise.all(
      roots.map(async ([name, root]) => {
        const { loadKubeConfig } = (await import(pathToFileURL(join(root, 'src/kube/client.ts')).href)) as ClientModule;
        return { name, kubeConfig: loadKubeConfig(cp.kubeconfigPath) };
      }),
    );
    for (const { kubeConfig } of clients) await measure(kubeConfig, 100, 4); // warm-up
    for (let round = 1; round <= rounds; round++) {
      for (const inFlight of [1, 16]) {
        for (const { name, kubeConfig } of clients) {
          const figures = await measure(kubeConfig, count, inFlight);
          rows.push({ client: name, inFlight, round, figures });
          process.stderr.write(
            `round ${round} ${name.padEnd(8)} ${String(inFlight).padStart(2)} in flight: ${fmt(figures.requestsPerSecond)} req/s, p50 ${fmt(figures.p50)} ms, p99 ${fmt(figures.p99)} ms, ${fmt(figures.cpuMsPerRequest)} CPU ms/request, ${figures.connections} connections (load ${machineLoad()})\n`,
          );
        }
      }
    }
  } finally {
    await cp.stop();
  }
  const body = roots.flatMap(([name]) =>
    [1, 16].map((inFlight) => {
      const these = rows.filter((r) => r.client === name && r.inFlight === inFlight).map((r) => r.figures);
      const m = (f: (x: Figures) => number) => median(these.map(f));
      return [name, String(inFlight), fmt(m((x) => x.requestsPerSecond)), fmt(m((x) => x.p50)), fmt(m((x) => x.p99)), fmt(m((x) => x.cpuMsPerRequest)), fmt(m((x) => x.connections), 0)];
    }),
  );
  const markdown = `${count} GET requests per run, median of ${rounds} round(s):\n\n${table(['client', 'in flight', 'req/s', 'p50 ms', 'p99 ms', 'CPU ms/request', 'connections opened'], body)}\n`;
  mkdirSync(join(import.meta.dirname, '../results'), { recursive: true });
  writeFileSync(join(import.meta.dirname, `../results/client-requests${args.get('label') ? `-${args.get('label')}` : ''}.md`), markdown);
  console.log(markdown);
}

await main();
