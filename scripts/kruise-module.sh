# Sourced by build-kruise.sh and build-kruise-peer.sh: `kruise_module_dir` downloads
# github.com/openkruise/kruise at $KRUISE_VERSION from the Go module proxy and prints the directory
# of its source in the module cache.
#
# The module's hash is checked against KRUISE_MODULE_SUM (scripts/versions.sh) rather than the
# checksum database: the checksum database reachable here has no entry for v1.9.0 (404), and a
# pinned hash is as strict. The hash was taken from what the proxy served; that content is the tree
# of commit 4c2bbcec of github.com/openkruise/kruise, where the tag pointed when the proxy first
# fetched it (the module's .info says so), with ContainerRecreateRequest in v1alpha1 and v1beta1.
kruise_module_dir() {
  local module=github.com/openkruise/kruise json sum dir
  json=$(GONOSUMDB="$module" GOFLAGS=-mod=mod go mod download -json "$module@$KRUISE_VERSION") || {
    echo "could not download $module@$KRUISE_VERSION from the Go module proxy: $json" >&2
    return 1
  }
  sum=$(sed -n 's/^\s*"Sum": "\(.*\)",*$/\1/p' <<<"$json")
  dir=$(sed -n 's/^\s*"Dir": "\(.*\)",*$/\1/p' <<<"$json")
  if [[ -n "$KRUISE_MODULE_SUM" && "$sum" != "$KRUISE_MODULE_SUM" ]]; then
    echo "$module@$KRUISE_VERSION from the Go module proxy has hash $sum, not KRUISE_MODULE_SUM=$KRUISE_MODULE_SUM (scripts/versions.sh): refusing to build it" >&2
    return 1
  fi
  [[ -n "$dir" ]] || { echo "go mod download printed no directory for $module@$KRUISE_VERSION" >&2; return 1; }
  echo "$dir"
}
