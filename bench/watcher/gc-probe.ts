// Preloaded into the watcher processes of the benchmark (`node --expose-gc --import
// bench/watcher/gc-probe.ts ...`). On SIGUSR2 it runs a full garbage collection and writes to
// $BENCH_GC_PROBE_OUT, as JSON, process.memoryUsage() (live heap, RSS after the collection) and
// the number of HTTP requests the process has sent so far by method (undici's
// `undici:request:create` diagnostics channel: the Kubernetes API requests of client-node).
// RSS alone moves with garbage not yet collected; the live heap after a full GC is what the
// process holds. Nothing else in the process changes.
import { subscribe } from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';

const out = process.env.BENCH_GC_PROBE_OUT;
const gc = (globalThis as { gc?: () => void }).gc;
const requests: Record<string, number> = {};
if (out && gc) {
  subscribe('undici:request:create', (message) => {
    const method = (message as { request?: { method?: string } }).request?.method ?? '?';
    requests[method] = (requests[method] ?? 0) + 1;
  });
  process.on('SIGUSR2', () => {
    gc();
    writeFileSync(out, JSON.stringify({ ...process.memoryUsage(), requests, at: Date.now() }));
  });
}
