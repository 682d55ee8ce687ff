# tether: see README.md. `make help` lists the targets.
SHELL := /usr/bin/env bash
GO ?= go

# The pinned tools (etcd, kube-*, kubectl, csi-sanity, mock driver, upstream
# external-provisioner). CI points this at a per-machine cache.
TOOLS_BIN ?= $(CURDIR)/.cache/tools/bin
export TETHER_TOOLS_BIN := $(TOOLS_BIN)

# Test knobs: `make test GOTEST_FLAGS=-v`, `make test PKG=./pkg/binder/...`.
PKG ?= ./...
GOTEST_FLAGS ?=
TEST_TIMEOUT ?= 30m

.PHONY: help build tools test unit lint clean clean-tools

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

build: ## build bin/binder and bin/provisioner
	$(GO) build -o bin/ ./cmd/...

tools: ## build the pinned tools that are missing (first time: about 10 minutes)
	@hack/tools/build.sh "$(TOOLS_BIN)"

test: tools ## run every test (unit and integration, on a real control plane)
	@status=0; $(GO) test -timeout $(TEST_TIMEOUT) $(GOTEST_FLAGS) $(PKG) || status=$$?; \
	  hack/reap.sh "$(TOOLS_BIN)" || status=1; exit $$status

unit: ## unit tests only (no control plane)
	$(GO) test -short $(GOTEST_FLAGS) ./pkg/... ./cmd/...

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd hack/tools && $(GO) vet -tags tools . >/dev/null

clean: ## remove build outputs (keeps the tools cache)
	rm -rf bin _artifacts

clean-tools: ## remove the tools cache (the next `make tools` rebuilds it)
	rm -rf "$(TOOLS_BIN)"
