// A Logger that keeps its lines, for unit tests that check what the code says.
import type { Logger } from '../../src/logger.ts';

export interface LoggedLine {
  level: string;
  fields: Record<string, unknown>;
  message: string;
}

/** Log lines as level, fields and message. */
export function capturingLogger(): { logger: Logger; lines: LoggedLine[] } {
  const lines: LoggedLine[] = [];
  const at = (level: string) => (fields: object | string, message = '') => void lines.push({ level, fields: fields as Record<string, unknown>, message });
  const logger: Logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), child: () => logger };
  return { logger, lines };
}
