#!/usr/bin/env bash
# Tests of @msgmesh/sdk against a real msgmesh (scripts/test.sh calls this).
#
# npm ci, build, npm pack; install the tarball into an empty folder; build msgmesh from this repo
# and start `msgmesh serve` on free ports with a temporary data dir, on the broker of
# MSGMESH_TEST_KAFKA_BROKERS (required when MSGMESH_TEST_REQUIRE_REAL_KAFKA=1, else the embedded
# broker); then run test/*.test.mjs with node --test against the installed package.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/msgmesh-sdk-js.XXXXXX")
server_pid=""
cleanup() {
  local rc=$?
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  if [[ $rc -ne 0 && -f $tmp/server.log ]]; then
    echo "--- msgmesh log (last 40 lines) ---" >&2
    tail -n 40 "$tmp/server.log" >&2 || true
  fi
  rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT INT TERM

brokers=${MSGMESH_TEST_KAFKA_BROKERS:-}
if [[ -z $brokers && ${MSGMESH_TEST_REQUIRE_REAL_KAFKA:-0} == 1 ]]; then
  echo "sdks/js/test.sh: MSGMESH_TEST_REQUIRE_REAL_KAFKA=1 but MSGMESH_TEST_KAFKA_BROKERS is empty" >&2
  exit 1
fi

echo "== sdks/js: npm ci, build, pack"
cd "$here"
npm ci --no-audit --no-fund --loglevel=error
npm run --silent build >/dev/null
npx tsc --noEmit -p .
mkdir -p "$tmp/pack" "$tmp/app"
npm pack --silent --pack-destination "$tmp/pack" >/dev/null
tarball=$(ls "$tmp"/pack/msgmesh-sdk-*.tgz)

echo "== sdks/js: install $(basename "$tarball") into an empty folder"
cd "$tmp/app"
printf '{"name":"sdk-js-test-app","private":true,"type":"module"}\n' >package.json
npm install --no-audit --no-fund --loglevel=error "$tarball"
cp -r "$here/test" "$tmp/app/test"

echo "== sdks/js: build and start msgmesh"
(cd "$root" && go build -o "$tmp/msgmesh" ./services/msgmesh)
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
key="mm_$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
prefix="sdkjs$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
(
  export MSGMESH_HTTP_ADDR="127.0.0.1:$port"
  export MSGMESH_DATA_DIR="$tmp/data"
  export MSGMESH_KAFKA_BROKERS="$brokers"
  export MSGMESH_KAFKA_EMBEDDED_ADDR="127.0.0.1:0"
  export MSGMESH_KAFKA_TOPIC_PREFIX="$prefix"
  export MSGMESH_BOOTSTRAP_ADMIN_KEY="$key"
  export MSGMESH_REALTIME_REPLAY_WINDOW_RECORDS=50
  export MSGMESH_REALTIME_RETRY_HINT=500ms
  # the tests publish faster than a free plan's 100 requests per second
  export MSGMESH_LIMITS_FREE_REQUESTS_PER_SECOND=100000
  export MSGMESH_LIMITS_FREE_MESSAGES_PER_SECOND=100000
  exec "$tmp/msgmesh" serve >"$tmp/server.log" 2>&1
) &
server_pid=$!
url="http://127.0.0.1:$port"
for _ in $(seq 1 300); do
  if curl -fsS "$url/readyz" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$server_pid" 2>/dev/null; then echo "msgmesh exited" >&2; exit 1; fi
  sleep 0.1
done
curl -fsS "$url/readyz" >/dev/null
echo "== sdks/js: msgmesh at $url on ${brokers:-the embedded broker}"

cd "$tmp/app"
MSGMESH_TEST_URL=$url MSGMESH_TEST_KEY=$key MSGMESH_SDK_DEV_DIR=$here \
  node --expose-gc --test --test-force-exit --test-concurrency=1 --test-timeout=120000 test/*.test.mjs
