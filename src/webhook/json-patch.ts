// A small, deterministic JSON Patch (RFC 6902) diff: the mutating webhook changes a deep copy
// of the object and sends the difference, so the patch always matches the intended result.
import { isDeepStrictEqual } from 'node:util';
import { isRecord } from '../policy/index.ts';

export type JsonPatchOperation =
  | { op: 'add'; path: string; value: unknown }
  | { op: 'remove'; path: string }
  | { op: 'replace'; path: string; value: unknown };

/** A JSON Pointer (RFC 6901) segment: `~` and `/` are escaped, so `a/b` is `a~1b`. */
export function escapePointerSegment(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

/**
 * The operations that turn `original` into `mutated`. Objects are compared key by key
 * (removals and changes in the original's key order, then additions in the mutated order);
 * anything else that differs, arrays included, is replaced whole.
 */
export function diff(original: unknown, mutated: unknown, path = ''): JsonPatchOperation[] {
  // The same value (a subtree the mutation shared instead of copying): nothing to compare.
  if (original === mutated) return [];
  if (!isRecord(original) || !isRecord(mutated)) {
    return isDeepStrictEqual(original, mutated) ? [] : [{ op: 'replace', path, value: mutated }];
  }
  const operations: JsonPatchOperation[] = [];
  const pathOf = (key: string) => `${path}/${escapePointerSegment(key)}`;
  // A key set to undefined is absent, as in the JSON the patch is sent as.
  const has = (object: Record<string, unknown>, key: string) => Object.hasOwn(object, key) && object[key] !== undefined;
  for (const key of Object.keys(original)) {
    if (!has(original, key)) continue;
    if (has(mutated, key)) operations.push(...diff(original[key], mutated[key], pathOf(key)));
    else operations.push({ op: 'remove', path: pathOf(key) });
  }
  for (const key of Object.keys(mutated)) {
    if (has(mutated, key) && !has(original, key)) operations.push({ op: 'add', path: pathOf(key), value: mutated[key] });
  }
  return operations;
}
