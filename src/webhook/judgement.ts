// What came of one admission request: its answer, and what the HTTP layer counts and logs about
// it. Plain data, so that it comes back from the worker thread as it is made on the event loop.
import type { Answer } from './admission.ts';

/** The results requests are counted under: the handler's answer (allowed, denied, patched), or error when no handler answered. */
export const ADMISSION_RESULTS = ['allowed', 'denied', 'patched', 'error'] as const;
export type AdmissionResult = (typeof ADMISSION_RESULTS)[number];

/** The fields of the log line that come from the body, each clipped. */
export interface RequestContext {
  namespace?: string;
  name?: string;
  operation?: string;
  kind?: string;
  dryRun: boolean;
}

/** One request's answer, and what to count and log about it. */
export interface Judgement {
  /** The HTTP status: 413 only for a body too large to read, 503 for one that waited past its deadline (app.ts). */
  status: 200 | 400 | 413 | 500 | 503;
  result: AdmissionResult;
  /** The request's uid, whole: the answer must carry it as sent (the log clips it). */
  uid: string;
  answer: Answer;
  context: RequestContext;
  /** Why the handler failed (a 500), for the log; never part of the answer. */
  failure?: { message: string; stack?: string };
  /**
   * The answer, already serialized, from the worker thread: a patch for a large pod is megabytes,
   * which would take the event loop milliseconds to copy and serialize. The answer then comes
   * without its patch, for the log.
   */
  payload?: Buffer;
}
