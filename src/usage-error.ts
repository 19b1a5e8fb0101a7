/** A mistake in the command line or its environment: the message says what and how to fix it. The CLI prints it and exits 2. */
export class UsageError extends Error {}
