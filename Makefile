# Small entry points; npm scripts hold the details.
.PHONY: test control-plane

# Node 24 comes from the `node` devDependency.
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

# Builds (once, then cached under ~/.cache/sidecar-terminator) etcd, kube-apiserver,
# kube-controller-manager and kubectl for the end-to-end tests; prints the bin directory.
control-plane:
	bash scripts/build-control-plane.sh

test:
	npm test
