#!/usr/bin/env bash
# An OCI registry for the release test: CNCF Distribution's registry, Debian's build (the
# `docker-registry` package, Distribution 2.8), which the release is pushed to and the real nodes
# pull from. Prints the path of the binary.
#
# The package is fetched with apt-get and unpacked into the cache, once per version, rather than
# installed: an install would start a registry as a system service on port 5000. One static binary
# of some 21 MB, against minutes of CPU to build Distribution v3 from the Go module proxy (storage
# drivers for three clouds come with it). Needs apt-get; runs `apt-get update` first when the
# package lists are missing (as root on a fresh machine).
set -euo pipefail
source "$(dirname "$0")/versions.sh"

command -v apt-get >/dev/null || { echo "the release test needs an OCI registry (Debian's docker-registry package); this machine has no apt-get to fetch it" >&2; exit 1; }
CACHE="$SIDECAR_TERMINATOR_CACHE"
mkdir -p "$CACHE"
exec 9>"$CACHE/docker-registry.lock"
flock 9
candidate() { apt-cache policy docker-registry 2>/dev/null | sed -n 's/^ *Candidate: //p'; }
version=$(candidate)
if [[ -z "$version" || "$version" == "(none)" ]]; then
  echo "[registry] apt-get update (the package lists are missing)" >&2
  apt-get update -qq >&2
  version=$(candidate)
fi
[[ -n "$version" && "$version" != "(none)" ]] || { echo "apt knows no docker-registry package: is this Debian or Ubuntu with its main archive?" >&2; exit 1; }
OUT="$CACHE/docker-registry-deb-${version//[:+~]/_}"
if [[ -x "$OUT/usr/bin/docker-registry" ]]; then
  echo "$OUT/usr/bin/docker-registry"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "[registry] fetching Debian's docker-registry $version" >&2
# As root into a private directory, which apt's _apt user cannot write to.
(cd "$work" && apt-get download -qq -o APT::Sandbox::User=root "docker-registry=$version" >&2)
rm -rf "$OUT.tmp" && mkdir -p "$OUT.tmp"
dpkg-deb -x "$work"/docker-registry_*.deb "$OUT.tmp"
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
echo "$OUT/usr/bin/docker-registry"
