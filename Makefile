# MsgMesh. Two commands do it all on a fresh machine:
#   make run    the embedded default (no Kafka to install)
#   make test   the whole suite against a real Apache Kafka broker that
#               scripts/kafka.sh downloads (Maven Central) and starts
SHELL := /bin/bash
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
GOFLAGS_BUILD := -trimpath -ldflags "-X main.Version=$(VERSION)"

.PHONY: build run test test-unit bench lint kafka-start kafka-stop clean

build: ## writes bin/msgmesh
	go build $(GOFLAGS_BUILD) -o bin/msgmesh ./services/msgmesh

run: build ## the embedded default: serves on 127.0.0.1:8080, Kafka protocol on 127.0.0.1:9092
	./bin/msgmesh serve

test: ## every test, against a real broker (started and stopped by scripts/test.sh)
	scripts/test.sh $(GOTEST_FLAGS)

test-unit: ## fast tests on the embedded broker only
	go test -count=1 ./platform/... ./services/... ./proto/...

bench: build ## benchmarks against the real broker; see docs/benchmarks.md
	scripts/bench.sh

lint: ## gofmt, go vet and golangci-lint
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	go vet ./...
	go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0 run ./...

kafka-start: ## start the real single-node broker (127.0.0.1:19092)
	scripts/kafka.sh start

kafka-stop:
	scripts/kafka.sh stop

clean:
	rm -rf bin data
