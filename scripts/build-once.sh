# shellcheck shell=bash
# Sourced by the scripts that build or fetch a program into the cache, once per version.
#
#   build_once WHAT DONE PRINT
#
# Prints PRINT and exits when the command DONE says the cache holds it. Otherwise checks that go
# is installed and takes $OUT.lock, held until the script exits: test files run in parallel and
# may ask at once, so one builds and the others wait for it, then find it built (DONE again).
build_once() {
  local what=$1 done=$2 print=$3
  if $done; then
    echo "$print"
    exit 0
  fi
  command -v go >/dev/null || { echo "go is required to build $what (https://go.dev/dl/)" >&2; exit 1; }
  mkdir -p "$(dirname "$OUT")"
  exec 9>"$OUT.lock"
  flock 9
  if $done; then
    echo "$print"
    exit 0
  fi
}
