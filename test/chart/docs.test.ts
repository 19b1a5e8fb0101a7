// The reference sections of docs/ against their sources: the flag table of installation.md
// against src/config.ts and `serve --help`, its Kubernetes versions table against the matrix
// runs recorded in scripts/test-matrix-results.json, the metric names of operations.md against
// src/, the RBAC tables of security.md against the chart, and every chart value the README or a
// page names against values.yaml.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { parse } from 'yaml';
import { SERVE_FLAGS, defaultText } from '../../src/config.ts';
import { CHART_SETTINGS, withServeFlagsTable } from '../support/config-reference.ts';
import { markdownFiles, readDoc, section } from '../support/markdown.ts';
import { readResults, withMatrixTable } from '../../scripts/test-matrix.ts';
import { chartDir, registeredMetrics, render } from './helm.ts';
import { repoRoot } from '../support/repo.ts';

const run = promisify(execFile);
const installation = readDoc('docs/installation.md');
const values = parse(readFileSync(join(chartDir, 'values.yaml'), 'utf8')) as Record<string, unknown>;

function hasValue(path: string): boolean {
  let node: unknown = values;
  for (const key of path.split('.')) {
    if (node === null || typeof node !== 'object' || !(key in node)) return false;
    node = (node as Record<string, unknown>)[key];
  }
  return true;
}

t.test('the table of serve flags is what src/config.ts generates', async (t) => {
  t.equal(withServeFlagsTable(installation), installation, 'up to date (node scripts/config-reference.ts --write regenerates it)');
  for (const spec of Object.values(SERVE_FLAGS)) t.match(section(installation, 'Configuration'), `\`${spec.env}\``, `--${spec.name} is in the table`);
});

t.test('the table of Kubernetes versions is what the matrix runs recorded', async (t) => {
  t.equal(withMatrixTable(installation, readResults()), installation, 'no result typed by hand (node scripts/test-matrix.ts --docs regenerates it)');
});

t.test('the defaults in the table are the ones serve --help prints', async (t) => {
  const { stdout } = await run(process.execPath, [join(repoRoot, 'src/cli.ts'), 'serve', '--help'], { env: { ...process.env, KUBECONFIG: '' } });
  const printed = new Map([...stdout.matchAll(/env (\S+), default: (.*)/g)].map(([, env = '', value = '']) => [env, value]));
  t.equal(printed.size, Object.keys(SERVE_FLAGS).length);
  for (const spec of Object.values(SERVE_FLAGS)) t.equal(defaultText(spec), printed.get(spec.env), `--${spec.name}`);
});

t.test('every chart value named in the docs and in the flag mapping exists in values.yaml', async (t) => {
  const named = new Set<string>();
  // The pages for users; ARCHITECTURE.md names source files, not values.
  const docs = markdownFiles().filter((file) => file === 'README.md' || (file.startsWith('docs/') && file !== 'docs/ARCHITECTURE.md')).map(readDoc).join('\n');
  for (const [, path = ''] of docs.matchAll(/`((?:admission|injectedSidecars|webhook|watcher|serviceMonitor|prometheusRule|grafanaDashboard|image|rbac)\.[A-Za-z.]+)[`=: ]/g)) named.add(path.replace(/\.$/, ''));
  for (const setting of Object.values(CHART_SETTINGS)) if (setting.kind === 'value') named.add(setting.path);
  t.ok(named.size > 15, `${named.size} values named`);
  for (const path of named) t.ok(hasValue(path), `${path} is in values.yaml`);
});

t.test('the Metrics section lists exactly the metrics src/ registers', async (t) => {
  const registered = registeredMetrics();
  const documented = new Set([...section(readDoc('docs/operations.md'), 'Metrics').matchAll(/`(sidecar_terminator_\w+)`/g)].map(([, name = '']) => name));
  t.ok(registered.size >= 4, `${registered.size} metrics in src/`);
  t.same([...documented].sort(), [...registered].sort());
});

t.test('the RBAC section has a row for every resource and verb the chart can grant', async (t) => {
  const rbac = section(readDoc('docs/security.md'), 'RBAC');
  const rows = rbac.split('\n').filter((line) => line.startsWith('| `'));
  const selecting = { injectedSidecars: { presets: { istio: { enabled: true, namespaceSelector: { matchLabels: { 'istio-injection': 'enabled' } } } } } };
  const variants = [{}, { watcher: { namespaces: ['team-a'] } }, { watcher: { killMechanism: 'crr' } }, { watcher: { killMechanism: 'signal' } }, selecting, { ...selecting, watcher: { namespaces: ['team-a'] } }];
  for (const variant of variants) {
    for (const role of (await render(variant)).filter((m) => m.kind === 'Role' || m.kind === 'ClusterRole')) {
      for (const rule of (role as unknown as { rules: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }> }).rules) {
        for (const resource of rule.resources) {
          for (const verb of rule.verbs) {
            const group = rule.apiGroups[0] === '' ? '""' : rule.apiGroups[0];
            t.ok(rows.some((row) => row.startsWith(`| \`${group}\``) && row.includes(`\`${resource}\``) && row.includes(`\`${verb}\``)), `${verb} ${group}/${resource}`);
          }
        }
      }
    }
  }
});
