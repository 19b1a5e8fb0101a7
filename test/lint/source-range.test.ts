// Where src/lint/source-range.ts places a field in YAML, called directly on parsed documents: the
// field from its key to the end of its value, the closest written parent of a field left unset,
// named list items and map keys, aliases, and columns in UTF-16 code units.
import t from 'tap';
import { LineCounter, parseDocument, type Node } from 'yaml';
import { parseFieldPath } from '../../src/lint/field-path.ts';
import { sourceRange } from '../../src/lint/source-range.ts';

/** The range of `path` in `text`, as lint computes it for the document's root. */
function rangeOf(text: string, path: string) {
  const lines = new LineCounter();
  const document = parseDocument(text, { lineCounter: lines, merge: true });
  return sourceRange(document, document.contents as Node, parseFieldPath(path), lines);
}

const pod = `apiVersion: v1
kind: Pod
metadata:
  annotations:
    sidecar-terminator.io/sidecars: proxy
spec:
  containers:
  - name: main
    image: busybox
  - name: proxy
    env:
    - name: MARKER
      value: "first"
    - name: MARKER
      value: "yes"
`;

t.test('a written field: from the start of its key to the end of its value', async (t) => {
  t.same(rangeOf(pod, 'spec.containers[0].image'), { line: 9, column: 5, endLine: 9, endColumn: 19 });
  t.same(rangeOf(pod, 'kind'), { line: 2, column: 1, endLine: 2, endColumn: 10 });
});

t.test('a list item by position starts at the item', async (t) => {
  t.match(rangeOf(pod, 'spec.containers[1]'), { line: 10, column: 5 });
});

t.test('env[NAME]: the last item of that name, the definition that takes effect', async (t) => {
  t.match(rangeOf(pod, 'spec.containers[1].env[MARKER].value'), { line: 15, column: 7, endLine: 15, endColumn: 19 });
});

t.test('annotations[KEY]: a map key named as a list item is', async (t) => {
  t.same(rangeOf(pod, 'metadata.annotations[sidecar-terminator.io/sidecars]'), { line: 5, column: 5, endLine: 5, endColumn: 42 });
});

t.test('a field not written: its closest written parent, whole', async (t) => {
  const spec = rangeOf(pod, 'spec');
  t.same(rangeOf(pod, 'spec.restartPolicy'), spec, 'an unset restartPolicy points at the pod spec');
  t.equal(spec.line, 6);
  t.same(rangeOf(pod, 'spec.containers[5].image'), rangeOf(pod, 'spec.containers'), 'a position past the end');
  t.same(rangeOf(pod, 'spec.containers[1].env[ABSENT]'), rangeOf(pod, 'spec.containers[1].env'));
  t.same(rangeOf('a: 1\n', 'spec'), { line: 1, column: 1, endLine: 2, endColumn: 1 }, 'nothing written at all: the whole document');
});

t.test('an alias is followed to the node it names', async (t) => {
  const text = 'defaults: &env\n  value: "x"\nspec:\n  env: *env\n';
  t.same(rangeOf(text, 'spec.env.value'), { line: 2, column: 3, endLine: 2, endColumn: 13 }, 'the anchored node, where the value is written');
});

t.test('columns count UTF-16 code units, as SARIF does', async (t) => {
  // The emoji before the key is two code units (one code point).
  t.same(rangeOf('metadata: {name: "😀", labels: {a: b}}\n', 'metadata.labels'), { line: 1, column: 24, endLine: 1, endColumn: 38 });
});
