#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests and local runs (the read model,
# postgres.url), from Debian's packages: no Docker.
#
#   scripts/postgres.sh start    install PostgreSQL if missing (apt-get install postgresql),
#                                initdb a cluster owned by an unprivileged user, start it on a
#                                free 127.0.0.1 port and print its connection URL as the last
#                                line; already running -> prints the URL, exit 0
#   scripts/postgres.sh stop     stop it (pg_ctl stop -m fast) and delete the cluster
#   scripts/postgres.sh halt     stop it but keep the cluster: the next start brings it back
#                                with its data on the same port (outage and restart tests)
#   scripts/postgres.sh status   exit 0 if it runs and accepts connections, 1 if not
#   scripts/postgres.sh url      print the connection URL of the running cluster
#
#   MSGMESH_POSTGRES_HOME  where the cluster lives, default ~/.cache/msgmesh/postgres
#   MSGMESH_POSTGRES_PORT  port, default a free one picked at start
#   MSGMESH_POSTGRES_USER  the system user that owns and runs the cluster when this script
#                          runs as root (PostgreSQL refuses to run as root), default postgres
#                          (made by the package), else nobody
# The cluster binds to 127.0.0.1 only and trusts local connections (a test database).
set -euo pipefail

PGHOME_DIR=${MSGMESH_POSTGRES_HOME:-$HOME/.cache/msgmesh/postgres}
DATA=$PGHOME_DIR/data
PORTFILE=$PGHOME_DIR/port
LOG=$PGHOME_DIR/postgres.log
HOST=127.0.0.1
DB=msgmesh

say() { printf 'postgres.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# bindir prints the newest /usr/lib/postgresql/<ver>/bin holding initdb.
bindir() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [[ -x $d/initdb && -x $d/pg_ctl ]] && { echo "$d"; return 0; }
  done
  return 1
}

install_pg() {
  bindir >/dev/null && return 0
  command -v apt-get >/dev/null || die "PostgreSQL is not installed and apt-get is missing"
  [[ $(id -u) -eq 0 ]] || die "PostgreSQL is not installed; run as root (apt-get install postgresql) or install it"
  say "installing PostgreSQL from Debian packages (apt-get install postgresql)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2 ||
    { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2; } ||
    die "apt-get install postgresql failed"
  bindir >/dev/null || die "PostgreSQL installed but no /usr/lib/postgresql/<ver>/bin/initdb"
}

# runas runs a command as the cluster's owner (ourselves unless root).
OWNER=
pick_owner() {
  if [[ $(id -u) -ne 0 ]]; then
    OWNER=$(id -un)
  elif [[ -n ${MSGMESH_POSTGRES_USER:-} ]]; then
    OWNER=$MSGMESH_POSTGRES_USER
  elif id postgres >/dev/null 2>&1; then
    OWNER=postgres
  else
    OWNER=nobody
  fi
}
runas() {
  if [[ $(id -u) -ne 0 ]]; then
    "$@"
  elif command -v runuser >/dev/null; then
    runuser -u "$OWNER" -- "$@"
  else
    su -s /bin/sh "$OWNER" -c "$(printf '%q ' "$@")"
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000))
}

url() { echo "postgres://$OWNER@$HOST:$(cat "$PORTFILE")/$DB?sslmode=disable"; }

running() {
  [[ -f $PORTFILE && -f $DATA/postmaster.pid ]] || return 1
  local bin
  bin=$(bindir) || return 1
  runas "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1 &&
    "$bin/pg_isready" -q -h "$HOST" -p "$(cat "$PORTFILE")" >/dev/null 2>&1
}

start() {
  pick_owner
  if running; then
    url
    return 0
  fi
  install_pg
  local bin port
  bin=$(bindir)
  mkdir -p "$PGHOME_DIR"
  # The owner must reach the directory: a root home is not traversable by
  # others, so a root run keeps the cluster under /tmp unless told otherwise.
  if [[ $(id -u) -eq 0 && -z ${MSGMESH_POSTGRES_HOME:-} ]] && ! runas test -x "$PGHOME_DIR"; then
    PGHOME_DIR=/tmp/msgmesh-postgres
    DATA=$PGHOME_DIR/data PORTFILE=$PGHOME_DIR/port LOG=$PGHOME_DIR/postgres.log
    mkdir -p "$PGHOME_DIR"
    if running; then
      url
      return 0
    fi
  fi
  [[ $(id -u) -eq 0 ]] && chown "$OWNER" "$PGHOME_DIR"
  if [[ -f $DATA/postmaster.pid ]]; then # left by a killed run
    runas "$bin/pg_ctl" -D "$DATA" stop -m immediate >/dev/null 2>&1 || true
  fi
  if [[ ! -f $DATA/PG_VERSION ]]; then
    rm -rf "$DATA"
    runas "$bin/initdb" -D "$DATA" -U "$OWNER" --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null 2>"$PGHOME_DIR/initdb.err" ||
      runas "$bin/initdb" -D "$DATA" -U "$OWNER" --auth=trust -E UTF8 --locale=C >/dev/null 2>>"$PGHOME_DIR/initdb.err" ||
      die "initdb failed: $(tail -3 "$PGHOME_DIR/initdb.err")"
  fi
  port=${MSGMESH_POSTGRES_PORT:-}
  if [[ -z $port && -f $PORTFILE ]]; then
    port=$(cat "$PORTFILE") # a halted cluster comes back where it was
  fi
  port=${port:-$(free_port)}
  echo "$port" >"$PORTFILE"
  runas "$bin/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start \
    -o "-c listen_addresses=$HOST -p $port -k $DATA -c fsync=on -c max_connections=100" >/dev/null ||
    die "PostgreSQL did not start: $(tail -5 "$LOG" 2>/dev/null)"
  runas "$bin/psql" -h "$HOST" -p "$port" -U "$OWNER" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$DB'" | grep -q 1 ||
    runas "$bin/createdb" -h "$HOST" -p "$port" -U "$OWNER" "$DB" || die "createdb $DB failed"
  say "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') running on $HOST:$port (data $DATA, owner $OWNER)"
  url
}

stop() {
  pick_owner
  [[ -d /tmp/msgmesh-postgres && ! -f $PORTFILE && $(id -u) -eq 0 && -z ${MSGMESH_POSTGRES_HOME:-} ]] &&
    PGHOME_DIR=/tmp/msgmesh-postgres DATA=/tmp/msgmesh-postgres/data PORTFILE=/tmp/msgmesh-postgres/port
  local bin
  bin=$(bindir) || return 0
  if [[ -f $DATA/postmaster.pid ]]; then
    runas "$bin/pg_ctl" -D "$DATA" stop -m fast -w -t 30 >/dev/null 2>&1 ||
      runas "$bin/pg_ctl" -D "$DATA" stop -m immediate >/dev/null 2>&1 || true
  fi
  rm -rf "$DATA" "$PORTFILE"
  say "stopped"
}

halt() {
  pick_owner
  resolve_home
  local bin
  bin=$(bindir) || return 0
  if [[ -f $DATA/postmaster.pid ]]; then
    runas "$bin/pg_ctl" -D "$DATA" stop -m fast -w -t 30 >/dev/null 2>&1 ||
      runas "$bin/pg_ctl" -D "$DATA" stop -m immediate >/dev/null 2>&1 || true
  fi
  say "halted (data kept in $DATA)"
}

resolve_home() {
  # status/url: find the cluster where start put it.
  if [[ ! -f $PORTFILE && $(id -u) -eq 0 && -z ${MSGMESH_POSTGRES_HOME:-} && -f /tmp/msgmesh-postgres/port ]]; then
    PGHOME_DIR=/tmp/msgmesh-postgres DATA=/tmp/msgmesh-postgres/data PORTFILE=/tmp/msgmesh-postgres/port
  fi
}

case ${1:-} in
start) start ;;
stop) stop ;;
halt) halt ;;
status) pick_owner; resolve_home; running ;;
url) pick_owner; resolve_home; running || die "not running (scripts/postgres.sh start)"; url ;;
*) echo "usage: $0 start|stop|halt|status|url" >&2; exit 2 ;;
esac
