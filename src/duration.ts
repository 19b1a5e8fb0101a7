const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses `500ms`, `90s`, `15m`, `12h`, `30d` (or a combination such as `1h30m`) into milliseconds. */
export function parseDuration(text: string): number | undefined {
  if (!/^(\d+(ms|s|m|h|d))+$/.test(text)) return undefined;
  let total = 0;
  for (const [, amount, unit] of text.matchAll(/(\d+)(ms|s|m|h|d)/g)) total += Number(amount) * UNIT_MS[unit!]!;
  return total;
}
