import { resolve } from 'node:path';

/** The repository's root directory, which the tests, scripts and the chart are found from. */
export const repoRoot = resolve(import.meta.dirname, '../..');
