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

.PHONY: all build cue lab test test-go bench vet-lab fmt

all: build

build:
	$(GO) build -o $(GPUPOLICY) ./cmd/gpupolicy

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

test: build cue cluster-build
	$(CUE) vet -c ./policies/lab
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 40m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./render/ ./admission/

fmt:
	gofmt -w $$(git ls-files '*.go')
