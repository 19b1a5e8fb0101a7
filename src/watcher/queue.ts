// A work queue in the manner of client-go's and controller-runtime's: a key waiting is queued once
// however often it is added, a key is never processed twice at once (added meanwhile, it runs
// again afterwards), and at most `concurrency` keys run together. Processing a key answers with
// what the reconciler's Result says (src/watcher/reconciler.ts): done, or look again after a delay;
// or it throws, and the key is retried with exponential backoff, for as long as it keeps failing: a
// finished pod does not change, so nothing else would bring it back. The queue reports what it
// does to its observer (the watcher's metrics).

import { DEFAULT_BACKOFF } from './retries.ts';

export interface QueueObserver {
  /** A key was processed: how it ended and how long it took. */
  processed(outcome: 'done' | 'requeue' | 'error', seconds: number): void;
  /** A key failed and is retried after `delayMs` (attempt: how many times in a row it has failed). */
  retrying?(attempt: number, delayMs: number): void;
}

export interface WorkQueueOptions<K> {
  concurrency: number;
  /** `requeueAfterMs` in the answer: process the key again after that long. */
  process(key: K): Promise<{ requeueAfterMs?: number } | void>;
  /** Delay before the n-th retry (n starts at 1) after `error`. */
  backoff?(attempt: number, error: unknown): number;
  onError?(key: K, error: unknown, attempt: number, retryInMs: number): void;
  observer?: QueueObserver;
}

interface Scheduled {
  timer: NodeJS.Timeout;
  at: number;
  /** A retry after a failure, as opposed to a requested look later. */
  retry: boolean;
}

export class WorkQueue<K> {
  private readonly options: WorkQueueOptions<K> & { backoff(attempt: number, error: unknown): number };
  private readonly waiting: K[] = [];
  private readonly queued = new Set<K>();
  private readonly active = new Set<K>();
  private readonly dirty = new Set<K>();
  private readonly failures = new Map<K, number>();
  private readonly scheduled = new Map<K, Scheduled>();
  private readonly idleWaiters: Array<() => void> = [];
  private stopped = false;

  constructor(options: WorkQueueOptions<K>) {
    this.options = { backoff: DEFAULT_BACKOFF, ...options };
  }

  add(key: K): void {
    if (this.stopped) return;
    if (this.active.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.waiting.push(key);
    this.pump();
  }

  /** Adds the key after a delay, unless it is added sooner; of two delays, the shorter wins. */
  addAfter(key: K, delayMs: number, retry = false): void {
    if (this.stopped) return;
    const at = Date.now() + delayMs;
    const current = this.scheduled.get(key);
    if (current && current.at <= at) return;
    if (current) clearTimeout(current.timer);
    const timer = setTimeout(() => {
      this.scheduled.delete(key);
      this.add(key);
    }, delayMs);
    this.scheduled.set(key, { timer, at, retry });
  }

  /**
   * Retries every failed key now instead of at the end of its backoff: for when the cause of most
   * failures has gone (the API server is back), so that work waits no longer than it must.
   */
  retryNow(): void {
    for (const [key, scheduled] of this.scheduled) {
      if (!scheduled.retry) continue;
      clearTimeout(scheduled.timer);
      this.scheduled.delete(key);
      this.add(key);
    }
  }

  /** Keys waiting to be processed now. */
  get depth(): number {
    return this.waiting.length;
  }

  /** Keys waiting for a retry after failing. */
  get retrying(): number {
    let count = 0;
    for (const scheduled of this.scheduled.values()) if (scheduled.retry) count++;
    return count;
  }

  get size(): number {
    return this.waiting.length + this.active.size;
  }

  /** Resolves once nothing is waiting or running (scheduled keys do not count). */
  async idle(): Promise<void> {
    if (this.size === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stops taking keys, cancels scheduled ones and waits for the keys running now. */
  async shutDown(): Promise<void> {
    this.stopped = true;
    for (const scheduled of this.scheduled.values()) clearTimeout(scheduled.timer);
    this.scheduled.clear();
    this.waiting.length = 0;
    this.queued.clear();
    await this.idle();
  }

  private pump(): void {
    while (!this.stopped && this.active.size < this.options.concurrency && this.waiting.length > 0) {
      const key = this.waiting.shift()!;
      this.queued.delete(key);
      this.active.add(key);
      void this.run(key);
    }
    if (this.size === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private async run(key: K): Promise<void> {
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    try {
      const result = await this.options.process(key);
      this.failures.delete(key);
      const requeueAfterMs = result?.requeueAfterMs;
      if (requeueAfterMs !== undefined) this.addAfter(key, requeueAfterMs);
      this.options.observer?.processed(requeueAfterMs !== undefined ? 'requeue' : 'done', seconds());
    } catch (error) {
      this.options.observer?.processed('error', seconds());
      const attempt = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, attempt);
      const delayMs = this.options.backoff(attempt, error);
      this.options.onError?.(key, error, attempt, delayMs);
      this.options.observer?.retrying?.(attempt, delayMs);
      this.addAfter(key, delayMs, true);
    } finally {
      this.active.delete(key);
      if (this.dirty.delete(key)) this.add(key);
      this.pump();
    }
  }
}
