#!/usr/bin/env bash
# cert-manager's CRDs (Certificate, Issuer, ClusterIssuer, ...), for the tests of the chart's
# webhook.tls.certManager option: from cert-manager's root Go module on the Go module proxy
# (deploy/crds), into a cache outside the repository, once per version. cert-manager's controller
# and cainjector live in nested Go modules the proxy does not serve, so nothing is built: the
# tests apply the CRDs to a real API server and play the controller's two writes themselves
# (docs/guarantees.md says which). Prints the directory holding the CRD files.
set -euo pipefail
source "$(dirname "$0")/versions.sh"
source "$(dirname "$0")/build-once.sh"

OUT="$SIDECAR_TERMINATOR_CACHE/cert-manager-$CERT_MANAGER_VERSION"
done_fetching() { [[ -f "$OUT/crds/cert-manager.io_certificates.yaml" ]]; }
build_once "cert-manager's CRDs (fetched from the Go module proxy)" done_fetching "$OUT/crds"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
module=github.com/cert-manager/cert-manager
echo "[cert-manager] downloading $module@$CERT_MANAGER_VERSION" >&2
dir=$(go mod download -json "$module@$CERT_MANAGER_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",*$/\1/p')
[[ -n "$dir" && -d "$dir/deploy/crds" ]] || { echo "could not download $module@$CERT_MANAGER_VERSION with its deploy/crds from the Go module proxy" >&2; exit 1; }
rm -rf "$OUT" && mkdir -p "$OUT"
cp "$dir"/deploy/crds/*.yaml "$OUT/" && chmod u+w "$OUT"/*.yaml
mkdir "$OUT/crds.tmp" && mv "$OUT"/*.yaml "$OUT/crds.tmp/" && mv "$OUT/crds.tmp" "$OUT/crds"
echo "$OUT/crds"
