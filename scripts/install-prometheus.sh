#!/usr/bin/env bash
# Prometheus and promtool, Debian's build (the `prometheus` package of the release this machine
# runs), for the alert tests: `promtool test rules` on the chart's PrometheusRule, and a real
# Prometheus scraping the add-on on a real node. Prints the directory holding both binaries.
#
# Uses the ones on the PATH when there are; otherwise scripts/install-debian-tool.sh fetches the
# package and unpacks it into the cache, once per version (two binaries, about 19 MB to fetch).
set -euo pipefail

if command -v promtool >/dev/null && command -v prometheus >/dev/null; then
  dirname "$(command -v promtool)"
  exit 0
fi
dirname "$(bash "$(dirname "$0")/install-debian-tool.sh" prometheus)"
