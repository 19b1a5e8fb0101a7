// Reading the project's Markdown as the tests that hold it to the code need it: a page, one of
// its sections, its fenced blocks (a ```sh block with the ```text block that shows its output),
// its tables as rows keyed by header, its links and the anchors GitHub gives its headings.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { repoRoot } from './repo.ts';


/** A Markdown file of the repository, by its path from the root (README.md, docs/installation.md). */
export function readDoc(path: string): string {
  return readFileSync(join(repoRoot, path), 'utf8');
}

/** Every Markdown file of the repository (not node_modules, dist or test output), relative to the root. */
export function markdownFiles(): string[] {
  const skipped = new Set(['node_modules', '.git', 'dist', '.tap', 'results']);
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        if (!skipped.has(entry.name)) walk(join(dir, entry.name));
      } else if (entry.name.endsWith('.md')) found.push(relative(repoRoot, join(dir, entry.name)));
    }
  };
  walk(repoRoot);
  return found.sort();
}

/** The text with fenced code blocks blanked (their line breaks kept), so headings and links inside them are not read. */
function withoutFences(text: string): string {
  return text.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, (block) => block.replace(/[^\n]/g, ' '));
}

export interface Heading {
  level: number;
  title: string;
  /** Where the heading's line starts in the text. */
  index: number;
}

export function headings(text: string): Heading[] {
  return [...withoutFences(text).matchAll(/^(#{1,6}) +(.+?) *#*$/gm)].map((match) => ({ level: match[1]!.length, title: match[2]!, index: match.index }));
}

/** The text of the section under the heading `title` (any level), up to the next heading of the same or a higher level. */
export function section(text: string, title: string): string {
  const all = headings(text);
  const at = all.findIndex((heading) => heading.title === title);
  if (at < 0) throw new Error(`no section "${title}"`);
  const next = all.slice(at + 1).find((heading) => heading.level <= all[at]!.level);
  return text.slice(all[at]!.index, next?.index);
}

/** The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens. */
export function slug(title: string): string {
  const text = title.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/[`*]/g, '');
  return text.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/ /g, '-');
}

/** Every anchor of a page: its headings' slugs, a repeated one with -1, -2... as GitHub numbers them. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const { title } of headings(text)) {
    const base = slug(title);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

/** The targets of the inline links and images of a page, outside code. */
export function links(text: string): string[] {
  const prose = withoutFences(text).replace(/`[^`\n]*`/g, (code) => ' '.repeat(code.length));
  return [...prose.matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?: "[^"]*")?\)/g)].map((match) => match[1]!);
}

export interface Fence {
  language: string;
  body: string;
  /** Where the body starts and ends in the text given. */
  start: number;
  end: number;
}

export function fences(text: string): Fence[] {
  return [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((match) => {
    const start = match.index + match[0].indexOf('\n') + 1;
    return { language: match[1]!, body: match[2]!, start, end: start + match[2]!.length };
  });
}

export interface CommandBlock {
  /** The ```sh block. */
  commands: Fence;
  /** The ```text block right after it, if any: what the commands print. */
  output?: Fence;
}

/** The ```sh blocks of the text, each with the ```text block that follows it with nothing between. */
export function commandBlocks(text: string): CommandBlock[] {
  const all = fences(text);
  return all.flatMap((fence, index) => {
    if (fence.language !== 'sh') return [];
    const next = all[index + 1];
    const adjacent = next && next.language === 'text' && text.slice(fence.end, next.start).replace(/```\w*\n?/g, '').trim() === '';
    return [{ commands: fence, ...(adjacent ? { output: next } : {}) }];
  });
}

/** The rows of the Markdown tables of the text, each cell keyed by its column's header. */
export function tableRows(text: string): Array<Record<string, string>> {
  const rows: Array<Record<string, string>> = [];
  const cells = (line: string) => line.slice(1, line.endsWith('|') ? -1 : undefined).split(/(?<!\\)\|/).map((cell) => cell.trim());
  const lines = withoutFences(text).split('\n');
  for (let i = 0; i + 1 < lines.length; i++) {
    if (!lines[i]!.startsWith('|') || !/^\|(\s*:?-+:?\s*\|)+$/.test(lines[i + 1]!)) continue;
    const header = cells(lines[i]!);
    for (i += 2; i < lines.length && lines[i]!.startsWith('|'); i++) {
      const row = cells(lines[i]!);
      rows.push(Object.fromEntries(header.map((name, column) => [name, row[column] ?? ''])));
    }
  }
  return rows;
}
