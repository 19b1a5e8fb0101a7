// Where a finding's field is in the YAML source: the field itself when it is written, else its
// closest written parent (a restartPolicy left unset points at the pod spec), as lines and
// columns from 1, columns in UTF-16 code units (SARIF's default).
import { isAlias, isMap, isScalar, isSeq, type Document, type LineCounter, type Node } from 'yaml';
import { lastIndexNamed, type FieldStep } from './field-path.ts';

export interface SourceRange {
  line: number;
  column: number;
  endLine: number;
  endColumn: number;
}

export function sourceRange(document: Document.Parsed, root: Node, steps: readonly FieldStep[], lines: LineCounter): SourceRange {
  const resolve = (node: unknown): Node | undefined => {
    const resolved = isAlias(node) ? node.resolve(document) : node;
    return resolved && typeof resolved === 'object' && 'range' in resolved ? (resolved as Node) : undefined;
  };
  let node = root;
  let start = root.range![0];
  let end = root.range![1];
  for (const step of steps) {
    const current = resolve(node);
    let next: Node | undefined;
    let keyStart: number | undefined;
    // `annotations[KEY]` names a map key the way `env[NAME]` names a list item.
    const key = 'key' in step ? step.key : 'name' in step && isMap(current) ? step.name : undefined;
    if (key !== undefined && isMap(current)) {
      const pair = current.items.findLast((item) => isScalar(item.key) && String(item.key.value) === key);
      if (pair && isScalar(pair.key)) {
        keyStart = pair.key.range![0];
        next = resolve(pair.value) ?? pair.key;
      }
    } else if ('index' in step && isSeq(current)) {
      next = resolve(current.items[step.index]);
    } else if ('name' in step && isSeq(current)) {
      const nameOf = (item: unknown) => {
        const map = resolve(item);
        const value = isMap(map) ? map.get('name', true) : undefined;
        return isScalar(value) ? value.value : undefined;
      };
      next = resolve(current.items[lastIndexNamed(current.items, step.name, nameOf)]);
    }
    if (!next?.range) break;
    node = next;
    start = keyStart ?? next.range[0];
    end = next.range[1];
  }
  const from = lines.linePos(start);
  const to = lines.linePos(Math.max(start, end));
  return { line: from.line, column: from.col, endLine: to.line, endColumn: to.col };
}
