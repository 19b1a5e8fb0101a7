/** Whether an error from client-node is an API answer with one of these HTTP status codes. */
export function isApiError(error: unknown, ...codes: number[]): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' && codes.includes(code);
}
