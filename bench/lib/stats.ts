// Small statistics and formatting helpers shared by the benchmarks. Nothing here asserts a
// timing: the benchmarks report figures, the README compares them with the targets.

/** The q-quantile (0..1) of the values, nearest-rank on a sorted copy; NaN when empty. */
export function quantile(values: ArrayLike<number>, q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = Float64Array.from(values).sort();
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank]!;
}

/** Quantiles of an already sorted Float64Array (no copy). */
export function sortedQuantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** The median; the mean of the two middle values for an even count. */
export function median(values: readonly number[]): number {
  const sorted = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

export function max(values: ArrayLike<number>): number {
  let best = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < values.length; i++) if (values[i]! > best) best = values[i]!;
  return values.length === 0 ? Number.NaN : best;
}

/** A growable list of numbers stored in a Float64Array (latencies of a run: tens of thousands). */
export class Samples {
  private data = new Float64Array(1024);
  length = 0;

  push(value: number): void {
    if (this.length === this.data.length) {
      const bigger = new Float64Array(this.data.length * 2);
      bigger.set(this.data);
      this.data = bigger;
    }
    this.data[this.length++] = value;
  }

  sorted(): Float64Array {
    return this.data.slice(0, this.length).sort();
  }
}

/** `1234.5` -> `1,235`; small numbers keep `digits` significant decimals. */
export function fmt(value: number, digits = 2): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString('en-US');
  return value.toFixed(digits);
}

export function pct(ratio: number): string {
  return Number.isFinite(ratio) ? `${Math.round(ratio * 100)}%` : 'n/a';
}

/** A GitHub-flavoured markdown table. */
export function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/** Minimal `--flag value` / `--flag` parser for the bench entry points. */
export function parseArgs(argv: readonly string[]): Map<string, string> {
  const args = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) throw new Error(`unexpected argument ${JSON.stringify(arg)}`);
    const [name, inline] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    const next = argv[i + 1];
    if (inline !== undefined) args.set(name, inline);
    else if (next !== undefined && !next.startsWith('--')) args.set(name, argv[++i]!);
    else args.set(name, 'true');
  }
  return args;
}

export function numberList(text: string): number[] {
  return text.split(',').map((part) => {
    const value = Number(part.replace(/_/g, ''));
    if (!Number.isFinite(value)) throw new Error(`not a number: ${JSON.stringify(part)}`);
    return value;
  });
}

/** A small, fast, seeded pseudo-random source (mulberry32): the same seed, the same numbers in [0, 1). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
