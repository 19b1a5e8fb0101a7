// Summaries of V8 CPU profiles (`node --cpu-prof`): each sample is charged to the innermost
// frame of its stack that a category rule matches (else the leaf's own category), so a builtin
// such as JSON.parse counts for the JS function that called it. Shares are of the busy samples
// (not in the categories "idle" and "profiler").
import { table } from './stats.ts';

export interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
export interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** A category name and a test on a frame; the first rule matching a frame names its category. */
export type Rule = [category: string, match: (frame: CallFrame) => boolean];

export interface ProfileSummary {
  busyMs: number;
  byCategory: Array<[string, number]>;
  byFunction: Array<[string, number]>;
}

export function summarise(profile: CpuProfile, rules: readonly Rule[]): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const categoryOf = new Map<number, string>();
  const category = (id: number): string => {
    const known = categoryOf.get(id);
    if (known) return known;
    const frame = byId.get(id)!.callFrame;
    const rule = rules.find(([, match]) => match(frame));
    const up = parent.get(id);
    const found = rule ? rule[0] : up === undefined ? 'other JS' : category(up);
    categoryOf.set(id, found);
    return found;
  };
  const categories = new Map<string, number>();
  const functions = new Map<string, number>();
  let busy = 0;
  profile.samples.forEach((id, index) => {
    const ms = (profile.timeDeltas[index] ?? 0) / 1000;
    const name = category(id);
    // Idle time, and the profiler's own work (category "profiler"), are not the program's.
    if (name === 'idle' || name === 'profiler') return;
    busy += ms;
    categories.set(name, (categories.get(name) ?? 0) + ms);
    const frame = byId.get(id)!.callFrame;
    const where = frame.url ? `${frame.url.replace(/^.*\/(node_modules|src|bench)\//, '$1/')}:${frame.lineNumber + 1}` : '';
    const fn = `${frame.functionName || '(anonymous)'}${where ? ` ${where}` : ''}`;
    functions.set(fn, (functions.get(fn) ?? 0) + ms);
  });
  const sorted = (map: Map<string, number>) => [...map].sort((a, b) => b[1] - a[1]);
  return { busyMs: busy, byCategory: sorted(categories), byFunction: sorted(functions) };
}


/** Markdown: categories, then the top functions by self time. */
export function profileTables(summary: ProfileSummary, top = 15): string {
  const share = (ms: number) => `${((100 * ms) / summary.busyMs).toFixed(1)}%`;
  return [
    table(['category', 'share of busy CPU'], summary.byCategory.map(([name, ms]) => [name, share(ms)])),
    '',
    'Top functions by self time:\n',
    table(['function', 'self'], summary.byFunction.slice(0, top).map(([name, ms]) => [`\`${name}\``, share(ms)])),
    '',
  ].join('\n');
}
