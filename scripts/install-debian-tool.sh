#!/usr/bin/env bash
# A program Debian packages prebuilt, for the tests, fetched with apt-get and unpacked into the
# cache once per package version rather than installed; prints the path of its binary:
#   docker-registry  CNCF Distribution's registry (2.8), which the release test pushes the release
#                    to and the real nodes pull from. An install would start it as a system
#                    service on port 5000. One static binary of some 21 MB, against minutes of CPU
#                    to build Distribution from the Go module proxy (storage drivers for three
#                    clouds come with it).
#   shellcheck       what actionlint runs on the release workflow's shell steps (links libffi and
#                    libgmp, which Debian systems have).
#   prometheus       Prometheus and promtool (scripts/install-prometheus.sh): an install would start
#                    Prometheus as a system service and pull its web UI's JavaScript libraries.
#                    Prints promtool's path; prometheus is beside it.
#
#   bash scripts/install-debian-tool.sh docker-registry|shellcheck|prometheus
#
# Needs apt-get; runs `apt-get update` first when the package lists are missing (as root on a
# fresh machine).
set -euo pipefail
source "$(dirname "$0")/versions.sh"

package="${1:-}"
case "$package" in
  docker-registry) binary=usr/bin/docker-registry ;;
  shellcheck) binary=usr/bin/shellcheck ;;
  prometheus) binary=usr/bin/promtool ;;
  *) echo "usage: bash scripts/install-debian-tool.sh docker-registry|shellcheck|prometheus" >&2; exit 2 ;;
esac
command -v apt-get >/dev/null || { echo "the tests need Debian's $package package; this machine has no apt-get to fetch it" >&2; exit 1; }
CACHE="$SIDECAR_TERMINATOR_CACHE"
mkdir -p "$CACHE"
exec 9>"$CACHE/$package.lock"
flock 9
candidate() { apt-cache policy "$package" 2>/dev/null | sed -n 's/^ *Candidate: //p'; }
version=$(candidate)
if [[ -z "$version" || "$version" == "(none)" ]]; then
  echo "[$package] apt-get update (the package lists are missing)" >&2
  apt-get update -qq >&2
  version=$(candidate)
fi
[[ -n "$version" && "$version" != "(none)" ]] || { echo "apt knows no $package package: is this Debian or Ubuntu with its main archive?" >&2; exit 1; }
OUT="$CACHE/$package-deb-${version//[:+~]/_}"
if [[ -x "$OUT/$binary" ]]; then
  echo "$OUT/$binary"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "[$package] fetching Debian's $package $version" >&2
# As root into a private directory, which apt's _apt user cannot write to.
(cd "$work" && apt-get download -qq -o APT::Sandbox::User=root "$package=$version" >&2)
rm -rf "$OUT.tmp" && mkdir -p "$OUT.tmp"
dpkg-deb -x "$work/${package}_"*.deb "$OUT.tmp"
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
echo "$OUT/$binary"
