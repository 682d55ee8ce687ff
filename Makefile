# tether: see README.md. `make help` lists the targets.
SHELL := /usr/bin/env bash
GO ?= go

# The pinned tools (etcd, kube-*, kubectl, csi-sanity, mock driver, upstream
# external-provisioner, helm). CI points this at a per-machine cache.
TOOLS_BIN ?= $(CURDIR)/.cache/tools/bin
export TETHER_TOOLS_BIN := $(TOOLS_BIN)

# Test knobs: `make test GOTEST_FLAGS=-v`, `make test PKG=./pkg/binder/...`.
PKG ?= ./...
GOTEST_FLAGS ?=
TEST_TIMEOUT ?= 30m

.PHONY: help demo build images release tools test unit sanity e2e kind-image e2e-kind conformance test-versions chaos sim bench-provisioner bench-wffc bench-capacity fuzz lint clean clean-tools

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

# make demo builds only what it runs: hack/tools/build.sh's demo set of tools
# (not make tools' all), and the demo itself with the flags of `make images`
# (-trimpath, CGO_ENABLED=0), so that the images' build reuses the packages
# compiled for it (-exec runs the demo without CGO_ENABLED=0, which its own
# builds need not inherit). Its first line says what it does and how long.
demo: ## run tether on a local control plane with two real nodes and watch claims bind and pods write (DEMO_EXIT=1 to end by itself); builds only the tools it runs
	@echo "make demo: a local control plane and two real kubelet nodes running tether; claims bind live until Ctrl-C. The first run builds its 6 tools and tether's images (10 to 15 minutes on 2 cores); later runs start in about 45 s."
	@hack/node-debs.sh demo
	@hack/tools/build.sh "$(TOOLS_BIN)" demo
	@CGO_ENABLED=0 $(GO) run -trimpath -exec 'env -u CGO_ENABLED' ./hack/demo

# The version stamped into every binary: `git describe` of this tree, or
# VERSION=vX.Y.Z.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS := -X github.com/tether-csi/tether/internal/version.version=$(VERSION)
# As internal/version.BuildTags (a test holds them equal).
BUILD_TAGS := grpcnotrace

build: ## build bin/binder, bin/provisioner, bin/kubectl-tether, bin/tether-push and bin/local-driver, stamped with VERSION (git describe)
	$(GO) build -trimpath -tags "$(BUILD_TAGS)" -ldflags "$(LDFLAGS)" -o bin/ ./cmd/...
	$(GO) build -trimpath -tags "$(BUILD_TAGS)" -ldflags "$(LDFLAGS)" -o bin/local-driver ./examples/local-driver

# Images and releases (internal/release): no container engine, no registry.
# IMAGE_REGISTRY names the images; IMAGE_PLATFORMS the os/arch list.
IMAGE_REGISTRY ?= ghcr.io/tether-csi
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64

images: ## OCI image archives of the binder, provisioner and local driver for IMAGE_PLATFORMS, reproducible, in _out/images/VERSION/ (load one with `ctr -n k8s.io images import`)
	$(GO) run ./hack/release images -version "$(VERSION)" -registry "$(IMAGE_REGISTRY)" -platforms "$(IMAGE_PLATFORMS)" -out "_out/images/$(VERSION)"

release: ## the release bundle of VERSION=vX.Y.Z in _out/release/VERSION/: image archives, tether.yaml pinned by digest, RELEASE_NOTES.md, SHA256SUMS
	@[[ "$(origin VERSION)" == "command line" || "$(origin VERSION)" == "environment" ]] || { echo "make release: say which, e.g. make release VERSION=v0.1.0" >&2; exit 2; }
	$(GO) run ./hack/release release -version "$(VERSION)" -registry "$(IMAGE_REGISTRY)" -platforms "$(IMAGE_PLATFORMS)" \
	  -out "_out/release/$(VERSION)"

tools: ## build every pinned tool that is missing, for the tests (make demo builds only its own); each build says how long it took
	@hack/node-debs.sh
	@hack/tools/build.sh "$(TOOLS_BIN)"

# `make test` runs with the race detector (it needs cgo): the test binaries
# (the simulator, test/sim, runs 300 schedules so and then its 10,000
# without it, with GOGC=800: the simulator allocates much and lives briefly;
# about 90 s against about 20 minutes under the race detector)
# and, through TETHER_RACE=1, the binder, provisioner and example driver that
# the tests start (test/cluster fails a test whose component reported a
# race). `make test RACE=` runs without it.
RACE ?= -race

test: tools ## run every test with the race detector (unit and integration, on a real control plane), the simulator's 10,000 schedules without it, then csi-sanity
	@status=0; export TETHER_RUN_ID=test-$$$$-$$(date +%s); \
	  TETHER_RACE=$(if $(RACE),1,0) $(GO) test -timeout $(TEST_TIMEOUT) $(RACE) $(GOTEST_FLAGS) $(PKG) || status=$$?; \
	  $(if $(RACE),GOGC=800 $(GO) test -timeout $(TEST_TIMEOUT) -count=1 -run '^TestSim$$' ./test/sim/ || status=$$?;) \
	  GO="$(GO)" hack/sanity.sh "$(TOOLS_BIN)" || status=1; \
	  hack/reap.sh "$(TOOLS_BIN)" "$$TETHER_RUN_ID" || status=1; exit $$status

e2e: tools ## the e2e: local cluster (deploy/csi's RBAC, every example, failover) and real kubelet nodes with deploy/csi as pods (also part of make test)
	$(GO) test -count=1 -timeout 20m -v ./test/e2e/

# tether's kind node image (test/kindnode): Kubernetes as pinned in
# hack/tools/versions.env, built here with no registry, cached in
# .cache/kind. KIND_IMAGE_OUT=FILE writes its docker-archive, LOAD=1 loads
# it into docker (DOCKER_HOST is honoured); without either it is built and
# its ID printed.
KIND_IMAGE_OUT ?=
kind-image: ## tether's kind node image for the pinned Kubernetes, built here with no registry, reproducible, cached in .cache/kind (LOAD=1 loads it into docker, KIND_IMAGE_OUT=FILE writes its archive); needs mmdebstrap (Debian)
	@hack/node-debs.sh kind
	$(GO) run ./hack/kind-image $(if $(LOAD),-load,$(if $(KIND_IMAGE_OUT),-o $(KIND_IMAGE_OUT)))

# make e2e-kind: with no docker here, a private dockerd (root; Debian's
# docker.io) in its own network and mount namespace, and tether's node
# image; with your docker and KIND_NODE_IMAGE, the public kindest/node.
KIND_NODE_IMAGE ?=
e2e-kind: ## tether from a `make release` bundle on a kind cluster (control plane + 2 workers), installed by the README's own commands, twice (archives loaded, then pushed to a registry on loopback), with real pods; KEEP=1 leaves the cluster up, KIND_NODE_IMAGE=kindest/node:...@sha256:... uses a public node image
	@$(if $(KIND_NODE_IMAGE),,hack/node-debs.sh kind)
	@hack/tools/build.sh "$(TOOLS_BIN)" kind
	TETHER_KIND=1 TOOLS_BIN="$(TOOLS_BIN)" KIND_NODE_IMAGE="$(KIND_NODE_IMAGE)" $(GO) test -count=1 -timeout 105m -v -run '^TestKind$$' ./test/e2ekind/

CONFORMANCE_STACK ?= tether
CONFORMANCE_FOCUS ?=
test-versions: tools ## the Kubernetes version matrix: the integration, node, conformance (make test's eight specs) and differential suites against each control plane of KUBE (default: KUBE_MATRIX in hack/tools/versions.env, v1.35.4 v1.36.3 v1.37.2), each version built once into a tools folder of its own; SHORT=1 the short suites CI runs (part of each, no conformance); SUITES narrows; a version outside the matrix (KUBE=v1.38.0-beta.0) is reported, not blocking; the table in _artifacts/test-versions.md
	@GO="$(GO)" KUBE="$(KUBE)" SHORT="$(SHORT)" SUITES="$(SUITES)" hack/test-versions.sh "$(TOOLS_BIN)"

conformance: tools ## Kubernetes' External Storage e2e suites for the local driver through tether, on two real nodes (CONFORMANCE_STACK=upstream: KCM's binder and EP v6.4.0 instead; CONFORMANCE_FOCUS narrows it); counts and JUnit in _artifacts/conformance-<stack>/
	$(GO) test -count=1 -timeout 250m -v -run '^TestExternalStorage$$' ./test/conformance/ \
	  -conformance.full -conformance.stack='$(CONFORMANCE_STACK)' -conformance.focus='$(CONFORMANCE_FOCUS)'

CHAOS_CLAIMS ?= 1000
CHAOS_SEED ?= 1
CHAOS_DURATION ?= 3m
chaos: tools ## the chaos run: CHAOS_CLAIMS claims under kills and deletes (make test runs 40)
	CHAOS_CLAIMS=$(CHAOS_CLAIMS) CHAOS_SEED=$(CHAOS_SEED) CHAOS_DURATION=$(CHAOS_DURATION) \
	  $(GO) test -count=1 -timeout 60m -v -run '^TestChaos$$' ./test/chaos/

SIM_SCHEDULES ?= 10000
SIM_SEED ?= 1
SIM_WITHOUT ?=
SIM_OUTCOMES ?=
sim: ## the deterministic simulator: SIM_SCHEDULES seeded schedules from SIM_SEED (SIM_WITHOUT=forge,strip leaves actors out) against tether's own code (make test runs 10000); a failure prints its seed and trace; SIM_OUTCOMES=FILE writes each schedule's outcome line instead (diff two files to show a change left behaviour as it was)
	GOGC=800 $(GO) run ./test/sim/cmd/sim -schedules=$(SIM_SCHEDULES) -seed=$(SIM_SEED) -without=$(SIM_WITHOUT) $(if $(SIM_OUTCOMES),-outcomes=$(SIM_OUTCOMES))

bench-provisioner: tools ## tether binder+provisioner against KCM+external-provisioner v6.4.0 and the floor: 1000 Immediate claims, etcd on loopback and 2.5ms away (BENCH_N sizes, e.g. 10000,100000 adds the scaling between them; BENCH_QPS, BENCH_RUNS, BENCH_ONLY, BENCH_TETHER_WORKERS, BENCH_ETCD_DELAY, BENCH_PPROF)
	TETHER_BENCH=1 $(GO) test -count=1 -timeout 120m -v -run '^TestBenchProvisioner$$' ./test/benchprov/

bench-wffc: tools ## 200 pods with WaitForFirstConsumer claims through kube-scheduler, tether against KCM+EP, etcd on loopback and 2.5ms away (BENCH_N, BENCH_QPS, BENCH_RUNS=5, BENCH_ONLY, BENCH_ETCD_DELAY, BENCH_PPROF)
	TETHER_BENCH=1 $(GO) test -count=1 -timeout 60m -v -run '^TestBenchWFFC$$' ./test/benchprov/

bench-capacity: tools ## capacity publishing on 2000 fake nodes x 3 WaitForFirstConsumer classes, tether's provisioner against EP v6.4.0, centralized: time to every CSIStorageCapacity, steady-state GetCapacity calls and API writes, a change's latency (BENCH_NODES, BENCH_POLL=30s, BENCH_QPS, BENCH_STEADY_POLLS, BENCH_CHANGES, BENCH_ONLY, BENCH_TIMEOUT)
	TETHER_BENCH=1 $(GO) test -count=1 -timeout 60m -v -run '^TestBenchCapacity$$' ./test/benchcap/

.PHONY: bench-nodes
bench-nodes: tools ## node-deployment mode at scale: 100,000 claims Bound on 100 nodes, 20 node-mode provisioners (each a process beside its own local driver, owning its node's 1,000), tether's then EP v6.4.0's: RSS and Go heap per process after sync and after new claims, time to sync, new claims' time to PV, the API server's watches and watch events per claim update (BENCH_N, BENCH_NODES, BENCH_CLUSTER_NODES, BENCH_NEW, BENCH_CHURN, BENCH_QPS, BENCH_ONLY=tether|ep, BENCH_BASE=<git ref>: that commit's provisioner first (BENCH_BASE_AFTER=1: after tether's), to measure a change before and after, BENCH_TIMEOUT per wait (30m), BENCH_RESERVE_MIB)
	TETHER_BENCH=1 $(GO) test -count=1 -timeout 150m -v -run '^TestBenchNodes$$' ./test/benchnodes/

.PHONY: bench-roll
bench-roll: tools ## a driver's DaemonSet rolled at fleet scale: the cluster of bench-nodes (100,000 claims Bound on 100 nodes), BENCH_NODES node provisioners (7: as many as fit for EP) restarted all at once, then one at a time, while BENCH_ROLL_RATE new claims a second (5) come and go; tether's then EP v6.4.0's: time until every node serves again, the stream's time to PV and to gone before, during and after each roll, peak and at-rest RSS, the API server's and etcd's CPU and memory (BENCH_N, BENCH_NODES, BENCH_CLUSTER_NODES, BENCH_ROLL_RATE, BENCH_ROLL_LIFE, BENCH_ROLL_WINDOW, BENCH_ONLY, BENCH_BASE, BENCH_BASE_AFTER, BENCH_MEMORY_LIMIT_MIB: tether's provisioners each in a memory cgroup of that limit, as a container's, BENCH_PPROF a folder for CPU profiles of the API server and one provisioner over the first BENCH_PPROF_SECONDS (30) of the whole-fleet roll, BENCH_TIMEOUT)
	TETHER_BENCH=1 $(GO) test -count=1 -timeout 240m -v -run '^TestBenchRoll$$' ./test/benchnodes/

.PHONY: bench-slowdriver
bench-slowdriver: tools ## tether against KCM+EP v6.4.0 through a driver that spends seconds per CreateVolume and DeleteVolume and goes on after its caller gave up: case slow (1000 claims, 2s, shipped defaults then equal settings, and the floor) and case slower (200 claims, 30s against a 10s --timeout) (BENCH_CASE, BENCH_N, BENCH_LATENCY, BENCH_SLOWER_N, BENCH_SLOWER_LATENCY, BENCH_QPS, BENCH_WORKERS, BENCH_ONLY, BENCH_ETCD_DELAY, BENCH_JITTER: each call's latency spread over +-that fraction by its volume)
	TETHER_BENCH=1 $(GO) test -count=1 -timeout 120m -v -run '^TestBenchSlowDriver$$' ./test/benchprov/

# Mixed versions (test/upgrade, docs/upgrade.md): the previous version is a
# commit named in the test until a release tag exists; TETHER_UPGRADE_FROM
# names another ref (CI runs on a full clone). TETHER_UPGRADE_N claims per
# case.
TETHER_UPGRADE_N ?= 200
.PHONY: upgrade
upgrade: tools ## mixed versions on a real control plane through a driver that takes 2s per call: the provisioner, then the binder, upgraded and rolled back mid-provisioning, each old with the other new (with clones and restores from snapshots), the local driver's DaemonSet rolled node by node on three nodes; TETHER_UPGRADE_N claims per case (200), TETHER_UPGRADE_FROM the previous version; checks no double binding, nothing stuck or leaked
	TETHER_UPGRADE_N=$(TETHER_UPGRADE_N) $(GO) test -count=1 -timeout 60m -v \
	  -run '^(TestProvisionerUpgradeRollback|TestBinderUpgradeRollback|TestSkew|TestNodeDeploymentRoll)$$' ./test/upgrade/

unit: ## unit tests only (no control plane)
	$(GO) test -short $(GOTEST_FLAGS) ./pkg/... ./cmd/... ./examples/...

# Every Fuzz function in the repository's test files, each for FUZZTIME.
FUZZTIME ?= 30s

fuzz: ## run every fuzz target for FUZZTIME each (default 30s); `make test` runs their seed corpora
	@set -e; for file in $$(git ls-files -co --exclude-standard '*_test.go' | xargs grep -l '^func Fuzz'); do \
	  for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$file"); do \
	    echo "== $$target ($$(dirname $$file)), $(FUZZTIME)"; \
	    $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) "./$$(dirname $$file)"; \
	  done; \
	done

sanity: tools ## csi-sanity against the example local driver and the csi-test mock driver (needs root)
	GO="$(GO)" hack/sanity.sh "$(TOOLS_BIN)"

# Mutation testing of the decision code (hack/mutate.sh, docs/testing.md):
# it takes over an hour on 2 cores (docs/testing.md has the figures), so it is
# not part of make test.
MUTATE_WORKERS ?= 2
MUTATE_PKG ?=
.PHONY: mutate
mutate: ## mutation testing of the decision code (pkg/nodeloss, the binder's and provisioner's decide files, the metrics' review code) with gremlins; each mutant judged by the package's tests and a short simulator run (none for pkg/server); per package killed / lived / not covered and the survivors (MUTATE_PKG=pkg/binder narrows it, MUTATE_WORKERS=2)
	@MUTATE_WORKERS=$(MUTATE_WORKERS) MUTATE_PKG=$(MUTATE_PKG) hack/mutate.sh "$(TOOLS_BIN)"

lint: ## gofmt, go vet, staticcheck, go.mod tidy, no `// indirect` mark on a module we import, claims and PVs written only where hack/writers/allow.txt says
	@GO="$(GO)" hack/lint.sh

clean: ## remove build outputs (keeps the tools cache)
	rm -rf bin _artifacts _out

clean-tools: ## remove the tools cache (the next `make tools` rebuilds it)
	rm -rf "$(TOOLS_BIN)"

# Binder comparison with kube-controller-manager: test/diff and test/bench.
# `make test-diff DIFF_SCENARIOS=20 DIFF_SEED=7`; the bench reads BENCH_N,
# BENCH_QPS, BENCH_KCM_MAX_N, BENCH_WORKERS, BENCH_BINDERS, BENCH_ETCD_DELAY,
# BENCH_RUNS, BENCH_TIMEOUT from the environment (see test/bench/bench_test.go).
DIFF_SCENARIOS ?= 200
DIFF_SEED ?= 1

.PHONY: test-diff bench-binder

test-diff: tools ## differential test: our binder against KCM's on random scenarios (DIFF_SCENARIOS, DIFF_SEED)
	DIFF_SCENARIOS=$(DIFF_SCENARIOS) DIFF_SEED=$(DIFF_SEED) \
	  $(GO) test -count=1 -timeout 120m -run '^TestDifferential$$' -v ./test/diff/

bench-binder: tools ## time our binder, KCM's and the floor binding N volumes to N claims, etcd on loopback and 2.5ms away (BENCH_N, BENCH_QPS, BENCH_RUNS, BENCH_ETCD_DELAY, BENCH_PPROF)
	TETHER_BENCH=1 $(GO) test -count=1 -timeout 180m -run '^TestBenchBinder$$' -v ./test/bench/

.PHONY: bench-binder-restart
bench-binder-restart: tools ## our binder's restart and leader failover with N claims bound (default 100000): time from the start, and from the leader's SIGKILL, to the caches synced and a new claim Bound; peak RSS (BENCH_N, BENCH_CHURN: nodes deleted before the start and while the standby stands by, measured beside a round without churn on the same cluster, BENCH_QPS, BENCH_TIMEOUT)
	TETHER_BENCH=1 $(GO) test -count=1 -timeout 120m -run '^TestBenchBinderRestart$$' -v ./test/bench/
