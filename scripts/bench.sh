#!/usr/bin/env bash
# Benchmarks, as `make bench` runs them (after `make build`): MsgMesh's HTTP
# publish and poll against a real single-node Apache Kafka, next to the
# franz-go client doing the same work directly. See docs/benchmarks.md.
#
#   scripts/bench.sh                       every scenario, 10 s each
#   scripts/bench.sh -duration 5s -prefill 100000 -scenarios batch,poll
#   scripts/bench.sh -inprocess -cpuprofile /tmp/gw.pprof   profile the gateway
#
# Extra arguments go to the program (go run ./integration/bench -help).
# Broker: scripts/kafka.sh's (started here and stopped at exit, unless it
# was already running). The report goes to stdout and docs/benchmarks-latest.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { printf 'bench.sh: %s\n' "$*" >&2; }

[[ -x bin/msgmesh ]] || { say "bin/msgmesh missing: run 'make build' (or 'make bench')"; exit 1; }

started=0
finish() {
  local rc=$?
  if [[ $started == 1 ]]; then
    scripts/kafka.sh stop || true
  fi
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if scripts/kafka.sh status 2>/dev/null; then
  say "using the running broker (left running)"
else
  scripts/kafka.sh start >/dev/null
  started=1
fi
brokers=$(scripts/kafka.sh brokers)

out=docs/benchmarks-latest.md
tmp=$(mktemp "${TMPDIR:-/tmp}/msgmesh-bench.XXXXXX")
# Bounded: every scenario has its own time limit; this is the backstop.
if timeout 30m go run ./integration/bench -brokers "$brokers" -msgmesh bin/msgmesh -out "$tmp" "$@"; then
  mv "$tmp" "$out"
  say "report written to $out"
else
  rc=$?
  rm -f "$tmp"
  say "benchmark failed (exit $rc)"
  exit "$rc"
fi
