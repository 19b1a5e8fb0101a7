// The chart's README: its table of values and its list of images are what scripts/chart-readme.ts
// makes from values.schema.json, values.yaml and scripts/build-images.ts, and the script's parts
// and command line work as the other generators' do.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { PUBLISHED } from '../../scripts/build-images.ts';
import { CHART_DIR, README, chartReadme, imagesList, valueRows, type SchemaNode } from '../../scripts/chart-readme.ts';
import { generatorCli, withParts } from '../../scripts/generated-parts.ts';
import { readDoc } from '../support/markdown.ts';

const readme = readDoc(README);
const schema = JSON.parse(readDoc(`${CHART_DIR}/values.schema.json`)) as SchemaNode;
const valuesYaml = readDoc(`${CHART_DIR}/values.yaml`);

t.test('the committed README is what the script makes', async (t) => {
  t.equal(chartReadme(readme), readme, `${README} is out of date: run node scripts/chart-readme.ts --write`);
});

t.test('a row for every value of values.yaml that is not a group of others, with its default', async (t) => {
  const rows = new Map(valueRows(schema, valuesYaml).map((row) => [row.path, row]));
  const leaves = (value: unknown, prefix: string): string[] =>
    Object.entries(value as Record<string, unknown>).flatMap(([key, inner]) => {
      const path = `${prefix}${key}`;
      const grouped = rows.get(path)?.type === 'group' || (!rows.has(path) && inner !== null && typeof inner === 'object' && !Array.isArray(inner));
      return grouped ? leaves(inner, `${path}.`) : [path];
    });
  const paths = leaves(parse(valuesYaml), '');
  t.ok(paths.length > 80, `${paths.length} values`);
  for (const path of paths) t.ok(rows.get(path)?.default !== undefined, path);
  t.match(rows.get('admission.enforcement'), { type: '`deny`, `warn`', default: 'deny', flag: '--enforcement', description: /^--enforcement: deny rejects/ });
  t.match(rows.get('webhook.resources.requests'), { type: 'map', default: '{ cpu: 50m, memory: 160Mi }' });
  t.match(rows.get('watcher.quickExitImage'), { type: 'string or null', default: 'null' });
  t.match(rows.get('webhook.shutdown'), { type: 'group', description: /^On a rolling update/ }, "a group keeps the comment above its first key's");
  t.match(rows.get('shutdownGrace'), { description: /A duration such as 90s/ }, "a definition's description joins the comment");
});

t.test('the schema stands in where values.yaml says nothing, and a value only the schema knows has no default', async (t) => {
  const rows = valueRows(
    {
      type: 'object',
      properties: { z: { type: 'integer', description: 'From the schema.' }, a: { type: 'integer', description: 'Not this.' }, b: { type: 'array', items: { $ref: '#/definitions/d' } } },
      definitions: { d: { type: 'string' } },
    },
    '# The file.\nz: 0\n# Said here.\na: 1\n',
  );
  t.same(rows, [
    { path: 'z', type: 'integer', default: '0', description: 'From the schema.' },
    { path: 'a', type: 'integer', default: '1', description: 'Said here.' },
    { path: 'b', type: 'array of string', description: '' },
  ]);
});

t.test('every published image is listed, with the chart appVersion as its tag', async (t) => {
  const list = imagesList('9.9.9').split('\n');
  t.equal(list.length, PUBLISHED.length);
  t.equal(list.at(-1), '- `ghcr.io/sidecar-terminator/sidecar-terminator:9.9.9`');
  t.ok(PUBLISHED.every((name) => readme.includes(`/${name}:`)), PUBLISHED.join(', '));
});

t.test('a generated part: written between its markers, refused without them; the command line', async (t) => {
  const part = { begin: '<!-- b -->', end: '<!-- e -->', make: () => 'new' };
  t.equal(withParts('x\n<!-- b -->\nold\n<!-- e -->\ny', [part], 'f.md'), 'x\n<!-- b -->\nnew\n<!-- e -->\ny');
  t.throws(() => withParts('no markers', [part], 'f.md'), /f\.md lacks the markers <!-- b --> \.\.\. <!-- e -->/);
  const dir = mkdtempSync(join(tmpdir(), 'st-generated-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'f.md'), '<!-- b -->\nold\n<!-- e -->\n');
  const said: string[] = [];
  const io = { stdout: (text: string) => said.push(`stdout: ${text}`), stderr: (text: string) => said.push(text) };
  const cli = (mode?: string) => generatorCli(dir, 'f.md', [part], 'scripts/x.ts', mode ? [mode] : [], io);
  t.equal(cli('--check'), 1, '--check fails on a stale file');
  t.same(said.splice(0), ['f.md is out of date; run node scripts/x.ts --write\n'], 'and names the command that fixes it');
  t.equal(cli(), 0);
  t.same(said.splice(0), ['stdout: <!-- b -->\nnew\n<!-- e -->\n'], 'no argument prints the file as it would be');
  t.equal(cli('--write'), 0);
  t.equal(readFileSync(join(dir, 'f.md'), 'utf8'), '<!-- b -->\nnew\n<!-- e -->\n');
  t.equal(cli('--check'), 0, 'and passes once it is written');
  t.equal(cli('--what'), 2, 'an unknown mode is a usage error');
});
