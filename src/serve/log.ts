// serve's log: one JSON line per record (pino), to stdout, at the configured level. Written off
// the event loop: a synchronous write(2) per line cost the watcher 3 to 6% of its CPU in a burst
// and the webhook one system call per admission decision. Lines written while one write is under
// way go out together in the next; pino writes what is left synchronously when the process exits
// (a crash included), so a line is lost only with the process killed outright (SIGKILL). Should
// stdout stall (a log reader that stopped reading), at most MAX_PENDING_BYTES wait, and lines
// beyond that are dropped rather than held in memory or blocking the event loop.
import { pino, type Logger } from 'pino';

/** About 20,000 lines: far more than a stall of a few seconds gathers. */
export const MAX_PENDING_BYTES = 8 * 1024 * 1024;

export function serveLogger(level: string, destination: number | string = 1): Logger {
  return pino({ level }, pino.destination({ dest: destination, sync: false, maxLength: MAX_PENDING_BYTES }));
}
