// `sidecar-terminator lint FILE...`: the webhook's validation, offline, on YAML manifests,
// for CI pipelines (README.md, "Lint manifests before applying them"). Findings are printed in the webhook's words.
// Input is untrusted: a size limit per file, a small alias budget against alias bombs, and
// the yaml package never runs code for tags (unknown tags are read as plain values).
import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { Composer, Lexer, LineCounter, Parser } from 'yaml';
import { applyEnforcement, formatFinding, inspectObject, isRecord, type EnforcementMode } from './policy/index.ts';

export const MAX_FILE_BYTES = 8 * 1024 * 1024;
const MAX_ALIAS_COUNT = 50;
/** YAML tokens in one document: a Kubernetes object (at most ~1.5 MiB in etcd) has a few hundred thousand. */
export const MAX_DOCUMENT_TOKENS = 1_000_000;
/** YAML tokens in one file: about twice what 8 MiB of ordinary manifests hold; parsing costs about 2 s per million. */
export const MAX_FILE_TOKENS = 4_000_000;
/** Lexer markers that stand for no source text. */
const MARKERS = new Set(['\x02', '\x18', '\x1f']);

export interface LintOptions {
  enforcement: EnforcementMode;
  quickExitImageAllowlist: readonly string[];
}

interface Counts {
  errors: number;
  warnings: number;
  /** Objects with a pod spec, which were validated. */
  checked: number;
  /** Other objects (Services, ConfigMaps, ...). */
  skipped: number;
}

export interface FileReport extends Counts {
  /** One line per finding: `file: Kind/name: error: <finding>`. */
  lines: string[];
}

/** A file that cannot be read or is not YAML: the command exits 2. */
class InputError extends Error {}

export interface LintIO {
  stdin: Readable;
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

/** Lints every file (`-` is stdin) and returns the exit code: 2 if a file failed, else 1 on errors, else 0. */
export async function runLint(files: readonly string[], options: LintOptions, io: LintIO): Promise<number> {
  const total: Counts = { errors: 0, warnings: 0, checked: 0, skipped: 0 };
  let failed = 0;
  for (const file of files) {
    const label = file === '-' ? '<stdin>' : file;
    try {
      const report = lintText(await readInput(file === '-' ? io.stdin : createReadStream(file), label), label, options);
      for (const line of report.lines) io.stdout.write(`${line}\n`);
      total.errors += report.errors;
      total.warnings += report.warnings;
      total.checked += report.checked;
      total.skipped += report.skipped;
    } catch (error) {
      failed++;
      io.stderr.write(`${error instanceof InputError ? error.message : `${label}: ${String(error)}`}\n`);
    }
  }
  const notes = [
    total.skipped > 0 ? `${plural(total.skipped, 'object')} without a pod spec skipped` : '',
    failed > 0 ? `${plural(failed, 'file')} could not be read or parsed` : '',
  ].filter(Boolean);
  io.stdout.write(
    `${plural(total.checked, 'object')} checked in ${plural(files.length - failed, 'file')}: ${plural(total.errors, 'error')}, ${plural(total.warnings, 'warning')}${notes.length ? ` (${notes.join('; ')})` : ''}\n`,
  );
  return failed > 0 ? 2 : total.errors > 0 ? 1 : 0;
}

/** Reads a whole input, refusing more than `limit` bytes. */
async function readInput(source: Readable, label: string, limit = MAX_FILE_BYTES): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of source) {
      const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
      size += buffer.length;
      if (size > limit) throw new InputError(`${label}: larger than the limit of ${limit} bytes; split the manifests into smaller files`);
      chunks.push(buffer);
    }
  } catch (error) {
    if (error instanceof InputError) throw error;
    throw new InputError(`${label}: cannot read: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    source.destroy();
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Lints the objects of a multi-document YAML text; throws InputError, naming the line, when it is not valid YAML. */
export function lintText(text: string, file: string, options: LintOptions): FileReport {
  const report: FileReport = { lines: [], errors: 0, warnings: 0, checked: 0, skipped: 0 };
  for (const { label, object } of objectsIn(text, file)) {
    const inspection = inspectObject(object, options.quickExitImageAllowlist);
    if (!inspection) {
      report.skipped++;
      continue;
    }
    report.checked++;
    for (const finding of applyEnforcement(inspection.findings, options.enforcement)) {
      report.lines.push(`${file}: ${label}: ${finding.severity}: ${formatFinding(finding)}`);
      if (finding.severity === 'error') report.errors++;
      else report.warnings++;
    }
  }
  return report;
}

interface LabelledObject {
  /** `Kind/name`, or the document's position when it has none. */
  label: string;
  object: unknown;
}

function objectsIn(text: string, file: string): LabelledObject[] {
  const lineCounter = new LineCounter();
  checkTokenBudget(text, file);
  const objects: LabelledObject[] = [];
  // One document at a time, so memory follows the largest document, not the file.
  // merge: `<<` keys are merged as Kubernetes' YAML reader (YAML 1.1) does.
  const documents = new Composer({ merge: true }).compose(new Parser(lineCounter.addNewLine).parse(text), true, text.length);
  for (;;) {
    let next;
    try {
      next = documents.next();
    } catch (error) {
      throw new InputError(`${file}: not valid YAML: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (next.done) break;
    const document = next.value;
    const [error] = document.errors;
    if (error) {
      // Composed documents carry the error's offset; the line counter turns it into a position.
      const position = error.linePos?.[0] ?? lineCounter.linePos(error.pos[0]);
      const where = `line ${position.line}, column ${position.col}: `;
      throw new InputError(`${file}: ${where}not valid YAML: ${error.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '')}`);
    }
    const line = lineCounter.linePos(document.range[0]).line;
    let value: unknown;
    try {
      value = document.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
    } catch (cause) {
      const reason = cause instanceof ReferenceError ? `aliases expand too much (more than ${MAX_ALIAS_COUNT}), as in an alias bomb` : String(cause);
      throw new InputError(`${file}: line ${line}: document rejected: ${reason}`);
    }
    if (value !== null && value !== undefined) objects.push(...listItems(value, `document at line ${line}`));
  }
  return objects;
}

/** The object itself, or the items of a List (`kind: List`, or `PodList` and the like). */
function listItems(value: unknown, position: string): LabelledObject[] {
  if (isRecord(value) && typeof value.kind === 'string' && value.kind.endsWith('List') && Array.isArray(value.items)) {
    return value.items.flatMap((item, index) => listItems(item, `${position}, item ${index + 1}`));
  }
  return [{ label: labelOf(value) ?? position, object: value }];
}

function labelOf(value: unknown): string | undefined {
  if (!isRecord(value) || typeof value.kind !== 'string') return undefined;
  const metadata = isRecord(value.metadata) ? value.metadata : {};
  const name = typeof metadata.name === 'string' ? metadata.name : typeof metadata.generateName === 'string' ? metadata.generateName : '(unnamed)';
  return `${value.kind}/${name}`;
}

/** Rejects input with more YAML tokens than Kubernetes manifests have, before building anything (dense input costs about 300 bytes of memory per token). */
function checkTokenBudget(text: string, file: string): void {
  let inDocument = 0;
  let total = 0;
  let offset = 0;
  let documentStart = 0;
  let previous = '';
  for (const token of new Lexer().lex(text)) {
    if (++total > MAX_FILE_TOKENS) throw new InputError(`${file}: rejected: more than ${MAX_FILE_TOKENS} YAML tokens; split the manifests into smaller files`);
    // A document starts at the stream's start or at a `---` that is not a scalar's text.
    if (token === '\x02' || (token === '---' && previous !== '\x1f')) {
      inDocument = 0;
      documentStart = offset;
    } else if (++inDocument > MAX_DOCUMENT_TOKENS) {
      const line = text.slice(0, documentStart).split('\n').length;
      throw new InputError(`${file}: line ${line}: document rejected: more than ${MAX_DOCUMENT_TOKENS} YAML tokens, far more than any Kubernetes object has`);
    }
    previous = token;
    if (!MARKERS.has(token)) offset += token.length;
  }
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}
