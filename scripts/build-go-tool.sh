#!/usr/bin/env bash
# Builds one command-line tool of the release from the Go module proxy into a cache outside the
# repository, once per version, and prints the path of its binary:
#   crane       go-containerregistry's OCI client: make release pushes the images with it
#   krew        the kubectl plugin manager: the release test installs the plugin with it
#   actionlint  the linter of GitHub Actions workflows: make test lints the release workflow
#
#   bash scripts/build-go-tool.sh NAME
#
# Each is one `go install PACKAGE@VERSION` (none of their modules has replace directives), with the
# versions of scripts/versions.sh; only the binary named is built.
set -euo pipefail
source "$(dirname "$0")/versions.sh"
source "$(dirname "$0")/build-once.sh"

name="${1:-}"
case "$name" in
  crane) package=github.com/google/go-containerregistry/cmd/crane version=$CRANE_VERSION ;;
  krew) package=sigs.k8s.io/krew/cmd/krew version=$KREW_VERSION ;;
  actionlint) package=github.com/rhysd/actionlint/cmd/actionlint version=$ACTIONLINT_VERSION ;;
  *) echo "usage: bash scripts/build-go-tool.sh crane|krew|actionlint" >&2; exit 2 ;;
esac

OUT="$SIDECAR_TERMINATOR_CACHE/$name-$version"
BIN="$OUT/bin/$name"
built() { [[ -x "$BIN" ]]; }
build_once "$name" built "$BIN"
mkdir -p "$OUT/bin"
echo "[$name] compiling $package@$version" >&2
# The version the tool reports, where its main package reads it from the linker.
ldflags="-s -w"
case "$name" in
  krew) ldflags="$ldflags -X sigs.k8s.io/krew/internal/version.gitTag=$version" ;;
  actionlint) ldflags="$ldflags -X github.com/rhysd/actionlint.version=${version#v}" ;;
esac
CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local GOBIN="$OUT/tmp" go install -trimpath -ldflags "$ldflags" "$package@$version" >&2
mv "$OUT/tmp/$(basename "$package")" "$BIN"
rm -rf "$OUT/tmp"
echo "$BIN"
