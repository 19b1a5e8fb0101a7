// Writes the generated parts of the chart's README (charts/sidecar-terminator/README.md): the table
// of values, from values.schema.json (types, descriptions) and values.yaml (defaults, and the
// comment above each key), and the images a release publishes, from scripts/build-images.ts.
//   node scripts/chart-readme.ts [--write | --check]
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isMap, isNode, isScalar, parseDocument, stringify, type Pair, type YAMLMap } from 'yaml';
import { PUBLISHED } from './build-images.ts';
import { generatorCli, withParts, type GeneratedPart } from './generated-parts.ts';
import { SERVE_FLAGS } from '../src/config.ts';
import { publishedImage } from '../src/policy/names.ts';
import { CHART_SETTINGS } from '../test/support/config-reference.ts';

const root = resolve(import.meta.dirname, '..');
export const CHART_DIR = 'charts/sidecar-terminator';
export const README = `${CHART_DIR}/README.md`;
const SCRIPT = 'scripts/chart-readme.ts';

/** A node of the JSON Schema, as far as the table reads it. */
export interface SchemaNode {
  type?: string | string[];
  description?: string;
  enum?: unknown[];
  const?: unknown;
  $ref?: string;
  oneOf?: SchemaNode[];
  anyOf?: SchemaNode[];
  items?: SchemaNode;
  properties?: Record<string, SchemaNode>;
  additionalProperties?: boolean | SchemaNode;
  definitions?: Record<string, SchemaNode>;
}

export interface ValueRow {
  path: string;
  type: string;
  /** The `serve` flag the value becomes (test/support/config-reference.ts), if any. */
  flag?: string;
  /** As values.yaml sets it, in YAML's flow style; undefined: not in values.yaml, or a group of values. */
  default?: string;
  description: string;
}

/** The flag each chart value sets, by the value's path. */
const FLAG_OF = new Map(
  Object.entries(CHART_SETTINGS).flatMap(([key, setting]) => (setting.kind === 'value' ? [[setting.path, `--${SERVE_FLAGS[key as keyof typeof SERVE_FLAGS].name}`] as const] : [])),
);

/**
 * One row per value a user sets: the leaves, the maps whose keys are the user's, and the groups of
 * values that values.yaml explains in a comment of their own.
 */
export function valueRows(schema: SchemaNode, valuesYaml: string): ValueRow[] {
  const doc = parseDocument(valuesYaml);
  const resolve = (node: SchemaNode): SchemaNode => (node.$ref ? (schema.definitions?.[node.$ref.replace('#/definitions/', '')] ?? {}) : node);
  const rows: ValueRow[] = [];
  const walk = (node: SchemaNode, map: YAMLMap | undefined, prefix: string) => {
    const pairs: Array<Pair<unknown, unknown>> = map?.items ?? [];
    const keys = [...new Set([...pairs.map((pair) => keyOf(pair)), ...Object.keys(node.properties ?? {})])];
    for (const key of keys) {
      if (key === 'global') continue; // Helm's, for parent charts
      const at = pairs.findIndex((pair) => keyOf(pair) === key);
      const pair = pairs[at];
      const own = node.properties?.[key] ?? {};
      const resolved = resolve(own);
      // In YAML's model the comment above a map's first key is the map's.
      const comment = prose((at === 0 ? map?.commentBefore : (pair?.key as { commentBefore?: string } | undefined)?.commentBefore) ?? '');
      // values.yaml's comment says most; the schema's description stands in where there is none.
      const description = [comment || own.description, own.$ref ? resolved.description : undefined].filter((text): text is string => !!text).join(' ');
      const path = `${prefix}${key}`;
      const flag = FLAG_OF.get(path);
      if (resolved.properties && (pair === undefined || isMap(pair.value))) {
        if (comment) rows.push({ path, type: 'group', description });
        walk(resolved, pair?.value as YAMLMap | undefined, `${path}.`);
      } else {
        rows.push({ path, type: typeText(resolved, resolve), ...(flag ? { flag } : {}), ...(pair ? { default: flow(pair.value) } : {}), description });
      }
    }
  };
  walk(schema, isMap(doc.contents) ? doc.contents : undefined, '');
  return rows;
}

function keyOf(pair: Pair<unknown, unknown>): string {
  return isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
}

/** A comment as one line of prose. */
function prose(text: string): string {
  return text.split('\n').map((line) => line.trim()).join(' ').trim();
}

function typeText(node: SchemaNode, resolve: (node: SchemaNode) => SchemaNode): string {
  const of = (inner: SchemaNode) => typeText(resolve(inner), resolve);
  if (node.enum) return node.enum.map((value) => `\`${String(value)}\``).join(', ');
  if (node.const !== undefined) return `\`${JSON.stringify(node.const)}\``;
  const alternatives = node.oneOf ?? node.anyOf;
  if (alternatives) return [...new Set(alternatives.map(of))].join(' or ');
  const types = Array.isArray(node.type) ? node.type : node.type ? [node.type] : [];
  return types
    .map((type) => {
      if (type === 'array') return node.items ? `array of ${of({ ...node.items, enum: undefined })}` : 'array';
      if (type === 'object' && node.additionalProperties && !node.properties) return 'map';
      return type;
    })
    .join(' or ') || 'any';
}

/** A default as values.yaml writes it, on one line: YAML's flow style. */
function flow(value: unknown): string {
  return stringify(isNode(value) ? value.toJSON() : value, { collectionStyle: 'flow', lineWidth: 0 }).trim();
}

function cell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('<', '&lt;');
}

export function valuesTable(schema: SchemaNode, valuesYaml: string): string {
  const code = (text: string | undefined) => (text === undefined ? '' : `\`${cell(text)}\``);
  const rows = valueRows(schema, valuesYaml).map((row) => `| ${code(row.path)} | ${cell(row.type)} | ${code(row.default)} | ${code(row.flag)} | ${cell(row.description)} |`);
  return ['| value | type | default | flag | what it does |', '|---|---|---|---|---|', ...rows].join('\n');
}

/** The published images of a release, as a list of the references of the chart's appVersion. */
export function imagesList(version: string): string {
  return PUBLISHED.map((name) => `- \`${publishedImage(name, version)}\``).join('\n');
}

const chartYaml = () => parseDocument(readFileSync(join(root, CHART_DIR, 'Chart.yaml'), 'utf8')).toJS() as { appVersion: string; version: string };

export const README_PARTS: readonly GeneratedPart[] = [
  {
    begin: `<!-- values: generated from values.schema.json and values.yaml by \`node ${SCRIPT} --write\`; edit those, not this table -->`,
    end: '<!-- end of values -->',
    make: () => valuesTable(JSON.parse(readFileSync(join(root, CHART_DIR, 'values.schema.json'), 'utf8')) as SchemaNode, readFileSync(join(root, CHART_DIR, 'values.yaml'), 'utf8')),
  },
  {
    begin: `<!-- images: generated from scripts/build-images.ts by \`node ${SCRIPT} --write\` -->`,
    end: '<!-- end of images -->',
    make: () => imagesList(chartYaml().appVersion),
  },
];

/** The README as the script writes it. */
export function chartReadme(current: string): string {
  return withParts(current, README_PARTS, README);
}

if (import.meta.main) process.exitCode = generatorCli(root, README, README_PARTS, SCRIPT);
