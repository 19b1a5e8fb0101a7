#!/usr/bin/env bash
# Builds the programs that users run as sidecars and the real-node tests stop, from the Go module
# proxy into a cache outside the repository, once per version. Prints the bin directory:
#   otelcol          an OpenTelemetry Collector assembled by the collector's builder
#                    (go.opentelemetry.io/collector/cmd/builder) from its otlp receiver and
#                    debug exporter: the distributions' own cmd/ folders are nested modules the
#                    proxy does not serve
#   cloud-sql-proxy  Cloud SQL Auth Proxy v2, with its --quitquitquit admin endpoint
# Only these two binaries are built (static, CGO_ENABLED=0).
set -euo pipefail
source "$(dirname "$0")/versions.sh"
source "$(dirname "$0")/build-once.sh"

OUT="$SIDECAR_TERMINATOR_CACHE/sidecar-programs-otelcol-$OTELCOL_VERSION-cloud-sql-proxy-$CLOUD_SQL_PROXY_VERSION"
BIN="$OUT/bin"
done_building() { [[ -x "$BIN/otelcol" && -x "$BIN/cloud-sql-proxy" ]]; }
build_once "the sidecar programs" done_building "$BIN"
mkdir -p "$BIN"
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
log() { echo "[sidecar-programs] $*" >&2; }

build_otelcol() {
  local work="$OUT/src-otelcol" version="${OTELCOL_VERSION#v}"
  rm -rf "$work" && mkdir -p "$work" && cd "$work"
  log "building the collector's builder $OTELCOL_VERSION"
  GOBIN="$work/tools" go install "go.opentelemetry.io/collector/cmd/builder@$OTELCOL_VERSION" >&2
  cat > builder.yaml <<YAML
dist:
  name: otelcol
  description: OpenTelemetry Collector (otlp receiver, debug exporter) for sidecar-terminator's tests
  version: $version
  output_path: $work/dist
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver $OTELCOL_VERSION
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter $OTELCOL_VERSION
YAML
  log "assembling and compiling the collector (otlp receiver, debug exporter)"
  "$work/tools/builder" --config builder.yaml --ldflags "-s -w" >&2
  mv "$work/dist/otelcol" "$BIN/otelcol"
}

build_cloud_sql_proxy() {
  local work="$OUT/src-cloud-sql-proxy" module=github.com/GoogleCloudPlatform/cloud-sql-proxy/v2
  rm -rf "$work" && mkdir -p "$work" && cd "$work"
  log "compiling $module@$CLOUD_SQL_PROXY_VERSION"
  GOBIN="$work/bin" go install -trimpath -ldflags "-s -w" "$module@$CLOUD_SQL_PROXY_VERSION" >&2
  mv "$work/bin/v2" "$BIN/cloud-sql-proxy" 2>/dev/null || mv "$work/bin/cloud-sql-proxy" "$BIN/cloud-sql-proxy"
}

[[ -x "$BIN/otelcol" ]] || (build_otelcol)
[[ -x "$BIN/cloud-sql-proxy" ]] || (build_cloud_sql_proxy)
rm -rf "$OUT"/src-*
echo "$BIN"
