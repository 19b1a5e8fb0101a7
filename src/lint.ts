// `sidecar-terminator lint FILE...`: the webhook's validation, offline, on YAML manifests,
// for CI pipelines. Findings are given in the webhook's words, as text, JSON or SARIF, each
// with the line and column of its field in the source.
// Input is untrusted: a size limit per file, a small alias budget against alias bombs, and
// the yaml package never runs code for tags (unknown tags are read as plain values).
import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { Composer, isMap, isNode, isSeq, Lexer, LineCounter, Parser, type Document, type Node } from 'yaml';
import { enforcedFindings, formatFinding, inspectObject, isRecord, nativeSidecarPlan, nearMissFindings, type EnforcementMode, type Finding, type NativeSidecarsMode } from './policy/index.ts';
import { RULES } from './policy/rules.ts';
import { containerOf, parseFieldPath } from './lint/field-path.ts';
import { toSarif } from './lint/sarif.ts';
import type { FileReport, LintReport } from './lint/report.ts';
import { sourceRange } from './lint/source-range.ts';
import { MAX_FILE_BYTES, type OutputFormat } from './lint/limits.ts';

export { MAX_FILE_BYTES, OUTPUT_FORMATS, type OutputFormat } from './lint/limits.ts';
const MAX_ALIAS_COUNT = 50;
/** YAML tokens in one document: a Kubernetes object (at most ~1.5 MiB in etcd) has a few hundred thousand. */
export const MAX_DOCUMENT_TOKENS = 1_000_000;
/** YAML tokens in one file: about twice what 8 MiB of ordinary manifests hold; parsing costs about 2 s per million. */
export const MAX_FILE_TOKENS = 4_000_000;
/** Lexer markers that stand for no source text. */
const MARKERS = new Set(['\x02', '\x18', '\x1f']);
/** How `helm template` names the template each document comes from. */
const HELM_SOURCE = /^ ?Source: (.+)$/m;

export interface LintOptions {
  enforcement: EnforcementMode;
  quickExitImageAllowlist: readonly string[];
  /** Other than `none`: say which pods the webhook would move to native sidecars (info findings). */
  nativeSidecars: NativeSidecarsMode;
  output: OutputFormat;
  /** Named in the SARIF report. */
  toolVersion: string;
}

/** A file that cannot be read or is not YAML: the command exits 2. */
class InputError extends Error {}

export interface LintIO {
  stdin: Readable;
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

/** Lints every file (`-` is stdin), prints the report and returns the exit code: 2 if a file failed, else 1 on errors, else 0. */
export async function runLint(files: readonly string[], options: LintOptions, io: LintIO): Promise<number> {
  const report: LintReport = { files: [...files].map(labelOf), findings: [], failures: [], errors: 0, warnings: 0, info: 0, checked: 0, skipped: 0 };
  for (const file of files) {
    const label = labelOf(file);
    try {
      const linted = lintText(await readInput(file === '-' ? io.stdin : createReadStream(file), label), label, options);
      report.findings.push(...linted.findings);
      report.errors += linted.errors;
      report.warnings += linted.warnings;
      report.info += linted.info;
      report.checked += linted.checked;
      report.skipped += linted.skipped;
    } catch (error) {
      const message = error instanceof InputError ? error.message : `${label}: ${String(error)}`;
      report.failures.push({ file: label, message });
      io.stderr.write(`${message}\n`);
    }
  }
  io.stdout.write(formatReport(report, options));
  return report.failures.length > 0 ? 2 : report.errors > 0 ? 1 : 0;
}

function labelOf(file: string): string {
  return file === '-' ? '<stdin>' : file;
}

function formatReport(report: LintReport, { output, toolVersion }: LintOptions): string {
  if (output === 'sarif') return `${JSON.stringify(toSarif(report, toolVersion), null, 2)}\n`;
  if (output === 'json') {
    const { files, findings, failures, errors, warnings, info, checked, skipped } = report;
    return `${JSON.stringify({ findings, failures, summary: { files: files.length, checked, skipped, errors, warnings, info } }, null, 2)}\n`;
  }
  const lines = report.findings.map((finding) => `${finding.file}: ${finding.object}: ${finding.severity}: ${finding.message}\n`);
  const failed = report.failures.length;
  const notes = [
    report.skipped > 0 ? `${plural(report.skipped, 'object')} without a pod spec skipped` : '',
    failed > 0 ? `${plural(failed, 'file')} could not be read or parsed` : '',
  ].filter(Boolean);
  const summary = `${plural(report.checked, 'object')} checked in ${plural(report.files.length - failed, 'file')}: ${plural(report.errors, 'error')}, ${plural(report.warnings, 'warning')}${report.info > 0 ? `, ${report.info} info` : ''}${notes.length ? ` (${notes.join('; ')})` : ''}\n`;
  return lines.join('') + summary;
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
export function lintText(text: string, file: string, options: Pick<LintOptions, 'enforcement' | 'quickExitImageAllowlist' | 'nativeSidecars'>): FileReport {
  const report: FileReport = { findings: [], errors: 0, warnings: 0, info: 0, checked: 0, skipped: 0 };
  const lines = new LineCounter();
  for (const found of objectsIn(text, file, lines)) {
    const inspection = inspectObject(found.object, options.quickExitImageAllowlist);
    if (!inspection) {
      report.skipped++;
      continue;
    }
    report.checked++;
    // In the order of the validating webhook's answer.
    const findings: Finding[] = [...nearMissFindings(inspection), ...enforcedFindings(inspection, options.enforcement)];
    if (options.nativeSidecars !== 'none') {
      const plan = nativeSidecarPlan(inspection);
      if (plan.outcome !== 'none') findings.push(...plan.findings);
    }
    for (const finding of findings) {
      const steps = parseFieldPath(finding.field);
      const container = containerOf(found.object, steps);
      report.findings.push({
        file,
        documentIndex: found.documentIndex,
        ...(found.itemIndex !== undefined ? { itemIndex: found.itemIndex } : {}),
        object: found.label,
        ...(container !== undefined ? { container } : {}),
        field: finding.field,
        rule: finding.rule,
        severity: finding.severity,
        message: formatFinding(finding),
        fix: RULES[finding.rule].fix,
        ...sourceRange(found.document, found.node, steps, lines),
        ...(found.helmTemplate !== undefined ? { helmTemplate: found.helmTemplate } : {}),
      });
      if (finding.severity === 'error') report.errors++;
      else if (finding.severity === 'warning') report.warnings++;
      else report.info++;
    }
  }
  return report;
}

interface FoundObject {
  /** `Kind/name`, or the document's position when it has none. */
  label: string;
  object: unknown;
  document: Document.Parsed;
  /** The object's node in the document. */
  node: Node;
  documentIndex: number;
  itemIndex?: number;
  helmTemplate?: string;
}

function objectsIn(text: string, file: string, lineCounter: LineCounter): FoundObject[] {
  checkTokenBudget(text, file);
  const objects: FoundObject[] = [];
  // One document at a time, so memory follows the largest document, not the file.
  // merge: `<<` keys are merged as Kubernetes' YAML reader (YAML 1.1) does.
  const documents = new Composer({ merge: true }).compose(new Parser(lineCounter.addNewLine).parse(text), true, text.length);
  for (let documentIndex = 0; ; documentIndex++) {
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
    if (value === null || value === undefined || !document.contents) continue;
    const helmTemplate = HELM_SOURCE.exec(document.commentBefore ?? document.contents.commentBefore ?? '')?.[1]?.trim();
    const found = { document, documentIndex, ...(helmTemplate ? { helmTemplate } : {}) };
    objects.push(...listItems(value, document.contents, `document at line ${line}`, found));
  }
  return objects;
}

type DocumentPlace = Pick<FoundObject, 'document' | 'documentIndex' | 'helmTemplate'>;

/** The object itself, or the items of a List (`kind: List`, or `PodList` and the like), each with its node. */
function listItems(value: unknown, node: Node, position: string, place: DocumentPlace, itemIndex?: number): FoundObject[] {
  if (isRecord(value) && typeof value.kind === 'string' && value.kind.endsWith('List') && Array.isArray(value.items)) {
    const itemNodes = isMap(node) ? node.get('items', true) : undefined;
    return value.items.flatMap((item, index) => {
      const itemNode = isSeq(itemNodes) ? itemNodes.items[index] : undefined;
      return listItems(item, isNode(itemNode) ? itemNode : node, `${position}, item ${index + 1}`, place, index);
    });
  }
  return [{ ...place, label: objectLabel(value) ?? position, object: value, node, ...(itemIndex !== undefined ? { itemIndex } : {}) }];
}

function objectLabel(value: unknown): string | undefined {
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
