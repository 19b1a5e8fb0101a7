// lint -o json and -o sarif: the same findings as the text output, each located at its field's
// line and column in the YAML source (multi-document files, List items, Helm-rendered stdin),
// SARIF valid against the SARIF 2.1.0 schema, and the rule catalogue complete.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import t from 'tap';
import { RULE_IDS, RULES } from '../../src/policy/rules.ts';
import { parseFieldPath } from '../../src/lint/field-path.ts';
import type { LintFinding } from '../../src/lint/report.ts';
import { helm } from '../chart/helm.ts';
import { runCli } from '../cli/run.ts';
import { readDoc, section, tableRows } from '../support/markdown.ts';

const MANIFESTS = 'test/fixtures/manifests';
const FIXTURES = ['bad-job', 'warning-job', 'valid-job', 'cronjob', 'deployment', 'multi', 'exit-codes'].map((name) => `${MANIFESTS}/${name}.yaml`);

async function lintJson(args: string[], input?: string) {
  const run = await runCli(['lint', '-o', 'json', ...args], input === undefined ? {} : { input });
  return { ...run, report: JSON.parse(run.stdout) as { findings: LintFinding[]; failures: Array<{ file: string; message: string }>; summary: Record<string, number> } };
}

/**
 * What the source says at a finding's line and column: the field's key (`restartPolicy:`), the
 * `name: X` of a `[X]` list item, or, for a field the source does not write, its closest parent's key.
 */
function expectedAt(source: string, finding: LintFinding): RegExp {
  const steps = parseFieldPath(finding.field);
  const last = steps.at(-1)!;
  const keys = steps.flatMap((step) => ('key' in step ? [step.key] : []));
  if ('name' in last) return new RegExp(`^name: ${last.name}\\b`);
  if ('index' in last) return /^\S/; // the first key of the item
  // The field itself, or a parent key when the source leaves it out (restartPolicy unset).
  const written = keys.filter((key) => new RegExp(`^\\s*(- )?${key}:`, 'm').test(source));
  return new RegExp(`^(${[last.key, ...written].join('|')}):`);
}

t.test('JSON: every finding of the text output, with its place and the fix', async (t) => {
  for (const file of FIXTURES) {
    const text = await runCli(['lint', file]);
    const { code, report } = await lintJson([file]);
    t.equal(code, text.code, `${file}: the same exit code`);
    const lines = text.stdout.trimEnd().split('\n').slice(0, -1);
    t.same(report.findings.map((f) => `${f.file}: ${f.object}: ${f.severity}: ${f.message}`), lines, `${file}: the same findings`);
    const source = readFileSync(file, 'utf8');
    const sourceLines = source.split('\n');
    for (const finding of report.findings) {
      t.equal(finding.fix, RULES[finding.rule].fix, `${finding.rule}: the rule's fix`);
      const at = sourceLines[finding.line - 1]!.slice(finding.column - 1);
      t.match(at, expectedAt(source, finding), `${file} ${finding.field} at line ${finding.line}, column ${finding.column}: "${at}"`);
      t.ok(finding.endLine > finding.line || (finding.endLine === finding.line && finding.endColumn > finding.column), `${finding.field}: the range ends after it starts`);
    }
  }
});

t.test('JSON: documents, List items and containers of a multi-document file', async (t) => {
  const { report } = await lintJson([`${MANIFESTS}/multi.yaml`]);
  t.match(report.findings, [
    { documentIndex: 1, object: 'Pod/debug', field: 'spec.restartPolicy', rule: 'restart-policy-always', severity: 'error', line: 15, column: 1 },
    { documentIndex: 3, itemIndex: 0, object: 'Job/first', field: 'spec.template.spec.containers', rule: 'no-main-container', line: 37, column: 11 },
    { documentIndex: 3, itemIndex: 1, object: 'Job/second', container: 'proxy', field: 'spec.template.spec.containers[1]', rule: 'virtual-node-without-image', severity: 'warning', line: 56, column: 15 },
  ]);
  t.equal(report.findings.length, 3);
  t.notOk('container' in report.findings[0]!, 'a pod-level finding names no container');
  t.same(report.summary, { files: 1, checked: 3, skipped: 1, errors: 2, warnings: 1, info: 0 });

  const bad = await lintJson([`${MANIFESTS}/bad-job.yaml`]);
  t.match(bad.report.findings[0], { container: 'cloud-sql-proxy', field: 'spec.template.spec.containers[1].env[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT]', rule: 'marker-value' });
});

t.test('positions: a marker defined twice points at the definition that takes effect', async (t) => {
  const dir = t.testdir({
    'twice.yaml': `# leading comment
apiVersion: batch/v1
kind: Job
metadata: {name: twice}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: busybox:1.36
        - name: proxy
          image: envoyproxy/envoy:v1.31.0
          env:
            - name: KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT
              value: "true"
            - {name: KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT, value: "yes"}
`,
  });
  const { report } = await lintJson([join(dir, 'twice.yaml')]);
  const invalid = report.findings.find((f) => f.rule === 'marker-value')!;
  t.match(invalid, { line: 17, column: 15, container: 'proxy' }, 'the flow mapping on line 17, the last definition');
  t.match(readFileSync(join(dir, 'twice.yaml'), 'utf8').split('\n')[16]!.slice(14), /^\{name: KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT, value: "yes"\}$/);
  const duplicate = report.findings.find((f) => f.rule === 'duplicate-marker')!;
  t.match(duplicate, { line: 17 });
});

t.test('SARIF: valid against the SARIF 2.1.0 schema, rules with help, results at their fields', async (t) => {
  // The schema's own anyOf branches name required properties they do not define, which ajv's strict mode refuses.
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  (addFormatsModule as unknown as (ajv: Ajv2020) => void)(ajv);
  const validate = ajv.compile(JSON.parse(readFileSync('test/fixtures/sarif/sarif-schema-2.1.0.json', 'utf8')) as object);

  const run = await runCli(['lint', '-o', 'sarif', ...FIXTURES, 'nowhere.yaml', '-'], { input: readFileSync(`${MANIFESTS}/bad-job.yaml`, 'utf8') });
  t.equal(run.code, 2, 'a missing file still exits 2');
  const log = JSON.parse(run.stdout);
  t.ok(validate(log), `schema-valid: ${JSON.stringify(validate.errors?.slice(0, 3))}`);
  t.notOk(validate({ ...log, version: '2.0.0' }), 'the validator does refuse an invalid log');

  const sarifRun = log.runs[0];
  const rules = sarifRun.tool.driver.rules as Array<{ id: string; help: { text: string }; defaultConfiguration: { level: string } }>;
  t.same(rules.map((rule) => rule.id), RULE_IDS, 'every rule, in the catalogue order');
  for (const rule of rules) t.match(rule.help.text, RULES[rule.id as keyof typeof RULES].fix, `${rule.id}: help with the fix`);
  t.equal(sarifRun.tool.driver.name, 'sidecar-terminator');
  t.same(sarifRun.artifacts.map((a: { location: { uri: string } }) => a.location.uri), [...FIXTURES, 'nowhere.yaml', '%3Cstdin%3E']);
  t.equal(sarifRun.invocations[0].executionSuccessful, false);
  t.match(sarifRun.invocations[0].toolExecutionNotifications, [{ level: 'error', message: { text: /^nowhere\.yaml: cannot read: ENOENT/ } }]);

  const json = await lintJson([...FIXTURES]);
  const fromFiles = sarifRun.results.filter((r: { locations: Array<{ physicalLocation: { artifactLocation: { uri: string } } }> }) => r.locations[0]!.physicalLocation.artifactLocation.uri !== '%3Cstdin%3E');
  t.equal(fromFiles.length, json.report.findings.length, 'one result per finding');
  for (const [index, result] of fromFiles.entries()) {
    const finding = json.report.findings[index]!;
    t.match(result, {
      ruleId: finding.rule,
      ruleIndex: RULE_IDS.indexOf(finding.rule),
      level: finding.severity,
      message: { text: `${finding.object}: ${finding.message}` },
      locations: [{ physicalLocation: { artifactLocation: { uri: finding.file }, region: { startLine: finding.line, startColumn: finding.column, endLine: finding.endLine, endColumn: finding.endColumn } } }],
    });
  }
  const stdin = sarifRun.results.filter((r: { locations: Array<{ physicalLocation: { artifactLocation: { uri: string; index: number } } }> }) => r.locations[0]!.physicalLocation.artifactLocation.uri === '%3Cstdin%3E');
  t.equal(stdin.length, 3, 'stdin findings too');
  t.equal(stdin[0].locations[0].physicalLocation.artifactLocation.index, FIXTURES.length + 1, 'pointing at its artifact');
});

t.test('exit codes: the restart and podFailurePolicy findings in text, JSON and SARIF, each at its field', async (t) => {
  const file = `${MANIFESTS}/exit-codes.yaml`;
  const text = await runCli(['lint', file]);
  t.equal(text.code, 1, 'the error of a sidecar only its quick-exit image stops fails the lint');
  t.match(text.stdout, /^test\/fixtures\/manifests\/exit-codes\.yaml: Job\/export: warning: spec\.podFailurePolicy\.rules\[0\]\.onExitCodes: this rule \(FailJob\) matches exit code 137 or 143 of sidecar cloud-sql-proxy, and 143 of sidecar istio-proxy, /m);
  t.match(text.stdout, /^test\/fixtures\/manifests\/exit-codes\.yaml: CronJob\/nightly-export: warning: spec\.jobTemplate\.spec\.podFailurePolicy\.rules\[0\]\.onExitCodes: this rule \(FailJob\) matches exit code 143 of sidecar cloud-sql-proxy, /m);
  t.match(text.stdout, /^test\/fixtures\/manifests\/exit-codes\.yaml: Job\/logs-forever: error: spec\.template\.spec\.containers\[1\]\.restartPolicy: Unsupported value: "Always": /m);
  t.match(text.stdout, /^3 objects checked in 1 file: 1 error, 5 warnings$/m);

  const { report } = await lintJson([file]);
  t.match(report.findings, [
    { object: 'Job/export', container: 'export', field: 'spec.template.spec.containers[0].restartPolicyRules[0]', rule: 'main-restarted-after-success', severity: 'warning', line: 29, column: 15 },
    { object: 'Job/export', container: 'otel-collector', field: 'spec.template.spec.containers[2].restartPolicy', rule: 'sidecar-restart-policy-always', severity: 'warning', line: 40, column: 11 },
    { object: 'Job/export', container: 'istio-proxy', field: 'spec.template.spec.containers[3].env[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT]', rule: 'on-failure-kill-exit-code', severity: 'warning', line: 53, column: 15 },
    { object: 'Job/export', field: 'spec.podFailurePolicy.rules[0].onExitCodes', rule: 'pod-failure-policy-sidecar-exit-code', severity: 'warning', line: 14, column: 9, fix: RULES['pod-failure-policy-sidecar-exit-code'].fix },
    { object: 'Job/logs-forever', container: 'fluent-bit', field: 'spec.template.spec.containers[1].restartPolicy', rule: 'sidecar-restart-policy-always', severity: 'error' },
    { object: 'CronJob/nightly-export', field: 'spec.jobTemplate.spec.podFailurePolicy.rules[0].onExitCodes', rule: 'pod-failure-policy-sidecar-exit-code', severity: 'warning' },
  ]);
  t.equal(report.findings.length, 6);
  t.notOk('container' in report.findings[3]!, 'a podFailurePolicy rule is no container');
  t.same(report.summary, { files: 1, checked: 3, skipped: 0, errors: 1, warnings: 5, info: 0 });

  const sarif = JSON.parse((await runCli(['lint', '-o', 'sarif', file])).stdout).runs[0];
  t.same(
    sarif.results.map((r: { ruleId: string; level: string; locations: Array<{ physicalLocation: { region: { startLine: number } } }> }) => [r.ruleId, r.level, r.locations[0]!.physicalLocation.region.startLine]),
    report.findings.map((f) => [f.rule, f.severity, f.line]),
    'one result per finding, at its line',
  );
  const rules = sarif.tool.driver.rules as Array<{ id: string; defaultConfiguration: { level: string } }>;
  for (const id of ['pod-failure-policy-sidecar-exit-code', 'sidecar-restart-policy-always', 'main-restarted-after-success'] as const) {
    t.match(rules.find((rule) => rule.id === id), { defaultConfiguration: { level: RULES[id].severity } }, `${id}: in the catalogue`);
  }
});

t.test('a pod that lost its native sidecar: an error in text, JSON and SARIF, at the init container, although a Job created it', async (t) => {
  const file = `${MANIFESTS}/lost-native-sidecar.yaml`;
  const text = await runCli(['lint', file]);
  t.equal(text.code, 1, 'the error fails the lint');
  t.match(text.stdout, /^test\/fixtures\/manifests\/lost-native-sidecar\.yaml: Pod\/export-7x2kq: error: spec\.initContainers\[0\]\.restartPolicy: Required value: cloud-sql-proxy was moved here as a native sidecar \(annotation sidecar-terminator\.io\/native-sidecars-migrated\), but its restartPolicy: Always was dropped, by a mutating webhook /m);
  t.match(text.stdout, /^1 object checked in 1 file: 1 error, 0 warnings$/m);
  const warned = await runCli(['lint', '--enforcement', 'warn', file]);
  t.equal(warned.code, 1, 'an error in warn mode too: the webhook refuses such a pod whatever the mode');

  const { report } = await lintJson([file]);
  t.match(report.findings, [{ object: 'Pod/export-7x2kq', container: 'cloud-sql-proxy', field: 'spec.initContainers[0].restartPolicy', rule: 'native-sidecar-lost', severity: 'error', line: 24, fix: RULES['native-sidecar-lost'].fix }]);
  t.equal(report.findings.length, 1, 'nothing else: no marker-on-init-container warning for the moved sidecar');

  const sarif = JSON.parse((await runCli(['lint', '-o', 'sarif', file])).stdout).runs[0];
  t.same(sarif.results.map((r: { ruleId: string; level: string }) => [r.ruleId, r.level]), [['native-sidecar-lost', 'error']]);
  t.match((sarif.tool.driver.rules as Array<{ id: string }>).find((rule) => rule.id === 'native-sidecar-lost'), { defaultConfiguration: { level: 'error' } }, 'in the catalogue');
});

t.test('Helm-rendered stdin: lines of the rendered stream, and the template each finding comes from', async (t) => {
  const chart = t.testdir({
    'Chart.yaml': 'apiVersion: v2\nname: batch\nversion: 0.1.0\n',
    'values.yaml': 'proxyImage: envoyproxy/envoy:v1.31.0\n',
    templates: {
      'config.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-settings\ndata:\n  mode: fast\n',
      'job.yaml': `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-report
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: report
          image: busybox:1.36
        - name: proxy
          image: {{ .Values.proxyImage }}
          env:
            - name: KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT
              value: "yes"
            - name: KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE
              value: {{ .Values.proxyImage }}
`,
    },
  });
  const rendered = await helm(['template', 'nightly', chart]);
  t.equal(rendered.code, 0, rendered.stderr);
  const { code, report } = await lintJson(['-'], rendered.stdout);
  t.equal(code, 1);
  const lines = rendered.stdout.split('\n');
  t.equal(report.findings.length, 2, 'the invalid marker and the own image');
  for (const finding of report.findings) {
    t.equal(finding.file, '<stdin>');
    t.equal(finding.object, 'Job/nightly-report');
    t.equal(finding.helmTemplate, 'batch/templates/job.yaml', 'the # Source: of helm template');
    t.equal(finding.documentIndex, 1, 'the second document of the stream');
    const name = /\[(KRUISE_[A-Z_]+)\]$/.exec(finding.field)![1];
    t.match(lines[finding.line - 1]!.slice(finding.column - 1), new RegExp(`^name: ${name}$`), `${finding.rule}: line ${finding.line} of the rendered stream`);
  }
});

t.test('-o is checked like any flag', async (t) => {
  const wrong = await runCli(['lint', '-o', 'xml', `${MANIFESTS}/valid-job.yaml`]);
  t.equal(wrong.code, 2);
  t.match(wrong.stderr, /--output: expected one of text, json, sarif, got "xml"/);
  const long = await runCli(['lint', '--output=json', `${MANIFESTS}/valid-job.yaml`]);
  t.same(JSON.parse(long.stdout).summary, { files: 1, checked: 1, skipped: 0, errors: 0, warnings: 0, info: 0 });
  const help = await runCli(['lint', '--help']);
  t.match(help.stdout, /-o, --output VALUE\n[\s\S]*One of: text, json, sarif\./);
});

t.test("the rules table of docs/admission-rules.md is the catalogue's, row for row", async (t) => {
  const rows = tableRows(section(readDoc('docs/admission-rules.md'), 'The rules'));
  const columns = (row: Record<string, string>) => [row.rule, row.severity, row['what it catches'], row.fix];
  const expected = RULE_IDS.map((id) => [`\`${id}\``, RULES[id].severity, RULES[id].summary, RULES[id].fix]);
  t.same(rows.map(columns), expected, 'rule, severity, what it catches and fix: take them from src/policy/rules.ts when a rule changes');
});
