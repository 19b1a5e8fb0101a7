// Every link between the project's Markdown files holds: a relative link names a file or
// directory of the repository, and an anchor names a heading of the page it points to (as GitHub
// makes anchors from headings); so does a link to the repository's own files on GitHub (the chart's
// README, read outside the repository, links there). Links to the rest of the web are left alone:
// the tests do not reach it. The chart's comments name sections of pages in words
// (`docs/security.md, "RBAC"`, `bench/README.md section 3`): each names a heading there.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { SOURCE_URL } from '../../scripts/build-images.ts';
import { anchors, headings, links, markdownFiles, readDoc, slug } from '../support/markdown.ts';
import { linkTarget, paragraphs, proseOf } from '../support/prose.ts';
import { repoRoot } from '../support/repo.ts';

interface Tree {
  read(path: string): string;
  /** What the path is in the repository, if anything. */
  kind(path: string): 'file' | 'directory' | undefined;
}

const onDisk: Tree = {
  read: readDoc,
  kind: (path) => (existsSync(join(repoRoot, path)) ? (statSync(join(repoRoot, path)).isDirectory() ? 'directory' : 'file') : undefined),
};

/** What is wrong with each link of `file`: a missing target, an unknown anchor, a path out of the repository. */
function brokenLinks(file: string, tree: Tree = onDisk): string[] {
  const problems: string[] = [];
  for (const link of links(tree.read(file))) {
    const { path: target, anchor } = linkTarget(file, link) ?? {};
    if (target === undefined) continue; // https:, mailto:
    if (target.startsWith('..')) {
      problems.push(`${file}: ${link} points out of the repository`);
      continue;
    }
    const kind = tree.kind(target);
    if (kind === undefined) problems.push(`${file}: ${link}: no file ${target}`);
    else if (anchor === undefined) continue;
    else if (kind === 'directory' || !target.endsWith('.md')) problems.push(`${file}: ${link}: an anchor into a file that is not Markdown`);
    else if (!anchors(tree.read(target)).has(anchor)) problems.push(`${file}: ${link}: ${target} has no heading with the anchor #${anchor}`);
  }
  return problems;
}

/** The files of the chart whose comments name pages: values.yaml, the templates and their notes. */
const CHART = 'charts/sidecar-terminator';
const chartFiles = [`${CHART}/values.yaml`, ...readdirSync(join(repoRoot, CHART, 'templates')).map((name) => `${CHART}/templates/${name}`)];

/**
 * What is wrong with each reference of `file` to a section of a page, in words or by anchor:
 * `docs/x.md#anchor`, `docs/x.md, "Heading"`, `README "Heading"`, `bench/README.md section 3`
 * (or `sections 0 and 3`), in the comments of a YAML file or template. Paths are from the repository's root.
 */
function brokenSectionReferences(file: string, text: string, read: (path: string) => string | undefined = readIfThere): string[] {
  const problems: string[] = [];
  const pattern = /(README|[\w./-]+\.md)(?:#([\w-]+)|,? ((?:"[^"]+"(?:,? and |, )?)+)|,? sections? ([\d, and]+\d))/g;
  // A reference may run over the lines of a comment: each paragraph of comment lines is read as one line.
  for (const paragraph of paragraphs(proseOf(file, text))) {
    for (const match of paragraph.text.matchAll(pattern)) {
      const [reference, name = '', anchor, quoted, numbers] = match;
      const page = name === 'README' ? 'README.md' : name;
      const at = `${file}:${paragraph.lineAt(match.index)}: ${reference}`;
      const content = read(page);
      if (content === undefined) {
        problems.push(`${at}: no file ${page}; name a page of the repository by its path from the root`);
        continue;
      }
      const titles = headings(content).map((heading) => heading.title);
      const wanted = anchor !== undefined ? [`#${anchor}`] : quoted !== undefined ? (quoted.match(/"[^"]+"/g) ?? []) : (numbers?.match(/\d+/g) ?? []).map((n) => `section ${n}`);
      const found = (want: string) =>
        want.startsWith('#') ? anchors(content).has(want.slice(1)) : want.startsWith('"') ? titles.includes(want.slice(1, -1)) : titles.some((t) => t.startsWith(`${want.slice('section '.length)}. `));
      for (const want of wanted.filter((want) => !found(want))) {
        problems.push(`${at}: ${page} has no heading ${want}; name one of its headings: ${titles.map((t) => `"${t}"`).join(', ')}`);
      }
    }
  }
  return problems;
}

function readIfThere(path: string): string | undefined {
  return existsSync(join(repoRoot, path)) && statSync(join(repoRoot, path)).isFile() ? readDoc(path) : undefined;
}

const files = markdownFiles();

t.test('every Markdown file is read, docs/ and the README among them', async (t) => {
  t.ok(files.includes('README.md') && files.includes('docs/ARCHITECTURE.md') && files.length > 10, files.join(', '));
});

t.test('every relative link and anchor of every Markdown file holds', async (t) => {
  for (const file of files) t.same(brokenLinks(file), [], file);
});

t.test("every page section the chart's comments name exists", async (t) => {
  for (const file of chartFiles) {
    t.same(brokenSectionReferences(file, readDoc(file)), [], file);
  }
});

t.test('references to sections in words: what the check finds', async (t) => {
  const pages: Record<string, string> = { 'docs/a.md': '# A\n\n## RBAC\n\n## 0. Footprint\n\n## 3. Bursts\n', 'README.md': '# R\n\n## Install\n' };
  const text = [
    '# docs/a.md, "RBAC" docs/a.md#rbac docs/a.md section 0 docs/a.md, sections 0 and 3 README "Install"',
    '# docs/a.md, "From a mirror" docs/a.md#nowhere docs/a.md sections 0 and 4 README "RBAC" docs/b.md, "X"',
    '',
    '# docs/a.md, "RBAC" and "0. Footprint", "3. Bursts" and',
    '# "Over two lines"',
  ].join('\n');
  t.same(brokenSectionReferences('values.yaml', text, (path) => pages[path]), [
    'values.yaml:2: docs/a.md, "From a mirror": docs/a.md has no heading "From a mirror"; name one of its headings: "A", "RBAC", "0. Footprint", "3. Bursts"',
    'values.yaml:2: docs/a.md#nowhere: docs/a.md has no heading #nowhere; name one of its headings: "A", "RBAC", "0. Footprint", "3. Bursts"',
    'values.yaml:2: docs/a.md sections 0 and 4: docs/a.md has no heading section 4; name one of its headings: "A", "RBAC", "0. Footprint", "3. Bursts"',
    'values.yaml:2: README "RBAC": README.md has no heading "RBAC"; name one of its headings: "R", "Install"',
    'values.yaml:2: docs/b.md, "X": no file docs/b.md; name a page of the repository by its path from the root',
    'values.yaml:4: docs/a.md, "RBAC" and "0. Footprint", "3. Bursts" and "Over two lines": docs/a.md has no heading "Over two lines"; name one of its headings: "A", "RBAC", "0. Footprint", "3. Bursts"',
  ]);
  t.same(brokenSectionReferences('values.yaml', 'key: docs/b.md, "X"\n'), [], "YAML: its comments only");
});

t.test('the check finds what it looks for', async (t) => {
  const pages: Record<string, string> = {
    'docs/a.md': '# A page\n\n## Why is my Job still running?\n\n## Metrics\n\n## Metrics\n\n```md\n## Not a heading\n[not a link](missing.md)\n```\n',
    'docs/b.md': [
      '# B',
      '[ok](a.md#why-is-my-job-still-running) [ok](a.md#metrics-1) [ok](#b) [ok](../README.md) [ok](../src) [ok](https://example.com/x.md)',
      '[bad](a.md#not-a-heading) [bad](missing.md) [bad](#nowhere) [bad](../../outside.md) [bad](../src#x) `[code](missing.md)`',
      `[ok](${SOURCE_URL}/blob/main/docs/a.md#metrics) [ok](${SOURCE_URL}/tree/main/src) [ok](${SOURCE_URL}/issues) [bad](${SOURCE_URL}/blob/main/docs/a.md#nowhere)`,
    ].join('\n'),
  };
  const tree: Tree = { read: (path) => pages[path] ?? onDisk.read(path), kind: (path) => (path in pages ? 'file' : onDisk.kind(path)) };
  t.same(brokenLinks('docs/b.md', tree).map((problem) => problem.replace(/^docs\/b\.md: /, '')), [
    'a.md#not-a-heading: docs/a.md has no heading with the anchor #not-a-heading',
    'missing.md: no file docs/missing.md',
    '#nowhere: docs/b.md has no heading with the anchor #nowhere',
    '../../outside.md points out of the repository',
    '../src#x: an anchor into a file that is not Markdown',
    `${SOURCE_URL}/blob/main/docs/a.md#nowhere: docs/a.md has no heading with the anchor #nowhere`,
  ]);
  t.equal(slug('`--native-sidecars`: which pods, and why?'), '--native-sidecars-which-pods-and-why');
  t.equal(slug('Compared with native sidecars and OpenKruise'), 'compared-with-native-sidecars-and-openkruise');
});
