#!/usr/bin/env bash
# Prometheus and promtool, Debian's build (the `prometheus` package of the release this machine
# runs), for the alert tests: `promtool test rules` on the chart's PrometheusRule, and a real
# Prometheus scraping the add-on on a real node. Prints the directory holding both binaries.
#
# Uses the ones on the PATH when there are. Otherwise the package is fetched with apt-get and
# unpacked into the cache, once per version, rather than installed: an install would start
# Prometheus as a system service and pull its web UI's JavaScript libraries, and the tests need
# two binaries (about 19 MB to fetch). Needs apt-get; runs `apt-get update` first when the package
# lists are missing (as root on a fresh machine).
set -euo pipefail
source "$(dirname "$0")/versions.sh"

if command -v promtool >/dev/null && command -v prometheus >/dev/null; then
  dirname "$(command -v promtool)"
  exit 0
fi
command -v apt-get >/dev/null || { echo "promtool is needed (Debian's prometheus package, or the upstream release on the PATH); this machine has no apt-get to fetch it" >&2; exit 1; }

CACHE="$SIDECAR_TERMINATOR_CACHE"
mkdir -p "$CACHE"
exec 9>"$CACHE/prometheus.lock"
flock 9
candidate() { apt-cache policy prometheus 2>/dev/null | sed -n 's/^ *Candidate: //p'; }
version=$(candidate)
if [[ -z "$version" || "$version" == "(none)" ]]; then
  echo "[prometheus] apt-get update (the package lists are missing)" >&2
  apt-get update -qq >&2
  version=$(candidate)
fi
[[ -n "$version" && "$version" != "(none)" ]] || { echo "apt knows no prometheus package: is this Debian or Ubuntu with its main archive?" >&2; exit 1; }
OUT="$CACHE/prometheus-deb-${version//[:+~]/_}"
if [[ -x "$OUT/usr/bin/promtool" && -x "$OUT/usr/bin/prometheus" ]]; then
  echo "$OUT/usr/bin"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "[prometheus] fetching Debian's prometheus $version" >&2
(cd "$work" && apt-get download -qq "prometheus=$version" >&2)
rm -rf "$OUT.tmp" && mkdir -p "$OUT.tmp"
dpkg-deb -x "$work"/prometheus_*.deb "$OUT.tmp"
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
echo "$OUT/usr/bin"
