// Every link between the project's Markdown files holds: a relative link names a file or
// directory of the repository, and an anchor names a heading of the page it points to (as GitHub
// makes anchors from headings). Links to the web are left alone: the tests do not reach it.
import { existsSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import t from 'tap';
import { anchors, links, markdownFiles, readDoc, slug } from '../support/markdown.ts';
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
    if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue; // https:, mailto:
    const [path = '', anchor] = link.split('#', 2);
    const target = path === '' ? file : relative(repoRoot, join(repoRoot, dirname(file), decodeURIComponent(path)));
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

const files = markdownFiles();

t.test('every Markdown file is read, docs/ and the README among them', async (t) => {
  t.ok(files.includes('README.md') && files.includes('docs/ARCHITECTURE.md') && files.length > 10, files.join(', '));
});

t.test('every relative link and anchor of every Markdown file holds', async (t) => {
  for (const file of files) t.same(brokenLinks(file), [], file);
});

t.test('the check finds what it looks for', async (t) => {
  const pages: Record<string, string> = {
    'docs/a.md': '# A page\n\n## Why is my Job still running?\n\n## Metrics\n\n## Metrics\n\n```md\n## Not a heading\n[not a link](missing.md)\n```\n',
    'docs/b.md': [
      '# B',
      '[ok](a.md#why-is-my-job-still-running) [ok](a.md#metrics-1) [ok](#b) [ok](../README.md) [ok](../src) [ok](https://example.com/x.md)',
      '[bad](a.md#not-a-heading) [bad](missing.md) [bad](#nowhere) [bad](../../outside.md) [bad](../src#x) `[code](missing.md)`',
    ].join('\n'),
  };
  const tree: Tree = { read: (path) => pages[path] ?? onDisk.read(path), kind: (path) => (path in pages ? 'file' : onDisk.kind(path)) };
  t.same(brokenLinks('docs/b.md', tree).map((problem) => problem.replace(/^docs\/b\.md: /, '')), [
    'a.md#not-a-heading: docs/a.md has no heading with the anchor #not-a-heading',
    'missing.md: no file docs/missing.md',
    '#nowhere: docs/b.md has no heading with the anchor #nowhere',
    '../../outside.md points out of the repository',
    '../src#x: an anchor into a file that is not Markdown',
  ]);
  t.equal(slug('`--native-sidecars`: which pods, and why?'), '--native-sidecars-which-pods-and-why');
  t.equal(slug('Compared with native sidecars and OpenKruise'), 'compared-with-native-sidecars-and-openkruise');
});
