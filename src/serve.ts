// `sidecar-terminator serve`: composition.ts builds what runs from the configuration,
// lifecycle.ts runs it until SIGTERM or SIGINT.
import type { ServeConfig } from './config.ts';
import type { Logger } from 'pino';
import { compose } from './serve/composition.ts';
import { runUntilSignal } from './serve/lifecycle.ts';
import { logWritten } from './serve/log.ts';

export async function runServe(config: ServeConfig): Promise<void> {
  const { logger, components } = compose(config);
  exitOnUnhandledErrors(logger);
  await runUntilSignal(components, logger);
}

/** How long a failing serve waits for its last log lines to be written before it exits anyway. */
export const LAST_LINES_WAIT_MS = 1000;

/**
 * An error nothing handled is a fault of the add-on: the process exits 1, as Node would, so its
 * Deployment restarts it, but says so first in its own JSON log line, where a log pipeline finds it,
 * after the lines before it (serve/log.ts writes them off the event loop).
 */
export function exitOnUnhandledErrors(logger: Logger): void {
  const fail = (kind: string) => (err: unknown) => {
    logger.error({ err }, `${kind}: exiting`);
    process.exitCode = 1;
    void logWritten(logger, LAST_LINES_WAIT_MS).then(() => process.exit(1));
  };
  process.once('unhandledRejection', fail('unhandled promise rejection'));
  process.once('uncaughtException', fail('uncaught exception'));
}
