#!/usr/bin/env bash
# Builds the benchmarks' OpenKruise peer: bench/kruise/main.go, a main around Kruise's own
# SidecarTerminator controller package, compiled inside a writable copy of the Kruise module from
# the Go module proxy (its go.mod pins the Kubernetes libraries with replace directives, which
# apply only inside that module), into a cache outside the repository, once per Kruise version and
# version of main.go. Prints the binary's path.
set -euo pipefail
source "$(dirname "$0")/versions.sh"
source "$(dirname "$0")/kruise-module.sh"
source "$(dirname "$0")/build-once.sh"

main_go="$(cd "$(dirname "$0")/.." && pwd)/bench/kruise/main.go"
digest=$(sha256sum "$main_go" | cut -c1-12)
OUT="$SIDECAR_TERMINATOR_CACHE/kruise-peer-$KRUISE_VERSION"
BIN="$OUT/bin/sidecarterminator-$digest"
built() { [[ -x "$BIN" ]]; }
build_once "the OpenKruise peer" built "$BIN"
mkdir -p "$OUT/bin"
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
log() { echo "[kruise-peer] $*" >&2; }

module=github.com/openkruise/kruise
src="$OUT/src"
if [[ ! -f "$src/go.mod" ]]; then
  log "resolving $module@$KRUISE_VERSION"
  dir=$(kruise_module_dir)
  rm -rf "$src" && cp -r "$dir" "$src" && chmod -R u+w "$src"
fi
mkdir -p "$src/cmd/sidecarterminator-peer"
cp "$main_go" "$src/cmd/sidecarterminator-peer/main.go"
cd "$src"
log "compiling Kruise's SidecarTerminator controller with bench/kruise/main.go (minutes on 2 cores the first time)"
go build -trimpath -ldflags "-s -w" -o "$BIN.tmp" ./cmd/sidecarterminator-peer >&2
mv "$BIN.tmp" "$BIN"
# Binaries of earlier versions of main.go.
find "$OUT/bin" -name 'sidecarterminator-*' ! -path "$BIN" -delete
echo "$BIN"
