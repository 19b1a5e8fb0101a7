// The JSON Patch diff of src/webhook/json-patch.ts on its own: the operations it writes for
// nested additions, removals and replacements, the root, arrays, and keys that need escaping;
// each patch applied as the API server would gives the mutated document.
import t from 'tap';
import { diff, escapePointerSegment } from '../../src/webhook/json-patch.ts';
import { applyPatch } from './support.ts';

t.test('a changed root is one replace at the empty path', async (t) => {
  t.same(diff(1, 2), [{ op: 'replace', path: '', value: 2 }]);
  t.same(diff({ a: 1 }, [1]), [{ op: 'replace', path: '', value: [1] }], 'an object become an array');
  t.same(diff('x', 'x'), [], 'an equal scalar: nothing');
});

t.test('nested changes are written at their own depth, removals and changes before the additions of the same object', async (t) => {
  const original = { metadata: { labels: { keep: '1', drop: '2' } }, spec: { restartPolicy: 'Never' } };
  const mutated = { spec: { restartPolicy: 'OnFailure' }, metadata: { labels: { keep: '1', added: '3' } }, status: {} };
  const operations = diff(original, mutated);
  t.same(operations, [
    { op: 'remove', path: '/metadata/labels/drop' },
    { op: 'add', path: '/metadata/labels/added', value: '3' },
    { op: 'replace', path: '/spec/restartPolicy', value: 'OnFailure' },
    { op: 'add', path: '/status', value: {} },
  ]);
  t.same(applyPatch(original, operations), mutated);
});

t.test('an added subtree is one add carrying it whole', async (t) => {
  const value = { labels: { a: '1' }, annotations: { b: '2' } };
  t.same(diff({}, { metadata: value }), [{ op: 'add', path: '/metadata', value }]);
  t.same(diff({ metadata: value }, {}), [{ op: 'remove', path: '/metadata' }], 'and a removed one one remove');
});

t.test('arrays: equal contents are no change, any difference replaces the array whole', async (t) => {
  const containers = [{ name: 'main', env: [{ name: 'A', value: '1' }] }];
  t.same(diff({ containers }, { containers: structuredClone(containers) }), [], 'a copy of the same array');
  const changed = [{ name: 'main', env: [{ name: 'A', value: '2' }] }];
  t.same(diff({ containers }, { containers: changed }), [{ op: 'replace', path: '/containers', value: changed }], 'a change deep inside an item');
  t.same(diff({ containers: [] }, { containers: {} }), [{ op: 'replace', path: '/containers', value: {} }], 'an array become an object');
  t.same(diff({ a: null }, { a: {} }), [{ op: 'replace', path: '/a', value: {} }], 'null is no object to descend into');
});

t.test('keys with ~ and / are escaped in every kind of operation, and the patch applies', async (t) => {
  const original = { labels: { 'example.com/gone': 'x', 'a~b': 'old' } };
  const mutated = { labels: { 'a~b': 'new', 'c/~d': 'added' } };
  const operations = diff(original, mutated);
  t.same(operations, [
    { op: 'remove', path: '/labels/example.com~1gone' },
    { op: 'replace', path: '/labels/a~0b', value: 'new' },
    { op: 'add', path: '/labels/c~1~0d', value: 'added' },
  ]);
  t.same(applyPatch(original, operations), mutated);
});

t.test('escapePointerSegment leaves plain keys alone and escapes what looks like an escape', async (t) => {
  t.equal(escapePointerSegment('sidecar-terminator.io'), 'sidecar-terminator.io');
  t.equal(escapePointerSegment('~1'), '~01', 'a literal ~1 does not read back as /');
  t.equal(escapePointerSegment('//'), '~1~1');
  t.equal(escapePointerSegment(''), '');
});

t.test('a key set to undefined is absent, as in the JSON sent: removed, never replaced or added without a value', async (t) => {
  t.same(diff({ a: 1, b: 2 }, { a: undefined, b: 2 }), [{ op: 'remove', path: '/a' }], 'a value set to undefined: removed');
  t.same(diff({ a: 1 }, { a: 1, b: undefined }), [], 'a new key set to undefined: nothing added');
  t.same(diff({ a: undefined }, { a: 1 }), [{ op: 'add', path: '/a', value: 1 }], 'a key that was undefined: added');
  t.same(diff({ a: undefined }, {}), [], 'undefined before and gone after: nothing');
});
