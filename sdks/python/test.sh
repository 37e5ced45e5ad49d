#!/usr/bin/env bash
# The Python SDK's tests, as a user gets the SDK: builds the wheel
# (python -m build), installs it (not the source tree) with the test
# dependencies into a fresh virtualenv in a temp dir, builds msgmesh from
# this repository, and runs tests/ sync and asyncio against it (the pytest
# session starts `msgmesh serve` on free ports and stops it at exit).
#
# Kafka: MSGMESH_TEST_KAFKA_BROKERS (the real broker), else the embedded one;
# with MSGMESH_TEST_REQUIRE_REAL_KAFKA=1 an empty MSGMESH_TEST_KAFKA_BROKERS
# fails. Extra arguments go to pytest (e.g. -k websocket).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"

if [[ -z "${MSGMESH_TEST_KAFKA_BROKERS:-}" && "${MSGMESH_TEST_REQUIRE_REAL_KAFKA:-}" == "1" ]]; then
  echo "sdks/python/test.sh: MSGMESH_TEST_REQUIRE_REAL_KAFKA=1 but MSGMESH_TEST_KAFKA_BROKERS is empty" >&2
  exit 1
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/msgmesh-pysdk.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

echo "== python SDK: fresh virtualenv ($("$python" --version))"
"$python" -m venv "$tmp/venv"
pip=("$tmp/venv/bin/python" -m pip --disable-pip-version-check -q)
"${pip[@]}" install "build==1.*"

echo "== python SDK: python -m build"
# build from a copy: nothing is written into the source tree
mkdir -p "$tmp/src"
cp -r "$here/pyproject.toml" "$here/README.md" "$here/src" "$tmp/src/"
"$tmp/venv/bin/python" -m build --wheel --outdir "$tmp/dist" "$tmp/src" >"$tmp/build.log" 2>&1 || {
  cat "$tmp/build.log" >&2; exit 1; }
wheel="$(ls "$tmp"/dist/msgmesh-*.whl)"
echo "   $(basename "$wheel")"
"${pip[@]}" install "$wheel" "pytest==9.*" "pytest-asyncio==1.*" "mypy>=1.10"

echo "== python SDK: mypy --strict (the wheel says it is typed: py.typed)"
(cd "$tmp" && "$tmp/venv/bin/python" -m mypy --strict --no-incremental -p msgmesh)

echo "== python SDK: go build msgmesh"
(cd "$repo" && go build -o "$tmp/msgmesh" ./services/msgmesh)

echo "== python SDK: pytest (broker: ${MSGMESH_TEST_KAFKA_BROKERS:-embedded})"
set +e
MSGMESH_TEST_BIN="$tmp/msgmesh" MSGMESH_TEST_REQUIRE_WHEEL=1 \
  "$tmp/venv/bin/python" -m pytest -c "$here/pyproject.toml" --rootdir "$here" -p no:cacheprovider \
  -q -rfExX "$here/tests" "$@"
rc=$?
set -e
if [[ $rc -eq 5 ]]; then
  echo "sdks/python/test.sh: pytest collected no tests" >&2
  exit 1
fi
exit $rc
