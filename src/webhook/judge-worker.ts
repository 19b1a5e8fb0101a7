// The worker thread of offload.ts: judges large bodies with the default handlers, one at a time,
// away from the event loop that answers probes and the other reviews.
import { parentPort } from 'node:worker_threads';
import type { AdmissionEndpoint } from './metrics.ts';
import { HANDLERS, judge } from './review.ts';
import type { AdmissionSettings } from './validate.ts';

export interface JudgeTask {
  id: number;
  endpoint: AdmissionEndpoint;
  body: Uint8Array;
  settings: AdmissionSettings;
}

parentPort?.on('message', ({ id, endpoint, body, settings }: JudgeTask) => {
  try {
    parentPort!.postMessage({ id, judgement: judge(body, HANDLERS[endpoint], settings) });
  } catch (error) {
    parentPort!.postMessage({ id, failure: error instanceof Error ? error.message : String(error) });
  }
});
