// Prints the table of serve flags of docs/installation.md, generated from src/config.ts; --write
// puts it into that page between its markers, --check exits 1 when the page is out of date.
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { serveFlagsTable, withServeFlagsTable } from '../test/support/config-reference.ts';

const pagePath = resolve(import.meta.dirname, '../docs/installation.md');
const mode = process.argv[2];
if (mode === '--write' || mode === '--check') {
  const current = readFileSync(pagePath, 'utf8');
  const updated = withServeFlagsTable(current);
  if (mode === '--write') writeFileSync(pagePath, updated);
  else if (updated !== current) {
    process.stderr.write('docs/installation.md: the table of serve flags is out of date; run node scripts/config-reference.ts --write\n');
    process.exitCode = 1;
  }
} else if (mode === undefined) {
  process.stdout.write(`${serveFlagsTable()}\n`);
} else {
  process.stderr.write('usage: node scripts/config-reference.ts [--write | --check]\n');
  process.exitCode = 2;
}
