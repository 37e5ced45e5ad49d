#!/usr/bin/env bash
# Benchmarks, as `make bench` runs them (after `make build`): MsgMesh's HTTP
# publish and poll against a real single-node Apache Kafka, next to the
# franz-go client doing the same work directly; and realtime fan-out (SSE and
# WebSocket to thousands of subscribers) next to Centrifugo v6, which
# scripts/centrifugo.sh builds from the Go module proxy (cached in
# ~/.cache/msgmesh/centrifugo). See docs/benchmarks.md.
#
#   scripts/bench.sh                       every scenario, 10 s each
#   scripts/bench.sh -duration 5s -prefill 100000 -scenarios batch,poll
#   scripts/bench.sh -inprocess -cpuprofile /tmp/gw.pprof   profile the gateway
#   scripts/bench.sh -scenarios realtime -realtime-sse 1000 -realtime-ws ''
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

# Realtime: thousands of subscriber connections in the load generator (and
# as many in the server): raise the open-files limit as far as allowed.
hard=$(ulimit -Hn)
if [[ $hard == unlimited ]]; then hard=1048576; fi
if (( hard > 65536 )); then hard=65536; fi
ulimit -n "$hard" 2>/dev/null || say "warning: could not raise ulimit -n (now $(ulimit -n))"
(( $(ulimit -n) >= 12000 )) || say "warning: ulimit -n is $(ulimit -n); the 5,000-subscriber realtime rows need about 12,000"

# Centrifugo, the realtime comparison: built once, then cached.
realtime_args=()
if centrifugo=$(scripts/centrifugo.sh); then
  realtime_args=(-centrifugo "$centrifugo")
else
  say "warning: could not build Centrifugo; the realtime rows run without the comparison"
fi

out=docs/benchmarks-latest.md
tmp=$(mktemp "${TMPDIR:-/tmp}/msgmesh-bench.XXXXXX")
# Bounded: every scenario has its own time limit; this is the backstop
# (about 30 minutes on a loaded machine before the realtime and webhooks
# one-core rows, which add at most about 15).
# -one-core: the publish, poll, realtime and webhooks rows again with
# msgmesh (and, for realtime, Centrifugo) on one core (GOMAXPROCS=1,
# taskset -c 0); pass -one-core=false to skip them.
if timeout 45m go run ./integration/bench -brokers "$brokers" -msgmesh bin/msgmesh -out "$tmp" -one-core "${realtime_args[@]}" "$@"; then
  mv "$tmp" "$out"
  say "report written to $out"
else
  rc=$?
  rm -f "$tmp"
  say "benchmark failed (exit $rc)"
  exit "$rc"
fi
