// Kubernetes field paths as findings write them (`spec.containers[1].env[NAME].valueFrom`):
// read into steps, and followed through an object to name the container a finding is about.
import { isRecord } from '../policy/index.ts';

export type FieldStep =
  /** A map key. */
  | { key: string }
  /** A list position. */
  | { index: number }
  /** The list item whose `name` is this (env variables, written `env[NAME]`). */
  | { name: string };

export function parseFieldPath(path: string): FieldStep[] {
  const steps: FieldStep[] = [];
  for (const [, key, bracket] of path.matchAll(/([^.[\]]+)|\[([^\]]*)\]/g)) {
    if (key !== undefined) steps.push({ key });
    else if (/^\d+$/.test(bracket!)) steps.push({ index: Number(bracket) });
    else steps.push({ name: bracket! });
  }
  return steps;
}

/** The item a `[NAME]` step picks: the last one of that name, the definition that takes effect. */
export function lastIndexNamed(items: readonly unknown[], name: string, nameOf: (item: unknown) => unknown): number {
  return items.findLastIndex((item) => nameOf(item) === name);
}

/** The name of the container (or init container) the path leads into, if any. */
export function containerOf(object: unknown, steps: readonly FieldStep[]): string | undefined {
  let node: unknown = object;
  for (const [position, step] of steps.entries()) {
    const previous = steps[position - 1];
    if ('key' in step) node = isRecord(node) ? node[step.key] : undefined;
    else if ('index' in step) node = Array.isArray(node) ? node[step.index] : undefined;
    else node = Array.isArray(node) ? node[lastIndexNamed(node, step.name, (item) => (isRecord(item) ? item.name : undefined))] : undefined;
    const inContainerList = previous !== undefined && 'key' in previous && /^(initC|ephemeralC|c)ontainers$/.test(previous.key);
    if (inContainerList && isRecord(node) && typeof node.name === 'string') return node.name;
  }
  return undefined;
}
