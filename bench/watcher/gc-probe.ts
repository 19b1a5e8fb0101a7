// Preloaded into the watcher processes of the benchmark (`node --expose-gc --import
// bench/watcher/gc-probe.ts ...`). On SIGUSR2 it runs a full garbage collection and writes
// process.memoryUsage() (live heap, RSS after the collection) to $BENCH_GC_PROBE_OUT, as JSON.
// RSS alone moves with garbage not yet collected; the live heap after a full GC is what the
// process holds. Nothing else in the process changes. (The API requests of each watcher are
// counted by the API server: bench/lib/audit.ts.)
import { writeFileSync } from 'node:fs';

const out = process.env.BENCH_GC_PROBE_OUT;
const gc = (globalThis as { gc?: () => void }).gc;
if (out && gc) {
  process.on('SIGUSR2', () => {
    gc();
    writeFileSync(out, JSON.stringify({ ...process.memoryUsage(), at: Date.now() }));
  });
}
