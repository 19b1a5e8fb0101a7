// The codes of the watcher's decisions: each kind where the policy and the watcher expect it, the
// warnings counted by the terminations metric under the labels it documents, and the table of
// docs/operations.md that lists them.
import t from 'tap';
import { CODES, countedAs, endsFromOutside, isCode, waitsOnMains, type Code, type WarningCode } from '../../src/policy/index.ts';
import { readDoc, section, tableRows } from '../support/markdown.ts';

const codes = Object.keys(CODES) as Code[];
const warnings = codes.filter((code): code is WarningCode => CODES[code].kind === 'warning');

t.test('codes are kebab-case and each has its words', async (t) => {
  for (const code of codes) {
    t.match(code, /^[a-z]+(-[a-z]+)*$/, code);
    t.ok(CODES[code].meaning.length > 0, `${code} means something`);
  }
});

t.test('isCode reads back what an event carries, and nothing else', async (t) => {
  t.ok(isCode('signal-ignored'));
  t.notOk(isCode('SidecarTerminator'), 'a reason is not a code');
  t.notOk(isCode(undefined));
  t.notOk(isCode('toString'), 'nor a name every object has');
});

t.test('the warnings the terminations metric counts, under its documented labels', async (t) => {
  const counted = Object.fromEntries(warnings.map((code) => [code, countedAs(code)]));
  t.same(counted, {
    'virtual-node-without-image': { mechanism: 'none', result: 'refused' },
    'quick-exit-image-not-allowed': { mechanism: 'image', result: 'refused' },
    'signal-user-unknown': { mechanism: 'signal', result: 'refused' },
    'signal-failed': { mechanism: 'signal', result: 'failed' },
    'signal-not-started': { mechanism: 'signal', result: 'failed' },
    'sigterm-unhandled': { mechanism: 'signal', result: 'escalated' },
    'signal-ignored': { mechanism: 'signal', result: 'escalated' },
    'crr-not-done': { mechanism: 'crr', result: 'escalated' },
    'quick-exit-image-not-pulled': { mechanism: 'image', result: 'failed' },
    'node-missing': undefined,
    'stop-failed': undefined,
    'request-refused': undefined,
  });
});

t.test('the table of docs/operations.md is the catalogue, row for row', async (t) => {
  const rows = tableRows(section(readDoc('docs/operations.md'), 'Decision codes'));
  const expected = codes.map((code) => {
    const counted = countedAs(code as WarningCode);
    return [`\`${code}\``, CODES[code].kind, CODES[code].meaning, CODES[code].kind === 'warning' && counted ? `\`mechanism="${counted.mechanism}", result="${counted.result}"\`` : ''];
  });
  t.same(rows.map((row) => Object.values(row)), expected, 'take the rows from src/policy/codes.ts when a code changes');
});

t.test('the waits on the main containers, and the warnings that come with the end of a sidecar from outside', async (t) => {
  t.same(codes.filter(waitsOnMains), ['pod-not-started', 'mains-running', 'main-restarting']);
  t.same(codes.filter(endsFromOutside), ['signal-user-unknown', 'signal-failed', 'signal-not-started', 'sigterm-unhandled', 'signal-ignored', 'crr-not-done']);
  t.ok(codes.filter(endsFromOutside).every((code) => / ended from outside/.test(CODES[code].meaning)), 'each says so in its words');
});
