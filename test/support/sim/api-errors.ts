import { ApiException } from '@kubernetes/client-node';

/** True for an API error with that HTTP status (client calls throw ApiException, watches set statusCode). */
export function isApiError(err: unknown, status: number): boolean {
  if (err instanceof ApiException) return err.code === status;
  return (err as { statusCode?: unknown } | undefined)?.statusCode === status;
}

/** One line for the log: the API server's message when there is one. */
export function describeError(err: unknown): string {
  if (err instanceof ApiException) {
    const body: unknown = typeof err.body === 'string' ? safeParse(err.body) : err.body;
    const message = (body as { message?: unknown } | undefined)?.message;
    return `HTTP ${err.code}${typeof message === 'string' ? `: ${message}` : ''}`;
  }
  return err instanceof Error ? err.message : String(err);
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
