// Preloaded into the watcher processes of the benchmark (`node --expose-gc --import
// bench/watcher/gc-probe.ts ...`): on SIGUSR2 it runs a full garbage collection and writes
// process.memoryUsage() (live heap, RSS after the collection) as JSON to $BENCH_GC_PROBE_OUT.
// RSS alone moves with garbage not yet collected; the live heap after a full GC is what the
// process holds. Nothing else in the process changes.
import { writeFileSync } from 'node:fs';

const out = process.env.BENCH_GC_PROBE_OUT;
const gc = (globalThis as { gc?: () => void }).gc;
if (out && gc) {
  process.on('SIGUSR2', () => {
    gc();
    writeFileSync(out, JSON.stringify({ ...process.memoryUsage(), at: Date.now() }));
  });
}
