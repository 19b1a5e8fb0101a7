// What the admission handlers share (in the manner of controller-runtime's webhook/admission
// package): the admission.k8s.io/v1 AdmissionReview, the settings and the readers of a request,
// a handler's Answer and the small constructors the handlers build it with. A handler answers;
// review.ts alone wraps the answer's response in an AdmissionReview carrying the request's uid,
// so no response can go out without it.
import { isRecord, type ControllerReference, type EnforcementMode, type InjectedSidecarPolicy, type OldKubelet, type PodMutatingWebhook } from '../policy/index.ts';

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

export interface AdmissionSettings {
  enforcement: EnforcementMode;
  /** When non-empty, quick-exit images must match one of these patterns. */
  quickExitImageAllowlist: readonly string[];
  /** Whether /native-sidecars migrates: --native-sidecars is on and the API server runs native sidecars. */
  nativeSidecars?: boolean;
  /** The cluster's other mutating webhooks for pods, as last read: a pod that lost its native sidecars is refused naming them. */
  podMutatingWebhooks?: readonly PodMutatingWebhook[];
  /** The nodes whose kubelets run no native sidecars, as last read ('unread' before): while there is one, or they are unknown, no pod is migrated. */
  oldKubelets?: readonly OldKubelet[] | 'unread';
  /** The injected-sidecar policy (--injected-sidecars), which /mutate and /native-sidecars apply to each pod first; none without it. */
  injectedSidecars?: InjectedSidecarSettings;
}

/** What the mutating handlers apply the injected-sidecar policy with. Plain data: it goes to the worker thread with the settings. */
export interface InjectedSidecarSettings {
  policy: InjectedSidecarPolicy;
  /**
   * The labels of each namespace, by name, as last seen; undefined while they are unknown (not
   * listed yet, or not needed: no entry has a namespaceSelector). An entry with a namespaceSelector
   * applies only in a namespace known here; for one that is not, the answer says it wants its labels.
   */
  namespaceLabels?: ReadonlyMap<string, Readonly<Record<string, string>>>;
}

/**
 * The object as the request names it. The API server always sends apiVersion and kind inside
 * the object too, but request.kind is the authority (after any version conversion).
 */
export function objectOf(request: AdmissionRequest, which: 'object' | 'oldObject' = 'object'): unknown {
  const object = request[which];
  if (!isRecord(object)) return object;
  return { ...object, apiVersion: apiVersionOf(request.kind), kind: request.kind.kind };
}

function apiVersionOf({ group, version }: GroupVersionKind): string {
  return group === '' ? version : `${group}/${version}`;
}

export function isPod(request: AdmissionRequest): boolean {
  return request.kind.group === '' && request.kind.kind === 'Pod';
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
  /**
   * The pod's namespace, when the injected-sidecar policy needed its labels and the settings lacked
   * them, and the entries they decide: the HTTP layer reads them and asks the handler again (app.ts).
   */
  namespaceLabelsWanted?: { namespace: string; entries: string[] };
}

/** Decides about one request; pure, so that it runs alike on the event loop and in the worker thread. */
export type AdmissionHandler = (request: AdmissionRequest, settings: AdmissionSettings) => Answer;

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

/** One operation of an RFC 6902 JSON Patch, as the answer carries it; diff() in json-patch.ts makes them. */
interface PatchOperation {
  op: string;
  path: string;
}

/** Allowed with these changes; no operations means no patch at all (the API server needs none). */
export function patched(operations: readonly PatchOperation[], options: AnswerOptions = {}): Answer {
  if (operations.length === 0) return allowed(options);
  const patch = Buffer.from(JSON.stringify(operations)).toString('base64');
  return answer({ allowed: true, patchType: 'JSONPatch', patch }, options);
}

/** The request could not be handled: a malformed body, or an internal failure. */
export function errored(code: number, message: string): Answer {
  return { response: { allowed: false, status: { code, message } } };
}
