// Prose that drifts from the code: each check reads the pages users read and fails with the page,
// the line and the fix.
//   - The Kubernetes releases the pages state: a range ends at the newest release the tests run
//     (scripts/test-matrix.ts, scripts/versions.sh) and starts at the oldest, or, said of the
//     chart, at its kubeVersion (Chart.yaml); so does every floor said of the chart.
//   - The images: every registry path of the registry the release pushes to is under its prefix,
//     IMAGE_REPOSITORY (src/policy/names.ts); every image of the project the pages name is one a
//     release publishes (scripts/build-images.ts); every list of them (a line, a table, a Markdown
//     list, a fenced block) names them all; and the versions of install commands are the chart's.
//   - Figures that recur (the first build, the unit loop, make bench, CPU per pod, reviews a
//     second) have a home page; a page that states one links to its home in the same paragraph
//     (table row, list item), and states the number the home states.
//   - The sample output of docs/status-plugin.md is what scripts/status-sample.ts renders from
//     examples/ with status's own code.
// The pages: the READMEs, docs/, the benchmarks, the changelog, the chart's values, README and
// templates, examples/, and the comments of the Makefile, .ci/run and scripts/test.sh's header.
// What it cannot see: it reads numbers and names, not meaning. A right number in a wrong sentence
// passes, and so does a figure in words it has no pattern for, or one stated once on a page no
// pattern expects it on; a figure's home is held to nothing but itself.
// Links and anchors are test/docs/links.test.ts's.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { ARCHITECTURES, PUBLISHED } from '../../scripts/build-images.ts';
import { withParts } from '../../scripts/generated-parts.ts';
import { PAGE as STATUS_PAGE, STORY_OF, sample, sampleParts } from '../../scripts/status-sample.ts';
import { MATRIX } from '../../scripts/test-matrix.ts';
import { IMAGE_REPOSITORY } from '../../src/policy/names.ts';
import { links, markdownFiles, readDoc } from '../support/markdown.ts';
import { ITEM, linkTarget, paragraphs, passages, proseOf } from '../support/prose.ts';
import { repoRoot } from '../support/repo.ts';

/** A page as the checks read it: its lines, fenced code blanked where a check reads prose only. */
type Pages = Record<string, string>;

/** The pages users read: the READMEs, docs/, the benchmarks, the changelog, the chart's values and templates, the examples, and the comments of the commands people run. */
function userPages(): Pages {
  const files = markdownFiles().filter((file) => file === 'README.md' || file === 'CHANGELOG.md' || file === 'bench/README.md' || file === 'charts/sidecar-terminator/README.md' || /^docs\/[^/]+\.md$/.test(file));
  const inDirectory = (dir: string) => readdirSync(join(repoRoot, dir)).map((name) => `${dir}/${name}`);
  const read = [...files, 'charts/sidecar-terminator/values.yaml', ...inDirectory('charts/sidecar-terminator/templates'), ...inDirectory('examples'), 'Makefile', '.ci/run'].map((file): [string, string] => [file, readDoc(file)]);
  // scripts/test.sh: its header, the usage; the rest of its comments are about its code.
  const testUsage = /^(?:#.*\n)*/.exec(readDoc('scripts/test.sh'))![0];
  return Object.fromEntries([...read, ['scripts/test.sh', testUsage]]);
}

/** Each sentence of each paragraph, with its line. Versions (1.30) and decimals do not end one. */
function sentences(file: string, text: string): Array<{ sentence: string; line: number }> {
  return paragraphs(proseOf(file, text)).flatMap((paragraph) => {
    const found: Array<{ sentence: string; line: number }> = [];
    let start = 0;
    for (const end of [...paragraph.text.matchAll(/[.;!?](?=\s|$)/g)].map((m) => m.index + 1).concat(paragraph.text.length)) {
      if (end > start) found.push({ sentence: paragraph.text.slice(start, end).trim(), line: paragraph.lineAt(start + (paragraph.text.slice(start).length - paragraph.text.slice(start).trimStart().length)) });
      start = end;
    }
    return found.filter((s) => s.sentence !== '');
  });
}

// --- Kubernetes releases ---------------------------------------------------------------------

interface Releases {
  /** Minor versions: the oldest and newest the version matrix runs, the default of the tests, the chart's floor. */
  oldest: number;
  newest: number;
  tested: number;
  chart: number;
}

const minor = (version: string) => Number(/^v?1\.(\d+)/.exec(version)?.[1]);

function releases(): Releases {
  const chart = parse(readDoc('charts/sidecar-terminator/Chart.yaml')) as { kubeVersion: string };
  const pinned = /K8S_VERSION:=(v[\d.]+)/.exec(readFileSync(join(repoRoot, 'scripts/versions.sh'), 'utf8'))?.[1] ?? '';
  return { oldest: minor(MATRIX[0]), newest: minor(MATRIX.at(-1)!), tested: minor(pinned), chart: minor(chart.kubeVersion.replace(/^>=\s*/, '')) };
}

/** What each page says of the releases that disagrees with `known`. */
function releaseDrift(pages: Pages, known: Releases): string[] {
  const problems: string[] = [];
  const aboutChart = /\bchart\b|\bhelm\b|kubeVersion/i;
  for (const [file, text] of Object.entries(pages)) {
    for (const { sentence, line } of sentences(file, text)) {
      const at = `${file}:${line}`;
      for (const [range, from = '', to = ''] of sentence.matchAll(/Kubernetes v?1\.(\d+)(?:\.\d+)? (?:to|through|-|–) v?1\.(\d+)/g)) {
        const start = aboutChart.test(sentence) ? known.chart : known.oldest;
        const whose = aboutChart.test(sentence) ? "the chart's kubeVersion (charts/sidecar-terminator/Chart.yaml)" : 'the oldest release of the version matrix (scripts/test-matrix.ts)';
        if (Number(from) !== start) problems.push(`${at}: "${range}" starts at 1.${from}, but ${whose} is 1.${start}; write "Kubernetes 1.${start} to 1.${known.newest}"`);
        if (Number(to) !== known.newest) problems.push(`${at}: "${range}" ends at 1.${to}, but the newest release of the version matrix (scripts/test-matrix.ts) is 1.${known.newest}; write 1.${known.newest}`);
      }
      // A floor said of the chart: "the chart needs 1.30", "Kubernetes 1.30 or later (`kubeVersion`)".
      if (aboutChart.test(sentence) && /\bneeds?\b|kubeVersion|\binstalls?\b/.test(sentence)) {
        for (const [floor, version = ''] of sentence.matchAll(/(?:Kubernetes |needs? )v?1\.(\d+)(?:\+| or later| and later)?(?!\.?\d)/g)) {
          if (Number(version) !== known.chart && !/ to v?1\./.test(sentence.slice(sentence.indexOf(floor) + floor.length, sentence.indexOf(floor) + floor.length + 6))) {
            problems.push(`${at}: "${floor}" said of the chart, whose kubeVersion (charts/sidecar-terminator/Chart.yaml) is 1.${known.chart}; write 1.${known.chart}`);
          }
        }
      }
      for (const [said, which = '', version = ''] of sentence.matchAll(/\b(newest|oldest)(?: supported)?(?: release)?,? (?:Kubernetes )?v?1\.(\d+)(?!\.?\d)/g)) {
        const expected = which === 'newest' ? known.newest : known.oldest;
        if (Number(version) !== expected) problems.push(`${at}: "${said}", but the ${which} release of the version matrix (scripts/test-matrix.ts) is 1.${expected}; write 1.${expected}`);
      }
    }
  }
  return problems;
}

// --- Images ----------------------------------------------------------------------------------

/** What each page says of the published images, or of the release's versions, that disagrees with the code. */
function imageDrift(pages: Pages, published: readonly string[], architectures: readonly string[], chart: { version: string; appVersion: string }): string[] {
  const problems: string[] = [];
  const known = new Set([...published, 'charts']);
  const repository = IMAGE_REPOSITORY.replaceAll('.', '\\.');
  const registry = repository.split('/')[0]!;
  const all = `${published.join(', ')} (scripts/build-images.ts, PUBLISHED)`;
  const names = (text: string) => published.filter((name) => new RegExp(`${repository}/${name}(?![\\w-])|\`${name}\``).test(text));
  for (const [file, text] of Object.entries(pages)) {
    text.split('\n').forEach((line, index) => {
      const at = `${file}:${index + 1}`;
      // The release pushes to one prefix: any other path on its registry is no image of ours.
      for (const [path] of line.matchAll(new RegExp(`(?<![\\w.-])${registry}(?:/[\\w.-]*[\\w-])+`, 'g'))) {
        if (path !== IMAGE_REPOSITORY && !path.startsWith(`${IMAGE_REPOSITORY}/`)) problems.push(`${at}: ${path}: a release pushes to ${IMAGE_REPOSITORY} (IMAGE_REPOSITORY, src/policy/names.ts); write ${path.split('/').length > IMAGE_REPOSITORY.split('/').length ? `${IMAGE_REPOSITORY}/${path.split('/').at(-1)}` : IMAGE_REPOSITORY}`);
      }
      for (const [reference, name = '', tag] of line.matchAll(new RegExp(`${repository}/([a-z0-9-]+)(?![a-z0-9-]|\\.\\.\\.)(?::([\\w.-]+))?`, 'g'))) {
        if (!known.has(name)) problems.push(`${at}: ${reference} is no image a release publishes; they are ${all}`);
        else if (tag !== undefined && /^\d+\.\d+\.\d+/.test(tag) && tag !== chart.appVersion && tag !== chart.version) problems.push(`${at}: ${reference}: the release is ${chart.appVersion} (charts/sidecar-terminator/Chart.yaml); write :${chart.appVersion}`);
      }
      for (const [flag, version = ''] of line.matchAll(/helm (?:install|upgrade|pull|show)\b.*?--version (\S+)/g)) {
        if (version !== chart.version && /^\d/.test(version)) problems.push(`${at}: "${flag}": the chart's version is ${chart.version} (charts/sidecar-terminator/Chart.yaml); write --version ${chart.version}`);
      }
      // A line that names published images in code names every one of them.
      const named = published.filter((name) => line.includes(`\`${name}\``));
      if (named.length >= 2 && named.length < published.length) {
        problems.push(`${at}: lists the published images ${named.join(', ')} but not ${published.filter((name) => !named.includes(name)).join(', ')}; a release publishes ${all}`);
      }
    });
    // A paragraph on the images that names their platforms names exactly theirs.
    for (const paragraph of paragraphs(proseOf(file, text).replace(/`[^`\n]*`/g, (code) => ' '.repeat(code.length)))) {
      const platforms = [...new Set([...paragraph.text.matchAll(/\blinux\/(\w+)/g)].map((m) => m[1]!))];
      if (/\bimages?\b/i.test(paragraph.text) && platforms.length > 0 && [...platforms].sort().join() !== [...architectures].sort().join()) {
        problems.push(`${file}:${paragraph.lineAt(paragraph.text.indexOf('linux/'))}: names the images' platforms linux/${platforms.join(', linux/')}, but they are built for linux/${architectures.join(', linux/')} (scripts/build-images.ts, ARCHITECTURES)`);
      }
    }
    // A table or Markdown list whose rows are mostly images (one each) is a list of them: it names every one.
    const lines = proseOf(file, text).split('\n');
    for (let index = 0; index < lines.length; ) {
      const start = index;
      const rows: string[] = [];
      for (; index < lines.length && lines[index]!.trim() !== '' && (rows.length > 0 || ITEM.test(lines[index]!.trim())); index++) {
        const line = lines[index]!.trim();
        if (/^\|[\s:|-]+$/.test(line)) rows.pop(); // a table's header, above this line
        else if (ITEM.test(line)) rows.push(line);
        else rows[rows.length - 1] += ` ${line}`;
      }
      if (index === start) index++;
      const naming = rows.filter((row) => names(row).length > 0);
      const missing = published.filter((name) => !naming.some((row) => names(row).includes(name)));
      if (naming.length >= 2 && naming.length * 2 >= rows.length && missing.length > 0) {
        problems.push(`${file}:${start + 1}: this ${rows[0]!.startsWith('|') ? 'table' : 'list'} of images lacks ${missing.join(', ')}; add a row for each: a release publishes ${all}`);
      }
    }
    // A block of image references (a copy of images.txt) lists every published image.
    for (const block of text.matchAll(/^```\w*\n([\s\S]*?)^```$/gm)) {
      const listed = new Set([...block[1]!.matchAll(new RegExp(`^(?:oci://)?${repository}/([a-z0-9-]+)`, 'gm'))].map((m) => m[1]!));
      const missing = published.filter((name) => !listed.has(name));
      if (listed.size >= 2 && missing.length > 0) {
        const line = text.slice(0, block.index).split('\n').length + 1;
        problems.push(`${file}:${line}: this list of images lacks ${missing.join(', ')}; images.txt names every image a release publishes: ${all}`);
      }
    }
  }
  return problems;
}

// --- Figures ---------------------------------------------------------------------------------

interface Figure {
  name: string;
  /** The page that states it; the others link there. */
  home: string;
  /** The figure stated as a number, in digits or in words. */
  pattern: RegExp;
  /** A paragraph must match this too, when set: what the figure is about. */
  context?: RegExp;
}

/** A number in digits or in words (up to twelve), and the words that hedge one. */
const NUMBER_WORDS: Record<string, number> = { a: 1, an: 1, one: 1, two: 2, three: 3, four: 4, five: 5, six: 6, seven: 7, eight: 8, nine: 9, ten: 10, eleven: 11, twelve: 12 };
const N = `(?:\\d[\\d,]*(?:\\.\\d+)?|${Object.keys(NUMBER_WORDS).filter((word) => word.length > 2).join('|')})`;
const ABOUT = '(?:about|some|under|around|within)';

const FIGURES: readonly Figure[] = [
  {
    // make dev, make test or CI with empty caches
    name: 'the first build',
    home: 'docs/development.md',
    // In digits: "two minutes on two cores" is the unit loop's.
    pattern: /\b\d+(?:\.\d+)? CPU-minutes\b|\b\d+(?:\.\d+)? minutes on two (?:idle )?cores\b|\bcold\b[^.]*?\btook \d+(?:\.\d+)? minutes\b/i,
  },
  {
    name: 'the time of make test-unit',
    home: 'docs/development.md',
    context: /make test-unit|unit loop|inner loop/i,
    pattern: new RegExp(`\\b(?:(?:took|takes)(?: ${ABOUT})?|${ABOUT}) (?:${N} ?(?:s|seconds?|minutes?)|(?:half )?an? (?:second|minute))\\b`),
  },
  { name: 'the time of make bench', home: 'bench/README.md', context: /make bench\b/, pattern: new RegExp(`\\b${ABOUT} (?:(?:an?|half an?|an? half) hour|${N} (?:minutes|hours?))\\b`) },
  { name: "the watcher's CPU per pod", home: 'bench/README.md', pattern: /\b\d+(?:\.\d+)? ms (?:more |of )?(?:CPU )?per pod\b/ },
  { name: "the webhook's reviews a second", home: 'bench/README.md', pattern: /\b\d[\d,]*(?:\.\d+)? (?:admission )?reviews? (?:a|per) second\b|\b\d[\d,]*(?:\.\d+)? reviews\/s\b/ },
];

const UNITS: Record<string, string> = { s: 's', second: 's', seconds: 's', minute: 'minute', minutes: 'minute', hour: 'hour', hours: 'hour', ms: 'ms', 'cpu-minutes': 'CPU-minutes', review: 'reviews', reviews: 'reviews' };

/** A figure as stated, made comparable: its first number in digits with its unit ("about two minutes": "2 minute"). */
function quantity(stated: string): string {
  const digits = stated
    .toLowerCase()
    .replace(/\b(?:half an?|an? half|half)\b/g, '0.5')
    .replace(/\b[a-z]+\b/g, (word) => String(NUMBER_WORDS[word] ?? word))
    .replaceAll(',', '');
  for (const [, number = '', unit = ''] of digits.matchAll(/(\d+(?:\.\d+)?) ?([a-z-]+)/g)) if (unit in UNITS) return `${Number(number)} ${UNITS[unit]}`;
  return digits;
}

/** Whether a paragraph of `file` links to `home`: a Markdown link, or in a YAML file's or script's comments its path from the root. */
function linksTo(file: string, text: string, home: string): boolean {
  if (links(text).some((link) => linkTarget(file, link)?.path === home)) return true;
  return !file.endsWith('.md') && new RegExp(`(?<![\\w./-])${home.replaceAll('.', '\\.')}\\b`).test(text);
}

/** Each figure stated off its home page without a link there in its paragraph, or with another number than the home's: where, and the fix. */
function figureDrift(pages: Pages, figures: readonly Figure[] = FIGURES): string[] {
  const problems: string[] = [];
  for (const figure of figures) {
    // The home is read whole: a figure it gives in a command's comment counts.
    const stated = Object.entries(pages).flatMap(([file, text]) =>
      passages(file === figure.home && file.endsWith('.md') ? text : proseOf(file, text))
        .filter((passage) => !figure.context || figure.context.test(passage.text))
        .flatMap((passage) => [...passage.text.matchAll(new RegExp(figure.pattern.source, `${figure.pattern.flags.replace('g', '')}g`))].map((match) => ({ file, passage, match }))),
    );
    // What the home states, by quantity: "about two minutes" and "takes 2 minutes" are one.
    const atHome = new Map(stated.filter(({ file }) => file === figure.home).map(({ match }) => [quantity(match[0]), match[0]]));
    for (const { file, passage, match } of stated.filter((statement) => statement.file !== figure.home)) {
      const at = `${file}:${passage.lineAt(match.index)}: ${figure.name}, stated as "${match[0]}"`;
      const link = file.endsWith('.md') ? `a link to ${figure.home}` : `its path, ${figure.home},`;
      if (!linksTo(file, passage.text, figure.home)) problems.push(`${at}, has no link to its home page in its paragraph; add ${link} there, or leave the figure to ${figure.home}`);
      if (!atHome.has(quantity(match[0]))) {
        const says = atHome.size > 0 ? `states ${[...atHome.values()].map((said) => `"${said}"`).join(', ')}` : 'does not state it';
        problems.push(`${at}: its home page, ${figure.home}, ${says}; write the number the home states, or state the new one there first`);
      }
    }
  }
  return problems;
}

// --- The checks, on the pages as they are ---------------------------------------------------

const pages = userPages();
const known = releases();

t.test('the Kubernetes releases the pages state are those of the version matrix and the chart', async (t) => {
  t.ok(known.oldest < known.newest && known.chart >= known.oldest, JSON.stringify(known));
  t.equal(known.tested, known.newest, 'scripts/versions.sh: the tests run on the newest release of the matrix by default (K8S_VERSION)');
  t.same(releaseDrift(pages, known), []);
});

t.test('the images the pages name are the ones a release publishes', async (t) => {
  const chart = parse(readDoc('charts/sidecar-terminator/Chart.yaml')) as { version: string; appVersion: string };
  t.same(imageDrift(pages, PUBLISHED, ARCHITECTURES, chart), []);
});

t.test('a figure stated off its home page links there and gives the home\'s number', async (t) => {
  t.ok(Object.keys(pages).length > 12 && 'bench/README.md' in pages, Object.keys(pages).join(', '));
  // The chart's README is left out: its table is values.yaml's comments, which are read.
  t.same(figureDrift(Object.fromEntries(Object.entries(pages).filter(([file]) => file !== 'charts/sidecar-terminator/README.md'))), []);
});

t.test("the status plugin's sample output is what status prints for the examples' pods", async (t) => {
  const page = readDoc(STATUS_PAGE);
  t.equal(withParts(page, await sampleParts(), STATUS_PAGE), page, `${STATUS_PAGE}: the sample output is not what the commands shown print for examples/; run node scripts/status-sample.ts --write`);
});

// --- The checks find what they look for ------------------------------------------------------

t.test("the status sample is told from the examples' manifests", async (t) => {
  const { list, story } = await sample();
  const examples = readdirSync(join(repoRoot, 'examples')).map((file) => file.replace(/\.yaml$/, ''));
  // misconfigured.yaml is refused at admission: it never has a pod.
  for (const example of examples.filter((name) => name !== 'misconfigured')) t.match(list, new RegExp(`^${example}-xxxxx +${example} `, 'm'), example);
  const job = parse(readDoc(`examples/${STORY_OF}.yaml`)) as { spec: { template: { spec: { containers: Array<{ name: string }> } } } };
  for (const { name } of job.spec.template.spec.containers) t.match(story, new RegExp(`^  ${name} +(main|sidecar) `, 'm'), `the story's container ${name}, from examples/${STORY_OF}.yaml`);
});

t.test('releases: a range, a floor said of the chart, the newest; what agrees passes', async (t) => {
  const releasesKnown: Releases = { oldest: 29, newest: 37, tested: 37, chart: 30 };
  const page = [
    'The add-on is written for Kubernetes 1.29 to 1.37 (older releases: below). The chart installs on Kubernetes 1.30 to 1.37.',
    'The tests run on the newest, 1.37, by default. The chart itself needs 1.30.',
    '',
    'The chart runs each Deployment on Kubernetes 1.29 to 1.36 (the fence needs',
    '1.30). The add-on runs on Kubernetes 1.28 to 1.37. The tests run on the newest, 1.36.',
    '**Kubernetes 1.31 or later** (`kubeVersion`): the fence. Feature X needs Kubernetes 1.35 or later.',
    '',
    '```sh',
    'echo Kubernetes 1.2 to 1.3',
    '```',
  ].join('\n');
  t.same(releaseDrift({ 'docs/a.md': page }, releasesKnown), [
    'docs/a.md:4: "Kubernetes 1.29 to 1.36" starts at 1.29, but the chart\'s kubeVersion (charts/sidecar-terminator/Chart.yaml) is 1.30; write "Kubernetes 1.30 to 1.37"',
    'docs/a.md:4: "Kubernetes 1.29 to 1.36" ends at 1.36, but the newest release of the version matrix (scripts/test-matrix.ts) is 1.37; write 1.37',
    'docs/a.md:5: "Kubernetes 1.28 to 1.37" starts at 1.28, but the oldest release of the version matrix (scripts/test-matrix.ts) is 1.29; write "Kubernetes 1.29 to 1.37"',
    'docs/a.md:5: "newest, 1.36", but the newest release of the version matrix (scripts/test-matrix.ts) is 1.37; write 1.37',
    'docs/a.md:6: "Kubernetes 1.31 or later" said of the chart, whose kubeVersion (charts/sidecar-terminator/Chart.yaml) is 1.30; write 1.30',
  ]);
  t.same(releaseDrift({ 'values.yaml': '# The chart needs Kubernetes 1.31.\nkey: Kubernetes 1.31\n' }, releasesKnown), [
    'values.yaml:1: "Kubernetes 1.31" said of the chart, whose kubeVersion (charts/sidecar-terminator/Chart.yaml) is 1.30; write 1.30',
  ], "YAML: its comments, not its values");
});

t.test('images: unknown names, partial lists, wrong tags and platforms', async (t) => {
  const chart = { version: '0.1.0', appVersion: '0.1.0' };
  const page = [
    'Each release publishes images (linux/amd64,',
    'linux/arm64): `a`, `b` and `c`.',
    '',
    'Its images are `a` and `b`, built for linux/amd64.',
    'Pull ghcr.io/sidecar-terminator/d:0.1.0 or ghcr.io/sidecar-terminator/a:0.2.0; the chart is oci://ghcr.io/sidecar-terminator/charts/x; clipped: ghcr.io/sidecar-terminator/quick-e...',
    'helm install x oci://ghcr.io/sidecar-terminator/charts/x --version 0.2.0',
    '',
    '```text',
    'ghcr.io/sidecar-terminator/a:0.1.0   one',
    'ghcr.io/sidecar-terminator/b:0.1.0   two',
    '```',
    '',
    '| what | reference |',
    '|---|---|',
    '| the first | `ghcr.io/sidecar-terminator/a:0.1.0` |',
    '| the second | `ghcr.io/sidecar-terminator/b:0.1.0` |',
    '| the chart | `oci://ghcr.io/sidecar-terminator/charts/x` |',
    '',
    '- `ghcr.io/sidecar-terminator/a:0.1.0`',
    '- `ghcr.io/sidecar-terminator/c:0.1.0`, and',
    '  its notes',
    '',
    'Mirror ghcr.io/someone/sidecar-terminator/a:0.1.0 or ghcr.io/sidecar-terminator-fork/b; the registry is ghcr.io/sidecar-terminator.',
  ].join('\n');
  // A table in which two of many rows name an image (defaults of flags) is no list of them.
  const flags = ['| flag | default |', '|---|---|', '| --a | `ghcr.io/sidecar-terminator/a:0.1.0` |', '| --b | `ghcr.io/sidecar-terminator/b:0.1.0` |', '| --x | 1 |', '| --y | 2 |', '| --z | 3 |'].join('\n');
  t.same(imageDrift({ 'docs/flags.md': flags }, ['a', 'b', 'c'], ['amd64', 'arm64'], chart), []);
  t.same(imageDrift({ 'docs/a.md': page }, ['a', 'b', 'c'], ['amd64', 'arm64'], chart), [
    'docs/a.md:4: lists the published images a, b but not c; a release publishes a, b, c (scripts/build-images.ts, PUBLISHED)',
    'docs/a.md:5: ghcr.io/sidecar-terminator/d:0.1.0 is no image a release publishes; they are a, b, c (scripts/build-images.ts, PUBLISHED)',
    'docs/a.md:5: ghcr.io/sidecar-terminator/a:0.2.0: the release is 0.1.0 (charts/sidecar-terminator/Chart.yaml); write :0.1.0',
    'docs/a.md:6: "helm install x oci://ghcr.io/sidecar-terminator/charts/x --version 0.2.0": the chart\'s version is 0.1.0 (charts/sidecar-terminator/Chart.yaml); write --version 0.1.0',
    'docs/a.md:23: ghcr.io/someone/sidecar-terminator/a: a release pushes to ghcr.io/sidecar-terminator (IMAGE_REPOSITORY, src/policy/names.ts); write ghcr.io/sidecar-terminator/a',
    'docs/a.md:23: ghcr.io/sidecar-terminator-fork/b: a release pushes to ghcr.io/sidecar-terminator (IMAGE_REPOSITORY, src/policy/names.ts); write ghcr.io/sidecar-terminator/b',
    "docs/a.md:4: names the images' platforms linux/amd64, but they are built for linux/amd64, linux/arm64 (scripts/build-images.ts, ARCHITECTURES)",
    'docs/a.md:13: this table of images lacks c; add a row for each: a release publishes a, b, c (scripts/build-images.ts, PUBLISHED)',
    'docs/a.md:19: this list of images lacks b; add a row for each: a release publishes a, b, c (scripts/build-images.ts, PUBLISHED)',
    'docs/a.md:9: this list of images lacks c; images.txt names every image a release publishes: a, b, c (scripts/build-images.ts, PUBLISHED)',
  ]);
});

t.test('figures: off its home page, a figure needs a link there in its paragraph and the number the home states', async (t) => {
  const home = [
    '### The first build',
    '',
    'The first build takes about 45 CPU-minutes: some 23 minutes on two idle cores.',
    '',
    '## The inner loop',
    '',
    '`make test-unit` runs them. It takes about two minutes on two cores: 129 s.',
  ].join('\n');
  const pagesWith: Pages = {
    'docs/development.md': home,
    'bench/README.md': 'The watcher spends 4.1 ms per pod at 2,000.\n\nmake bench takes about an hour on two cores.\n',
    'README.md': [
      'The first build takes some 23 minutes on two cores ([how long](docs/development.md#the-first-build)).',
      '',
      'The first build takes some 23 minutes on two cores.',
      '',
      'The webhook answers 1,700 reviews a second.',
      '',
      '```sh',
      'make bench  # about an hour',
      '```',
    ].join('\n'),
    'docs/a.md': [
      '| figure | where |',
      '|---|---|',
      '| 9 ms of CPU per pod | [bursts](../bench/README.md#3-bursts) |',
      '| 4.1 ms per pod | [bursts](../bench/README.md) |',
      '| 4.1 ms per pod | said elsewhere |',
      '',
      '- The inner loop takes under a minute ([times](development.md#the-inner-loop)).',
      '- The inner loop takes about two minutes on two cores',
      '  ([times](development.md#the-inner-loop)).',
    ].join('\n'),
    Makefile: '# The inner loop (make test-unit) takes under a minute.\ntest-unit:\n\t./test.sh --unit\n\n# The inner loop: about two minutes (docs/development.md, "The inner loop").\n',
    'charts/x/values.yaml': '# for up to 2.2 ms more CPU per pod in a burst (bench/README.md section 3)\nkey: 1 ms per pod\n',
  };
  const unitLoop = 'docs/development.md, states "takes about two minutes"; write the number the home states, or state the new one there first';
  const cpu = 'bench/README.md, states "4.1 ms per pod"; write the number the home states, or state the new one there first';
  t.same(figureDrift(pagesWith), [
    'README.md:3: the first build, stated as "23 minutes on two cores", has no link to its home page in its paragraph; add a link to docs/development.md there, or leave the figure to docs/development.md',
    `docs/a.md:7: the time of make test-unit, stated as "takes under a minute": its home page, ${unitLoop}`,
    'Makefile:1: the time of make test-unit, stated as "takes under a minute", has no link to its home page in its paragraph; add its path, docs/development.md, there, or leave the figure to docs/development.md',
    `Makefile:1: the time of make test-unit, stated as "takes under a minute": its home page, ${unitLoop}`,
    `docs/a.md:3: the watcher's CPU per pod, stated as "9 ms of CPU per pod": its home page, ${cpu}`,
    'docs/a.md:5: the watcher\'s CPU per pod, stated as "4.1 ms per pod", has no link to its home page in its paragraph; add a link to bench/README.md there, or leave the figure to bench/README.md',
    `charts/x/values.yaml:1: the watcher's CPU per pod, stated as "2.2 ms more CPU per pod": its home page, ${cpu}`,
    'README.md:5: the webhook\'s reviews a second, stated as "1,700 reviews a second", has no link to its home page in its paragraph; add a link to bench/README.md there, or leave the figure to bench/README.md',
    'README.md:5: the webhook\'s reviews a second, stated as "1,700 reviews a second": its home page, bench/README.md, does not state it; write the number the home states, or state the new one there first',
  ]);
  t.same(figureDrift({ 'docs/development.md': home, 'README.md': '`make test-unit` takes about two minutes ([times](docs/development.md#the-inner-loop)).\n' }), [], 'the home\'s number, in words, with a link');
});

// Keep the list of pages honest: a page added to docs/ is read.
t.test('every page of docs/ is among the pages read', async (t) => {
  for (const file of readdirSync(join(repoRoot, 'docs')).filter((name) => name.endsWith('.md'))) t.ok(`docs/${file}` in pages, `docs/${file}`);
});
