// Preloaded into the measured processes of the benchmarks (`node --expose-gc --import
// bench/watcher/gc-probe.mjs ...`). On SIGUSR2 it runs a full garbage collection and writes
// process.memoryUsage() (live heap, RSS after the collection) to $BENCH_GC_PROBE_OUT, as JSON,
// with where the resident memory is after that collection: the file-backed and anonymous pages
// (/proc/self/smaps_rollup) and V8's heap space by space (the physical memory of each, and what
// is in use). RSS alone moves with garbage not yet collected; the live heap after a full GC is
// what the process holds. Nothing else in the process changes: it is plain JavaScript because a
// TypeScript file preloaded here would load Node's type stripper into the measured process
// (17 MiB more RSS for a process of Node 24 that does nothing). (The API requests of each watcher
// are counted by the API server: bench/lib/audit.ts.)
import { readFileSync, writeFileSync } from 'node:fs';
import { getHeapSpaceStatistics, getHeapStatistics } from 'node:v8';

const out = process.env.BENCH_GC_PROBE_OUT;
/** @type {(() => void) | undefined} */
const gc = globalThis.gc;
if (out && gc) {
  process.on('SIGUSR2', () => {
    gc();
    const rollup = readFileSync('/proc/self/smaps_rollup', 'utf8');
    const kib = (/** @type {string} */ key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1] ?? Number.NaN);
    const heap = getHeapStatistics();
    const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, { physical: s.physical_space_size, used: s.space_used_size }]));
    const v8 = { physical: heap.total_physical_size, used: heap.used_heap_size, malloced: heap.malloced_memory, external: heap.external_memory, spaces };
    writeFileSync(out, JSON.stringify({ ...process.memoryUsage(), anonymous: kib('Anonymous') * 1024, fileBacked: (kib('Rss') - kib('Anonymous')) * 1024, v8, at: Date.now() }));
  });
}
