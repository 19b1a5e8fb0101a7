#!/usr/bin/env bash
# Builds what a real node runs besides kubelet (which scripts/build-control-plane.sh builds with the
# rest of Kubernetes): containerd 2 with its runc shim and ctr, crictl, runc, and the CNI plugins bridge,
# host-local and loopback, from the Go module proxy into a cache outside the repository, once per
# version. Prints the bin directory (the CNI plugins are in its cni/ subdirectory).
#
# runc needs cgo and libseccomp (headers and static library from Debian's libseccomp-dev, unpacked
# into the cache): without seccomp support every container that asks for the RuntimeDefault profile
# fails. Everything else builds with CGO_ENABLED=0.
set -euo pipefail
source "$(dirname "$0")/versions.sh"

OUT="$SIDECAR_TERMINATOR_CACHE/node-containerd-$CONTAINERD_VERSION-runc-$RUNC_VERSION-cni-$CNI_PLUGINS_VERSION-crictl-$CRI_TOOLS_VERSION"
BIN="$OUT/bin"
BINARIES=(containerd containerd-shim-runc-v2 ctr crictl runc cni/bridge cni/host-local cni/loopback)

missing() {
  local name
  for name in "${BINARIES[@]}"; do [[ -x "$BIN/$name" ]] || return 0; done
  return 1
}

if ! missing && command -v nft >/dev/null; then
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null || { echo "go is required to build the node (https://go.dev/dl/)" >&2; exit 1; }
mkdir -p "$BIN/cni"
log() { echo "[node] $*" >&2; }

# kube-proxy (nftables mode) runs the host's `nft`; it is no Go module, so it comes from Debian.
ensure_nft() {
  command -v nft >/dev/null && return 0
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    log "installing Debian's nftables (kube-proxy programs Services with the nft command)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q nftables >&2 ||
      { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nftables >&2; }
    return 0
  fi
  log "warning: no nft command: kube-proxy cannot run here; install nftables"
}

exec 9>"$OUT.lock"
flock 9
ensure_nft
if ! missing; then
  echo "$BIN"
  exit 0
fi
export GOFLAGS=-mod=mod GOTOOLCHAIN=local

# A module built from a writable copy of itself, so that its own replace directives apply.
module_copy() {
  local module="$1" version="$2" dest="$3" dir
  dir=$(go mod download -json "$module@$version" | sed -n 's/^\s*"Dir": "\(.*\)",*$/\1/p')
  [[ -n "$dir" ]] || { echo "could not download $module@$version from the Go module proxy" >&2; exit 1; }
  rm -rf "$dest" && cp -r "$dir" "$dest" && chmod -R u+w "$dest"
}

build_containerd() {
  local src="$OUT/src-containerd" pkg=github.com/containerd/containerd/v2
  log "resolving $pkg@$CONTAINERD_VERSION"
  module_copy "$pkg" "$CONTAINERD_VERSION" "$src"
  cd "$src"
  log "compiling containerd, containerd-shim-runc-v2, ctr"
  CGO_ENABLED=0 go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
    -ldflags "-s -w -X $pkg/version.Version=$CONTAINERD_VERSION -X $pkg/version.Package=$pkg" \
    -o "$BIN/" ./cmd/containerd ./cmd/containerd-shim-runc-v2 ./cmd/ctr >&2
}

# libseccomp's headers and static library from Debian's libseccomp-dev, unpacked into the cache
# (nothing is installed on the machine): runc links libseccomp statically.
libseccomp_dev() {
  local deps="$OUT/deps"
  if [[ ! -f "$deps/usr/include/seccomp.h" ]]; then
    command -v apt-get >/dev/null || { echo "runc needs libseccomp's headers: this script fetches Debian's libseccomp-dev with apt-get, which this machine lacks; install libseccomp-dev (or libseccomp-devel) and pkg-config" >&2; exit 1; }
    log "fetching Debian's libseccomp-dev (runc's seccomp support needs its headers)"
    rm -rf "$deps" "$OUT/debs" && mkdir -p "$deps" "$OUT/debs"
    (cd "$OUT/debs" && { apt-get download libseccomp-dev >&2 2>/dev/null || { apt-get update -q >&2 && apt-get download libseccomp-dev >&2; }; })
    dpkg-deb -x "$OUT"/debs/libseccomp-dev_*.deb "$deps"
    # Only the static library: the shared one's symlink points at a file outside this directory.
    rm -f "$deps"/usr/lib/*/libseccomp.so
  fi
  echo "$deps"
}

build_runc() {
  local src="$OUT/src-runc" pkg=github.com/opencontainers/runc
  local deps
  deps=$(libseccomp_dev)
  command -v gcc >/dev/null || { echo "runc needs a C compiler (gcc) to build" >&2; exit 1; }
  log "resolving $pkg@$RUNC_VERSION"
  module_copy "$pkg" "$RUNC_VERSION" "$src"
  cd "$src"
  log "compiling runc (cgo, seccomp)"
  PKG_CONFIG_PATH="$(echo "$deps"/usr/lib/*/pkgconfig)" PKG_CONFIG_SYSROOT_DIR="$deps" CGO_ENABLED=1 go build -trimpath -tags "seccomp urfave_cli_no_docs" \
    -ldflags "-s -w -X main.version=${RUNC_VERSION#v}" -o "$BIN/runc" . >&2
}

build_crictl() {
  local src="$OUT/src-cri-tools"
  log "resolving sigs.k8s.io/cri-tools@$CRI_TOOLS_VERSION"
  module_copy sigs.k8s.io/cri-tools "$CRI_TOOLS_VERSION" "$src"
  cd "$src"
  log "compiling crictl"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRI_TOOLS_VERSION" -o "$BIN/crictl" ./cmd/crictl >&2
}

build_cni_plugins() {
  local src="$OUT/src-cni" pkg=github.com/containernetworking/plugins
  log "resolving $pkg@$CNI_PLUGINS_VERSION"
  module_copy "$pkg" "$CNI_PLUGINS_VERSION" "$src"
  cd "$src"
  log "compiling the CNI plugins bridge, host-local, loopback"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/cni/" ./plugins/main/bridge ./plugins/ipam/host-local ./plugins/main/loopback >&2
}

[[ -x "$BIN/containerd" && -x "$BIN/containerd-shim-runc-v2" && -x "$BIN/ctr" ]] || (build_containerd)
[[ -x "$BIN/crictl" ]] || (build_crictl)
[[ -x "$BIN/runc" ]] || (build_runc)
[[ -x "$BIN/cni/bridge" && -x "$BIN/cni/host-local" && -x "$BIN/cni/loopback" ]] || (build_cni_plugins)
echo "$BIN"
