# Meshplane developer commands. `make help` lists them.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
BUF       := $(GO) tool buf
BIN       := $(CURDIR)/bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X github.com/meshplane/meshplane/libs/platform.Version=$(VERSION)
PKGS      := github.com/meshplane/meshplane/...
CMDS      := \
	services/registration/cmd/registration \
	services/ingest/cmd/ingest \
	services/translation/cmd/translation \
	services/distribution/cmd/distribution \
	services/agent/cmd/agent \
	services/console/cmd/console \
	cmd/meshplane \
	cmd/meshctl
TEST_TIMEOUT ?= 30m
# The reference-estate benchmarks (test/e2e BenchmarkFanOutReference: about
# 10 minutes to set up on 2 cores) outlast go test's default 10 minutes.
BENCH_TIMEOUT ?= 2h

.PHONY: help
help: ## Show this help.
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: tools
tools: ## Install redis-server and etcd (apt) if missing; build and cache kube-apiserver, kubectl, helm, istiod (pilot-discovery) and meshplane-istio-validate.
	@bash hack/tools.sh

.PHONY: generate
generate: ## Regenerate Go and TypeScript code from proto/ (buf; Go plugins from tools/go.mod, protoc-gen-es from clients/ts).
	@test -x clients/ts/node_modules/.bin/protoc-gen-es || { echo "clients/ts/node_modules is missing: run 'make tools'"; exit 1; }
	rm -rf libs/gen/meshplane clients/ts/gen docs/api
	$(BUF) generate
	$(GO) run ./tools/crdgen -out deploy/crds -embed libs/gen/crds

.PHONY: verify-generate
verify-generate: generate ## Fail if the committed generated code differs from a fresh generation.
	@git diff --exit-code -- libs/gen deploy/crds clients/ts/gen docs/api || { echo "generated code is stale: run 'make generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- libs/gen deploy/crds clients/ts/gen docs/api)" || { git status --porcelain -- libs/gen deploy/crds clients/ts/gen docs/api; echo "untracked generated files: run 'make generate' and commit"; exit 1; }

# The console's browser app (web/console, Vite + React + TypeScript) is built
# into the Go adapter that embeds it; the built assets are committed, so a Go
# build needs no Node. Builds are deterministic: CI rebuilds and diffs them.
WEB_DIST := services/console/internal/adapters/web/dist

.PHONY: web
web: ## Build the console's browser app into services/console/internal/adapters/web/dist (npm ci, then vite build).
	cd web/console && npm ci --no-audit --no-fund && npm run build

.PHONY: verify-web
verify-web: web ## Fail if the committed console assets differ from a fresh build.
	@git diff --exit-code -- $(WEB_DIST) && test -z "$$(git status --porcelain -- $(WEB_DIST))" || { git status --porcelain -- $(WEB_DIST); echo "the console's built assets are stale: run 'make web' and commit"; exit 1; }

.PHONY: web-test
web-test: ## Unit tests of the console's browser app (Vitest).
	cd web/console && npm ci --no-audit --no-fund && npm test

# tools/istiovalidate runs Istio's own validation and analyzers on
# translation's outputs. It is outside go.work (istio.io/istio pins its own
# k8s.io/* versions): these flags build it as hack/tools.sh builds
# pilot-discovery, so that both share the build cache of istio.io/istio.
ISTIO_VALIDATE_GO := cd tools/istiovalidate && GOWORK=off CGO_ENABLED=0 $(GO)
ISTIO_VALIDATE_FLAGS := -trimpath

.PHONY: istio-validate
istio-validate: ## Build bin/meshplane-istio-validate, which `meshctl render --validate` runs (Istio's own validation, offline).
	@mkdir -p $(BIN)
	$(ISTIO_VALIDATE_GO) build $(ISTIO_VALIDATE_FLAGS) -ldflags '-s -w' -o $(BIN)/meshplane-istio-validate ./cmd/meshplane-istio-validate

.PHONY: lint
lint: ## buf lint and breaking check, gofmt, go vet, staticcheck (the layering and docs checks are tests: tools/archtest).
	$(BUF) lint
	@if git rev-parse --verify -q main >/dev/null; then $(BUF) breaking --against '.git#branch=main'; fi
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^libs/gen/')); test -z "$$out" || { echo "not gofmt-ed:"; echo "$$out"; exit 1; }
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	$(ISTIO_VALIDATE_GO) vet $(ISTIO_VALIDATE_FLAGS) ./...

.PHONY: build
build: ## Build every binary into bin/.
	@mkdir -p $(BIN)
	@for c in $(CMDS); do echo "build $$c"; $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./$$c; done

.PHONY: test
test: tools verify-generate verify-web web-test lint ## Run every test (needs the tools; installs them when missing).
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(PKGS)
	$(ISTIO_VALIDATE_GO) test $(ISTIO_VALIDATE_FLAGS) -count=1 -timeout $(TEST_TIMEOUT) ./...

.PHONY: test-short
test-short: ## Everything but the e2e suite (MESHPLANE_SKIP_E2E=1).
	MESHPLANE_SKIP_E2E=1 $(GO) test -short $(PKGS)

# ISTIOD=on builds istiod (once, about 20 CPU-minutes) and runs it in the
# demo; ISTIOD=off never runs it; unset, the demo runs it when it is built.
ISTIOD ?=

.PHONY: demo-tools
demo-tools: ## Only what the demo runs: redis-server and etcd (apt), kube-apiserver and kubectl (no npm or helm; istiod only with ISTIOD=on).
	@bash hack/tools.sh --demo $(if $(filter on 1 true yes,$(ISTIOD)),--istiod)

.PHONY: demo
demo: demo-tools build ## The main job: all-in-one management plane, a management cluster, two clusters with bookinfo, two agents; istiod per cluster when built (ISTIOD=on|off).
	$(GO) run ./test/e2e/cmd/demo --bin $(BIN) $(if $(ISTIOD),--istiod=$(ISTIOD)) $(DEMO_ARGS)

.PHONY: bench
bench: ## Run the benchmarks.
	$(GO) test -run '^$$' -bench . -benchmem -timeout $(BENCH_TIMEOUT) $(PKGS)

# benchstat (golang.org/x/perf, pinned as a tool in tools/go.mod) compares
# runs of benchmarks saved with go test -count 10 (docs/benchmarks.md):
#   make benchstat OLD=old.txt NEW=new.txt
.PHONY: benchstat
benchstat: ## Compare benchmark runs: make benchstat OLD=old.txt NEW=new.txt (NEW optional; BENCHSTAT_FLAGS).
	@test -n "$(OLD)" || { echo "usage: make benchstat OLD=old.txt [NEW=new.txt] [BENCHSTAT_FLAGS=...]"; exit 1; }
	$(GO) tool benchstat $(BENCHSTAT_FLAGS) $(OLD) $(NEW)

# The long chaos soak's knobs (docs/benchmarks.md, Chaos soak).
CHAOS_DURATION ?= 30m
CHAOS_AGENTS ?= 50

.PHONY: chaos
chaos: tools ## The long chaos soak: CHAOS_DURATION (30m) of faults on the plane, CHAOS_AGENTS (50) simulated agents and two real clusters; CHAOS_SEED replays a schedule.
	MESHPLANE_CHAOS_DURATION=$(CHAOS_DURATION) MESHPLANE_CHAOS_AGENTS=$(CHAOS_AGENTS) $(if $(CHAOS_SEED),MESHPLANE_CHAOS_SEED=$(CHAOS_SEED)) \
		$(GO) test -count=1 -run 'TestChaos$$' -timeout 90m -v ./test/e2e/
