# cordon's build, test and benchmark entry points. `make test` is what CI runs.
GO      ?= go
BIN     := bin/cordon
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build test unit integration race escape bench fuzz soak lint demo clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/cordon
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BIN)-holder ./cmd/cordon-holder

# Unit tests, then the integration suite against the real binary.
test: lint build unit integration

unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /integration$$)

# A failing run ends by repeating each failing test's report, so the tail
# of the log (all CI shows) names it.
integration: build
	@{ $(GO) test -count=1 -timeout 15m ./integration/... 2>&1; echo "go test exit status $$?"; } | tee bin/integration.log
	@grep -qx 'go test exit status 0' bin/integration.log || { \
	  echo "integration: failed; the failing tests' reports again (whole log: bin/integration.log):"; \
	  awk '/^ *--- FAIL/ {p=1; print; next} p && /^[ \t]/ {print; next} {p=0} /^panic: |^FAIL/' bin/integration.log; \
	  exit 1; }

# Unit tests and the integration suite with the race detector, cordon's
# binaries included (they exit 66 on a race, which fails the test).
race:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /integration$$)
	CORDON_RACE=1 $(GO) test -count=1 -timeout 30m ./integration/...

# The escape corpus (integration/escape/*.yaml): fails when any attack gets through or goes unlogged.
escape:
	@{ $(GO) test -count=1 -run TestEscapeCorpus -v ./integration/ 2>&1; echo "go test exit status $$?"; } | tee /tmp/escape.log
	@grep -E '^escape corpus: [0-9]+ passed, [0-9]+ failed$$' /tmp/escape.log || { echo "escape corpus: the runner did not finish; see /tmp/escape.log"; exit 1; }
	@grep -qx 'go test exit status 0' /tmp/escape.log

lint:
	@test -z "$$(gofmt -l . | tee /dev/stderr)" || (echo "gofmt: files above need formatting" && exit 1)
	$(GO) vet ./...
	GOOS=linux GOARCH=arm64 $(GO) vet ./...
	GOOS=darwin GOARCH=arm64 $(GO) vet ./...
	GOOS=darwin GOARCH=amd64 $(GO) build ./...
	$(shell $(GO) env GOPATH)/bin/staticcheck ./...

bench: build
	$(GO) run ./bench -out bench/RESULTS.md

fuzz:
	./scripts/fuzz.sh 20s

# 100,000 requests for 10,000 names through TLS termination, within 8
# minutes, with cordon's memory, descriptors and threads bounded. Not part
# of `make test`: the test only exists with the soak build tag.
soak: build
	$(GO) test -count=1 -tags soak -timeout 12m -v -run '^TestSoak$$' ./integration/

demo: build
	./scripts/demo.sh

clean:
	rm -rf bin
