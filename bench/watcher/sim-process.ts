// The kubelet simulator (test/support) in its own process, for the watcher benchmark: it plays
// kubelet and kruise-daemon for the managed pods' namespace only, and takes commands as JSON
// lines on stdin:
//   {"id":1,"op":"exit","namespace":"ns","pods":["a","b"],"container":"main"}
// answered on stdout with {"id":1,"failed":[...]} once every container has exited and its
// status was written. Started by bench/watcher/run.ts.
//
//   node bench/watcher/sim-process.ts --kubeconfig FILE --namespaces ns1,ns2 [--concurrency 64]
import { createInterface } from 'node:readline';
import { KubeletSimulator } from '../../test/support/kubelet-simulator.ts';
import { pooledKubeConfig } from '../lib/kube.ts';
import { parseArgs } from '../lib/stats.ts';

const args = parseArgs(process.argv.slice(2));
// Keep-alive connections for the simulator's requests (see bench/lib/kube.ts).
const kubeConfig = pooledKubeConfig(args.get('kubeconfig') ?? '');
const namespaces = (args.get('namespaces') ?? '').split(',').filter(Boolean);
// Status writes in flight at once: a burst goes as fast as the API server takes them.
const concurrency = Number(args.get('concurrency') ?? 64);

const sim = new KubeletSimulator(kubeConfig, {
  namespaces,
  normalNodes: ['sim-node'],
  virtualNodes: ['sim-virtual-node'],
  log: (message) => process.stderr.write(`[sim] ${message}\n`),
});
await sim.start();
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);

interface Command {
  id: number;
  op: 'exit';
  namespace: string;
  pods: string[];
  container: string;
}

async function pool<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const command = JSON.parse(line) as Command;
  const failed: string[] = [];
  void pool(command.pods, concurrency, async (pod) => {
    try {
      await sim.exitContainer(command.namespace, pod, command.container, 0, { timeoutMs: 120_000 });
    } catch (error) {
      failed.push(`${pod}: ${(error as Error).message}`);
    }
  }).then(() => process.stdout.write(`${JSON.stringify({ id: command.id, failed })}\n`));
});
lines.on('close', () => {
  void sim.stop().then(() => process.exit(0));
});
process.once('SIGTERM', () => {
  void sim.stop().then(() => process.exit(0));
});
