// `sidecar-terminator serve`: composition.ts builds what runs from the configuration,
// lifecycle.ts runs it until SIGTERM or SIGINT.
import type { ServeConfig } from './config.ts';
import type { Logger } from './logger.ts';
import { compose } from './serve/composition.ts';
import { runUntilSignal } from './serve/lifecycle.ts';

export async function runServe(config: ServeConfig): Promise<void> {
  const { logger, components } = compose(config);
  exitOnUnhandledErrors(logger);
  await runUntilSignal(components, logger);
}

/**
 * An error nothing handled is a fault of the add-on: the process exits 1, as Node would, so its
 * Deployment restarts it, but says so first in its own JSON log line, where a log pipeline finds it.
 */
export function exitOnUnhandledErrors(logger: Logger): void {
  const fail = (kind: string) => (err: unknown) => {
    logger.error({ err }, `${kind}: exiting`);
    process.exit(1);
  };
  process.once('unhandledRejection', fail('unhandled promise rejection'));
  process.once('uncaughtException', fail('uncaught exception'));
}
