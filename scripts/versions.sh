# Every version the project builds or runs against, pinned in one place. Each can be overridden
# from the environment (K8S_VERSION=v1.29.15 make test). Sourced by the build scripts; the tests read
# it through them.
: "${K8S_VERSION:=v1.37.2}"
: "${ETCD_VERSION:=v3.6.16}"
: "${HELM_VERSION:=v3.22.0}"
# The real node: container runtime, OCI runtime, CNI plugins, the CRI command-line client.
: "${CONTAINERD_VERSION:=v2.4.2}"
: "${RUNC_VERSION:=v1.3.6}"
: "${CNI_PLUGINS_VERSION:=v1.9.1}"
: "${CRI_TOOLS_VERSION:=v1.36.0}"
# OpenKruise, for its kruise-daemon and its controller next to ours; the hash of the module the
# Go module proxy serves for it (scripts/kruise-module.sh checks it; empty: not checked).
: "${KRUISE_VERSION:=v1.9.0}"
: "${KRUISE_MODULE_SUM=h1:7MWDURrU7VlkapL1qaFLQehJG0OdTN338RSvzuzR3kU=}"
# Programs users run as sidecars, for the real-node tests of the stop methods: an OpenTelemetry
# Collector assembled by its builder from the collector's own components, and Cloud SQL Auth Proxy v2.
: "${OTELCOL_VERSION:=v0.165.0}"
: "${CLOUD_SQL_PROXY_VERSION:=v2.27.0}"
# The npm that installs the packages where the machine's is older than 11.16, which is the first to
# enforce package.json's allowScripts (scripts/install-packages.sh): the one Node.js 24.21 ships.
: "${NPM_VERSION:=11.19.0}"
# The release (make release, scripts/release.ts) and its test: the OCI client that pushes it, the
# kubectl plugin manager that installs the plugin, the workflow linter (scripts/build-go-tool.sh).
: "${CRANE_VERSION:=v0.22.1}"
: "${KREW_VERSION:=v0.4.3}"
: "${ACTIONLINT_VERSION:=v1.7.12}"
: "${SIDECAR_TERMINATOR_CACHE:=$HOME/.cache/sidecar-terminator}"
export K8S_VERSION ETCD_VERSION HELM_VERSION CONTAINERD_VERSION RUNC_VERSION CNI_PLUGINS_VERSION CRI_TOOLS_VERSION KRUISE_VERSION KRUISE_MODULE_SUM OTELCOL_VERSION CLOUD_SQL_PROXY_VERSION NPM_VERSION CRANE_VERSION KREW_VERSION ACTIONLINT_VERSION SIDECAR_TERMINATOR_CACHE
