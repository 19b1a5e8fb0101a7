// The README is read in a few minutes: what the add-on does, its install, the env table, one
// example, what makes it differ from OpenKruise, and links to every page of docs/, where the rest
// lives. Its example is the example file users apply.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { fences, headings, links, readDoc } from '../support/markdown.ts';
import { repoRoot } from '../support/repo.ts';

const readme = readDoc('README.md');

t.test('a few screens: at most 200 lines', async (t) => {
  const lines = readme.split('\n').length;
  t.ok(lines <= 200, `${lines} lines`);
});

t.test('its sections: try it, run the tests, install, an example, what differs from OpenKruise, the documentation', async (t) => {
  t.same(
    headings(readme).filter((heading) => heading.level === 2).map((heading) => heading.title),
    ['Try it on this machine', 'Run the tests', 'Install with Helm', 'An example', "What differs from OpenKruise's Job Sidecar Terminator", 'Documentation', 'Contributing'],
  );
  t.match(readme, /\| `KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT` \|/, 'the env table');
});

t.test('every page of docs/ is linked from the README', async (t) => {
  const linked = new Set(links(readme).map((link) => link.split('#')[0]));
  const pages = readdirSync(join(repoRoot, 'docs')).filter((file) => file.endsWith('.md'));
  t.ok(pages.length >= 11, `${pages.length} pages`);
  for (const page of pages) t.ok(linked.has(`docs/${page}`), `docs/${page}`);
  t.ok(linked.has('bench/README.md'), 'and the benchmarks');
});

t.test('the example is examples/log-shipper.yaml as users apply it', async (t) => {
  const yaml = fences(readme).filter((fence) => fence.language === 'yaml');
  t.equal(yaml.length, 1);
  const file = readDoc('examples/log-shipper.yaml');
  t.equal(yaml[0]!.body, file.slice(file.indexOf('apiVersion:')), 'the file, without its opening comment');
  t.match(readme, /kubectl apply -f examples\/log-shipper\.yaml/);
});
