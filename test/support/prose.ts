// The prose of the pages users read, as the tests that hold it to the code read it: a YAML file's
// comments (values.yaml, the chart's templates), a Makefile's or shell script's comments, a
// Markdown page outside its fenced code, each in paragraphs whose sentences may run over several
// lines; and where a page's links point in the repository.
import { dirname, posix } from 'node:path';
import { SOURCE_URL } from '../../scripts/build-images.ts';

/** The file's comments with their marker removed, other lines blank. */
const comments = (text: string, marker: RegExp): string => text.split('\n').map((line) => (marker.test(line) ? line.replace(marker, '') : '')).join('\n');

/** Whether `file` is a Makefile or shell script, whose prose is its `#` comments. */
const isScript = (file: string): boolean => /(^|\/)Makefile$|\.sh$|^\.ci\/run$/.test(file);

/** The prose of a file, other text blanked with its line breaks kept: comments of YAML, templates, Makefiles and scripts (not the `#!` line), Markdown outside fences. */
export function proseOf(file: string, text: string): string {
  if (file.endsWith('.txt')) return text;
  if (/\.(ya?ml|tpl)$/.test(file)) return comments(text, /^\s*(#|\{\{-?\s*\/\*)/);
  if (isScript(file)) return comments(text, /^\s*#(?!!)/);
  return text.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, (block) => block.replace(/[^\n]/g, ' '));
}

export interface Paragraph {
  /** Its lines, trimmed and joined with a space. */
  text: string;
  /** The line (from 1) of the text's character at `index`. */
  lineAt: (index: number) => number;
}

/** The runs of non-blank lines of `text`, each as one line; `startsOne` says which lines start a run of their own. */
function runs(text: string, startsOne: (line: string, previous: string) => boolean): Paragraph[] {
  const result: Paragraph[] = [];
  let run: Array<{ text: string; line: number; start: number }> = [];
  const close = () => {
    const lines = run;
    if (lines.length > 0) result.push({ text: lines.map((l) => l.text).join(' '), lineAt: (index) => lines.findLast((l) => l.start <= index)!.line });
    run = [];
  };
  text.split('\n').forEach((line, index) => {
    const content = line.trim();
    if (content === '') return close();
    if (run.length > 0 && startsOne(content, run.at(-1)!.text)) close();
    const last = run.at(-1);
    run.push({ text: content, line: index + 1, start: last ? last.start + last.text.length + 1 : 0 });
  });
  close();
  return result;
}

/** The runs of non-blank lines of `text`, each as one line. */
export function paragraphs(text: string): Paragraph[] {
  return runs(text, () => false);
}

/** How a table row or a Markdown list item begins, on a trimmed line. */
export const ITEM = /^(\||[-*+] |\d+[.)] )/;

/** The paragraphs of `text` with each table row and each list item apart: the smallest run of prose whose links speak for it. */
export function passages(text: string): Paragraph[] {
  return runs(text, (line, previous) => ITEM.test(line) || previous.startsWith('|'));
}

/** The file of the repository (from its root) that a link on page `file` points to, with its anchor; undefined for a link to the rest of the web, '..' first for one out of the repository. */
export function linkTarget(file: string, link: string): { path: string; anchor: string | undefined } | undefined {
  const onGitHub = /^(?:blob|tree)\/main\/(.*)$/.exec(link.startsWith(`${SOURCE_URL}/`) ? link.slice(SOURCE_URL.length + 1) : '')?.[1];
  if (onGitHub === undefined && /^[a-z][a-z0-9+.-]*:/i.test(link)) return undefined; // https:, mailto:
  const [path = '', anchor] = (onGitHub ?? link).split('#', 2);
  if (path === '') return { path: file, anchor };
  const resolved = posix.normalize(posix.join(onGitHub === undefined ? dirname(file) : '.', decodeURIComponent(path))).replace(/\/$/, '');
  return { path: resolved, anchor };
}
