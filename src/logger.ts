// The logger every part of the add-on writes to. serve passes a pino logger (JSON lines); tests
// may pass anything with these methods. Only the webhook's HTTP layer needs pino itself, because
// fastify does.

/** A log call: fields first (merged into the JSON line), then the message; or a message alone. */
export interface LogFn {
  (fields: object, message?: string): void;
  (message: string): void;
}

export interface Logger {
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
  /** A logger that adds `bindings` to every line, e.g. `{ component: 'watcher' }`. */
  child(bindings: Record<string, unknown>): Logger;
}
