// The injected-sidecar policy's file (--injected-sidecars), read and checked: every problem named
// by its path, with the fix. A module of its own, apart from src/policy/index.ts, so that the
// yaml package is loaded only by what reads the file (serve's policy source), never by the
// webhook's handlers nor its worker thread.
import { parseDocument } from 'yaml';
import type { InjectedSidecarEntry, InjectedSidecarPolicy, LabelSelector } from './injected-sidecars.ts';
import { parseGracePeriod, parseStopMethod, STOP_METHOD_SYNTAX } from './stop-method.ts';
import { DNS_LABEL, arrayOf, isRecord } from './types.ts';

/** Job pods only, unless the operator lists others: Argo Workflows and Tekton stop their own sidecars. */
const DEFAULT_OWNERS = [{ apiVersion: 'batch/v1', kind: 'Job' }] as const;

const ENTRY_FIELDS = ['name', 'container', 'stop', 'gracePeriodSeconds', 'ignoreExitCode', 'namespaceSelector', 'owners'];
const SELECTOR_FIELDS = ['matchLabels', 'matchExpressions'];
const EXPRESSION_FIELDS = ['key', 'operator', 'values'];
const OWNER_FIELDS = ['apiVersion', 'kind'];
type Operator = NonNullable<LabelSelector['matchExpressions']>[number]['operator'];
const OPERATORS: readonly Operator[] = ['In', 'NotIn', 'Exists', 'DoesNotExist'];

/** A label's name part and value (a value may also be empty). */
const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
/** A label key's optional prefix: a DNS-1123 subdomain. */
const LABEL_PREFIX = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Collects the problems of a policy file, each as `path: problem: fix`. */
type Problems = string[];

/** Parses and checks the file's text: every problem named by its path (`entries[2].stop`) with the fix; never throws. */
export function parseInjectedSidecarPolicy(text: string): { policy: InjectedSidecarPolicy } | { errors: string[] } {
  const document = parseDocument(text);
  if (document.errors.length > 0) {
    // The yaml package's messages quote the source over several lines; its first line says where.
    return { errors: document.errors.map((error) => `not YAML or JSON: ${error.message.split('\n')[0]!.replace(/:$/, '')}`) };
  }
  let root: unknown;
  try {
    // Few aliases: a policy has no use for them, and each may stand for a copy of a whole tree.
    root = document.toJS({ maxAliasCount: 20 });
  } catch (error) {
    return { errors: [`not YAML or JSON: ${(error as Error).message}`] };
  }
  const problems: Problems = [];
  if (!isRecord(root)) return { errors: ['the file: must be a mapping with one field, entries: the list of injected sidecars, e.g. `entries: []`'] };
  unknownFields(root, ['entries'], '', problems);
  if (!Array.isArray(root.entries)) {
    problems.push('entries: required: a list of injected sidecars, each with name and container (`entries: []` for none)');
    return { errors: problems };
  }
  const entries = root.entries.map((raw, index) => parseEntry(raw, `entries[${index}]`, problems));
  firstOfEach(entries.map((entry) => entry?.name), 'name', problems, 'give each entry a name of its own');
  firstOfEach(entries.map((entry) => entry?.container), 'container', problems, 'one entry per container: merge the two');
  if (problems.length > 0) return { errors: problems };
  return { policy: { entries: entries as InjectedSidecarEntry[] } };
}

function parseEntry(raw: unknown, path: string, problems: Problems): InjectedSidecarEntry | undefined {
  if (!isRecord(raw)) {
    problems.push(`${path}: must be a mapping with at least name and container, e.g. {name: istio, container: istio-proxy}`);
    return undefined;
  }
  unknownFields(raw, ENTRY_FIELDS, `${path}.`, problems);
  const name = dnsLabel(raw.name, `${path}.name`, 'a name for the entry, e.g. istio', problems);
  const container = dnsLabel(raw.container, `${path}.container`, 'the name of the container the injector adds, e.g. istio-proxy', problems);
  // A name or container that cannot be read is left empty: the errors say so, and the duplicate checks pass over it.
  const entry: InjectedSidecarEntry = { name: name ?? '', container: container ?? '', owners: [...DEFAULT_OWNERS] };
  if (raw.stop !== undefined) {
    const parsed = typeof raw.stop === 'string' ? parseStopMethod(raw.stop) : { error: `must be a string: ${STOP_METHOD_SYNTAX}` };
    if ('error' in parsed) problems.push(`${path}.stop: ${parsed.error}`);
    else entry.stop = (raw.stop as string).trim();
  }
  if (raw.gracePeriodSeconds !== undefined) {
    const parsed = parseGracePeriod(typeof raw.gracePeriodSeconds === 'number' ? String(raw.gracePeriodSeconds) : '');
    if ('error' in parsed) problems.push(`${path}.gracePeriodSeconds: ${parsed.error}`);
    else entry.gracePeriodSeconds = parsed.seconds;
  }
  if (raw.ignoreExitCode !== undefined) {
    if (typeof raw.ignoreExitCode === 'boolean') entry.ignoreExitCode = raw.ignoreExitCode;
    else problems.push(`${path}.ignoreExitCode: must be true or false (unquoted)`);
  }
  if (raw.namespaceSelector !== undefined) {
    const selector = parseSelector(raw.namespaceSelector, `${path}.namespaceSelector`, problems);
    // An empty selector matches every namespace, as no selector does: it needs no namespace's labels.
    if (selector?.matchLabels !== undefined || selector?.matchExpressions !== undefined) entry.namespaceSelector = selector;
  }
  if (raw.owners !== undefined) entry.owners = parseOwners(raw.owners, `${path}.owners`, problems);
  return entry;
}

function dnsLabel(value: unknown, path: string, what: string, problems: Problems): string | undefined {
  if (value === undefined) problems.push(`${path}: required: ${what}`);
  else if (typeof value !== 'string' || !DNS_LABEL.test(value)) problems.push(`${path}: must be lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit: ${what}`);
  else return value;
  return undefined;
}

function parseSelector(raw: unknown, path: string, problems: Problems): LabelSelector | undefined {
  if (!isRecord(raw)) {
    problems.push(`${path}: must be a label selector, a mapping with matchLabels and/or matchExpressions, e.g. {matchLabels: {istio-injection: enabled}}`);
    return undefined;
  }
  unknownFields(raw, SELECTOR_FIELDS, `${path}.`, problems);
  const selector: LabelSelector = {};
  if (raw.matchLabels !== undefined) {
    if (!isRecord(raw.matchLabels)) problems.push(`${path}.matchLabels: must be a mapping of label keys to values, e.g. {istio-injection: enabled}`);
    else {
      for (const [key, value] of Object.entries(raw.matchLabels)) {
        labelKey(key, `${path}.matchLabels.${key}`, problems);
        labelValue(value, `${path}.matchLabels.${key}`, problems);
      }
      if (Object.keys(raw.matchLabels).length > 0) selector.matchLabels = raw.matchLabels as Record<string, string>;
    }
  }
  if (raw.matchExpressions !== undefined) {
    if (!Array.isArray(raw.matchExpressions)) problems.push(`${path}.matchExpressions: must be a list of {key, operator, values}`);
    else if (raw.matchExpressions.length > 0) {
      selector.matchExpressions = raw.matchExpressions.map((expression, index) => parseExpression(expression, `${path}.matchExpressions[${index}]`, problems));
    }
  }
  return selector;
}

function parseExpression(raw: unknown, path: string, problems: Problems): { key: string; operator: Operator; values?: string[] } {
  if (!isRecord(raw)) {
    problems.push(`${path}: must be a mapping {key, operator, values}, e.g. {key: istio-injection, operator: In, values: [enabled]}`);
    return { key: '', operator: 'In' };
  }
  unknownFields(raw, EXPRESSION_FIELDS, `${path}.`, problems);
  const key = typeof raw.key === 'string' ? raw.key : '';
  if (raw.key === undefined) problems.push(`${path}.key: required: the label key the expression tests`);
  else labelKey(raw.key, `${path}.key`, problems);
  const operator = raw.operator as Operator;
  const values = raw.values ?? [];
  if (!Array.isArray(values)) problems.push(`${path}.values: must be a list of label values`);
  else values.forEach((value, index) => labelValue(value, `${path}.values[${index}]`, problems));
  const count = arrayOf(values).length;
  if (!OPERATORS.includes(operator)) problems.push(`${path}.operator: must be one of ${OPERATORS.join(', ')}`);
  else if (operator === 'In' || operator === 'NotIn') {
    if (count === 0) problems.push(`${path}.values: required with ${operator}: list at least one label value`);
    return { key, operator, values: values as string[] };
  } else if (count > 0) problems.push(`${path}.values: must be left out with ${operator}, which tests only whether the label is set`);
  return { key, operator };
}

function labelKey(key: unknown, path: string, problems: Problems): void {
  const [prefix, name] = typeof key === 'string' && key.includes('/') ? key.split(/\/(.*)/s) : [undefined, key];
  const valid = typeof name === 'string' && LABEL_NAME.test(name) && (prefix === undefined || LABEL_PREFIX.test(prefix));
  if (!valid) problems.push(`${path}: not a label key: [PREFIX/]NAME, NAME at most 63 letters, digits, '-', '_' or '.', PREFIX a DNS subdomain`);
}

function labelValue(value: unknown, path: string, problems: Problems): void {
  if (typeof value !== 'string') problems.push(`${path}: label values are strings: quote it, e.g. "true"`);
  else if (value !== '' && !LABEL_NAME.test(value)) problems.push(`${path}: not a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`);
}

function parseOwners(raw: unknown, path: string, problems: Problems): Array<{ apiVersion: string; kind: string }> {
  if (!Array.isArray(raw) || raw.length === 0) {
    problems.push(`${path}: must be a list of at least one {apiVersion, kind}, e.g. [{apiVersion: batch/v1, kind: Job}]; leave it out for Job pods`);
    return [];
  }
  return raw.map((owner, index) => {
    const at = `${path}[${index}]`;
    if (!isRecord(owner)) {
      problems.push(`${at}: must be a mapping {apiVersion, kind}, e.g. {apiVersion: batch/v1, kind: Job}; {apiVersion: v1, kind: Pod} for pods no controller owns`);
      return { apiVersion: '', kind: '' };
    }
    unknownFields(owner, OWNER_FIELDS, `${at}.`, problems);
    const text = (field: 'apiVersion' | 'kind', example: string) => {
      const value = owner[field];
      if (typeof value === 'string' && value !== '') return value;
      problems.push(`${at}.${field}: required: the ${field} of the controller, e.g. ${example}`);
      return '';
    };
    return { apiVersion: text('apiVersion', 'batch/v1'), kind: text('kind', 'Job') };
  });
}

/** A field the policy does not know is an error: a misspelt field must not be silently ignored. */
function unknownFields(record: Record<string, unknown>, known: readonly string[], prefix: string, problems: Problems): void {
  for (const key of Object.keys(record)) {
    if (!known.includes(key)) problems.push(`${prefix}${key}: unknown field: the fields here are ${known.join(', ')}`);
  }
}

/** Reports each entry whose `field` (its value in `values`, by entry) repeats an earlier entry's. */
function firstOfEach(values: ReadonlyArray<string | undefined>, field: string, problems: Problems, fix: string): void {
  const first = new Map<string, number>();
  values.forEach((value, index) => {
    if (value === undefined || value === '') return;
    const earlier = first.get(value);
    if (earlier === undefined) first.set(value, index);
    else problems.push(`entries[${index}].${field}: ${value} is also the ${field} of entries[${earlier}]: ${fix}`);
  });
}
