// Findings (src/policy/findings.ts): their words as the API server words field errors, the cuts
// that keep a hostile value or path from making a huge message, the listing of many, and what the
// enforcement mode makes of their severities.
import t from 'tap';
import {
  MAX_FIELD_CHARACTERS,
  MAX_LISTED_FINDINGS,
  MAX_VALUE_CHARACTERS,
  applyEnforcement,
  clip,
  clipValue,
  errorsOf,
  formatFinding,
  formatFindingWithoutValue,
  listedFindings,
  listedMessages,
  warningsOf,
  type Finding,
} from '../../src/policy/findings.ts';

const finding = (extra: Partial<Finding> = {}): Finding => ({ rule: 'marker-value', severity: 'error', field: 'spec.containers[1].env[X]', detail: 'say "true"', ...extra });

t.test('formatFinding: field, type, quoted value and detail, each part only when there is one', async (t) => {
  t.equal(formatFinding(finding({ type: 'Invalid value', value: 'yes' })), 'spec.containers[1].env[X]: Invalid value: "yes": say "true"');
  t.equal(formatFinding(finding()), 'spec.containers[1].env[X]: say "true"', 'a plain remark');
  t.equal(formatFinding(finding({ value: '' })), 'spec.containers[1].env[X]: "": say "true"', 'an empty value is a value');
  t.equal(formatFinding(finding({ type: 'Required value' })), 'spec.containers[1].env[X]: Required value: say "true"');
  t.equal(formatFinding(finding({ value: 'a"b\nc' })), 'spec.containers[1].env[X]: "a\\"b\\nc": say "true"', 'quoted as JSON: a value cannot end the quote or the line');
});

t.test('formatFindingWithoutValue: the same words without the value', async (t) => {
  t.equal(formatFindingWithoutValue(finding({ type: 'Invalid value', value: 'yes' })), 'spec.containers[1].env[X]: Invalid value: say "true"');
  t.equal(formatFindingWithoutValue(finding({ type: 'Forbidden' })), formatFinding(finding({ type: 'Forbidden' })), 'no value: both the same');
});

t.test('a value is quoted whole up to MAX_VALUE_CHARACTERS, cut with its length beyond', async (t) => {
  const whole = 'v'.repeat(MAX_VALUE_CHARACTERS);
  t.equal(formatFinding(finding({ value: whole })), `spec.containers[1].env[X]: "${whole}": say "true"`);
  const long = `${whole}w`;
  t.equal(formatFinding(finding({ value: long })), `spec.containers[1].env[X]: "${whole}"... (${MAX_VALUE_CHARACTERS + 1} characters): say "true"`);
  t.equal(clipValue(long), whole);
  t.equal(clipValue('short'), 'short');
});

t.test('a field path is cut at MAX_FIELD_CHARACTERS, with or without the value', async (t) => {
  const field = `metadata.annotations[${'k'.repeat(MAX_FIELD_CHARACTERS)}]`;
  const cut = `${field.slice(0, MAX_FIELD_CHARACTERS)}...`;
  t.equal(formatFinding(finding({ field, value: 'v' })), `${cut}: "v": say "true"`);
  t.equal(formatFindingWithoutValue(finding({ field, value: 'v' })), `${cut}: say "true"`);
  const exact = 'f'.repeat(MAX_FIELD_CHARACTERS);
  t.equal(formatFinding(finding({ field: exact })), `${exact}: say "true"`, 'a path of the longest length is whole');
});

t.test('clip: 253 characters (the longest name) unless told, then "..."', async (t) => {
  t.equal(clip('n'.repeat(253)), 'n'.repeat(253));
  t.equal(clip('n'.repeat(254)), `${'n'.repeat(253)}...`);
  t.equal(clip('abcdef', 3), 'abc...');
  t.equal(clip('abc', 3), 'abc');
});

t.test('listedMessages: exactly MAX_LISTED_FINDINGS are all listed, with no count', async (t) => {
  const messages = Array.from({ length: MAX_LISTED_FINDINGS }, (_, i) => `m${i}`);
  t.same(listedMessages(messages, 'warning'), messages);
  t.same(listedMessages([], 'warning'), []);
  t.equal(listedMessages([...messages, 'x', 'y'], 'warning').at(-1), 'and 2 more warnings', 'the count in the words given');
});

t.test('listedFindings: only the listed findings are formatted, by formatFinding unless told', async (t) => {
  const findings = Array.from({ length: 1000 }, (_, i) => finding({ value: `v${i}` }));
  let formatted = 0;
  const listed = listedFindings(findings, 'error', (f) => (formatted++, f.value!));
  t.equal(formatted, MAX_LISTED_FINDINGS, 'a thousand findings, ten formatted');
  t.same(listed, [...findings.slice(0, MAX_LISTED_FINDINGS).map((f) => f.value), `and ${1000 - MAX_LISTED_FINDINGS} more errors`]);
  t.same(listedFindings(findings.slice(0, 1), 'error'), [formatFinding(findings[0]!)]);
});

t.test('applyEnforcement: warn mode makes errors warnings, but a lost native sidecar stays an error', async (t) => {
  const findings = [finding(), finding({ rule: 'native-sidecar-lost' }), finding({ severity: 'info', rule: 'native-sidecar-migration' }), finding({ severity: 'warning' })];
  const warned = applyEnforcement(findings, 'warn');
  t.same(warned.map((f) => `${f.rule} ${f.severity}`), ['marker-value warning', 'native-sidecar-lost error', 'native-sidecar-migration info', 'marker-value warning']);
  t.equal(findings[0]!.severity, 'error', 'the findings given are left as they were');
  t.equal(applyEnforcement(findings, 'deny'), findings, 'deny: the findings as they are');
});

t.test('errorsOf and warningsOf leave the info findings out', async (t) => {
  const findings = [finding({ severity: 'info' }), finding({ severity: 'warning', detail: 'w' }), finding({ detail: 'e' })];
  t.same(errorsOf(findings).map((f) => f.detail), ['e']);
  t.same(warningsOf(findings).map((f) => f.detail), ['w']);
});
