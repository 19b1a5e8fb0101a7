// One AdmissionReview, from the body's bytes to the one sent back: parse, check the envelope and
// the types of the fields the policy reads, run the handler (judge), then wrap its answer with
// the request's uid (review). Pure and synchronous, so that it runs alike on the event loop
// (small bodies) and in the worker thread (judge-worker.ts) that takes large ones: its result is
// plain data, and carries the log fields, clipped.
import { clip, isRecord } from '../policy/index.ts';
import { ADMISSION_API_VERSION, errored, type AdmissionHandler, type AdmissionRequest, type AdmissionReview, type AdmissionSettings, type Answer } from './admission.ts';
import type { AdmissionResult, Judgement, RequestContext } from './judgement.ts';
import { mutate, mutateNativeSidecars } from './mutating-handlers.ts';
import type { AdmissionEndpoint } from './routes.ts';
import { BodyError, checkReview, parseJsonBody } from './schema.ts';
import { validate } from './validating-handler.ts';

export const HANDLERS: Record<AdmissionEndpoint, AdmissionHandler> = {
  validate,
  mutate,
  'native-sidecars': mutateNativeSidecars,
};

/** Parses and checks the body, then runs the handler. */
export function judge(body: Uint8Array | string, handler: AdmissionHandler, settings: AdmissionSettings): Judgement {
  let parsed: unknown;
  try {
    parsed = parseJsonBody(typeof body === 'string' ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
  } catch (error) {
    if (!(error instanceof BodyError)) throw error;
    return refused('', {}, error.message, error.statusCode);
  }
  const { uid, ...context } = requestContext(parsed);
  const problem = checkReview(parsed);
  if (problem) return refused(uid, context, problem);
  let answer: Answer;
  try {
    answer = handler((parsed as { request: AdmissionRequest }).request, settings);
  } catch (error) {
    const { message, stack } = error instanceof Error ? error : new Error(String(error));
    return { status: 500, result: 'error', uid, answer: errored(500, 'internal error while handling the admission request'), context, failure: { message, stack } };
  }
  const result: AdmissionResult = !answer.response.allowed ? 'denied' : answer.response.patch ? 'patched' : 'allowed';
  return { status: 200, result, uid, answer, context };
}

function refused(uid: string, context: RequestContext | Record<string, never>, message: string, status: 400 | 413 = 400): Judgement {
  return { status, result: 'error', uid, answer: errored(status, message), context: { dryRun: false, ...context } };
}

/** The AdmissionReview sent back: the answer's response, with the request's uid. */
export function review(uid: string, answer: Answer): AdmissionReview {
  return { apiVersion: ADMISSION_API_VERSION, kind: 'AdmissionReview', response: { uid, ...answer.response } };
}

/** The identifying fields of a body that may be anything (it failed validation when an error is answered). */
export function requestContext(body: unknown): RequestContext & { uid: string } {
  const request = isRecord(body) && isRecord(body.request) ? body.request : {};
  const clipped = (value: unknown) => (typeof value === 'string' ? clip(value) : undefined);
  return {
    uid: typeof request.uid === 'string' ? request.uid : '',
    namespace: clipped(request.namespace),
    name: clipped(request.name),
    operation: clipped(request.operation),
    kind: isRecord(request.kind) ? clipped(request.kind.kind) : undefined,
    dryRun: request.dryRun === true,
  };
}
