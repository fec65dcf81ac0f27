# gpupolicy — run one shared GPU by policy.
#
#   make lab     build the tool, vet the lab policy (stock cue vet and
#                gpupolicy vet), render it and explain it
#   make test    build every tool and server the tests need, then run them
#
# Tools are built from their Go modules into bin/ (git-ignored) once per
# machine and reused after.

GO       ?= go
CUE_VERSION := v0.17.1
BIN      := $(CURDIR)/bin
GPUPOLICY := $(BIN)/gpupolicy
CUE      := $(BIN)/cue

.PHONY: all build cue lab test bench vet-lab fmt testjob-deps

all: build

# Build tags. nvml links NVML (GPU memory sampling in verify), which needs
# cgo and lazy binding. kustomize_disable_go_plugin_support leaves out
# kustomize's loader of Go .so plugins: krusty imports it, and environment
# builds run with plugins disabled, so it is never called; a binary that
# links package plugin exports every symbol dynamically (106 MB against
# 82 MB without) and maps ~4 MiB more at every start (issue 17).
GO_TAGS      := -tags nvml,kustomize_disable_go_plugin_support
NVML_LDFLAGS := -extldflags=-Wl,-z,lazy
NVML_FLAGS   := $(GO_TAGS) -ldflags=$(NVML_LDFLAGS)

# gpupolicy's version, for `gpupolicy version`: git describe of the tree
# (a tag, else the commit; "-dirty" for uncommitted changes), set with
# -X github.com/gpupolicy/gpupolicy/internal/version.Version. Without git
# (an unpacked release tarball) it stays unset and version falls back on
# the build info. VERSION=v1.2.3 make build sets it by hand. The -X goes into
# the one -ldflags that NVML's flags use: go build keeps only the last
# -ldflags it is given.
VERSION    ?= $(shell git describe --always --dirty 2>/dev/null)
GO_LDFLAGS := $(NVML_LDFLAGS)$(if $(VERSION), -X github.com/gpupolicy/gpupolicy/internal/version.Version=$(VERSION))
# go-nvml's cgo preamble wraps every NVML function, the ones nvml.h marks
# deprecated too: gcc would print some thirty -Wdeprecated-declarations
# warnings that say nothing about gpupolicy. Silenced here, in the flags.
export CGO_CFLAGS := $(or $(CGO_CFLAGS),-O2 -g) -Wno-deprecated-declarations

build:
	$(GO) build $(GO_TAGS) -ldflags='$(GO_LDFLAGS)' -o $(GPUPOLICY) ./cmd/gpupolicy

# The stock cue command at the library's version.
cue: $(CUE)
$(CUE):
	GOBIN=$(BIN) $(GO) install cuelang.org/go/cmd/cue@$(CUE_VERSION)

vet-lab: build cue
	$(CUE) vet -c ./policies/lab
	$(GPUPOLICY) vet policies/lab

lab: vet-lab
	$(GPUPOLICY) render policies/lab
	$(GPUPOLICY) explain policies/lab || [ $$? -eq 1 ]

# Debian's CPU build of PyTorch, for the test job's CPU path (testjob's tests
# run the real script against its CPU reference).
testjob-deps:
	@/usr/bin/python3 -c 'import torch' 2>/dev/null || { \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch; }

test: build cue cluster-build testjob-deps
	$(CUE) vet -c ./policies/lab
	$(CUE) vet -c ./policies/department
	$(GO) vet ./...
	$(GPUPOLICY) render --env lab --check
	$(GPUPOLICY) render --env local --check
	$(GO) test $(NVML_FLAGS) -count=1 -timeout 40m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./render/ ./internal/admission/

# Fuzz the policy loader, vet, render and explain (FuzzPolicy, seeded with
# the lab and the vet scenarios) for FUZZTIME; plain go test runs the seeds.
# mutate runs the built gpupolicy over MUTANTS mutated copies of the lab.
FUZZTIME ?= 5m
MUTANTS  ?= 3000
.PHONY: fuzz mutate
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzPolicy$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./internal/policy/

mutate:
	$(GO) run ./hack/mutate -n $(MUTANTS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# The local lab cluster (cluster/README.md): etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, a KWOK GPU node, Kueue and Argo's
# workflow-controller, built from their Go modules into bin/cluster/ and run
# on 127.0.0.1. cluster-build takes about 15 minutes cold on 2 cores and
# skips whatever is already built.
.PHONY: cluster-build cluster-up cluster-down

cluster-build:
	$(GO) run ./internal/cluster/cmd/lab-cluster build

cluster-up: cluster-build
	$(GO) run ./internal/cluster/cmd/lab-cluster up

cluster-down:
	$(GO) run ./internal/cluster/cmd/lab-cluster down
