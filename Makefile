# Small entry points; npm scripts hold the details.
.PHONY: test test-unit control-plane build

# Node 24 comes from the `node` devDependency.
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

# npm packages, reinstalled when the lock file changes. Only the install scripts package.json's
# allowScripts approves run; any other one fails the install (scripts/install-packages.sh).
node_modules: package.json package-lock.json
	bash scripts/install-packages.sh
	@touch node_modules

# Builds (once, then cached under ~/.cache/sidecar-terminator) etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kubelet and kube-proxy for the end-to-end tests;
# prints the bin directory.
control-plane:
	bash scripts/build-control-plane.sh

build: node_modules
	npm run build

# The test command: installs what is missing, type-checks, lints, runs unit and end-to-end
# tests with coverage, and fails below the coverage floor.
test: node_modules
	npm test

# The inner loop: every test that needs no control plane and no Go, no lint (its time:
# docs/development.md, "The inner loop").
test-unit: node_modules
	npm run test:unit

.PHONY: dev helm chart-test

# A local cluster (docs/getting-started.md): a real control plane, two real nodes (kubelet, containerd,
# runc: a normal one and one registered as a virtual kubelet; only where a real node cannot run, not
# root or no cgroups, the kubelet simulator plays them) and sidecar-terminator serve registered with
# it; runs until Ctrl-C.
dev: node_modules
	bash scripts/build-control-plane.sh
	node scripts/dev.ts

# Builds helm (once, then cached under ~/.cache/sidecar-terminator); prints its path.
helm:
	bash scripts/build-helm.sh

# The chart's tests: lint, template, schema, RBAC against the code, install on a real API server.
chart-test: node_modules
	npm test -- test/chart/*.test.ts

.PHONY: bench

# Benchmarks (bench/README.md): admission latency and throughput next to the framework's limit,
# where admission time goes, and the watcher's burst latency and memory next to a watcher that
# caches every pod, a rolling restart of the webhook under load, and the webhook under hostile
# reviews and half-open connections (`make bench ONLY=hostile`). Reproduces every figure of
# bench/README.md, which gives how long a run takes;
# `make bench QUICK=1` is a short run that checks the harness (and that OpenKruise's controller
# still builds and runs); `make bench ONLY=watcher,parity` runs some parts. Never part of `make test`.
bench: node_modules
	node bench/run.ts $(if $(QUICK),--quick) $(if $(ONLY),--only $(ONLY))

.PHONY: test-matrix

# The end-to-end suite (real node included) on Kubernetes 1.29, 1.33 and 1.37, each built once
# into the cache; writes the table "Kubernetes versions" of docs/installation.md. On 1.29 the chart's
# tests are skipped: its kubeVersion is >=1.30. Not part of `make test`.
# `make test-matrix VERSIONS=v1.29.15` runs one version; the others keep their last result.
test-matrix: node_modules
	node scripts/test-matrix.ts $(VERSIONS)

.PHONY: release

# A release without Docker (docs/development.md, "Releasing"): multi-architecture images, their
# SBOMs, the chart, the kubectl plugin per platform and its krew manifest, checksums, into
# release/VERSION (OUT=DIR elsewhere); PUSH=registry/prefix pushes the images and the chart there.
release: node_modules
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=x.y.z [PUSH=registry/prefix] [OUT=dir]" >&2; exit 2; }
	node scripts/release.ts --version $(VERSION) $(if $(OUT),--out $(OUT)) $(if $(PUSH),--push $(PUSH))
