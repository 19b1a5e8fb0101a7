// `sidecar-terminator serve`: composition.ts builds what runs from the configuration,
// lifecycle.ts runs it until SIGTERM or SIGINT.
import type { ServeConfig } from './config.ts';
import { compose } from './serve/composition.ts';
import { runUntilSignal } from './serve/lifecycle.ts';

export async function runServe(config: ServeConfig): Promise<void> {
  const { logger, components } = compose(config);
  await runUntilSignal(components, logger);
}
