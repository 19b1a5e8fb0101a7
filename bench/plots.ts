// The pictures of bench/README.md, from the watcher benchmark's results (bench/results/watcher.json):
// memory (RSS and live heap after a full GC) against the number of unmanaged pods, and the
// latency distribution of each burst, the add-on beside OpenKruise's controller. Vega-Lite
// specifications compiled and rendered to SVG by Vega in this process (no browser).
//
//   node bench/plots.ts [--results bench/results/watcher.json] [--out bench]
//
// Writes memory.svg and bursts.svg; `make bench` runs it after the watcher part.
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import { parseArgs } from './lib/stats.ts';

/** What bench/watcher/run.ts writes (the fields drawn here). */
interface WatcherResults {
  managedCount: number;
  memoryPoints: Array<{ watcher: string; unmanaged: number; heapMiB: number; rssAfterGcMiB: number }>;
  burstResults: Array<{ watcher: string; burst: number; latencies?: number[] }>;
}

export const WATCHER_NAMES: Record<string, string> = {
  slim: 'sidecar-terminator',
  kruise: 'OpenKruise (its controller)',
  'all-pods': 'Kruise-style watcher (ours)',
  before: 'sidecar-terminator before',
};

/** A Vega-Lite specification rendered to an SVG document. */
export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  return svg;
}

const FONT = { font: 'sans-serif', labelFont: 'sans-serif', titleFont: 'sans-serif' };

export function memorySpec(results: WatcherResults): TopLevelSpec {
  const values = results.memoryPoints.flatMap((point) => [
    { watcher: WATCHER_NAMES[point.watcher] ?? point.watcher, unmanaged: point.unmanaged, measure: 'RSS after a full GC', MiB: Math.round(point.rssAfterGcMiB) },
    { watcher: WATCHER_NAMES[point.watcher] ?? point.watcher, unmanaged: point.unmanaged, measure: 'live heap after a full GC', MiB: Math.round(point.heapMiB) },
  ]);
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: `Watcher memory with ${results.managedCount.toLocaleString('en-US')} managed pods`, ...FONT },
    config: { font: 'sans-serif' },
    data: { values },
    facet: { column: { field: 'measure', type: 'nominal', title: null, sort: ['RSS after a full GC', 'live heap after a full GC'] } },
    spec: {
      width: 300,
      height: 220,
      layer: [
        { mark: { type: 'line', point: true } },
        { mark: { type: 'text', dx: 4, dy: -8, fontSize: 10 }, encoding: { text: { field: 'MiB', type: 'quantitative' } } },
      ],
      encoding: {
        x: { field: 'unmanaged', type: 'quantitative', title: 'unmanaged pods in the cluster' },
        y: { field: 'MiB', type: 'quantitative', title: 'MiB' },
        color: { field: 'watcher', type: 'nominal', title: null, legend: { orient: 'bottom', columns: 2 } },
      },
    },
    resolve: { scale: { y: 'independent' } },
  };
}

export function burstsSpec(results: WatcherResults): TopLevelSpec {
  const values = results.burstResults.flatMap((burst) =>
    (burst.latencies ?? []).map((ms) => ({ watcher: WATCHER_NAMES[burst.watcher] ?? burst.watcher, burst: `burst of ${burst.burst.toLocaleString('en-US')}`, size: burst.burst, ms: Math.round(ms) })),
  );
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: 'Latency from a main container finished to its sidecars\' stop request, per pod (cumulative)', ...FONT },
    config: { font: 'sans-serif' },
    data: { values },
    transform: [{ window: [{ op: 'cume_dist', as: 'fraction' }], sort: [{ field: 'ms' }], groupby: ['watcher', 'burst'] }],
    facet: { column: { field: 'burst', type: 'nominal', title: null, sort: { field: 'size' } } },
    spec: {
      width: 220,
      height: 200,
      mark: { type: 'line', interpolate: 'step-after' },
      encoding: {
        x: { field: 'ms', type: 'quantitative', title: 'ms' },
        y: { field: 'fraction', type: 'quantitative', title: 'fraction of the pods', axis: { format: '%' } },
        color: { field: 'watcher', type: 'nominal', title: null, legend: { orient: 'bottom' } },
      },
    },
    resolve: { scale: { x: 'independent' } },
  };
}

if (import.meta.main) {
  const args = parseArgs(process.argv.slice(2));
  const results = JSON.parse(readFileSync(resolve(args.get('results') ?? join(import.meta.dirname, 'results/watcher.json')), 'utf8')) as WatcherResults;
  const out = resolve(args.get('out') ?? import.meta.dirname);
  writeFileSync(join(out, 'memory.svg'), await renderSvg(memorySpec(results)));
  if (results.burstResults.some((burst) => burst.latencies)) writeFileSync(join(out, 'bursts.svg'), await renderSvg(burstsSpec(results)));
  else process.stderr.write('no per-pod latencies in these results (an older run): bursts.svg not written\n');
  process.stderr.write(`plots written to ${out}\n`);
}
