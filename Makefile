# MsgMesh. Two commands do it all on a fresh machine:
#   make run    the embedded default (no Kafka to install)
#   make test   the whole suite against a real Apache Kafka broker that
#               scripts/kafka.sh downloads (Maven Central) and starts
SHELL := /bin/bash
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
GOFLAGS_BUILD := -trimpath -ldflags "-X main.Version=$(VERSION)"

.PHONY: build apidocs run test test-unit bench guarantees lint kafka-start kafka-stop clean

APIDOCS := services/msgmesh/apidocs

build: apidocs ## writes bin/msgmesh (with the /docs renderer when npm is there)
	go build $(GOFLAGS_BUILD) -o bin/msgmesh ./services/msgmesh

# The /docs page's renderer: Redoc's standalone bundle from npm, pinned by
# $(APIDOCS)/package-lock.json, copied into $(APIDOCS)/bundle/ (gitignored)
# for the Go build to embed. Without npm (or the registry) the build goes on
# and /docs says how to get it; /openapi.yaml is served either way.
apidocs:
	@if ! command -v npm >/dev/null; then \
	  echo "make: npm not found: bin/msgmesh will serve /docs without its renderer (install Node.js 20+ and run make build again)" >&2; \
	elif (cd $(APIDOCS) && npm ci --loglevel=error >/dev/null); then \
	  cp $(APIDOCS)/node_modules/redoc/bundles/redoc.standalone.js $(APIDOCS)/node_modules/redoc/bundles/redoc.standalone.js.LICENSE.txt $(APIDOCS)/bundle/; \
	else \
	  echo "make: npm ci in $(APIDOCS) failed: bin/msgmesh will serve /docs without its renderer" >&2; \
	fi

run: build ## the embedded default: serves on 127.0.0.1:8080, Kafka protocol on 127.0.0.1:9092
	./bin/msgmesh serve

test: ## every test, against a real broker (started and stopped by scripts/test.sh)
	scripts/test.sh $(GOTEST_FLAGS)

test-unit: ## fast tests on the embedded broker only
	go test -count=1 ./platform/... ./services/... ./proto/...

bench: build ## benchmarks against the real broker; see docs/benchmarks.md
	scripts/bench.sh

# The delivery-guarantee checker's long mode (issue 15, docs/guarantees.md):
# a broker of its own (scripts/kafka.sh on a free port and data dir, never
# the shared one), at least 100,000 acknowledged messages and 50 faults
# over both node layouts; 20-30 minutes. The short mode runs in make test.
guarantees: ## the long fault-injecting delivery checker; prints the tables (docs/guarantees.md)
	MSGMESH_GUARANTEES=long go test -count=1 -timeout 75m -v -run TestGuarantees ./integration/guarantees

lint: ## gofmt, go vet and golangci-lint
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	go vet ./...
	go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0 run ./...

kafka-start: ## start the real single-node broker (127.0.0.1:19092)
	scripts/kafka.sh start

kafka-stop:
	scripts/kafka.sh stop

clean:
	rm -rf bin data $(APIDOCS)/node_modules
	find $(APIDOCS)/bundle -type f ! -name README.md -delete
