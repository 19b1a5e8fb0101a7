// Parts of a committed file that a script writes from the code: each between a line that opens it
// and one that closes it. The command line every such script shares: --write puts the parts into
// the file, --check exits 1 when the file differs from what they make, no argument prints the file
// as it would be.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface GeneratedPart {
  /** The comment line that opens the part; it says which command writes it. */
  begin: string;
  end: string;
  /** The part's text, from the code. */
  make(): string;
}

/** `text` with each part's lines between its markers replaced by what it makes now. */
export function withParts(text: string, parts: readonly GeneratedPart[], file: string): string {
  return parts.reduce((current, part) => {
    const begin = current.indexOf(part.begin);
    const end = current.indexOf(part.end, begin);
    if (begin < 0 || end < 0) throw new Error(`${file} lacks the markers ${part.begin} ... ${part.end}`);
    return `${current.slice(0, begin + part.begin.length)}\n${part.make()}\n${current.slice(end)}`;
  }, text);
}

export interface GeneratorIO {
  stdout(text: string): void;
  stderr(text: string): void;
}

const processIO: GeneratorIO = { stdout: (text) => process.stdout.write(text), stderr: (text) => process.stderr.write(text) };

/** Runs a generator's command line (`node SCRIPT [--write | --check]`) for `file`, a path from `root`; its exit code. */
export function generatorCli(root: string, file: string, parts: readonly GeneratedPart[], script: string, argv = process.argv.slice(2), io = processIO): number {
  const path = join(root, file);
  const current = readFileSync(path, 'utf8');
  const updated = withParts(current, parts, file);
  const [mode] = argv;
  if (mode === '--write') writeFileSync(path, updated);
  else if (mode === '--check') {
    if (updated !== current) {
      io.stderr(`${file} is out of date; run node ${script} --write\n`);
      return 1;
    }
  } else if (mode === undefined) io.stdout(updated);
  else {
    io.stderr(`usage: node ${script} [--write | --check]\n`);
    return 2;
  }
  return 0;
}
