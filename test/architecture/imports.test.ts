// The import graph of src/ (docs/ARCHITECTURE.md, "Layers"): no cycle, and dependencies point
// one way: src/policy at the bottom imports nothing outside itself; the edges (webhook, watcher,
// kube, tls, lint, ...) import policy and each other; serve composes the edges; cli is on top
// and nothing imports it. Type-only and dynamic imports count like the others.
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

/** The layer of a file: a file may import its own layer or a lower one, never a higher one. */
function layerOf(file: string): { rank: number; name: string } {
  if (file.startsWith('src/policy/')) return { rank: 0, name: 'policy' };
  if (file === 'src/cli.ts') return { rank: 3, name: 'cli' };
  if (file === 'src/serve.ts' || file.startsWith('src/serve/')) return { rank: 2, name: 'serve' };
  return { rank: 1, name: 'edge' };
}

function layeringViolations(graph: Map<string, string[]>): string[] {
  const violations: string[] = [];
  for (const [file, imports] of graph) {
    for (const imported of imports) {
      const from = layerOf(file);
      const to = layerOf(imported);
      if (to.rank > from.rank) violations.push(`${file} (${from.name}) imports ${imported} (${to.name})`);
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

t.test('layers: policy imports only policy, nothing imports cli, edges do not import serve', async (t) => {
  t.strictSame(layeringViolations(graph), []);
});

t.test('the checks find what they look for', async (t) => {
  const bad = new Map([
    ['src/policy/decide.ts', ['src/logger.ts']],
    ['src/logger.ts', ['src/serve.ts']],
    ['src/serve.ts', ['src/cli.ts']],
    ['src/cli.ts', ['src/serve.ts']],
  ]);
  t.strictSame(layeringViolations(bad), [
    'src/policy/decide.ts (policy) imports src/logger.ts (edge)',
    'src/logger.ts (edge) imports src/serve.ts (serve)',
    'src/serve.ts (serve) imports src/cli.ts (cli)',
  ]);
  t.strictSame(cycles(bad), [['src/serve.ts', 'src/cli.ts', 'src/serve.ts']]);
  t.strictSame(cycles(new Map([['a', ['b']], ['b', []]])), []);
});
