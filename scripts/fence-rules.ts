// Writes the fence's CEL rules (src/kube/fence-rules.ts) into the chart, which renders its
// ValidatingAdmissionPolicies from them: --write updates the file, --check exits 1 when it is out
// of date, no argument prints it.
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { FENCE_RULES } from '../src/kube/fence-rules.ts';

const path = resolve(import.meta.dirname, '../charts/sidecar-terminator/files/fence-rules.json');
const text = `${JSON.stringify(FENCE_RULES, null, 2)}\n`;
const mode = process.argv[2];
if (mode === '--write') writeFileSync(path, text);
else if (mode === '--check') {
  if (readFileSync(path, 'utf8') !== text) {
    process.stderr.write('charts/sidecar-terminator/files/fence-rules.json is out of date; run node scripts/fence-rules.ts --write\n');
    process.exitCode = 1;
  }
} else if (mode === undefined) process.stdout.write(text);
else {
  process.stderr.write('usage: node scripts/fence-rules.ts [--write | --check]\n');
  process.exitCode = 2;
}
