#!/usr/bin/env bash
# The project's test command, closing with one "N passed, N failed" line.
#   scripts/test.sh           (make test) everything: type-check, lint, build or reuse the cached
#                             control plane, every test (unit and end-to-end) with coverage, and
#                             the coverage floors (scripts/coverage-floor.ts).
#   scripts/test.sh --unit    (make test-unit, npm run test:unit) the inner loop: every test that
#                             needs no control plane, no Go and no download, i.e. all but test/e2e,
#                             test/chart and the CLI on other Node.js lines, save two stress runs
#                             (unit_loop says which; UNIT_STRESS=1 keeps them).
#   scripts/test.sh FILE...   (npm test -- FILE...) these test files, after the type-check; the
#                             control plane is built only when one of them needs it.
set -euo pipefail
shopt -s globstar
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"
start=$SECONDS

# tap builds the plugins it runs test files with into node_modules. A fresh install holds tap's
# default set, whose TypeScript loader .taprc leaves out (Node runs the tests' TypeScript itself)
# and under which t.mockImport's mocks do not apply; the runner rebuilds only for the runs after the
# one that finds the difference. So the set .taprc names is built first, once per .taprc and lock.
tap_plugins="node_modules/.cache/sidecar-terminator/tap-plugins-$(cat .taprc package-lock.json | sha256sum | cut -c1-16)"
if [ ! -f "$tap_plugins" ]; then
  tap build >/dev/null
  mkdir -p "$(dirname "$tap_plugins")" && touch "$tap_plugins"
fi

# Incremental: a second run re-checks only what changed (its state is kept in node_modules/.cache).
typecheck() { tsc -p tsconfig.json --noEmit --incremental --tsBuildInfoFile node_modules/.cache/sidecar-terminator/tsbuildinfo; }

# tap closes each run with a line such as `# { total: 12, pass: 10, fail: 1, skip: 1 }`: the sum of
# `what` (pass, fail, skip) over the runs logged in these files.
count() {
  local what=$1 sum=0 log n
  shift
  for log in "$@"; do
    n=$(grep -E '^# \{ total: [0-9]+' "$log" | tail -n 1 | grep -oE "$what: [0-9]+" | grep -oE '[0-9]+' || echo 0)
    sum=$((sum + n))
  done
  echo "$sum"
}

# The inner loop. Each test file runs once, by scripts/unit-runner.ts (tap's runner starts every
# file with loaders the loop does not need): those of test/policy and test/watcher with the
# coverage their floor needs; the type-check beside them.
unit_loop() {
  # Fewer fuzz cases than make test's 3,000 keep the loop short; FUZZ_CASES still wins.
  export FUZZ_CASES="${FUZZ_CASES:-1000}"
  # .taprc's jobs fit the end-to-end files (a control plane each). A unit test file takes a core
  # while it computes, and several wait on timers part of the time: one more than the cores.
  local jobs="${UNIT_JOBS:-$(($(nproc) + 1))}"
  # Left to make test, with the end-to-end suite: the CLI on each Node.js line downloads those
  # releases (150 MB the first time); test/webhook/growth.test.ts times every hostile body shape at
  # three sizes, several times over, and adversarial.test.ts's test of every shape at the API server's
  # 3 MiB limit judges each on every endpoint: over a minute of CPU each, most of the loop's time
  # (that test is named to tap to leave out; the other tests of the file stay).
  local files=() stress=() file
  for file in test/**/*.test.ts; do
    case "$file" in
      test/e2e/* | test/chart/* | test/cli/node-lines.test.ts) ;;
      test/webhook/growth.test.ts) [ -n "${UNIT_STRESS:-}" ] && files+=("$file") ;;
      *) files+=("$file") ;;
    esac
  done
  [ -n "${UNIT_STRESS:-}" ] || stress=(--grep '^every shape of hostile body at the API server limit' --invert)
  local checked log
  checked=$(mktemp) log=$(mktemp)
  trap 'rm -f "$checked" "$log"' EXIT

  typecheck >"$checked" 2>&1 &
  local checking=$!

  echo "== tests (node $(node --version)), $jobs at a time, the type-check meanwhile; test/policy and test/watcher with coverage: every branch of src/policy, by its unit tests (scripts/coverage-floor.ts says why)"
  set +e
  node scripts/unit-runner.ts --jobs "$jobs" --cover test/policy --cover test/watcher "${stress[@]}" "${files[@]}" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  # The same rule as make test's, so that a branch of src/policy without its test fails here first.
  node scripts/coverage-floor.ts policy || status=1
  echo "-- type-check (tsc --noEmit)"
  wait "$checking" || status=1
  cat "$checked"
  set -e

  echo "unit tests: $((SECONDS - start)) s, type-check included"
  echo "tests: $(count pass "$log") passed, $(count fail "$log") failed, $(count skip "$log") skipped"
  exit "$status"
}

mode=all
tap_args=()
if [ "${1:-}" = "--unit" ]; then
  shift
  [ $# -eq 0 ] || { echo "scripts/test.sh --unit takes no arguments (run chosen files with: scripts/test.sh FILE...)" >&2; exit 2; }
  unit_loop
elif [ $# -gt 0 ]; then
  mode=files
  tap_args=("$@")
fi

echo "== type-check (tsc --noEmit)"
typecheck

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
# Every branch of src/policy, measured by their own unit tests alone (unit_loop does the same).
if [ "$mode" != files ] && [ "$status" -eq 0 ]; then
  echo "== coverage: every branch of src/policy, by its unit tests (scripts/coverage-floor.ts says why)"
  tap --coverage-report=json-summary test/policy/*.test.ts test/watcher/*.test.ts >/dev/null && node scripts/coverage-floor.ts policy || status=1
fi
set -e

if [ "$status" -ne 0 ]; then
  failed=$(awk -f scripts/tap-failures.awk "$log")
  [ -z "$failed" ] || printf '== what failed (scripts/tap-failures.awk)\n%s\n' "$failed"
fi
echo "tests: $(count pass "$log") passed, $(count fail "$log") failed, $(count skip "$log") skipped"
exit "$status"
