// The admission.k8s.io/v1 AdmissionReview, a handler's Answer, and the small constructors the
// handlers build their answers with (in the manner of controller-runtime's webhook/admission
// package). A handler answers; the HTTP layer alone wraps the answer's response in an
// AdmissionReview carrying the request's uid, so no response can go out without it.
import type { ControllerReference } from '../policy/index.ts';
import type { JsonPatchOperation } from './json-patch.ts';

export const ADMISSION_API_VERSION = 'admission.k8s.io/v1';
export const OPERATIONS = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'] as const;
export type Operation = (typeof OPERATIONS)[number];

export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

/** The fields of an AdmissionRequest this webhook reads; the envelope schema guarantees their types. */
export interface AdmissionRequest {
  uid: string;
  kind: GroupVersionKind;
  subResource?: string;
  name?: string;
  namespace?: string;
  operation: Operation;
  /** The new object (CREATE, UPDATE); untrusted, read with the policy's defensive readers. */
  object?: unknown;
  /** The existing object (UPDATE, DELETE). */
  oldObject?: unknown;
  dryRun?: boolean;
}

export interface Status {
  code: number;
  reason?: string;
  message: string;
}

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: Status;
  /** Base64 of a JSON Patch document. */
  patch?: string;
  patchType?: 'JSONPatch';
  /** Shown by kubectl as `Warning: ...`; keep each a single line. */
  warnings?: string[];
}

export interface AdmissionReview {
  apiVersion: typeof ADMISSION_API_VERSION;
  kind: 'AdmissionReview';
  request?: AdmissionRequest;
  response?: AdmissionResponse;
}

/** What the validating handler found on an object a controller created: the errors it admitted (owner-events.ts makes it an Event). */
export interface OwnerNotice {
  namespace: string;
  /** The controller as the object names it: a claim until the recorder has read it. */
  owner: ControllerReference;
  /** The admitted object's kind (Pod, Job: one the policy knows, never the caller's text). */
  kind: string;
  /** The first errors, formatted without the object's values (the rest counted in a last entry). */
  errors: string[];
  /** How many errors there are in all. */
  errorCount: number;
}

/** What /native-sidecars did with a pod that has sidecars: moved them, or kept them where they are. */
export const MIGRATION_RESULTS = ['migrated', 'kept', 'restored'] as const;
export type MigrationResult = (typeof MIGRATION_RESULTS)[number];

/**
 * A handler's answer, carried as it is to the wire: the response sent (the HTTP layer adds the
 * request's uid), and beside it what the webhook does about the request but never sends.
 */
export interface Answer {
  response: Omit<AdmissionResponse, 'uid'>;
  /** For the owner's Event, recorded after the answer is sent. */
  ownerNotice?: OwnerNotice;
  /** For the metrics. */
  migration?: MigrationResult;
}

export interface AnswerOptions {
  warnings?: readonly string[];
}

/** Omits an empty warnings list, so plain answers stay plain. */
function answer(response: Answer['response'], options: AnswerOptions): Answer {
  return { response: options.warnings?.length ? { ...response, warnings: [...options.warnings] } : response };
}

export function allowed(options: AnswerOptions = {}): Answer {
  return answer({ allowed: true }, options);
}

/** A denial for an invalid object: 422 Invalid, as the API server's own validation answers. */
export function denied(message: string, options: AnswerOptions = {}): Answer {
  return answer({ allowed: false, status: { code: 422, reason: 'Invalid', message } }, options);
}

/** Allowed with these changes; no operations means no patch at all (the API server needs none). */
export function patched(operations: readonly JsonPatchOperation[], options: AnswerOptions = {}): Answer {
  if (operations.length === 0) return allowed(options);
  const patch = Buffer.from(JSON.stringify(operations)).toString('base64');
  return answer({ allowed: true, patchType: 'JSONPatch', patch }, options);
}

/** The request could not be handled: a malformed body, or an internal failure. */
export function errored(code: number, message: string): Answer {
  return { response: { allowed: false, status: { code, message } } };
}

export function review(uid: string, answer: Answer): AdmissionReview {
  return { apiVersion: ADMISSION_API_VERSION, kind: 'AdmissionReview', response: { uid, ...answer.response } };
}
