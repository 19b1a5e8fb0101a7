// What lint reports, shared by its text, JSON and SARIF forms.
import type { RuleId, Severity } from '../policy/index.ts';
import type { SourceRange } from './source-range.ts';

export interface Counts {
  errors: number;
  warnings: number;
  /** What --native-sidecars would do; never fails a run. */
  info: number;
  /** Objects with a pod spec, which were validated. */
  checked: number;
  /** Other objects (Services, ConfigMaps, ...). */
  skipped: number;
}

/** One finding, located: what the JSON output lists, and what text and SARIF are made from. */
export interface LintFinding extends SourceRange {
  file: string;
  /** Position of the YAML document in the file, from 0 (empty documents count). */
  documentIndex: number;
  /** Position in the items of a List, from 0, when the object is one of them. */
  itemIndex?: number;
  /** `Kind/name`, or the document's position when it has none. */
  object: string;
  /** The container the field belongs to, if any. */
  container?: string;
  field: string;
  rule: RuleId;
  severity: Severity;
  /** The finding in the webhook's words. */
  message: string;
  /** What to do, for this rule. */
  fix: string;
  /** The Helm template the document was rendered from (`# Source:` of `helm template`). */
  helmTemplate?: string;
}

export interface FileReport extends Counts {
  findings: LintFinding[];
}

/** A file that could not be read or parsed, and why. */
export interface InputFailure {
  file: string;
  message: string;
}

export interface LintReport extends Counts {
  files: string[];
  findings: LintFinding[];
  failures: InputFailure[];
}
