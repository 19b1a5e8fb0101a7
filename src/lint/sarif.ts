// lint's report as SARIF 2.1.0, the format GitHub code scanning and other CI tools read: every
// rule of the catalogue with its help, and each finding at the line and column of its field.
import { isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';
import { RULE_IDS, RULES } from '../policy/rules.ts';
import type { Severity } from '../policy/index.ts';
import type { LintReport } from './report.ts';

const SARIF_SCHEMA = 'https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json';
const TOOL = 'sidecar-terminator';

/** The report as a SARIF log with one run. */
export function toSarif(report: LintReport, toolVersion: string): object {
  const artifactIndex = new Map(report.files.map((file, index) => [file, index]));
  const location = (file: string) => ({ uri: artifactUri(file), index: artifactIndex.get(file) ?? -1 });
  return {
    $schema: SARIF_SCHEMA,
    version: '2.1.0',
    runs: [
      {
        tool: {
          driver: {
            name: TOOL,
            semanticVersion: toolVersion,
            rules: RULE_IDS.map((id) => {
              const rule = RULES[id];
              return {
                id,
                shortDescription: { text: rule.summary },
                help: { text: `${rule.summary} Fix: ${rule.fix}`, markdown: `${rule.summary}\n\n**Fix:** ${rule.fix}` },
                defaultConfiguration: { level: sarifLevel(rule.severity) },
                properties: { tags: ['kubernetes', 'sidecar'] },
              };
            }),
          },
        },
        artifacts: report.files.map((file) => ({ location: { uri: artifactUri(file) } })),
        invocations: [
          {
            executionSuccessful: report.failures.length === 0,
            toolExecutionNotifications: report.failures.map((failure) => ({
              level: 'error',
              message: { text: failure.message },
              locations: [{ physicalLocation: { artifactLocation: location(failure.file) } }],
            })),
          },
        ],
        results: report.findings.map((finding) => ({
          ruleId: finding.rule,
          ruleIndex: RULE_IDS.indexOf(finding.rule),
          level: sarifLevel(finding.severity),
          message: { text: `${finding.object}: ${finding.message}` },
          locations: [
            {
              physicalLocation: {
                artifactLocation: location(finding.file),
                region: { startLine: finding.line, startColumn: finding.column, endLine: finding.endLine, endColumn: finding.endColumn },
              },
              logicalLocations: [{ fullyQualifiedName: `${finding.object}:${finding.field}`, kind: 'object' }],
            },
          ],
          properties: {
            documentIndex: finding.documentIndex,
            ...(finding.itemIndex !== undefined ? { itemIndex: finding.itemIndex } : {}),
            ...(finding.container !== undefined ? { container: finding.container } : {}),
            ...(finding.helmTemplate !== undefined ? { helmTemplate: finding.helmTemplate } : {}),
            fix: finding.fix,
          },
        })),
      },
    ],
  };
}

/** A file as a URI reference: relative paths stay relative (code scanning resolves them against the repository). */
function artifactUri(file: string): string {
  if (isAbsolute(file)) return pathToFileURL(file).href;
  return file.split(/[\\/]/).map(encodeURIComponent).join('/');
}

/** SARIF's levels are error, warning and note. */
function sarifLevel(severity: Severity): 'error' | 'warning' | 'note' {
  return severity === 'info' ? 'note' : severity;
}
