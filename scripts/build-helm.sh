#!/usr/bin/env bash
# Builds helm from the Go module proxy into a cache outside the repository, once per version,
# the way scripts/build-control-plane.sh builds the control plane. Prints the path of the binary.
set -euo pipefail
source "$(dirname "$0")/versions.sh"
source "$(dirname "$0")/build-once.sh"

CACHE="$SIDECAR_TERMINATOR_CACHE"
OUT="$CACHE/helm-$HELM_VERSION"
BIN="$OUT/bin/helm"
built() { [[ -x "$BIN" ]]; }
build_once helm built "$BIN"
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

log() { echo "[helm] $*" >&2; }

# A wrapper module: `go install pkg@version` would also do for this release (its go.mod has no
# replace directives), but a wrapper keeps working when a release adds some.
dir="$OUT/src"
rm -rf "$dir" && mkdir -p "$dir" "$OUT/bin" && cd "$dir"
go mod init local/helm >/dev/null 2>&1
cat > tools.go <<GO
//go:build tools

package tools

import _ "helm.sh/helm/v3/cmd/helm"
GO
log "resolving helm.sh/helm/v3@$HELM_VERSION"
go get "helm.sh/helm/v3@$HELM_VERSION" >&2
go mod tidy >&2 || true
# As helm's Makefile does: the Kubernetes version that `helm template` and `helm lint` assume
# without a cluster comes from the client-go it is built with (v0.35 -> 1.35); without these
# flags it would be 1.20, below the chart's kubeVersion.
client_go=$(go list -m -f '{{.Version}}' k8s.io/client-go)
minor=$(echo "$client_go" | cut -d. -f2)
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags="$ldflags -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
done
log "compiling helm (client-go $client_go)"
go build -trimpath -ldflags "$ldflags" -o "$BIN.tmp" helm.sh/helm/v3/cmd/helm >&2
mv "$BIN.tmp" "$BIN"
echo "$BIN"
