// The admission.k8s.io/v1 AdmissionReview, and the small constructors the handlers build
// their decisions with (in the manner of controller-runtime's webhook/admission package).
// A handler decides; the HTTP layer alone wraps the decision in an AdmissionReview carrying
// the request's uid, so no response can go out without it.
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

/** What a handler decides about a request. */
export interface AdmissionDecision {
  allowed: boolean;
  status?: Status;
  /** Base64 of a JSON Patch document. */
  patch?: string;
  patchType?: 'JSONPatch';
  /** Shown by kubectl as `Warning: ...`; keep each a single line. */
  warnings?: string[];
}

export interface AdmissionResponse extends AdmissionDecision {
  uid: string;
}

export interface AdmissionReview {
  apiVersion: typeof ADMISSION_API_VERSION;
  kind: 'AdmissionReview';
  request?: AdmissionRequest;
  response?: AdmissionResponse;
}

export interface DecisionOptions {
  warnings?: readonly string[];
}

/** Omits an empty warnings list, so plain decisions stay plain. */
function withWarnings(decision: AdmissionDecision, options: DecisionOptions): AdmissionDecision {
  return options.warnings?.length ? { ...decision, warnings: [...options.warnings] } : decision;
}

export function allowed(options: DecisionOptions = {}): AdmissionDecision {
  return withWarnings({ allowed: true }, options);
}

/** A denial for an invalid object: 422 Invalid, as the API server's own validation answers. */
export function denied(message: string, options: DecisionOptions = {}): AdmissionDecision {
  return withWarnings({ allowed: false, status: { code: 422, reason: 'Invalid', message } }, options);
}

/** Allowed with these changes; no operations means no patch at all (the API server needs none). */
export function patched(operations: readonly JsonPatchOperation[], options: DecisionOptions = {}): AdmissionDecision {
  if (operations.length === 0) return allowed(options);
  const patch = Buffer.from(JSON.stringify(operations)).toString('base64');
  return withWarnings({ allowed: true, patchType: 'JSONPatch', patch }, options);
}

/** The request could not be handled: a malformed body, or an internal failure. */
export function errored(code: number, message: string): AdmissionDecision {
  return { allowed: false, status: { code, message } };
}

export function review(uid: string, decision: AdmissionDecision): AdmissionReview {
  return { apiVersion: ADMISSION_API_VERSION, kind: 'AdmissionReview', response: { uid, ...decision } };
}
