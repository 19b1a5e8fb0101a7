// The worker thread of offload.ts: judges large bodies with the default handlers, one at a time,
// away from the event loop that answers probes and the other reviews.
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { review } from './admission.ts';
import type { AdmissionEndpoint } from './metrics.ts';
import { HANDLERS, judge } from './review.ts';
import type { AdmissionSettings } from './validate.ts';

export interface JudgeTask {
  id: number;
  endpoint: AdmissionEndpoint;
  body: Uint8Array;
  settings: AdmissionSettings;
  /** Epoch ms after which the API server no longer waits for the answer: the body is not judged. */
  deadline: number;
}

// This thread alone at the lowest CPU priority (Linux sets a thread's own nice value), so that
// the event loop gets the cores first: a stream of large bodies slows the large bodies only. In
// a container the priority weighs against the webhook's own threads (its cgroup shares the node
// with others as a whole); on a host shared with busy processes it can slow a large body a lot.
try {
  setPriority(19);
} catch {
  // Not allowed here: the worker keeps the process's priority.
}

parentPort?.on('message', ({ id, endpoint, body, settings, deadline }: JudgeTask) => {
  if (Date.now() > deadline) {
    parentPort!.postMessage({ id, expired: true });
    return;
  }
  try {
    const { decision, ...judgement } = judge(body, HANDLERS[endpoint], settings);
    // The answer serialized here, and its bytes moved, not copied, to the event loop's thread.
    const payload = new TextEncoder().encode(JSON.stringify(review(judgement.uid, decision)));
    parentPort!.postMessage({ id, judgement: { ...judgement, decision: { ...decision, patch: undefined } }, payload }, [payload.buffer]);
  } catch (error) {
    parentPort!.postMessage({ id, failure: error instanceof Error ? error.message : String(error) });
  }
});
