// A work queue in the manner of client-go's: a key waiting is queued once however often it is
// added, a key is never processed twice at once (added meanwhile, it runs again afterwards),
// failures retry with exponential backoff, and at most `concurrency` keys run together.

export interface WorkQueueOptions<K> {
  concurrency: number;
  /** Processes one key; a thrown error schedules a retry. */
  process(key: K): Promise<void>;
  /** Delay before the n-th retry (n starts at 1). */
  backoff?(attempt: number): number;
  /** Retries after which a key is dropped (it comes back on its next add). */
  maxRetries?: number;
  onError?(key: K, error: unknown, attempt: number): void;
}

export const exponentialBackoff = (baseMs: number, maxMs: number) => (attempt: number) =>
  Math.min(maxMs, baseMs * 2 ** (attempt - 1));

export class WorkQueue<K> {
  private readonly options: Required<Omit<WorkQueueOptions<K>, 'onError'>> & Pick<WorkQueueOptions<K>, 'onError'>;
  private readonly waiting: K[] = [];
  private readonly queued = new Set<K>();
  private readonly active = new Set<K>();
  private readonly dirty = new Set<K>();
  private readonly failures = new Map<K, number>();
  private readonly timers = new Map<K, NodeJS.Timeout>();
  private readonly idleWaiters: Array<() => void> = [];
  private stopped = false;

  constructor(options: WorkQueueOptions<K>) {
    this.options = { backoff: exponentialBackoff(200, 30_000), maxRetries: 15, ...options };
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

  /** Adds the key after a delay, unless it is added sooner. */
  addAfter(key: K, delayMs: number): void {
    if (this.stopped || this.timers.has(key)) return;
    this.timers.set(
      key,
      setTimeout(() => {
        this.timers.delete(key);
        this.add(key);
      }, delayMs),
    );
  }

  get size(): number {
    return this.waiting.length + this.active.size;
  }

  /** Resolves once nothing is waiting or running (scheduled retries do not count). */
  async idle(): Promise<void> {
    if (this.size === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stops taking keys, cancels scheduled retries and waits for the keys running now. */
  async shutDown(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
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
    try {
      await this.options.process(key);
      this.failures.delete(key);
    } catch (error) {
      const attempt = (this.failures.get(key) ?? 0) + 1;
      this.options.onError?.(key, error, attempt);
      if (attempt <= this.options.maxRetries) {
        this.failures.set(key, attempt);
        this.addAfter(key, this.options.backoff(attempt));
      } else {
        this.failures.delete(key);
      }
    } finally {
      this.active.delete(key);
      if (this.dirty.delete(key)) this.add(key);
      this.pump();
    }
  }
}
