// Large bodies are judged in a worker thread. JSON.parse cannot be interrupted: a 3 MiB pod (the
// API server's request limit) takes tens of milliseconds to parse and check, and on the event
// loop every probe and every other review would wait for it. The worker takes them one at a
// time, on its own heap: a body that needs more memory than that heap kills the worker, not
// the webhook (the review gets a 413, the next large one a new worker).
import { Worker } from 'node:worker_threads';
import type { AdmissionSettings } from './admission.ts';
import type { Judgement } from './judgement.ts';
import type { AdmissionEndpoint } from './routes.ts';

/** A body for the worker (judge-worker.ts) to judge. */
export interface JudgeTask {
  id: number;
  endpoint: AdmissionEndpoint;
  body: Uint8Array;
  settings: AdmissionSettings;
  /** Epoch ms after which the API server no longer waits for the answer: the body is not judged. */
  deadline: number;
}

/** The worker's reply to a task: its judgement with the answer serialized (payload), or why there is none. */
export interface JudgeReply {
  id: number;
  judgement?: Judgement;
  payload?: Uint8Array;
  failure?: string;
  expired?: true;
}

/**
 * Bodies larger than this go to the worker. Below it, parsing and judging take a millisecond or
 * two at worst (twice what the 28 KiB pod of a Job with five containers takes), so even a
 * stream of them, one after another, barely delays the reviews around it.
 */
export const OFFLOAD_BODY_BYTES = 64 * 1024;

/**
 * The worker's heap. A body that passes the scan of parseJsonBody (at most MAX_BODY_COLLECTIONS
 * objects and arrays, at most --body-limit bytes) parses into about 100 MiB at worst; small
 * young-generation spaces keep what the worker holds between bodies small.
 */
const WORKER_HEAP = { maxOldGenerationSizeMb: 160, maxYoungGenerationSizeMb: 8 };

/** An idle worker ends after this long, returning its heap to the system; the next large body starts another (about 50 ms). */
const WORKER_IDLE_MS = 10_000;

/** The worker died while judging (out of memory: the body is too costly to judge). */
export class WorkerFailure extends Error {
  readonly outOfMemory: boolean;

  constructor(message: string, outOfMemory: boolean) {
    super(message);
    this.outOfMemory = outOfMemory;
  }
}

/**
 * The review waited in the worker's queue until after its deadline (the webhooks' timeout): the
 * API server has given up on it, so judging it would only delay the large bodies behind it.
 */
export class ReviewExpired extends Error {
  constructor() {
    super('the review waited for the worker longer than the webhook timeout, behind other large reviews; the API server has given up on it');
  }
}

type Pending = { resolve: (judgement: Judgement) => void; reject: (error: Error) => void };

export class Offload {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private idle: NodeJS.Timeout | undefined;

  /**
   * Judges `body` in the worker, started on first use. The body's memory moves to the worker. A
   * body still queued at `deadline` (epoch ms) is not judged: the promise rejects with ReviewExpired.
   */
  judge(endpoint: AdmissionEndpoint, body: Buffer, settings: AdmissionSettings, deadline = Number.POSITIVE_INFINITY): Promise<Judgement> {
    clearTimeout(this.idle);
    const worker = (this.worker ??= this.start());
    const id = this.nextId++;
    // Moved, not copied; a Buffer that shares its memory with others (Node's pool among them,
    // which cannot be moved) is copied first, into memory of its own.
    const owned = body.byteOffset === 0 && body.byteLength === body.buffer.byteLength ? body : new Uint8Array(body);
    const task: JudgeTask = { id, endpoint, body: owned, settings, deadline };
    return new Promise<Judgement>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      // Busy, the worker keeps the process alive; idle, it does not.
      worker.ref();
      worker.postMessage(task, [owned.buffer as ArrayBuffer]);
    });
  }

  async close(): Promise<void> {
    clearTimeout(this.idle);
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private start(): Worker {
    // Beside this module: judge-worker.ts in the sources, the bundle judge-worker.js beside the
    // bundle that holds this code (scripts/bundle.ts).
    const script = new URL(import.meta.url.endsWith('.ts') ? './judge-worker.ts' : './judge-worker.js', import.meta.url);
    // Without the parent's --import hooks (a test runner's), which would keep it alive.
    const worker = new Worker(script, { execArgv: [], resourceLimits: WORKER_HEAP });
    worker.on('message', ({ id, judgement, payload, failure, expired }: JudgeReply) => {
      const pending = this.pending.get(id);
      this.pending.delete(id);
      if (this.pending.size === 0) {
        worker.unref();
        this.idle = setTimeout(() => void this.close(), WORKER_IDLE_MS).unref();
      }
      if (judgement) pending?.resolve(payload ? { ...judgement, payload: Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength) } : judgement);
      else pending?.reject(expired ? new ReviewExpired() : new Error(failure));
    });
    const fail = (error: Error) => {
      if (this.worker === worker) this.worker = undefined;
      const failure = new WorkerFailure(error.message, (error as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY');
      for (const pending of this.pending.values()) pending.reject(failure);
      this.pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the worker exited (${code})`)));
    // After the listeners: listening for messages takes a reference again.
    worker.unref();
    return worker;
  }
}
