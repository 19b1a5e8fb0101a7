#!/usr/bin/env bash
# Builds the Kubernetes binaries of one release from the Go module proxy into a cache outside the
# repository, once per version: etcd, kube-apiserver, kube-controller-manager and kubectl (the
# control plane; kube-scheduler for clusters with a real node), kubelet and kube-proxy (the real node).
# Prints the bin directory.
set -euo pipefail
source "$(dirname "$0")/versions.sh"

OUT="$SIDECAR_TERMINATOR_CACHE/control-plane-$K8S_VERSION-etcd-$ETCD_VERSION"
BIN="$OUT/bin"
KUBERNETES_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy)

missing() {
  local name
  for name in etcd "${KUBERNETES_BINARIES[@]}"; do [[ -x "$BIN/$name" ]] || return 0; done
  return 1
}

if ! missing; then
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null || { echo "go is required to build the control plane (https://go.dev/dl/)" >&2; exit 1; }
mkdir -p "$BIN"
# Test files run in parallel and may all ask at once: one builds, the others wait for it.
exec 9>"$OUT.lock"
flock 9
if ! missing; then
  echo "$BIN"
  exit 0
fi
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

log() { echo "[control-plane] $*" >&2; }

# k8s.io/kubernetes points its k8s.io/* staging modules at local paths, so it is built from a
# wrapper module that replaces each of them with the published v0.X.Y tag of the same release.
build_kubernetes() {
  local dir="$OUT/src-kubernetes"
  rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
  go mod init local/controlplane >/dev/null 2>&1
  local gomod staging="v0${K8S_VERSION#v1}"
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",*$/\1/p')
  local replaces
  replaces=$(grep -oE '^[[:space:]]+k8s\.io/[a-z0-9-]+ v0\.0\.0$' "$gomod" | awk '{print $1}' | sort -u)
  for m in $replaces; do
    go mod edit -replace "$m=$m@$staging"
  done
  local packages=() name
  for name in "${KUBERNETES_BINARIES[@]}"; do packages+=("k8s.io/kubernetes/cmd/$name"); done
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    printf '\t_ "%s"\n' "${packages[@]}"
    printf ')\n'
  } > tools.go
  log "resolving k8s.io/kubernetes@$K8S_VERSION"
  go get "k8s.io/kubernetes@$K8S_VERSION" >&2
  go mod tidy >&2 || true
  log "compiling ${KUBERNETES_BINARIES[*]} (several minutes on 2 cores)"
  go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION" \
    -o "$BIN/" "${packages[@]}" >&2
}

build_etcd() {
  local dir="$OUT/src-etcd"
  rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
  go mod init local/etcd >/dev/null 2>&1
  cat > tools.go <<GO
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  log "resolving go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
  go mod tidy >&2 || true
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3 >&2
}

[[ -x "$BIN/etcd" ]] || (build_etcd)
for name in "${KUBERNETES_BINARIES[@]}"; do
  if [[ ! -x "$BIN/$name" ]]; then
    (build_kubernetes)
    break
  fi
done
echo "$BIN"
