// The worker thread of offload.ts: judges large bodies with the default handlers, one at a time,
// away from the event loop that answers probes and the other reviews.
import { getPriority, setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import type { JudgeReply, JudgeTask } from './offload.ts';
import { HANDLERS, judge, review } from './review.ts';

// This thread alone at a lower CPU priority (Linux sets a thread's own nice value), so that the
// event loop gets the cores first: a stream of large bodies slows the large bodies only. In a
// container the priority weighs against the webhook's own threads (its cgroup shares the node
// with others as a whole), but on a host shared with busy processes (a local run, a test machine)
// it weighs against them too: at the lowest priority, 19, the scheduler's weight of 15 against a
// busy process's 1,024 left a 3 MiB body unjudged past the API server's 10 s; at 10, a weight of
// 110, the event loop still gets about nine times the worker's share, and the worker its answer
// within the deadline.
const WORKER_NICE = 10;
try {
  // Never above the process's own: a process started at a lower priority keeps the worker below it.
  setPriority(Math.max(getPriority(), WORKER_NICE));
} catch {
  // Not allowed here: the worker keeps the process's priority.
}

const reply = (message: JudgeReply, transfer: ArrayBuffer[] = []) => parentPort!.postMessage(message, transfer);

parentPort?.on('message', ({ id, endpoint, body, settings, deadline }: JudgeTask) => {
  if (Date.now() > deadline) {
    reply({ id, expired: true });
    return;
  }
  try {
    const judgement = judge(body, HANDLERS[endpoint], settings);
    const { answer } = judgement;
    // The answer serialized here, and its bytes moved, not copied, to the event loop's thread.
    const payload = new TextEncoder().encode(JSON.stringify(review(judgement.uid, answer)));
    reply({ id, judgement: { ...judgement, answer: { ...answer, response: { ...answer.response, patch: undefined } } }, payload }, [payload.buffer]);
  } catch (error) {
    reply({ id, failure: error instanceof Error ? error.message : String(error) });
  }
});
