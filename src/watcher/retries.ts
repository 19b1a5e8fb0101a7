// When a failed reconcile is tried again, by the kind of its failure. A refusal that retrying
// cannot fix (403: RBAC or the fence's admission policy; 422: the object is invalid; 400, 405,
// 413, 415: the request itself is wrong) is tried again after 15 s, then less and less often, up
// to every 5 minutes, and the pod gets one Warning event saying so (the reconciler reports it, and
// hands the queue a Refused error, as controller-runtime's reconcilers hand it a TerminalError): the
// change that lifts it often comes seconds later (a helm upgrade updates the fence's admission
// policy after the watcher's Deployment, and the API server applies it a moment later still); a
// finished pod does not change, so it is never given up, but it does not hammer the API server.
// Anything else (the network, a timeout, 429, 5xx, a conflict) may pass at the next attempt:
// retried for as long as it fails, with exponential backoff and jitter, so that pods that failed
// together do not all come back at the same moment.
import { isApiError } from '../kube/api-errors.ts';

export const exponentialBackoff = (baseMs: number, maxMs: number) => (attempt: number) =>
  Math.min(maxMs, baseMs * 2 ** (attempt - 1));

/** controller-runtime's default starts at 5 ms and stops at 1000 s; an API request per retry is cheap, a hanging Job is not. */
export const DEFAULT_BACKOFF = exponentialBackoff(500, 2 * 60_000);

/** The first retry of a refused reconcile: a policy or role updated with the watcher lifts the refusal within seconds. */
export const REFUSED_FIRST_RETRY_MS = 15_000;

/** How often, at most, a refused reconcile is tried again once it has been for a while: the refusal may be lifted (RBAC or the policy fixed). */
export const REFUSED_RETRY_MS = 5 * 60_000;

const REFUSED_BACKOFF = exponentialBackoff(REFUSED_FIRST_RETRY_MS, REFUSED_RETRY_MS);

/** Each delay moves by up to this fraction of itself, either way, at random. */
const JITTER = 0.2;

/** Whether the API server refused the request in a way retrying the same request cannot fix. */
export function isRefusal(error: unknown): boolean {
  return error instanceof Refused || isApiError(error, 400, 403, 405, 413, 415, 422);
}

/** A reconcile the API server refused (isRefusal), reported on the pod already: the queue retries it slowly. */
export class Refused extends Error {
  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.name = 'Refused';
  }
}

/** The delay before the n-th retry in a row of a key whose last attempt failed with `error`. */
export function retryDelay(attempt: number, error: unknown, random: () => number = Math.random): number {
  const delay = isRefusal(error) ? REFUSED_BACKOFF(attempt) : DEFAULT_BACKOFF(attempt);
  return Math.round(delay * (1 + JITTER * (2 * random() - 1)));
}
