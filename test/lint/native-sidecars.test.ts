// lint --native-sidecars: which pod templates the webhook would move to native sidecars, and why
// the others stay, as info findings that never change the exit status; located like any finding.
import { readFileSync } from 'node:fs';
import t from 'tap';
import type { LintFinding } from '../../src/lint/report.ts';
import { runCli } from '../cli/run.ts';

const FILE = 'test/fixtures/manifests/native-sidecars.yaml';
const source = readFileSync(FILE, 'utf8').split('\n');

t.test('text: one info line per sidecar that moves, one per reason a pod stays; exit 0', async (t) => {
  const run = await runCli(['lint', '--native-sidecars=all', FILE]);
  t.equal(run.code, 0, 'info never fails a run');
  t.same(run.stdout.split('\n').filter(Boolean), [
    `${FILE}: Job/migrates: info: spec.template.spec.containers[0]: sidecar proxy moves to initContainers[1] with restartPolicy: Always when the pod is created: the kubelet stops it once the main containers are done`,
    `${FILE}: Job/migrates: info: spec.template.spec.containers[2]: sidecar sql moves to initContainers[2] with restartPolicy: Always when the pod is created: the kubelet stops it once the main containers are done`,
    `${FILE}: CronJob/probed: info: spec.jobTemplate.spec.template.spec.containers[1].startupProbe: as a native sidecar, proxy would hold back the main containers until this probe succeeds`,
    `${FILE}: Job/virtual: info: spec.template.spec.nodeSelector: the pod can run on virtual-kubelet nodes, whose providers may not run native sidecars; there a sidecar is stopped by its quick-exit image`,
    '5 objects checked in 1 file: 0 errors, 0 warnings, 4 info',
  ], 'the opted-out Job and the Deployment say nothing');
});

t.test('none (the default) says nothing about native sidecars; labelled says what all says; the environment variable works', async (t) => {
  const plain = await runCli(['lint', FILE]);
  t.equal(plain.stdout, '5 objects checked in 1 file: 0 errors, 0 warnings\n');
  const all = await runCli(['lint', '--native-sidecars', 'all', FILE]);
  t.equal((await runCli(['lint', '--native-sidecars', 'labelled', FILE])).stdout, all.stdout, 'lint cannot see namespace labels');
  t.equal((await runCli(['lint', FILE], { env: { SIDECAR_TERMINATOR_NATIVE_SIDECARS: 'all' } })).stdout, all.stdout);
  const wrong = await runCli(['lint', '--native-sidecars=yes', FILE]);
  t.equal(wrong.code, 2);
  t.match(wrong.stderr, /--native-sidecars: expected one of none, labelled, all, got "yes"/);
  t.match((await runCli(['lint', '--help'])).stdout, /--native-sidecars VALUE\n\s+labelled or all: also report, as info findings/);
});

t.test('JSON and SARIF: the findings at their fields, counted apart, SARIF level note', async (t) => {
  const json = JSON.parse((await runCli(['lint', '-o', 'json', '--native-sidecars=all', FILE])).stdout) as { findings: LintFinding[]; summary: Record<string, number> };
  t.same(json.summary, { files: 1, checked: 5, skipped: 0, errors: 0, warnings: 0, info: 4 });
  t.same(json.findings.map((f) => [f.object, f.rule, f.container]), [
    ['Job/migrates', 'native-sidecar-migration', 'proxy'],
    ['Job/migrates', 'native-sidecar-migration', 'sql'],
    ['CronJob/probed', 'native-sidecar-migration-skipped', 'proxy'],
    ['Job/virtual', 'native-sidecar-migration-skipped', undefined],
  ]);
  const at = (finding: LintFinding) => source[finding.line - 1]!.slice(finding.column - 1);
  t.match(at(json.findings[0]!), /^name: proxy$/, 'a moving sidecar: its container');
  t.match(at(json.findings[2]!), /^startupProbe:$/, 'a reason: its field');
  t.match(at(json.findings[3]!), /^nodeSelector:$/);

  const sarif = JSON.parse((await runCli(['lint', '-o', 'sarif', '--native-sidecars=all', FILE])).stdout);
  const [run] = sarif.runs;
  t.same(run.results.map((r: { level: string }) => r.level), ['note', 'note', 'note', 'note']);
  const rules = run.tool.driver.rules as Array<{ id: string; defaultConfiguration: { level: string } }>;
  t.equal(rules.find((rule) => rule.id === 'native-sidecar-migration')?.defaultConfiguration.level, 'note');
  t.equal(rules.find((rule) => rule.id === 'marker-value')?.defaultConfiguration.level, 'error', 'the others keep theirs');
});
