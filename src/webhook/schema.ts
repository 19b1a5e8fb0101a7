// What the webhook accepts as a request body: JSON, not absurdly deep, shaped as an
// admission.k8s.io/v1 AdmissionReview whose object has the types Kubernetes gives the fields
// the policy reads. Failures become 400 messages that name the field.
import { Ajv, type ErrorObject, type Options as AjvOptions } from 'ajv';
import { clip } from '../policy/index.ts';
import { ADMISSION_API_VERSION, OPERATIONS } from './admission.ts';

/**
 * ajv options: validation only, never coercing types, filling in defaults or stripping
 * properties, which would change the object being admitted. `verbose` keeps the offending value
 * in each error, for the message.
 */
export const AJV_OPTIONS: AjvOptions = { coerceTypes: false, useDefaults: false, removeAdditional: false, allErrors: false, verbose: true };

const gvk = {
  type: 'object',
  required: ['group', 'version', 'kind'],
  properties: { group: { type: 'string' }, version: { type: 'string' }, kind: { type: 'string' } },
} as const;

// The fields of an object the policy reads, with their Kubernetes types (null is read as absent).
// The API server sends nothing else; another caller gets a 400 naming the field instead of an
// answer built from, say, a number where a container name belongs.
const aString = { type: ['string', 'null'] } as const;
const stringMap = { type: ['object', 'null'], additionalProperties: aString } as const;
const list = <T extends object>(items: T) => ({ type: ['array', 'null'], items }) as const;
const container = {
  type: 'object',
  properties: {
    name: aString,
    image: aString,
    command: list(aString),
    env: list({ type: 'object', properties: { name: aString, value: aString, valueFrom: { type: ['object', 'null'] } } }),
    restartPolicy: aString,
  },
} as const;
const metadata = {
  type: ['object', 'null'],
  properties: {
    name: aString,
    generateName: aString,
    namespace: aString,
    labels: stringMap,
    annotations: stringMap,
    ownerReferences: list({ type: 'object', properties: { apiVersion: aString, kind: aString, name: aString, uid: aString, controller: { type: ['boolean', 'null'] } } }),
  },
} as const;
const podSpecFields = {
  containers: list(container),
  initContainers: list(container),
  restartPolicy: aString,
  nodeName: aString,
  nodeSelector: stringMap,
  tolerations: list({ type: 'object', properties: { key: aString, operator: aString, value: aString } }),
} as const;
const podTemplate = { type: ['object', 'null'], properties: { metadata, spec: { type: ['object', 'null'], properties: podSpecFields } } } as const;
/** A Pod (metadata, spec), a workload (spec.template), a CronJob (spec.jobTemplate.spec.template) or a PodTemplate (template). */
const admittedObject = {
  type: ['object', 'null'],
  properties: {
    metadata,
    spec: { type: ['object', 'null'], properties: { ...podSpecFields, template: podTemplate, jobTemplate: { type: ['object', 'null'], properties: { metadata, spec: { type: ['object', 'null'], properties: { template: podTemplate } } } } } },
    template: podTemplate,
  },
} as const;

/** The envelope, and the types of the fields of the object the policy reads. */
export const admissionReviewSchema = {
  type: 'object',
  required: ['apiVersion', 'kind', 'request'],
  properties: {
    apiVersion: { const: ADMISSION_API_VERSION },
    kind: { const: 'AdmissionReview' },
    request: {
      type: 'object',
      required: ['uid', 'kind', 'operation'],
      properties: {
        uid: { type: 'string' },
        kind: gvk,
        subResource: { type: 'string' },
        name: { type: 'string' },
        namespace: { type: 'string' },
        operation: { enum: OPERATIONS },
        object: admittedObject,
        oldObject: admittedObject,
        dryRun: { type: 'boolean' },
      },
      if: { properties: { operation: { enum: ['CREATE', 'UPDATE'] } } },
      then: { required: ['object'], properties: { object: { type: 'object' } } },
    },
  },
} as const;

/** Kubernetes objects nest a few dozen levels at most; deeper bodies would only exhaust the stack. */
export const MAX_BODY_DEPTH = 100;

/**
 * Objects and arrays in one body. JSON.parse gives each about 64 bytes of heap, so a body of
 * nothing but `{},` costs twenty times its size: this bounds what parsing an 8 MiB body can
 * take. A pod at the API server's 3 MiB limit with nothing but one-entry env variables has
 * about 250,000.
 */
export const MAX_BODY_COLLECTIONS = 500_000;

export class BodyError extends Error {
  readonly statusCode: 400 | 413;

  constructor(message: string, statusCode: 400 | 413 = 400) {
    super(message);
    this.statusCode = statusCode;
  }
}

/**
 * Bodies at least this long are scanned before JSON.parse; shorter ones are parsed first and
 * their depth measured on what was parsed. Below it no body can reach MAX_BODY_COLLECTIONS (each
 * object or array takes two characters at least), JSON.parse takes well under a millisecond and
 * builds a few MiB at most, and V8 parses any nesting without recursion; walking what was parsed
 * costs a pod of five containers 13 us against the scan's 31 (JSON.parse: 103), and admission is
 * mostly such pods. Large bodies, judged in the worker, are refused before they are built.
 */
export const SCAN_FROM_LENGTH = 64 * 1024;

const DEPTH_ERROR = `request body nests deeper than ${MAX_BODY_DEPTH} levels`;

/** JSON.parse, with what it builds bounded (see SCAN_FROM_LENGTH); messages never quote the body (it may hold secrets). */
export function parseJsonBody(text: string): unknown {
  const scanned = text.length >= SCAN_FROM_LENGTH;
  if (scanned) {
    const { depth, collections } = scanJson(text);
    if (depth > MAX_BODY_DEPTH) throw new BodyError(DEPTH_ERROR);
    if (collections > MAX_BODY_COLLECTIONS) {
      throw new BodyError(`request body holds more than ${MAX_BODY_COLLECTIONS} objects and arrays (${collections}); no pod the API server accepts has that many`, 413);
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new BodyError(text.trim() === '' ? 'request body is empty: expected an admission.k8s.io/v1 AdmissionReview' : 'request body is not valid JSON');
  }
  if (!scanned && nestsDeeper(parsed, MAX_BODY_DEPTH)) throw new BodyError(DEPTH_ERROR);
  return parsed;
}

/** Whether `value` holds objects and arrays nested deeper than `levels`: it looks no deeper than that, and allocates nothing. */
function nestsDeeper(value: unknown, levels: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (levels === 0) return true;
  if (Array.isArray(value)) {
    for (const item of value) if (nestsDeeper(item, levels - 1)) return true;
    return false;
  }
  // JSON.parse's objects: own keys only, a "__proto__" key included (an own property there).
  for (const key in value) if (nestsDeeper((value as Record<string, unknown>)[key], levels - 1)) return true;
  return false;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const [OPEN_OBJECT, CLOSE_OBJECT, OPEN_ARRAY, CLOSE_ARRAY] = [0x7b, 0x7d, 0x5b, 0x5d];

/**
 * The deepest nesting and the number of objects and arrays of a JSON text, read outside its
 * strings: linear, and nothing allocated, whatever the text (valid JSON or not; JSON.parse judges
 * that next). Most of a pod's text is inside strings, which are skipped with indexOf to the next
 * quote not escaped by an odd run of backslashes (each backslash is counted for one quote only):
 * read character by character, the 28 KiB pod of a Job took half as long to scan as to parse, this
 * way a quarter (bench/README.md, section 1).
 */
function scanJson(text: string): { depth: number; collections: number } {
  let depth = 0;
  let deepest = 0;
  let collections = 0;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code === QUOTE) {
      index = closingQuote(text, index);
      if (index === -1) break;
    } else if (code === OPEN_OBJECT || code === OPEN_ARRAY) {
      collections++;
      if (++depth > deepest) deepest = depth;
    } else if (code === CLOSE_OBJECT || code === CLOSE_ARRAY) {
      depth--;
    }
  }
  return { depth: deepest, collections };
}

/** The index of the quote that closes the string opened at `open`, or -1 when none does. */
function closingQuote(text: string, open: number): number {
  let index = open;
  for (;;) {
    index = text.indexOf('"', index + 1);
    if (index === -1) return -1;
    let backslashes = 0;
    while (text.charCodeAt(index - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return index;
  }
}

const validateReview = new Ajv(AJV_OPTIONS).compile(admissionReviewSchema);

/** What is wrong with a parsed body, in the words of describeSchemaError, or undefined when it is a well-formed AdmissionReview. */
export function checkReview(body: unknown): string | undefined {
  return validateReview(body) ? undefined : describeSchemaError(validateReview.errors);
}

/** Each segment of a field path, and each value, is cut at this many characters in a 400's message: they come from the body. */
const MAX_QUOTED_CHARACTERS = 64;

/** A JSON Pointer as a Kubernetes field path: `/request/object/spec/containers/1/name` is `request.object.spec.containers[1].name`. */
function fieldPath(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((raw) => raw.replaceAll('~1', '/').replaceAll('~0', '~'))
    .map((segment, index) => {
      const cut = clip(segment, MAX_QUOTED_CHARACTERS);
      return /^\d+$/.test(segment) || !/^[A-Za-z_][\w-]*$/.test(segment) ? `[${cut}]` : index === 0 ? cut : `.${cut}`;
    })
    .join('');
}

/** The first schema violation in the words of a Kubernetes field error, e.g. `request.uid: Required value`. */
export function describeSchemaError(errors: readonly ErrorObject[] | null | undefined): string {
  const error = errors?.[0];
  if (!error) return 'malformed AdmissionReview';
  const path = fieldPath(error.instancePath);
  const field = (child?: string) => [path, child].filter(Boolean).join('.') || 'body';
  const quoted = (value: unknown) => clip(JSON.stringify(value) ?? String(value), MAX_QUOTED_CHARACTERS);
  const params = error.params as Record<string, unknown>;
  let text: string;
  switch (error.keyword) {
    case 'required':
      text = `${field(String(params.missingProperty))}: Required value`;
      break;
    case 'const':
      text = `${field()}: Unsupported value: ${quoted(error.data)}: supported value: ${quoted(params.allowedValue)}`;
      break;
    case 'enum':
      text = `${field()}: Unsupported value: ${quoted(error.data)}: supported values: ${(params.allowedValues as unknown[]).map(quoted).join(', ')}`;
      break;
    case 'type':
      text = `${field()}: Invalid value: must be ${String(params.type).replace(',', ' or ')}, not ${typeName(error.data)}`;
      break;
    default:
      text = `${field()}: ${error.message ?? 'invalid'}`;
  }
  return `malformed AdmissionReview: ${text}`;
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  return Array.isArray(value) ? 'array' : typeof value;
}
