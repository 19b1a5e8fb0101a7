// lint's report as SARIF, from src/lint/sarif.ts called directly: artifact URIs for relative and
// absolute paths, each result's level, location and properties, and the failures as notifications
// of a run that did not succeed.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import type { LintFinding, LintReport } from '../../src/lint/report.ts';
import { toSarif } from '../../src/lint/sarif.ts';
import { RULE_IDS, RULES } from '../../src/policy/rules.ts';

const finding = (file: string, extra: Partial<LintFinding> = {}): LintFinding => ({
  file,
  documentIndex: 0,
  object: 'Job/nightly',
  field: 'spec.template.spec.containers[1].env[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT]',
  rule: 'duplicate-marker',
  severity: RULES['duplicate-marker'].severity,
  message: 'defined twice',
  fix: RULES['duplicate-marker'].fix,
  line: 3,
  column: 5,
  endLine: 4,
  endColumn: 9,
  ...extra,
});

const report = (files: string[], findings: LintFinding[], failures: LintReport['failures'] = []): LintReport =>
  ({ files, findings, failures, errors: 0, warnings: 0, info: 0, checked: 1, skipped: 0 });

/** The one run of the log toSarif makes of `lint`. */
const runOf = (lint: LintReport): any => (toSarif(lint, '1.2.3') as any).runs[0];

t.test('the log: SARIF 2.1.0, one run of the tool at its version, every rule with its level', async (t) => {
  const log = toSarif(report([], []), '1.2.3') as any;
  t.match(log, { version: '2.1.0', $schema: /sarif-schema-2\.1\.0\.json$/ });
  t.equal(log.runs.length, 1);
  t.match(log.runs[0].tool.driver, { name: 'sidecar-terminator', semanticVersion: '1.2.3' });
  const levels = Object.fromEntries(log.runs[0].tool.driver.rules.map((rule: any) => [rule.id, rule.defaultConfiguration.level]));
  for (const id of RULE_IDS) t.equal(levels[id], { info: 'note', warning: 'warning', error: 'error' }[RULES[id].severity], id);
});

t.test('artifact URIs: relative paths stay relative, each segment encoded; absolute ones are file URLs', async (t) => {
  const absolute = resolve('/tmp/some dir/job.yaml');
  const run = runOf(report(['manifests/my job.yaml', 'win\\dir\\a#b.yaml', '<stdin>', absolute], []));
  t.same(run.artifacts.map((artifact: any) => artifact.location.uri), ['manifests/my%20job.yaml', 'win/dir/a%23b.yaml', '%3Cstdin%3E', pathToFileURL(absolute).href]);
  t.match(pathToFileURL(absolute).href, /^file:\/\/.*some%20dir\/job\.yaml$/);
});

t.test('a result: rule and its index, level, message with the object, region, and the field as its logical place', async (t) => {
  const run = runOf(report(['a.yaml', 'b.yaml'], [finding('b.yaml')]));
  t.same(run.results, [{
    ruleId: 'duplicate-marker',
    ruleIndex: RULE_IDS.indexOf('duplicate-marker'),
    level: RULES['duplicate-marker'].severity,
    message: { text: 'Job/nightly: defined twice' },
    locations: [{
      physicalLocation: { artifactLocation: { uri: 'b.yaml', index: 1 }, region: { startLine: 3, startColumn: 5, endLine: 4, endColumn: 9 } },
      logicalLocations: [{ fullyQualifiedName: 'Job/nightly:spec.template.spec.containers[1].env[KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT]', kind: 'object' }],
    }],
    properties: { documentIndex: 0, fix: RULES['duplicate-marker'].fix },
  }]);
});

t.test("a result's properties: item, container and Helm template only when the finding has them; info is a note", async (t) => {
  const located = finding('a.yaml', { itemIndex: 2, container: 'proxy', helmTemplate: 'chart/templates/job.yaml', documentIndex: 3, rule: 'native-sidecar-migration', severity: 'info' });
  const [result] = runOf(report(['a.yaml'], [located])).results;
  t.strictSame(result.properties, { documentIndex: 3, itemIndex: 2, container: 'proxy', helmTemplate: 'chart/templates/job.yaml', fix: located.fix });
  t.equal(result.level, 'note');
  t.equal(result.ruleIndex, RULE_IDS.indexOf('native-sidecar-migration'));
});

t.test('failures: notifications at their files, and the run marked unsuccessful; none: successful', async (t) => {
  const failed = runOf(report(['a.yaml', 'missing.yaml'], [], [{ file: 'missing.yaml', message: 'missing.yaml: cannot read: ENOENT' }]));
  t.same(failed.invocations, [{
    executionSuccessful: false,
    toolExecutionNotifications: [{ level: 'error', message: { text: 'missing.yaml: cannot read: ENOENT' }, locations: [{ physicalLocation: { artifactLocation: { uri: 'missing.yaml', index: 1 } } }] }],
  }]);
  t.same(runOf(report(['a.yaml'], [])).invocations, [{ executionSuccessful: true, toolExecutionNotifications: [] }]);
});

t.test('a file the report does not list is located at index -1', async (t) => {
  const [result] = runOf(report([], [finding('elsewhere.yaml')])).results;
  t.same(result.locations[0].physicalLocation.artifactLocation, { uri: 'elsewhere.yaml', index: -1 });
});
