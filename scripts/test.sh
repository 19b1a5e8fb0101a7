#!/usr/bin/env bash
# The project's test command, closing with one "N passed, N failed" line.
#   scripts/test.sh           (make test) everything: type-check, lint, build or reuse the cached
#                             control plane, every test (unit and end-to-end) with coverage, and
#                             the coverage floors (scripts/coverage-floor.ts).
#   scripts/test.sh --unit    (make test-unit, npm run test:unit) the inner loop: every test that
#                             needs no control plane, no Go and no download, i.e. all but test/e2e,
#                             test/chart and the CLI on other Node.js lines.
#   scripts/test.sh FILE...   (npm test -- FILE...) these test files, after the type-check; the
#                             control plane is built only when one of them needs it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"
start=$SECONDS

mode=all
tap_args=()
if [ "${1:-}" = "--unit" ]; then
  mode=unit
  shift
  # Fewer fuzz cases than make test's 3,000 keep the loop short; FUZZ_CASES still wins.
  export FUZZ_CASES="${FUZZ_CASES:-1000}"
  # Coverage is make test's business; without it each test process starts faster. The CLI on
  # each Node.js line downloads those releases (150 MB the first time): make test's business too.
  tap_args=(--exclude 'test/{e2e,chart}/**' --exclude 'test/cli/node-lines.test.ts' --disable-coverage "$@")
elif [ $# -gt 0 ]; then
  mode=files
  tap_args=("$@")
fi

echo "== type-check (tsc --noEmit)"
# Incremental: a second run re-checks only what changed (its state is kept in node_modules/.cache).
tsc -p tsconfig.json --noEmit --incremental --tsBuildInfoFile node_modules/.cache/sidecar-terminator/tsbuildinfo

if [ "$mode" = all ]; then
  echo "== lint (eslint, no warning allowed)"
  npm run --silent lint
fi

if [ "$mode" = all ] || { [ "$mode" = files ] && printf '%s\n' "$@" | grep -qE '(^|/)test/(e2e|chart)/'; }; then
  echo "== control plane binaries"
  bash scripts/build-control-plane.sh
  bash scripts/build-helm.sh
  # Built here once rather than by the first test files that need them, all at once.
  echo "== real node: containerd, runc, CNI plugins, crictl, OpenKruise, images"
  bash scripts/build-node.sh
  bash scripts/build-kruise.sh
  node scripts/build-images.ts
  echo "== the release's tools: crane, krew, actionlint, shellcheck, a registry"
  for tool in crane krew actionlint; do bash scripts/build-go-tool.sh "$tool" >/dev/null; done
  for package in docker-registry shellcheck; do bash scripts/install-debian-tool.sh "$package" >/dev/null; done
fi

echo "== tests (node $(node --version))"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
tap "${tap_args[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$mode" = all ] && [ "$status" -eq 0 ]; then
  echo "== coverage floor (the whole run)"
  tap report json-summary >/dev/null && node scripts/coverage-floor.ts whole
  status=$?
fi
# The inner loop holds src/policy to the same rule as make test (about 30 s), so that a branch
# without its test fails here first.
if [ "$mode" != files ] && [ "$status" -eq 0 ]; then
  echo "== coverage: every branch of src/policy, by its unit tests (scripts/coverage-floor.ts says why)"
  tap --coverage-report=json-summary test/policy/*.test.ts test/watcher/*.test.ts >/dev/null && node scripts/coverage-floor.ts policy || status=1
fi
set -e

# tap closes with a line such as `# { total: 12, pass: 10, fail: 1, skip: 1 }`.
summary=$(grep -E '^# \{ total: [0-9]+' "$log" | tail -n 1 || true)
count() { echo "$summary" | grep -oE "$1: [0-9]+" | grep -oE '[0-9]+' || echo 0; }
[ "$mode" = unit ] && echo "unit tests: $((SECONDS - start)) s, type-check included"
echo "tests: $(count pass) passed, $(count fail) failed, $(count skip) skipped"
exit "$status"
