#!/usr/bin/env bash
# The project's test command: type-check, build or reuse the cached control plane, run every
# test (unit and end-to-end), and close with one "N passed, N failed" line.
# Arguments are passed to tap, e.g. `npm test -- test/policy/*.test.ts`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

echo "== type-check (tsc --noEmit)"
tsc -p tsconfig.json --noEmit

echo "== lint (eslint, no warning allowed)"
npm run --silent lint

echo "== control plane binaries"
bash scripts/build-control-plane.sh
bash scripts/build-helm.sh

echo "== tests (node $(node --version))"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
tap "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

# tap closes with a line such as `# { total: 12, pass: 10, fail: 1, skip: 1 }`.
summary=$(grep -E '^# \{ total: [0-9]+' "$log" | tail -n 1 || true)
count() { echo "$summary" | grep -oE "$1: [0-9]+" | grep -oE '[0-9]+' || echo 0; }
echo "tests: $(count pass) passed, $(count fail) failed, $(count skip) skipped"
exit "$status"
