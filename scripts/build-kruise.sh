#!/usr/bin/env bash
# Builds OpenKruise's kruise-daemon (it stops containers for ContainerRecreateRequests through the
# node's container runtime) and its manager (whose webhook completes each ContainerRecreateRequest,
# and whose SidecarTerminator controller is the peer in the benchmarks), from the Go module proxy
# into a cache outside the repository, once per version, with the CRDs of the same release.
# Prints the output directory: bin/kruise-daemon, bin/kruise-manager, crd/*.yaml and
# webhook/manifests.yaml (the webhook configurations Kruise's manager fills in).
set -euo pipefail
source "$(dirname "$0")/versions.sh"
source "$(dirname "$0")/kruise-module.sh"
source "$(dirname "$0")/build-once.sh"

OUT="$SIDECAR_TERMINATOR_CACHE/kruise-$KRUISE_VERSION"
done_building() { [[ -x "$OUT/bin/kruise-daemon" && -x "$OUT/bin/kruise-manager" && -d "$OUT/crd" && -f "$OUT/webhook/manifests.yaml" ]]; }
build_once OpenKruise done_building "$OUT"
mkdir -p "$OUT/bin"
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
log() { echo "[kruise] $*" >&2; }

# Kruise pins its Kubernetes libraries with replace directives, which apply only inside its own
# module: build from a writable copy of it, not with `go install pkg@version`.
module=github.com/openkruise/kruise
log "resolving $module@$KRUISE_VERSION"
dir=$(kruise_module_dir)
src="$OUT/src"
rm -rf "$src" && cp -r "$dir" "$src" && chmod -R u+w "$src"
cd "$src"
log "compiling kruise-daemon and kruise-manager (several minutes on 2 cores)"
[[ -x "$OUT/bin/kruise-daemon" ]] || go build -trimpath -ldflags "-s -w" -o "$OUT/bin/kruise-daemon" ./cmd/daemon >&2
[[ -x "$OUT/bin/kruise-manager" ]] || go build -trimpath -ldflags "-s -w" -o "$OUT/bin/kruise-manager" . >&2
rm -rf "$OUT/crd" "$OUT/webhook" && cp -r config/crd/bases "$OUT/crd" && mkdir -p "$OUT/webhook" && cp config/webhook/manifests.yaml "$OUT/webhook/"
echo "$OUT"
