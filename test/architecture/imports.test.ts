// The import graph of src/ (docs/ARCHITECTURE.md, "Layers"): no cycle, and every import points
// down the layers or stays in its own part: src/policy at the bottom imports nothing outside
// itself; logger, config and health above it; kube and tls, the Kubernetes client and the
// certificates, above those; then the components (watcher, webhook, status, lint), which never
// import one another; serve composes the components; cli is on top and nothing imports it.
// Type-only and dynamic imports count like the others. Inside the components, the webhook's
// admission handlers import no other handler, and the webhook and the watcher are each at most
// four floors deep; and no two files under src/, nor two exported types, share a name.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import t from 'tap';
import ts from 'typescript';

const root = resolve(import.meta.dirname, '../..');

/** Every .ts file under src/, relative to the repository (src/cli.ts, ...). */
function sourceFiles(): string[] {
  return readdirSync(join(root, 'src'), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => relative(root, join(entry.parentPath, entry.name)))
    .sort();
}

/** Each file's imports of other files under src/ (packages and node: modules left out). */
function importGraph(files: readonly string[], read: (file: string) => string): Map<string, string[]> {
  return new Map(
    files.map((file) => {
      const { importedFiles } = ts.preProcessFile(read(file), true, true);
      const local = importedFiles.map((imported) => imported.fileName).filter((name) => name.startsWith('.'));
      return [file, local.map((name) => join(dirname(file), name))];
    }),
  );
}

/** The layers, bottom up: a file imports its own layer or a lower one; in the components' layer, only its own component. */
const LAYERS: ReadonlyArray<{ name: string; parts: Record<string, (file: string) => boolean>; apart?: true }> = [
  { name: 'policy', parts: { policy: (file) => file.startsWith('src/policy/') } },
  { name: 'foundation', parts: { foundation: (file) => ['src/logger.ts', 'src/duration.ts', 'src/usage-error.ts', 'src/config.ts', 'src/health.ts'].includes(file) } },
  { name: 'clients', parts: { kube: (file) => file.startsWith('src/kube/'), tls: (file) => file.startsWith('src/tls/') } },
  {
    name: 'components',
    apart: true,
    parts: {
      watcher: (file) => file.startsWith('src/watcher/'),
      webhook: (file) => file.startsWith('src/webhook/'),
      status: (file) => file.startsWith('src/status/'),
      lint: (file) => file === 'src/lint.ts' || file.startsWith('src/lint/'),
    },
  },
  { name: 'serve', parts: { serve: (file) => file === 'src/serve.ts' || file.startsWith('src/serve/') } },
  { name: 'cli', parts: { cli: (file) => file === 'src/cli.ts' } },
];

/** The layer (its rank, bottom 0) and part of a file; a file in no layer is an error, so a new directory must be placed. */
function layerOf(file: string): { rank: number; layer: string; part: string } {
  for (const [rank, layer] of LAYERS.entries()) {
    for (const [part, holds] of Object.entries(layer.parts)) if (holds(file)) return { rank, layer: layer.name, part };
  }
  throw new Error(`${file} is in no layer: place it in LAYERS (test/architecture/imports.test.ts) and in docs/ARCHITECTURE.md`);
}

function layeringViolations(graph: Map<string, string[]>): string[] {
  const violations: string[] = [];
  for (const [file, imports] of graph) {
    for (const imported of imports) {
      const from = layerOf(file);
      const to = layerOf(imported);
      if (to.rank > from.rank) violations.push(`${file} (${from.part}) imports ${imported} (${to.part}): an upward edge`);
      else if (to.rank === from.rank && to.part !== from.part && LAYERS[from.rank]!.apart) violations.push(`${file} (${from.part}) imports ${imported} (${to.part}): components import no other component`);
    }
  }
  return violations;
}

/** Every cycle found by a depth-first search, each as the path that closes it. */
function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const path: string[] = [];
  const visit = (file: string) => {
    if (state.get(file) === 'done') return;
    if (state.get(file) === 'visiting') {
      found.push([...path.slice(path.indexOf(file)), file]);
      return;
    }
    state.set(file, 'visiting');
    path.push(file);
    for (const imported of graph.get(file) ?? []) visit(imported);
    path.pop();
    state.set(file, 'done');
  };
  for (const file of graph.keys()) visit(file);
  return found;
}

const files = sourceFiles();
const graph = importGraph(files, (file) => readFileSync(join(root, file), 'utf8'));

t.test('the graph is read from every source file', async (t) => {
  t.ok(files.includes('src/cli.ts') && files.some((file) => file.startsWith('src/policy/')), `${files.length} files under src/`);
  for (const [file, imports] of graph) {
    for (const imported of imports) t.ok(files.includes(imported), `${file} imports ${imported}, which exists`);
  }
  t.ok(graph.get('src/cli.ts')?.includes('src/serve.ts'), "the CLI's dynamic import of serve is seen");
});

t.test('no import cycle in src/', async (t) => {
  t.strictSame(cycles(graph).map((cycle) => cycle.join(' -> ')), []);
});

t.test('every file is in a layer, and every import points down or stays in its part', async (t) => {
  for (const file of files) t.doesNotThrow(() => layerOf(file), file);
  t.strictSame(layeringViolations(graph), []);
});

t.test('the checks find what they look for', async (t) => {
  const bad = new Map([
    ['src/policy/decide.ts', ['src/logger.ts']],
    ['src/logger.ts', ['src/kube/client.ts']],
    ['src/kube/fence-rules.ts', ['src/watcher/crr.ts', 'src/webhook/owner-events.ts', 'src/tls/store.ts']],
    ['src/tls/secret-store.ts', ['src/status/cluster.ts']],
    ['src/status/cluster.ts', ['src/watcher/kill-mechanism-follower.ts']],
    ['src/watcher/watcher.ts', ['src/serve/composition.ts']],
    ['src/serve.ts', ['src/cli.ts']],
    ['src/cli.ts', ['src/serve.ts']],
  ]);
  t.strictSame(layeringViolations(bad), [
    'src/policy/decide.ts (policy) imports src/logger.ts (foundation): an upward edge',
    'src/logger.ts (foundation) imports src/kube/client.ts (kube): an upward edge',
    'src/kube/fence-rules.ts (kube) imports src/watcher/crr.ts (watcher): an upward edge',
    'src/kube/fence-rules.ts (kube) imports src/webhook/owner-events.ts (webhook): an upward edge',
    'src/tls/secret-store.ts (tls) imports src/status/cluster.ts (status): an upward edge',
    'src/status/cluster.ts (status) imports src/watcher/kill-mechanism-follower.ts (watcher): components import no other component',
    'src/watcher/watcher.ts (watcher) imports src/serve/composition.ts (serve): an upward edge',
    'src/serve.ts (serve) imports src/cli.ts (cli): an upward edge',
  ]);
  t.strictSame(cycles(bad), [['src/serve.ts', 'src/cli.ts', 'src/serve.ts']]);
  t.strictSame(cycles(new Map([['a', ['b']], ['b', []]])), []);
  t.throws(() => layerOf('src/elsewhere/new.ts'), /is in no layer/);
});

/** The admission handlers: each turns an AdmissionRequest into an answer, and none imports another. */
const HANDLERS = ['src/webhook/validating-handler.ts', 'src/webhook/mutating-handlers.ts'];

/** The longest chain of imports between the files of `dir` (A imports B imports C: three floors). */
function deepestChain(graph: Map<string, string[]>, dir: string): string[] {
  const inside = (file: string) => file.startsWith(dir) && !file.slice(dir.length).includes('/');
  const chains = new Map<string, string[]>();
  const chainFrom = (file: string): string[] => {
    const known = chains.get(file);
    if (known) return known;
    chains.set(file, [file]); // a cycle, failed above, ends here
    const below = (graph.get(file) ?? []).filter(inside).map(chainFrom);
    const longest = [file, ...below.reduce((a, b) => (b.length > a.length ? b : a), [])];
    chains.set(file, longest);
    return longest;
  };
  return [...graph.keys()].filter(inside).map(chainFrom).reduce((a, b) => (b.length > a.length ? b : a), []);
}

/** Names that two or more of `entries` ([name, where]) carry, with where. */
function sharedNames(entries: ReadonlyArray<[string, string]>): string[] {
  const where = new Map<string, string[]>();
  for (const [name, place] of entries) where.set(name, [...(where.get(name) ?? []), place]);
  return [...where].filter(([, places]) => places.length > 1).map(([name, places]) => `${name}: ${places.join(', ')}`);
}

/** The types, interfaces, classes and enums each file exports, as [name, file]. */
function exportedTypes(files: readonly string[], read: (file: string) => string): Array<[string, string]> {
  return files.flatMap((file) => {
    const source = ts.createSourceFile(file, read(file), ts.ScriptTarget.Latest);
    return source.statements.flatMap((statement): Array<[string, string]> => {
      const exported = ts.canHaveModifiers(statement) && ts.getModifiers(statement)?.some((modifier) => modifier.kind === ts.SyntaxKind.ExportKeyword);
      const typed = ts.isInterfaceDeclaration(statement) || ts.isTypeAliasDeclaration(statement) || ts.isClassDeclaration(statement) || ts.isEnumDeclaration(statement);
      return exported && typed && statement.name ? [[statement.name.text, file]] : [];
    });
  });
}

t.test('no admission handler imports another', async (t) => {
  for (const handler of HANDLERS) t.ok(files.includes(handler), `${handler} exists`);
  const sideways = HANDLERS.flatMap((handler) => (graph.get(handler) ?? []).filter((imported) => HANDLERS.includes(imported)).map((imported) => `${handler} imports ${imported}`));
  t.strictSame(sideways, []);
});

t.test('the webhook and the watcher are each at most four floors deep', async (t) => {
  for (const dir of ['src/webhook/', 'src/watcher/']) {
    const chain = deepestChain(graph, dir);
    t.ok(chain.length >= 2 && chain.length <= 4, `${dir}: ${chain.length} floors (${chain.join(' -> ')})`);
  }
});

t.test('no two files under src/ share a name', async (t) => {
  t.strictSame(sharedNames(files.map((file) => [file.split('/').at(-1)!, file])), []);
});

t.test('no two exported types share a name', async (t) => {
  const types = exportedTypes(files, (file) => readFileSync(join(root, file), 'utf8'));
  t.ok(types.length > 100, `${types.length} exported types read`);
  t.strictSame(sharedNames(types), []);
});

t.test('the name and depth checks find what they look for', async (t) => {
  const deep = new Map([
    ['src/webhook/a.ts', ['src/webhook/b.ts', 'src/policy/x.ts']],
    ['src/webhook/b.ts', ['src/webhook/c.ts']],
    ['src/webhook/c.ts', ['src/webhook/d.ts']],
    ['src/webhook/d.ts', ['src/webhook/e.ts']],
    ['src/webhook/e.ts', []],
  ]);
  t.strictSame(deepestChain(deep, 'src/webhook/'), ['src/webhook/a.ts', 'src/webhook/b.ts', 'src/webhook/c.ts', 'src/webhook/d.ts', 'src/webhook/e.ts']);
  t.strictSame(sharedNames([['metrics.ts', 'src/watcher/watcher-metrics.ts'], ['metrics.ts', 'src/webhook/admission-metrics.ts'], ['cli.ts', 'src/cli.ts']]), ['metrics.ts: src/watcher/watcher-metrics.ts, src/webhook/admission-metrics.ts']);
  const read = (file: string) => (file === 'a.ts' ? 'export interface Action { x: 1 }\nexport type Step = 1;\ninterface Local {}\n' : 'export class Action {}\nexport const Step = 2;\n');
  t.strictSame(sharedNames(exportedTypes(['a.ts', 'b.ts'], read)), ['Action: a.ts, b.ts']);
});
