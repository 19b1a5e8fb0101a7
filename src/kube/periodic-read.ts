// A value read from the API server in the background and again every interval: what an admission
// decision needs to know of the cluster (its other mutating webhooks, its kubelets' versions),
// at hand without an API call in the admission's path. A failed read keeps the last value and is
// logged once until a read succeeds again.
import type { Logger } from '../logger.ts';
import { apiErrorMessage } from './api-errors.ts';

/** The wait before the next read after a failed one, when everyMs is longer. */
export const RETRY_MS = 15_000;

export interface PeriodicReadOptions<T> {
  read: () => Promise<T>;
  everyMs: number;
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

  constructor(options: PeriodicReadOptions<T>) {
    this.options = options;
  }

  /** The value as last read; undefined until a read succeeds. */
  current(): T | undefined {
    return this.value;
  }

  /** Reads now, then every everyMs until stop(). */
  async start(): Promise<void> {
    await this.refresh();
    const next = () => {
      // After a failure, sooner: what waits on the value (a migration, a name) waits less.
      const delay = this.failing ? Math.min(this.options.everyMs, RETRY_MS) : this.options.everyMs;
      this.timer = setTimeout(() => void this.refresh().then(next), delay);
      this.timer.unref();
    };
    next();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** One read. */
  async refresh(): Promise<void> {
    const { read, what, meanwhile, logger } = this.options;
    try {
      this.value = await read();
      if (this.failing) logger.info({ what }, `${what} read again`);
      this.failing = false;
    } catch (error) {
      if (!this.failing) logger.warn({ what, error: apiErrorMessage(error) }, `cannot read ${what}: ${meanwhile}`);
      this.failing = true;
    }
  }
}
