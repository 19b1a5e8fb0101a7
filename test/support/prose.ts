// The prose of the pages users read, as the tests that hold it to the code read it: a YAML file's
// comments (values.yaml, the chart's templates), a Markdown page outside its fenced code, each in
// paragraphs whose sentences may run over several lines.

/** The prose of a file, other text blanked with its line breaks kept: comments of YAML and templates, Markdown outside fences. */
export function proseOf(file: string, text: string): string {
  if (file.endsWith('.txt')) return text;
  if (/\.ya?ml$/.test(file)) return text.split('\n').map((line) => (/^\s*(#|\{\{-?\s*\/\*)/.test(line) ? line.replace(/^\s*(#|\{\{-?\s*\/\*)/, '') : '')).join('\n');
  return text.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, (block) => block.replace(/[^\n]/g, ' '));
}

export interface Paragraph {
  /** Its lines, trimmed and joined with a space. */
  text: string;
  /** The line (from 1) of the text's character at `index`. */
  lineAt: (index: number) => number;
}

/** The runs of non-blank lines of `text`, each as one line. */
export function paragraphs(text: string): Paragraph[] {
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
    const last = run.at(-1);
    run.push({ text: content, line: index + 1, start: last ? last.start + last.text.length + 1 : 0 });
  });
  close();
  return result;
}
