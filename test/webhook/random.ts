// A small seeded PRNG (mulberry32) and the mutations of the fuzz test: the same seed gives the
// same cases, so a failure can be replayed with FUZZ_SEED.
import { MARKER_NAMES } from '../../src/policy/index.ts';

export class Random {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let x = this.#state;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  }

  int(max: number): number {
    return Math.floor(this.next() * max);
  }

  chance(probability: number): boolean {
    return this.next() < probability;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
}

const ODD_TEXT = [
  '', ' ', 'true', 'TRUE', 'false', 'yes', '0', 'null', 'Always', 'Never', 'OnFailure', 'CREATE', 'Pod', 'v1',
  'nginx:1.27', 'busybox', 'busybox:latest', 'registry.example.com/quick-exit:1.0', 'Not An Image', 'a'.repeat(300),
  '\u0000', '\ud800', '\udfff', '\u202e\u0644\u0627', '\u200b\ufeff', '😀👨‍👩‍👧', 'e\u0301\u0301\u0301', '\n\r\t', '"\\', '</script>',
  '__proto__', 'constructor', 'toString', 'hasOwnProperty', '~1/~0', 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT',
];

export function randomText(random: Random): string {
  if (random.chance(0.7)) return random.pick(ODD_TEXT);
  return Array.from({ length: random.int(40) }, () => String.fromCharCode(random.int(0x10000))).join('');
}

export function randomValue(random: Random, depth = 0): unknown {
  switch (random.int(depth > 3 ? 5 : 7)) {
    case 0:
      return null;
    case 1:
      return random.chance(0.5);
    case 2:
      return random.pick([0, -1, 1.5, 1e308, -0, Number.MAX_SAFE_INTEGER + 2, 422]);
    case 3:
    case 4:
      return randomText(random);
    case 5:
      return Array.from({ length: random.int(4) }, () => randomValue(random, depth + 1));
    default:
      return Object.fromEntries(Array.from({ length: random.int(4) }, () => [randomText(random), randomValue(random, depth + 1)]));
  }
}

type Path = Array<string | number>;

/** Every path to a value inside `root`, the root itself included. */
function pathsOf(root: unknown): Path[] {
  const paths: Path[] = [[]];
  const pending: Array<[unknown, Path]> = [[root, []]];
  for (let item = pending.pop(); item; item = pending.pop()) {
    const [node, path] = item;
    if (typeof node !== 'object' || node === null) continue;
    for (const [key, child] of Object.entries(node)) {
      const childPath = [...path, Array.isArray(node) ? Number(key) : key];
      paths.push(childPath);
      pending.push([child, childPath]);
    }
  }
  return paths;
}

function parentOf(root: any, path: Path): any {
  return path.slice(0, -1).reduce((node, key) => node[key], root);
}

function nested(depth: number, random: Random): unknown {
  let value: unknown = randomText(random);
  for (let level = 0; level < depth; level++) value = random.chance(0.5) ? [value] : { spec: value };
  return value;
}

/** Changes on the parsed review: each returns the new root (the root itself may be replaced). */
const STRUCTURAL: Record<string, (root: any, random: Random) => unknown> = {
  'wrong type': (root, random) => setAt(root, random.pick(pathsOf(root)), randomValue(random)),
  deletion: (root, random) => {
    const path = random.pick(pathsOf(root));
    if (path.length === 0) return undefined;
    const parent = parentOf(root, path);
    if (Array.isArray(parent)) parent.splice(Number(path.at(-1)), 1);
    else delete parent[path.at(-1)!];
    return root;
  },
  'deep nesting': (root, random) => setAt(root, random.pick(pathsOf(root)), nested(random.chance(0.5) ? 20 + random.int(100) : 1000 + random.int(1000), random)),
  'huge string': (root, random) => setAt(root, random.pick(pathsOf(root)), 'x'.repeat(random.chance(0.8) ? 100_000 : 1_200_000)),
  unicode: (root, random) => setAt(root, random.pick(pathsOf(root)), random.pick(ODD_TEXT.slice(20))),
  'prototype keys': (root, random) => {
    const targets = pathsOf(root).filter((path) => isObject(getAt(root, path)));
    if (targets.length === 0) return root;
    const target = getAt(root, random.pick(targets)) as Record<string, unknown>;
    Object.defineProperty(target, random.pick(['__proto__', 'constructor', 'prototype']), { value: { polluted: true, labels: 'x' }, enumerable: true, writable: true, configurable: true });
    return root;
  },
  'marker env': (root, random) => {
    const containers = root?.request?.object?.spec?.containers ?? root?.request?.object?.spec?.template?.spec?.containers;
    if (Array.isArray(containers) && containers.length > 0) {
      const container = random.pick(containers);
      if (isObject(container)) {
        const env = Array.isArray(container.env) ? container.env : (container.env = []);
        env.push({ name: random.pick(MARKER_NAMES), ...(random.chance(0.8) ? { value: randomText(random) } : { valueFrom: randomValue(random) }) });
      }
    }
    return root;
  },
};

/** Changes on the JSON text. */
const TEXTUAL: Record<string, (text: string, random: Random) => string> = {
  'duplicate keys': (text, random) => {
    const at = text.indexOf('{', random.int(text.length));
    if (at < 0) return text;
    const key = random.pick(['uid', 'operation', 'kind', 'object', 'request', 'apiVersion', 'labels', 'metadata']);
    return `${text.slice(0, at + 1)}${JSON.stringify(key)}:${JSON.stringify(randomValue(random))},${text.slice(at + 1)}`;
  },
  truncation: (text, random) => text.slice(0, random.int(text.length)),
  'byte noise': (text, random) => {
    const chars = [...text];
    for (let n = 1 + random.int(5); n > 0; n--) chars[random.int(chars.length)] = random.pick(['"', '{', '}', '[', ']', ',', ':', '\\', '\u0000', 'é', ' ']);
    return chars.join('');
  },
  'lone surrogate escape': (text, random) => {
    const at = text.indexOf('"', random.int(text.length));
    return at < 0 ? text : `${text.slice(0, at + 1)}\\ud83d${text.slice(at + 1)}`;
  },
};

export interface FuzzCase {
  body: string;
  contentType: string | undefined;
  /** What was done, for the failure report. */
  mutations: string[];
}

/** A fixture (as parsed JSON, fresh) mutated 1 to 4 times, or now and then a random value. */
export function fuzzCase(random: Random, fixture: unknown): FuzzCase {
  const mutations: string[] = [];
  let root: unknown = fixture;
  if (random.chance(0.03)) {
    root = randomValue(random);
    mutations.push('random value');
  }
  for (let n = 1 + random.int(3); n > 0; n--) {
    const name = random.pick(Object.keys(STRUCTURAL));
    mutations.push(name);
    root = STRUCTURAL[name]!(root, random);
  }
  let body = JSON.stringify(root) ?? '';
  if (random.chance(0.3)) {
    const name = random.pick(Object.keys(TEXTUAL));
    mutations.push(name);
    body = TEXTUAL[name]!(body, random);
  }
  const contentType = random.chance(0.95) ? random.pick(['application/json', 'application/json; charset=utf-8']) : random.pick([undefined, 'text/plain', 'application/x-www-form-urlencoded', 'application/yaml']);
  if (contentType !== 'application/json' && contentType !== 'application/json; charset=utf-8') mutations.push(`content type ${contentType}`);
  return { body, contentType, mutations };
}

function isObject(value: unknown): value is Record<string, any> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function getAt(root: unknown, path: Path): unknown {
  return path.reduce<any>((node, key) => node?.[key], root);
}

function setAt(root: unknown, path: Path, value: unknown): unknown {
  if (path.length === 0) return value;
  parentOf(root, path)[path.at(-1)!] = value;
  return root;
}
