// What the webhook accepts as a request body: JSON, not absurdly deep, shaped as an
// admission.k8s.io/v1 AdmissionReview. Failures become 400 messages that name the field.
import type { ErrorObject, Options as AjvOptions } from 'ajv';
import { ADMISSION_API_VERSION, OPERATIONS } from './admission.ts';

/**
 * ajv options for the route schemas: validation only. Fastify's defaults coerce types, fill
 * in defaults and strip unknown properties, which would change the object being admitted.
 * `verbose` keeps the offending value in each error, for the message.
 */
export const AJV_OPTIONS: AjvOptions = { coerceTypes: false, useDefaults: false, removeAdditional: false, allErrors: false, verbose: true };

const gvk = {
  type: 'object',
  required: ['group', 'version', 'kind'],
  properties: { group: { type: 'string' }, version: { type: 'string' }, kind: { type: 'string' } },
} as const;

/** The envelope only: the object inside is judged by the policy, whose readers accept anything. */
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
        object: { type: ['object', 'null'] },
        oldObject: { type: ['object', 'null'] },
        dryRun: { type: 'boolean' },
      },
      if: { properties: { operation: { enum: ['CREATE', 'UPDATE'] } } },
      then: { required: ['object'], properties: { object: { type: 'object' } } },
    },
  },
} as const;

/** Kubernetes objects nest a few dozen levels at most; deeper bodies would only exhaust the stack. */
export const MAX_BODY_DEPTH = 100;

export class BodyError extends Error {
  readonly statusCode = 400;
}

/** JSON.parse, with messages that never quote the body (it may hold secrets). */
export function parseJsonBody(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new BodyError(text.trim() === '' ? 'request body is empty: expected an admission.k8s.io/v1 AdmissionReview' : 'request body is not valid JSON');
  }
  if (depthExceeds(value, MAX_BODY_DEPTH)) throw new BodyError(`request body nests deeper than ${MAX_BODY_DEPTH} levels`);
  return value;
}

/**
 * Recursive, but never deeper than `limit` + 1 calls: it stops as soon as the limit is passed, so
 * a hostile depth cannot overflow the stack. No allocation per value (the old iterative walk
 * pushed a [node, depth] pair and an Object.values array for every value of the body).
 */
function depthExceeds(node: unknown, limit: number, depth = 1): boolean {
  if (typeof node !== 'object' || node === null) return false;
  if (depth > limit) return true;
  if (Array.isArray(node)) {
    for (const child of node) if (depthExceeds(child, limit, depth + 1)) return true;
  } else {
    for (const key in node) if (depthExceeds((node as Record<string, unknown>)[key], limit, depth + 1)) return true;
  }
  return false;
}

/** The first schema violation in the words of a Kubernetes field error, e.g. `request.uid: Required value`. */
export function describeSchemaError(errors: readonly ErrorObject[] | null | undefined): string {
  const error = errors?.[0];
  if (!error) return 'malformed AdmissionReview';
  const path = error.instancePath.split('/').slice(1).join('.');
  const field = (child?: string) => [path, child].filter(Boolean).join('.') || 'body';
  const quoted = (value: unknown) => truncate(JSON.stringify(value) ?? String(value));
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

function truncate(text: string, max = 64): string {
  return text.length > max ? `${text.slice(0, max)}...` : text;
}
