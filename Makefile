# Paddock's build. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

GO ?= go
# CLUSTER_LOCK serializes everything that runs a local cluster on this machine (one at a time:
# the cluster uses fixed interfaces and ports): the end-to-end tests and make bench.
CLUSTER_LOCK ?= /tmp/paddock-cluster.lock
# Tools are pinned in tools/go.mod and built from it into bin/tools, so that what they load (the
# API packages for controller-gen, the tree for the linters) resolves against this module's go.mod.
TOOLBIN := $(CURDIR)/bin/tools
CONTROLLER_GEN := $(TOOLBIN)/controller-gen
GOLANGCI_LINT := $(TOOLBIN)/golangci-lint-kube-api-linter
HELM := $(TOOLBIN)/helm
KUSTOMIZE := $(TOOLBIN)/kustomize
CHART := charts/paddock
# Kubernetes and etcd binaries, built from their official Go modules into a per-machine cache.
K8S_BIN = $(shell hack/build-k8s.sh kube-apiserver etcd)
GO_TEST_FLAGS ?=
# Debian packages of the local dev cluster's real node (containerd, runc, CNI plugins), of its
# busybox and sandbox images, and mmdebstrap, which builds env-base from the Debian archive;
# `make e2e-deps` installs the missing ones through hack/install-deps.sh, and Node.js with npm
# when they are not on PATH (a NodeSource node bundles npm; Debian's does not).
IMAGE_DEBIAN_PACKAGES := busybox-static bash-static
DEV_DEBIAN_PACKAGES := containerd runc containernetworking-plugins $(IMAGE_DEBIAN_PACKAGES) mmdebstrap iproute2 iptables ipset

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
	  /^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy code, CRDs, RBAC, protobuf code and the dist bundles.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd:crdVersions=v1 paths=./api/agents/... output:crd:dir=config/crd/core
	$(CONTROLLER_GEN) crd:crdVersions=v1 paths=./api/extensions/... output:crd:dir=config/crd/extensions
	$(CONTROLLER_GEN) crd:crdVersions=v1 paths=./api/snapshots/... output:crd:dir=config/crd/extensions
	$(CONTROLLER_GEN) rbac:roleName=paddock-controller paths=./internal/manager/rbac/core/... output:rbac:dir=config/rbac/core
	$(CONTROLLER_GEN) rbac:roleName=paddock-controller-extensions paths=./internal/manager/rbac/extensions/... output:rbac:dir=config/rbac/extensions
	hack/generate-proto.sh
	$(MAKE) --no-print-directory dist

.PHONY: dist
dist: chart-files $(KUSTOMIZE) ## Render the single-file install bundles under dist/ from config/, with the pinned kustomize.
	@mkdir -p dist
	$(KUSTOMIZE) build config/default > dist/paddock.yaml
	$(KUSTOMIZE) build config/core > dist/paddock-core.yaml
	$(KUSTOMIZE) build config/router > dist/paddock-router.yaml
	$(KUSTOMIZE) build config/snapshots > dist/paddock-snapshots.yaml
	$(KUSTOMIZE) build config/egress > dist/paddock-egress.yaml
	@# Upstream's namespace, in files under 1 MiB each: kubectl apply --server-side -f dist/agent-sandbox-system/
	@mkdir -p dist/agent-sandbox-system
	$(KUSTOMIZE) build config/crd/core > dist/agent-sandbox-system/crds-core.yaml
	$(KUSTOMIZE) build config/crd/extensions > dist/agent-sandbox-system/crds-extensions.yaml
	$(KUSTOMIZE) build config/profiles/agent-sandbox-system-no-crds > dist/agent-sandbox-system/install.yaml
	@# UNSAFE migration profile: upstream's tokenless direct paths (docs/compatibility.md, "Install profiles").
	$(KUSTOMIZE) build config/profiles/upstream-unauthenticated-migration > dist/upstream-unauthenticated-migration.yaml

# The chart's CRDs and ClusterRole rules are copies of the generated ones, never edited by hand;
# `make verify` fails when a copy is stale.
.PHONY: chart-files
chart-files: ## Copy the generated CRDs, RBAC rules and admission policies into the Helm chart.
	@rm -rf $(CHART)/crds $(CHART)/files/rbac $(CHART)/files/admission && mkdir -p $(CHART)/crds $(CHART)/files/rbac $(CHART)/files/admission
	cp config/crd/core/*_*.yaml config/crd/extensions/*_*.yaml $(CHART)/crds/
	cp config/rbac/core/role.yaml $(CHART)/files/rbac/core-role.yaml
	cp config/rbac/extensions/role.yaml $(CHART)/files/rbac/extensions-role.yaml
	cp config/admission/idle-policy.yaml config/admission/autosize-policy.yaml config/admission/warm-resources-policy.yaml config/admission/suspend-rootfs-policy.yaml config/admission/restore-from-policy.yaml $(CHART)/files/admission/
	cp config/snapshots/image-policy.yaml $(CHART)/files/admission/snapshot-image-policy.yaml
	cp config/egress/admission.yaml $(CHART)/files/admission/egress-policy.yaml
	cp config/router/secret_writes.yaml $(CHART)/files/admission/router-secret-writes.yaml

.PHONY: verify
verify: generate ## Regenerate, then fail on any difference or new untracked file.
	@hack/verify-tracked.sh
	@hack/verify-clean.sh

.PHONY: fmt
fmt: ## Format the Go code.
	$(GO) fmt ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) helm-lint ## Run golangci-lint, with the Kubernetes API linter, and helm lint.
	$(GOLANGCI_LINT) run --allow-parallel-runners ./...

.PHONY: helm-lint
helm-lint: $(HELM) ## Lint the Helm chart with its default values and with every optional part on.
	$(HELM) lint --strict $(CHART)
	$(HELM) lint --strict $(CHART) --set router.enabled=true,metrics.serviceMonitor.enabled=true,tracing.enabled=true,snapshots.enabled=true,snapshots.repository=registry.example/snapshots
	$(HELM) lint --strict $(CHART) --set egress.enabled=true,egress.clusterCIDRs={198.18.0.0/24}

##@ Test

.PHONY: test
test: test-unit test-integration test-e2e ## Run every test tier (what CI runs).

.PHONY: test-unit
test-unit: ## Run unit tests (no API server).
	$(GO) test $(GO_TEST_FLAGS) -race $$($(GO) list ./... | grep -v /test/)

.PHONY: test-integration
test-integration: k8s-binaries $(HELM) $(KUSTOMIZE) e2b-deps image-deps ## Run integration tests against a real kube-apiserver and etcd (and the E2B SDK tier).
	PADDOCK_HELM=$(HELM) PADDOCK_KUSTOMIZE=$(KUSTOMIZE) KUBEBUILDER_ASSETS=$(K8S_BIN) $(GO) test $(GO_TEST_FLAGS) ./test/integration/...

# The E2B tiers (test/integration/e2b against sandboxd's envd, test/integration/e2bfrontdoor
# through the router's E2B front door) run the unmodified npm e2b SDK with the machine's Node.js.
E2B_CLIENT := test/integration/e2b/client
E2B_FRONTDOOR_CLIENT := test/integration/e2bfrontdoor/client
# test/integration/interpreter runs the unmodified @e2b/code-interpreter against sandboxd's interpreter.
INTERPRETER_CLIENT := test/integration/interpreter/client

.PHONY: image-deps
image-deps: ## Install the Debian packages the sandbox image is built from (test/integration/sandboximage runs it).
	@hack/install-deps.sh $(IMAGE_DEBIAN_PACKAGES)

.PHONY: e2b-deps
e2b-deps: $(E2B_CLIENT)/node_modules/.package-lock.json $(E2B_FRONTDOOR_CLIENT)/node_modules/.package-lock.json $(INTERPRETER_CLIENT)/node_modules/.package-lock.json ## Install the pinned E2B SDKs of the E2B tiers (npm ci).

$(E2B_CLIENT)/node_modules/.package-lock.json: $(E2B_CLIENT)/package-lock.json $(E2B_CLIENT)/package.json
	cd $(E2B_CLIENT) && npm ci --no-audit --no-fund

$(E2B_FRONTDOOR_CLIENT)/node_modules/.package-lock.json: $(E2B_FRONTDOOR_CLIENT)/package-lock.json $(E2B_FRONTDOOR_CLIENT)/package.json
	cd $(E2B_FRONTDOOR_CLIENT) && npm ci --no-audit --no-fund

$(INTERPRETER_CLIENT)/node_modules/.package-lock.json: $(INTERPRETER_CLIENT)/package-lock.json $(INTERPRETER_CLIENT)/package.json
	cd $(INTERPRETER_CLIENT) && npm ci --no-audit --no-fund

.PHONY: test-e2e
test-e2e: e2e-deps $(HELM) $(KUSTOMIZE) ## Run end-to-end tests: bring a local dev cluster up (as root), test it, take it down.
	@echo "test-e2e: waiting for the machine's cluster lock $(CLUSTER_LOCK) (make bench holds it too)"
	PADDOCK_HELM=$(HELM) PADDOCK_KUSTOMIZE=$(KUSTOMIZE) flock $(CLUSTER_LOCK) $(GO) test $(GO_TEST_FLAGS) -count=1 -timeout 45m ./test/e2e/...

.PHONY: e2e-deps
e2e-deps: ## Install the dev cluster's Debian packages and build its binaries (once per machine).
	@hack/install-deps.sh $(DEV_DEBIAN_PACKAGES)
	@# The MCP test drives paddock mcp with the official TypeScript client (npm ci in its testdata).
	@command -v node >/dev/null && command -v npm >/dev/null || hack/install-deps.sh nodejs npm
	@hack/build-k8s.sh kube-apiserver etcd kube-controller-manager kube-scheduler kubelet kubectl >/dev/null
	@hack/build-dev-tools.sh kwok coredns kube-router >/dev/null
	@hack/build-gvisor.sh >/dev/null

.PHONY: dev
dev: ## Bring up the local dev cluster (paddock dev up; KUBECONFIG is printed at the end).
	$(GO) run ./cmd/paddock dev up

.PHONY: dev-down
dev-down: ## Stop the local dev cluster and remove its state.
	$(GO) run ./cmd/paddock dev down

.PHONY: k8s-binaries
k8s-binaries: ## Build kube-apiserver and etcd from official modules into the cache (once per machine).
	@hack/build-k8s.sh kube-apiserver etcd

##@ Benchmark

.PHONY: bench
bench: ## Benchmark on a fresh local cluster with KWOK nodes (machine lock held; taken down after), report into bin/bench/<time> and docs/performance/results.md. Env: hack/bench.sh.
	@hack/bench.sh

.PHONY: bench-compare
bench-compare: ## Benchmark two controller revisions in turn on one fresh cluster: make bench-compare A=main B=HEAD. Env: hack/bench-compare.sh.
	@hack/bench-compare.sh $(A) $(B)

##@ Build

# Tool binaries are rebuilt whenever tools/go.mod changes.
$(TOOLBIN)/%: tools/go.mod tools/go.sum
	$(GO) -C tools build -o $(TOOLBIN)/ $(shell $(GO) -C tools list -f '{{.ImportPath}}' tool | grep -E '/$*(/v[0-9]+)?$$')

.PHONY: tools
tools: $(CONTROLLER_GEN) $(GOLANGCI_LINT) $(HELM) $(KUSTOMIZE) ## Build the pinned tool binaries (controller-gen, golangci-lint, helm, kustomize) into bin/tools/.

.PHONY: build
build: ## Build every binary into bin/.
	$(GO) build -o bin/ ./cmd/...
