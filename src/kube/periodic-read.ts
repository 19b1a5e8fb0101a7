// A value read from the API server in the background and again every interval: what an admission
// decision needs to know of the cluster (its other mutating webhooks, its kubelets' versions),
// at hand without an API call in the admission's path. A failed read keeps the last value and is
// logged once until a read succeeds again.
import type { Logger } from '../logger.ts';
import { apiErrorMessage } from './api-errors.ts';

/** The wait before the next read after a failed one, when everyMs is longer. */
export const RETRY_MS = 15_000;
/** A read that takes longer has failed: the value stays as it was, and the next read comes as after a failure. */
export const READ_TIMEOUT_MS = 30_000;

export interface PeriodicReadOptions<T> {
  read: () => Promise<T>;
  everyMs: number;
  /** READ_TIMEOUT_MS by default. */
  timeoutMs?: number;
  /** What is read, for the logs ("the mutating webhook configurations"). */
  what: string;
  /** What a failure costs, for its warning. */
  meanwhile: string;
  logger: Logger;
}

export class PeriodicRead<T> {
  private readonly options: PeriodicReadOptions<T>;
  private value: T | undefined;
  private timer: NodeJS.Timeout | undefined;
  private failing = false;
  private stopped = false;

  constructor(options: PeriodicReadOptions<T>) {
    this.options = options;
  }

  /** The value as last read; undefined until a read succeeds. */
  current(): T | undefined {
    return this.value;
  }

  /** Reads now, then every everyMs until stop(); settles after the first read. */
  async start(): Promise<void> {
    await this.refresh();
    this.schedule();
  }

  /** No read after this one, including one that was in flight when it was called. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(): void {
    if (this.stopped) return;
    // After a failure, sooner: what waits on the value (a migration, a name) waits less.
    const delay = this.failing ? Math.min(this.options.everyMs, RETRY_MS) : this.options.everyMs;
    this.timer = setTimeout(() => void this.refresh().then(() => this.schedule()), delay);
    this.timer.unref();
  }

  /** One read. */
  async refresh(): Promise<void> {
    const { read, what, meanwhile, logger, timeoutMs = READ_TIMEOUT_MS } = this.options;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs / 1000}s`)), timeoutMs);
    });
    try {
      this.value = await Promise.race([read(), timedOut]);
      if (this.failing) logger.info({ what }, `${what} read again`);
      this.failing = false;
    } catch (error) {
      if (!this.failing) logger.warn({ what, error: apiErrorMessage(error) }, `cannot read ${what}: ${meanwhile}`);
      this.failing = true;
    } finally {
      clearTimeout(timer);
    }
  }
}
