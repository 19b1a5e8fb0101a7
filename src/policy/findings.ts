// Findings: what validation reports, in the words of Kubernetes field errors.

/** `info` is never part of an admission answer: lint reports it, for what --native-sidecars would do. */
export type Severity = 'error' | 'warning' | 'info';

/** The Kubernetes field error types used here; a finding without one is a plain remark. */
export type FindingType = 'Invalid value' | 'Required value' | 'Forbidden' | 'Duplicate value' | 'Unsupported value' | 'Not found';

/** Stable identifiers of the rules checked at admission, one per row of the rules table of docs/admission-rules.md. */
export type AdmissionRuleId =
  | 'marker-value'
  | 'marker-value-from'
  | 'quick-exit-image-empty'
  | 'quick-exit-image-invalid'
  | 'quick-exit-image-own'
  | 'quick-exit-image-not-allowed'
  | 'no-main-container'
  | 'ignore-exit-code-without-kill'
  | 'restart-policy-always'
  | 'quick-exit-image-unpinned'
  | 'quick-exit-image-command'
  | 'on-failure-kill-exit-code'
  | 'sidecar-restart-policy-always'
  | 'main-restarted-after-success'
  | 'pod-failure-policy-sidecar-exit-code'
  | 'virtual-node-without-image'
  | 'marker-on-init-container'
  | 'duplicate-marker'
  | 'sidecar-name-invalid'
  | 'sidecar-not-found'
  | 'stop-method-invalid'
  | 'grace-period-invalid'
  | 'stop-without-sidecar'
  | 'native-sidecar-lost';

/** What lint says, as info, about --native-sidecars: which sidecars would move, and why others stay. */
export type MigrationRuleId = 'native-sidecar-migration' | 'native-sidecar-migration-skipped';

/** A name close to a marker's but not it (near-miss.ts): looked for beside the pod spec's validation, by both webhooks and lint. */
export type NearMissRuleId = 'near-miss-marker';

/** Every rule id lint and SARIF know. */
export type RuleId = AdmissionRuleId | NearMissRuleId | MigrationRuleId;

export interface Finding {
  rule: RuleId;
  severity: Severity;
  /** Kubernetes-style field path, e.g. `spec.template.spec.containers[1].env[NAME]`. */
  field: string;
  type?: FindingType;
  /** The offending value, shown quoted. */
  value?: string;
  /** A plain sentence: what is wrong and what to do. */
  detail: string;
}

/** Adds a finding of a rule: the validators give the rule and the detail, the catalogue (rules.ts) its severity, or its milder one when `milder`. */
export type Report = (finding: Omit<Finding, 'severity'>, milder?: boolean) => void;

/** `field: Type: "value": detail`, as the API server words its own validation errors. */
export function formatFinding(finding: Finding): string {
  return formatParts(finding, true);
}

/**
 * formatFinding without the value: the field path and the rule's words only, for text written
 * where the object's author must not choose the words (an event on an object it does not own).
 */
export function formatFindingWithoutValue(finding: Finding): string {
  return formatParts(finding, false);
}

function formatParts(finding: Finding, withValue: boolean): string {
  // A field path holds keys from the object (an annotation's, a label's): cut as a long one would be.
  const parts = [clip(finding.field, MAX_FIELD_CHARACTERS)];
  if (finding.type) parts.push(finding.type);
  if (finding.value !== undefined && withValue) parts.push(quoteValue(finding.value));
  parts.push(finding.detail);
  return parts.join(': ');
}

/** Values longer than this are cut in messages: a hostile value must not make a huge denial, log line or lint report. */
export const MAX_VALUE_CHARACTERS = 128;

function quoteValue(value: string): string {
  return JSON.stringify(clipValue(value)) + (value.length > MAX_VALUE_CHARACTERS ? `... (${value.length} characters)` : '');
}

/** Field paths longer than this are cut in messages: the longest a real one gets (a 253-character key under a prefix). */
export const MAX_FIELD_CHARACTERS = 320;

/** Text that comes from a request, cut at `max` characters (253, the longest Kubernetes name, unless told) and marked so. */
export function clip(text: string, max = 253): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}

/** The first MAX_VALUE_CHARACTERS characters of a value from the object, for a message. */
export function clipValue(value: string): string {
  return value.length <= MAX_VALUE_CHARACTERS ? value : value.slice(0, MAX_VALUE_CHARACTERS);
}

/**
 * At most this many findings are spelled out in one admission answer or event, and the rest
 * counted: a pod with 60,000 bad containers gets a denial of a few KiB, not of 10 MiB (the API
 * server keeps 4 KiB of warnings anyway). `lint` lists them all.
 */
export const MAX_LISTED_FINDINGS = 10;

/** The first MAX_LISTED_FINDINGS messages, and a last one counting the others when there are more. */
export function listedMessages(messages: readonly string[], what: string): string[] {
  return withCount(messages.slice(0, MAX_LISTED_FINDINGS), messages.length, what);
}

/** listedMessages of the findings, formatted (by formatFinding unless told): only the listed ones are formatted at all. */
export function listedFindings(findings: readonly Finding[], what: string, format: (finding: Finding) => string = formatFinding): string[] {
  return withCount(findings.slice(0, MAX_LISTED_FINDINGS).map(format), findings.length, what);
}

function withCount(listed: string[], total: number, what: string): string[] {
  const more = total - listed.length;
  return more > 0 ? [...listed, `and ${more} more ${what}${more === 1 ? '' : 's'}`] : listed;
}

export type EnforcementMode = 'deny' | 'warn';

/**
 * In `warn` mode every error is reported as a warning instead, but a pod that lost a native
 * sidecar (`native-sidecar-lost`): it could never start its main containers, so it is refused
 * whatever the mode and whoever created it.
 */
export function applyEnforcement(findings: Finding[], mode: EnforcementMode): Finding[] {
  if (mode === 'deny') return findings;
  return findings.map((finding) => (finding.severity === 'error' && finding.rule !== 'native-sidecar-lost' ? { ...finding, severity: 'warning' } : finding));
}

export function errorsOf(findings: Finding[]): Finding[] {
  return findings.filter((finding) => finding.severity === 'error');
}

export function warningsOf(findings: Finding[]): Finding[] {
  return findings.filter((finding) => finding.severity === 'warning');
}
