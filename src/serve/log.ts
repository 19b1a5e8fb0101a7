// serve's log: one JSON line per record (pino), to stdout, at the configured level. Written off
// the event loop: a synchronous write(2) per line cost the watcher 3 to 6% of its CPU in a burst
// and the webhook one system call per admission decision. Lines written while one write is under
// way go out together in the next; pino writes what is left synchronously when the process exits,
// and serve's exit on a failure first waits for the write under way (logWritten), so a line is lost
// only with the process killed outright (SIGKILL). Should stdout stall (a log reader that stopped
// reading), at most MAX_PENDING_BYTES wait, and lines beyond that are dropped rather than held in
// memory or blocking the event loop.
import { pino, type Logger } from 'pino';

/** About 20,000 lines: far more than a stall of a few seconds gathers. */
export const MAX_PENDING_BYTES = 8 * 1024 * 1024;

export function serveLogger(level: string, destination: number | string = 1): Logger {
  return pino({ level }, pino.destination({ dest: destination, sync: false, maxLength: MAX_PENDING_BYTES }));
}

/**
 * Resolves once every line `logger` (a serveLogger) took is written, its destination then ended, or
 * after `waitMs` should stdout stall. For a process about to exit on a failure: an exit right after
 * a line could cut short the write under way and write the later lines, from the main thread, before
 * its rest.
 */
export function logWritten(logger: Logger, waitMs: number): Promise<void> {
  // The destination pino keeps on the logger (a child's too); `destroyed`: ended already.
  const stream = (logger as unknown as Record<symbol, ReturnType<typeof pino.destination> & { destroyed?: boolean }>)[pino.symbols.streamSym];
  if (!stream || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, waitMs);
    stream.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    stream.end();
  });
}
