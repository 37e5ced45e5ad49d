#!/usr/bin/env bash
# The test suite, as `make test` and CI (.ci/run) run it.
#
#   scripts/test.sh                         go vet ./... and every test against a real broker:
#                                           the unit packages with -race, the integration
#                                           packages without, then each fuzz target for
#                                           MSGMESH_FUZZTIME (default 10s)
#   scripts/test.sh -run TestPoll ./platform/...   extra go test args (packages replace ./...)
#   GOTEST_FLAGS='-race -v' scripts/test.sh
#
# Broker: MSGMESH_TEST_KAFKA_BROKERS if set; otherwise the single-node Apache
# Kafka of scripts/kafka.sh (started here and stopped at exit, unless it was
# already running). If that broker cannot start, the suite runs on the
# in-process kfake instead, except with MSGMESH_TEST_REQUIRE_REAL_KAFKA=1
# (CI), where that is a failure.
#
# Packages are tested in parallel (go test's default -p = GOMAXPROCS, which is
# 2 on our machines); tests share the broker, so they use unique topic and
# group names (platform/kafkatest.Name).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

require_real=${MSGMESH_TEST_REQUIRE_REAL_KAFKA:-0}
say() { printf 'test.sh: %s\n' "$*" >&2; }

# kcat, and Debian's Chromium for the real-browser SSE test
# (integration/realtime_browser_test.go: it fails without Chromium when
# MSGMESH_TEST_REQUIRE_REAL_KAFKA=1, and skips otherwise).
if ! scripts/deps.sh kcat chromium; then
  if [[ $require_real == 1 ]]; then
    say "error: could not install test dependencies (kcat, chromium)"
    exit 1
  fi
  say "warning: could not install kcat or chromium; tests that need them may skip or fail"
fi

# The /docs renderer (npm ci in services/msgmesh/apidocs), so that the Go
# test binaries embed it (integration/apidocs_browser_test.go needs it when
# MSGMESH_TEST_REQUIRE_REAL_KAFKA=1, and skips otherwise).
make -s apidocs
if [[ ! -f services/msgmesh/apidocs/bundle/redoc.standalone.js && $require_real == 1 ]]; then
  say "error: the /docs renderer could not be built (make apidocs: npm ci)"
  exit 1
fi

started=0
pg_started=0
kafka_run=
kafka_env=() # for scripts/kafka.sh only: msgmesh reads MSGMESH_KAFKA_* itself

# The broker this suite starts gets a data dir of its own (removed at exit)
# and free ports: a data dir kept from earlier runs holds every topic those
# runs made, and a broker recovering thousands of them did not answer within
# kafka.sh's start timeout. A broker that already runs on the default port
# (scripts/kafka.sh start by hand) is used as it is.
free_port_block() { # N: the first of N consecutive free 127.0.0.1 ports
  local n=$1 base i
  for _ in $(seq 1 200); do
    base=$((20000 + RANDOM % 10000))
    for ((i = 0; i < n; i++)); do
      (exec 3<>"/dev/tcp/127.0.0.1/$((base + i))") 2>/dev/null && continue 2
    done
    echo "$base"
    return 0
  done
  return 1
}
fresh_broker_env() {
  local home=${MSGMESH_KAFKA_HOME:-$HOME/.cache/msgmesh/kafka-4.4.0} port
  mkdir -p "$home/run"
  kafka_run=$(mktemp -d "$home/run/test.XXXXXX")
  port=$(free_port_block 3) || { say "error: no three consecutive free ports"; return 1; }
  kafka_env=(MSGMESH_KAFKA_DATA_DIR="$kafka_run" MSGMESH_KAFKA_PORT="$port")
  say "starting a fresh broker on 127.0.0.1:$port (data $kafka_run)"
}
stop_broker() {
  local rc=$?
  if [[ -n ${unit_pid:-} ]]; then
    kill "$unit_pid" 2>/dev/null || true
  fi
  say "suite ran against: ${broker_desc:-none}; ${pg_desc:-no PostgreSQL} (exit $rc)"
  if [[ $started == 1 ]]; then
    env "${kafka_env[@]}" scripts/kafka.sh stop || true
  fi
  if [[ -n $kafka_run ]]; then
    if [[ $rc == 0 ]]; then
      rm -rf "$kafka_run"
    else
      say "the broker's data and logs are kept in $kafka_run"
    fi
  fi
  if [[ $pg_started == 1 ]]; then
    scripts/postgres.sh stop || true
  fi
  exit "$rc"
}
trap stop_broker EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ -n ${MSGMESH_TEST_KAFKA_BROKERS:-} ]]; then
  broker_desc="real Kafka at $MSGMESH_TEST_KAFKA_BROKERS (from MSGMESH_TEST_KAFKA_BROKERS)"
elif scripts/kafka.sh status 2>/dev/null; then
  MSGMESH_TEST_KAFKA_BROKERS=$(scripts/kafka.sh brokers)
  broker_desc="real Apache Kafka at $MSGMESH_TEST_KAFKA_BROKERS (already running; left running)"
elif fresh_broker_env && env "${kafka_env[@]}" scripts/kafka.sh start >/dev/null; then
  started=1
  MSGMESH_TEST_KAFKA_BROKERS=$(env "${kafka_env[@]}" scripts/kafka.sh brokers)
  broker_desc="real Apache Kafka at $MSGMESH_TEST_KAFKA_BROKERS (scripts/kafka.sh)"
elif [[ $require_real == 1 ]]; then
  broker_desc="none"
  say "error: MSGMESH_TEST_REQUIRE_REAL_KAFKA=1 but scripts/kafka.sh could not start a broker"
  exit 1
else
  MSGMESH_TEST_KAFKA_BROKERS=
  broker_desc="embedded kfake (scripts/kafka.sh start failed)"
  say "warning: no real broker; tests run on the in-process kfake"
fi
export MSGMESH_TEST_KAFKA_BROKERS
say "suite runs against: $broker_desc"

# PostgreSQL for the read model (platform/readmodel, integration/readmodel_test.go):
# MSGMESH_TEST_POSTGRES_URL if set; otherwise scripts/postgres.sh's cluster
# (started here and stopped at exit, unless it was already running). Without
# one those tests skip, except with MSGMESH_TEST_REQUIRE_REAL_KAFKA=1.
if [[ -n ${MSGMESH_TEST_POSTGRES_URL:-} ]]; then
  pg_desc="PostgreSQL at $MSGMESH_TEST_POSTGRES_URL (from MSGMESH_TEST_POSTGRES_URL)"
elif scripts/postgres.sh status 2>/dev/null; then
  MSGMESH_TEST_POSTGRES_URL=$(scripts/postgres.sh url)
  pg_desc="PostgreSQL at $MSGMESH_TEST_POSTGRES_URL (already running; left running)"
elif pg_url=$(scripts/postgres.sh start | tail -n 1) && [[ -n $pg_url ]]; then
  pg_started=1
  MSGMESH_TEST_POSTGRES_URL=$pg_url
  pg_desc="PostgreSQL at $MSGMESH_TEST_POSTGRES_URL (scripts/postgres.sh)"
elif [[ $require_real == 1 ]]; then
  say "error: MSGMESH_TEST_REQUIRE_REAL_KAFKA=1 but scripts/postgres.sh could not start PostgreSQL"
  exit 1
else
  MSGMESH_TEST_POSTGRES_URL=
  pg_desc="no PostgreSQL (scripts/postgres.sh start failed)"
  say "warning: no PostgreSQL; the read model's PostgreSQL tests skip"
fi
export MSGMESH_TEST_POSTGRES_URL
say "read model tests use: $pg_desc"

# Extra args: flags pass through; if none of them names packages, test
# ./... and the Go client's module (sdks/go, its own module in go.work),
# then the SDK suites: each installs what it needs (npm ci, a virtualenv),
# packs its package, installs the artifact into an empty folder and runs
# its tests against a msgmesh it starts on the same broker.
pkgs=(./... ./sdks/go/...)
whole=1
for a in "$@"; do
  case $a in
  ./* | ../* | github.com/*) pkgs=() whole=0 ;;
  esac
done

go vet ./... ./sdks/go/...
if [[ $whole == 1 ]]; then
  # The unit packages under the race detector (-race; 2-5 minutes on a
  # shared 2-core machine), and beside them (in parallel, as go test runs
  # packages) the integration packages without it (13-17 minutes; under
  # -race over 22, too long for this suite). Their in-process nodes run
  # the code the unit packages race-test (README, Development). The unit
  # run's output follows the integration run's.
  mapfile -t unit < <(go list ./... ./sdks/go/... | grep -v '/integration')
  unit_log=$(mktemp)
  started_at=$SECONDS
  # shellcheck disable=SC2086
  go test -count=1 -timeout 40m -race ${GOTEST_FLAGS:-} "$@" "${unit[@]}" >"$unit_log" 2>&1 &
  unit_pid=$!
  int_rc=0
  # shellcheck disable=SC2086
  go test -count=1 -timeout 40m ${GOTEST_FLAGS:-} "$@" ./integration/... || int_rc=$?
  say "integration packages: $((SECONDS - started_at))s"
  unit_rc=0
  wait "$unit_pid" || unit_rc=$?
  cat "$unit_log"
  rm -f "$unit_log"
  say "unit packages with -race: done after $((SECONDS - started_at))s"
  if [[ $int_rc != 0 || $unit_rc != 0 ]]; then
    say "error: go test failed (integration exit $int_rc, unit with -race exit $unit_rc)"
    exit 1
  fi
  # Every fuzz target, briefly (go test fuzzes one target per run); a
  # failing input is written under the package's testdata/fuzz to replay.
  fuzztime=${MSGMESH_FUZZTIME:-10s}
  # fuzz_target TARGET PKG: go's fuzzer now and then ends a run that found
  # nothing with "context deadline exceeded" at its -fuzztime (a
  # coordinator and worker race in the toolchain, no failing input
  # written); such a run is made once more. A real failure writes its
  # input under testdata/fuzz and fails the suite.
  fuzz_target() {
    local out rc=0
    out=$(go test -run '^$' -fuzz "^$1\$" -fuzztime "$fuzztime" "$2" 2>&1) || rc=$?
    printf '%s\n' "$out"
    if ((rc != 0)) && grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written to' <<<"$out"; then
      say "warning: $1 ended with 'context deadline exceeded' and no failing input (go's fuzzer at -fuzztime); running it once more"
      rc=0
      go test -run '^$' -fuzz "^$1\$" -fuzztime "$fuzztime" "$2" || rc=$?
    fi
    return "$rc"
  }
  started_at=$SECONDS
  while read -r file target; do
    fuzz_target "$target" "./$(dirname "$file")"
  done < <(grep -rEn --include='*_test.go' --exclude-dir=node_modules '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' platform services proto integration |
    sed -E 's/^([^:]+):[0-9]+:func (Fuzz[A-Za-z0-9_]+).*/\1 \2/' | sort)
  say "fuzz targets, $fuzztime each: $((SECONDS - started_at))s"
else
  # shellcheck disable=SC2086
  go test -count=1 -timeout 40m ${GOTEST_FLAGS:-} "$@" "${pkgs[@]}"
fi

if [[ $whole == 1 ]]; then
  for suite in sdks/js/test.sh sdks/python/test.sh sdks/mcp-server/test.sh; do
    if [[ -x $suite ]]; then
      say "running $suite"
      "$suite"
    elif [[ -e $suite ]]; then
      say "running $suite"
      bash "$suite"
    else
      say "error: $suite is missing"
      exit 1
    fi
  done
fi
