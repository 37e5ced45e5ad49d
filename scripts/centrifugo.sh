#!/usr/bin/env bash
# Builds Centrifugo v6, the realtime benchmark's point of comparison, from
# the Go module proxy into ~/.cache/msgmesh/centrifugo (once; never
# committed) and prints the binary's path. `make bench` (scripts/bench.sh)
# calls it; integration/bench starts the binary with its own minimal config.
#
#   scripts/centrifugo.sh                 build if missing, print the path
#   CENTRIFUGO_VERSION=v6.9.1 scripts/centrifugo.sh
#
# The build takes about 2 minutes on 2 cores.
set -euo pipefail

version=${CENTRIFUGO_VERSION:-v6.9.1}
dir=${MSGMESH_CACHE_DIR:-$HOME/.cache/msgmesh}/centrifugo
bin=$dir/centrifugo
stamp=$dir/centrifugo.version

if [[ -x $bin && -f $stamp && $(cat "$stamp") == "$version" ]]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null 2>&1 || { echo "centrifugo.sh: go is needed to build centrifugo" >&2; exit 1; }
echo "centrifugo.sh: building centrifugo $version with go install (about 2 min)" >&2
mkdir -p "$dir"
rm -f "$stamp"
# Outside this module (its go.mod must not be touched); the version is
# stamped in as a release build would have it.
(
  cd "${TMPDIR:-/tmp}"
  GOBIN=$dir GOFLAGS=-mod=mod GOWORK=off timeout 15m go install \
    -ldflags "-X github.com/centrifugal/centrifugo/v6/internal/build.Version=${version#v}" \
    "github.com/centrifugal/centrifugo/v6@$version"
) >&2
echo "$version" >"$stamp"
echo "$bin"
