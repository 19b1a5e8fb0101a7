/** Whether an error from client-node is an API answer with one of these HTTP status codes. */
export function isApiError(error: unknown, ...codes: number[]): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' && codes.includes(code);
}

/** The API server's own message of a client-node error (its Status body), else the error's message. */
export function apiErrorMessage(error: unknown): string {
  const body = (error as { body?: unknown } | null)?.body;
  if (typeof body === 'string') {
    try {
      return (JSON.parse(body) as { message?: string }).message ?? body;
    } catch {
      return body;
    }
  }
  return error instanceof Error ? error.message : String(error);
}
