#!/usr/bin/env bash
# Apache Kafka 4.x (KRaft, combined broker+controller) for tests and local
# runs, started from the Apache Kafka jars on Maven Central: no Docker, no
# ZooKeeper, no binary tarball. One node by default; MSGMESH_KAFKA_NODES=3
# starts a three-node cluster; MSGMESH_KAFKA_SECURITY=sasl_ssl adds a
# SASL_SSL listener (SCRAM users, certificates made at the first start).
#
#   scripts/kafka.sh start     start in the background and wait until every node
#                              answers Kafka requests; already running -> prints brokers, exit 0
#   scripts/kafka.sh stop      TERM, wait, then KILL (every node)
#   scripts/kafka.sh status    exit 0 if running (and answering), 1 if not
#   scripts/kafka.sh brokers   print the bootstrap addresses, comma-separated
#                              (the SASL_SSL ones with MSGMESH_KAFKA_SECURITY=sasl_ssl;
#                              "brokers plaintext" prints the PLAINTEXT ones)
#   scripts/kafka.sh ca-file   print the CA file that signs the SASL_SSL listener's certificate
#   scripts/kafka.sh pid N     print the pid of node N (1-based), if it runs
#   scripts/kafka.sh logs      print the tail of the broker log(s)
#   scripts/kafka.sh reset     stop and delete the data dir (fresh cluster next start)
#
# Everything lives outside the repo:
#   MSGMESH_KAFKA_HOME             jar cache, default ~/.cache/msgmesh/kafka-4.4.0
#                                  (jars in $MSGMESH_KAFKA_HOME/libs, fetched by mvn on first use)
#   MSGMESH_KAFKA_PORT             PLAINTEXT port of node 1, default 19092; node N uses port + N - 1
#                                  (keep ports below 32768, the ephemeral range)
#   MSGMESH_KAFKA_CONTROLLER_PORT  controller port of node 1, default broker port + nodes
#                                  (19093 for one node); node N uses it + N - 1
#   MSGMESH_KAFKA_SASL_SSL_PORT    SASL_SSL port of node 1, default broker port + 2 * nodes
#                                  (19094 for one node); node N uses it + N - 1
#   MSGMESH_KAFKA_NODES            number of nodes (1..9), default 1
#   MSGMESH_KAFKA_SECURITY         plaintext (default) or sasl_ssl
#   MSGMESH_KAFKA_DATA_DIR         data, config, pid and logs, default $MSGMESH_KAFKA_HOME/run/<port>
#                                  (node N of several in <dir>/node<N>; certificates in <dir>/security)
#   MSGMESH_KAFKA_HEAP             JVM heap flags, default "-Xms256m -Xmx768m" (one node) or
#                                  "-Xms128m -Xmx384m" (each of several)
#   MSGMESH_KAFKA_START_TIMEOUT    seconds to wait for the brokers to answer, default 120
# Everything binds to 127.0.0.1 only.
#
# With MSGMESH_KAFKA_SECURITY=sasl_ssl the SASL_SSL listener offers
# SCRAM-SHA-256, SCRAM-SHA-512, PLAIN and OAUTHBEARER (unsecured JWTs, for
# tests), with a certificate for 127.0.0.1 and localhost signed by a CA made
# at the first start (<data dir>/security/ca.pem; a client certificate
# client.pem / client-key.pem signed by it is there too). Users (SCRAM and PLAIN):
#   msgmesh / msgmesh-secret   super user
#   noacl   / noacl-secret     no ACLs (every topic and group is refused)
# The StandardAuthorizer is on; the PLAINTEXT listener (inter-broker) stays
# open to anyone on 127.0.0.1.
set -euo pipefail

KAFKA_VERSION=4.4.0
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KHOME=${MSGMESH_KAFKA_HOME:-$HOME/.cache/msgmesh/kafka-$KAFKA_VERSION}
NODES=${MSGMESH_KAFKA_NODES:-1}
SECURITY=${MSGMESH_KAFKA_SECURITY:-plaintext}
PORT=${MSGMESH_KAFKA_PORT:-19092}
CPORT=${MSGMESH_KAFKA_CONTROLLER_PORT:-$((PORT + NODES))}
SPORT=${MSGMESH_KAFKA_SASL_SSL_PORT:-$((PORT + 2 * NODES))}
RUN=${MSGMESH_KAFKA_DATA_DIR:-$KHOME/run/$PORT}
if ((NODES > 1)); then
  HEAP=${MSGMESH_KAFKA_HEAP:-"-Xms128m -Xmx384m"}
else
  HEAP=${MSGMESH_KAFKA_HEAP:-"-Xms256m -Xmx768m"}
fi
START_TIMEOUT=${MSGMESH_KAFKA_START_TIMEOUT:-120}
HOST=127.0.0.1
SEC=$RUN/security
# Keystore password of the generated certificates (test material only).
STOREPASS=msgmesh-store

LIBS=$KHOME/libs
CHECK=$KHOME/bin/kafkacheck

say() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[[ $NODES =~ ^[1-9]$ ]] || die "MSGMESH_KAFKA_NODES must be 1..9, got '$NODES'"
case $SECURITY in plaintext | sasl_ssl) ;; *) die "MSGMESH_KAFKA_SECURITY must be plaintext or sasl_ssl, got '$SECURITY'" ;; esac

# addrs BASE: host:port of every node from BASE up, comma-separated.
addrs() {
  local i out=""
  for ((i = 0; i < NODES; i++)); do out+="${out:+,}$HOST:$(($1 + i))"; done
  echo "$out"
}
PLAIN_BROKERS=$(addrs "$PORT")
if [[ $SECURITY == sasl_ssl ]]; then BROKERS=$(addrs "$SPORT"); else BROKERS=$PLAIN_BROKERS; fi

# node N sets the per-node paths and ports (one node keeps the data dir's
# top level, as before several nodes existed).
use_node() {
  NODE=$1
  if ((NODES == 1)); then NRUN=$RUN; else NRUN=$RUN/node$NODE; fi
  NPORT=$((PORT + NODE - 1))
  NCPORT=$((CPORT + NODE - 1))
  NSPORT=$((SPORT + NODE - 1))
  PROPS=$NRUN/server.properties
  LOG4J=$NRUN/log4j2.properties
  PIDFILE=$NRUN/kafka.pid
  LOGDIR=$NRUN/logs
  DATADIR=$NRUN/data
  OUT=$LOGDIR/kafka.out # JVM stdout/stderr of the current run
}
use_node 1

# pid of our broker if it runs, else nothing (and a stale pid file is removed).
our_pid() {
  [[ -f $PIDFILE ]] || return 0
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka.Kafka $PROPS"; then
    echo "$pid"
    return 0
  fi
  rm -f "$PIDFILE"
}

port_busy() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

who_listens() {
  if command -v ss >/dev/null 2>&1; then
    ss -Hltnp "sport = :$1" 2>/dev/null | sed 's/^/  /' >&2 || true
  fi
}

MARK='==== scripts/kafka.sh start'

# Tail of the JVM output and of server.log since the last start.
log_tail() {
  local n=${1:-40}
  if [[ -s $OUT ]]; then
    say "---- last lines of $OUT ----"
    tail -n "$n" "$OUT" >&2
  fi
  if [[ -s $LOGDIR/server.log ]]; then
    say "---- last lines of $LOGDIR/server.log (this run) ----"
    awk -v m="$MARK" 'index($0, m) == 1 { buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }' \
      "$LOGDIR/server.log" | tail -n "$n" >&2
  fi
}

# Jars: once per cache dir. A marker file makes an interrupted download retry.
ensure_jars() {
  [[ -f $LIBS/.complete ]] && return 0
  command -v mvn >/dev/null 2>&1 || die "mvn not found (Maven is needed once, to fetch the Kafka $KAFKA_VERSION jars)"
  command -v java >/dev/null 2>&1 || die "java not found (Java 17+ runs the broker)"
  say "fetching Apache Kafka $KAFKA_VERSION jars into $LIBS (first use only)..."
  rm -rf "$LIBS"
  mkdir -p "$LIBS"
  mvn -B -q -f "$REPO/deployments/kafka/pom.xml" dependency:copy-dependencies \
    -DoutputDirectory="$LIBS" >"$KHOME/mvn.log" 2>&1 ||
    { tail -n 30 "$KHOME/mvn.log" >&2; die "mvn could not fetch the Kafka jars (log: $KHOME/mvn.log)"; }
  ls "$LIBS"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null 2>&1 || die "kafka_2.13-$KAFKA_VERSION.jar missing after mvn"
  touch "$LIBS/.complete"
}

# The readiness probe: a real Metadata request (scripts/kafkacheck), built once
# per cache dir; falls back to kcat -L, then to an open port.
ensure_check() {
  [[ -x $CHECK && $CHECK -nt $REPO/scripts/kafkacheck/main.go ]] && return 0
  command -v go >/dev/null 2>&1 || return 0
  mkdir -p "$(dirname "$CHECK")"
  if (cd "$REPO" && go build -o "$CHECK.tmp" ./scripts/kafkacheck); then
    mv "$CHECK.tmp" "$CHECK"
  else
    say "warning: could not build scripts/kafkacheck; readiness falls back to kcat or the open port"
  fi
}

# node_answers: node $NODE answers a Metadata request on its PLAINTEXT
# port and (for a cluster) its metadata lists every node.
node_answers() {
  if [[ -x $CHECK ]]; then
    local out
    out=$("$CHECK" -brokers "$HOST:$NPORT" -timeout 3s 2>/dev/null) || return 1
    (($(grep -c . <<<"$out") >= NODES))
  elif command -v kcat >/dev/null 2>&1; then
    kcat -L -b "$HOST:$NPORT" -m 3 >/dev/null 2>&1
  else
    port_busy "$NPORT"
  fi
}

answers() {
  local i
  for ((i = 1; i <= NODES; i++)); do
    use_node "$i"
    node_answers || return 1
  done
}

# Certificates and keystores of the SASL_SSL listener, made once per data
# dir: a CA, a broker certificate for 127.0.0.1/localhost and a client
# certificate (mutual TLS), all signed by the CA.
ensure_certs() {
  [[ -f $SEC/.complete ]] && return 0
  command -v openssl >/dev/null 2>&1 || die "openssl not found (it makes the SASL_SSL certificates)"
  command -v keytool >/dev/null 2>&1 || die "keytool not found (Java 17+ brings it)"
  rm -rf "$SEC"
  mkdir -p "$SEC"
  (
    cd "$SEC"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=MsgMesh test CA" \
      -keyout ca-key.pem -out ca.pem
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout broker-key.pem -out broker.csr
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >broker.ext
    openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 3650 \
      -extfile broker.ext -out broker.pem
    openssl pkcs12 -export -name broker -in broker.pem -inkey broker-key.pem -certfile ca.pem \
      -passout "pass:$STOREPASS" -out broker.p12
    keytool -importcert -noprompt -alias ca -file ca.pem -keystore truststore.p12 -storetype PKCS12 \
      -storepass "$STOREPASS"
    openssl req -newkey rsa:2048 -nodes -subj "/CN=msgmesh-client" -keyout client-key.pem -out client.csr
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 3650 \
      -extfile client.ext -out client.pem
    chmod 600 ./*-key.pem ./*.p12
  ) >"$RUN/certs.log" 2>&1 || { cat "$RUN/certs.log" >&2; die "making the certificates failed"; }
  touch "$SEC/.complete"
}

# SCRAM users, added to the metadata at format time.
SCRAM_USERS=(msgmesh:msgmesh-secret noacl:noacl-secret)

write_config() {
  mkdir -p "$NRUN" "$LOGDIR" "$DATADIR"
  local listeners="PLAINTEXT://$HOST:$NPORT" advertised="PLAINTEXT://$HOST:$NPORT"
  local protomap="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
  if [[ $SECURITY == sasl_ssl ]]; then
    listeners+=",SASL_SSL://$HOST:$NSPORT"
    advertised+=",SASL_SSL://$HOST:$NSPORT"
    protomap+=",SASL_SSL:SASL_SSL"
  fi
  local quorum i rf=$((NODES < 3 ? NODES : 3)) isr=$((NODES > 1 ? 2 : 1))
  if ((NODES == 1)); then
    quorum="controller.quorum.bootstrap.servers=$HOST:$NCPORT"
  else
    quorum="controller.quorum.voters="
    local voters=""
    for ((i = 1; i <= NODES; i++)); do voters+="${voters:+,}$i@$HOST:$((CPORT + i - 1))"; done
    quorum+=$voters
  fi
  cat >"$PROPS" <<EOF
# Generated by scripts/kafka.sh; rewritten on every start.
process.roles=broker,controller
node.id=$NODE
listeners=$listeners,CONTROLLER://$HOST:$NCPORT
advertised.listeners=$advertised
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$protomap
$quorum
log.dirs=$DATADIR
num.partitions=1
default.replication.factor=$rf
auto.create.topics.enable=false
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$isr
group.initial.rebalance.delay.ms=0
# tests use short consumer-group sessions (broker default minimum: 6000)
group.min.session.timeout.ms=1000
# tests create and delete many topics
delete.topic.enable=true
num.network.threads=2
num.io.threads=4
log.retention.check.interval.ms=60000
EOF
  if ((NODES > 1)); then
    cat >>"$PROPS" <<EOF
# a dead node is fenced (its partitions get new leaders) within 3 s, not 9 s
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=3000
EOF
  fi
  if [[ $SECURITY == sasl_ssl ]]; then
    cat >>"$PROPS" <<EOF
# MSGMESH_KAFKA_SECURITY=sasl_ssl
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN,OAUTHBEARER
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_msgmesh="msgmesh-secret" user_noacl="noacl-secret";
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";
ssl.keystore.type=PKCS12
ssl.keystore.location=$SEC/broker.p12
ssl.keystore.password=$STOREPASS
ssl.key.password=$STOREPASS
ssl.truststore.type=PKCS12
ssl.truststore.location=$SEC/truststore.p12
ssl.truststore.password=$STOREPASS
ssl.client.auth=requested
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
# ANONYMOUS: the PLAINTEXT (inter-broker) and CONTROLLER listeners
super.users=User:ANONYMOUS;User:msgmesh
EOF
  fi
  cat >"$LOG4J" <<EOF
# Generated by scripts/kafka.sh. Broker log: $LOGDIR/server.log (rolled at 20 MB, 5 kept).
name = msgmesh-kafka
appender.file.type = RollingFile
appender.file.name = FILE
appender.file.fileName = $LOGDIR/server.log
appender.file.filePattern = $LOGDIR/server.log.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 20MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 5
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = WARN
EOF
}

classpath() { printf '%s:' "$LIBS"/*.jar | sed 's/:$//'; }

# What the data dir was formatted for; the controller addresses (and the
# SCRAM users, for sasl_ssl) are part of the stored metadata.
layout() {
  local l="broker=$PORT controller=$CPORT"
  ((NODES > 1)) && l+=" nodes=$NODES"
  [[ $SECURITY != plaintext ]] && l+=" security=$SECURITY"
  echo "$l"
}

cluster_id() {
  if [[ ! -s $RUN/cluster.id ]]; then
    local id
    id=$(java -cp "$(classpath)" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
    [[ $id =~ ^[A-Za-z0-9_-]{22}$ ]] || die "kafka.tools.StorageTool random-uuid printed '$id'"
    echo "$id" >"$RUN/cluster.id"
  fi
  cat "$RUN/cluster.id"
}

format_storage() {
  [[ -f $DATADIR/meta.properties ]] && return 0
  local id args=()
  id=$(cluster_id)
  ((NODES == 1)) && args+=(--standalone)
  if [[ $SECURITY == sasl_ssl ]]; then
    local u
    for u in "${SCRAM_USERS[@]}"; do
      args+=(--add-scram "SCRAM-SHA-256=[name=${u%%:*},password=${u#*:}]")
      args+=(--add-scram "SCRAM-SHA-512=[name=${u%%:*},password=${u#*:}]")
    done
  fi
  say "formatting storage in $DATADIR (cluster id $id)"
  java -Dlog4j2.configurationFile="$LOG4J" -cp "$(classpath)" kafka.tools.StorageTool \
    format -t "$id" -c "$PROPS" "${args[@]}" >"$LOGDIR/format.log" 2>&1 ||
    { cat "$LOGDIR/format.log" >&2; die "storage format failed"; }
}

pids() {
  local i p out=""
  for ((i = 1; i <= NODES; i++)); do
    use_node "$i"
    p=$(our_pid)
    [[ -n $p ]] && out+="${out:+ }$p"
  done
  echo "$out"
}

cmd_start() {
  local running
  running=$(pids)
  STARTED=()
  if [[ -n $running ]] && (($(wc -w <<<"$running") == NODES)); then
    say "already running (pid $running)"
    read -r -a STARTED <<<"$running"
    wait_ready "$SECONDS"
    [[ $SECURITY == sasl_ssl ]] && say "CA file: $SEC/ca.pem (users msgmesh/msgmesh-secret, noacl/noacl-secret)"
    echo "$BROKERS"
    return 0
  fi
  local p i
  for ((i = 1; i <= NODES; i++)); do
    use_node "$i"
    [[ -n $(our_pid) ]] && continue
    local ports=("$NPORT" "$NCPORT")
    [[ $SECURITY == sasl_ssl ]] && ports+=("$NSPORT")
    for p in "${ports[@]}"; do
      if port_busy "$p"; then
        say "error: port $HOST:$p is in use by a process that is not this MsgMesh broker (pid file $PIDFILE):"
        who_listens "$p"
        die "free the port or pick others with MSGMESH_KAFKA_PORT / MSGMESH_KAFKA_CONTROLLER_PORT / MSGMESH_KAFKA_SASL_SSL_PORT"
      fi
    done
  done
  if [[ -f $RUN/ports ]] && [[ $(cat "$RUN/ports") != "$(layout)" ]]; then
    die "$RUN was formatted with $(cat "$RUN/ports") (now $(layout)); the controller addresses and SCRAM users are part of the stored metadata. Use another MSGMESH_KAFKA_DATA_DIR or 'scripts/kafka.sh reset'"
  fi
  command -v java >/dev/null 2>&1 || die "java not found (Java 17+ runs the broker)"
  local t0=$SECONDS
  STARTED=()
  ensure_jars
  ensure_check
  [[ $SECURITY == sasl_ssl ]] && ensure_certs
  for ((i = 1; i <= NODES; i++)); do
    use_node "$i"
    write_config
    format_storage
  done
  layout >"$RUN/ports"

  for ((i = 1; i <= NODES; i++)); do
    use_node "$i"
    [[ -n $(our_pid) ]] && continue
    say "starting Apache Kafka $KAFKA_VERSION node $NODE on $HOST:$NPORT$([[ $SECURITY == sasl_ssl ]] && echo " (SASL_SSL $HOST:$NSPORT)") (controller $HOST:$NCPORT, data $NRUN)"
    : >"$OUT"
    echo "$MARK $(date '+%F %T') pid $$ ====" >>"$LOGDIR/server.log"
    # setsid: the broker outlives this shell and ignores the terminal's Ctrl-C.
    # 9>&-: it must not inherit (and so hold) the start/stop lock.
    # shellcheck disable=SC2086
    setsid java $HEAP -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
      -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
      -Dlog4j2.configurationFile="$LOG4J" -Dkafka.logs.dir="$LOGDIR" \
      -cp "$(classpath)" kafka.Kafka "$PROPS" </dev/null >>"$OUT" 2>&1 9>&- &
    echo "$!" >"$PIDFILE"
    STARTED+=("$!")
  done
  wait_ready "$t0"
  [[ $SECURITY == sasl_ssl ]] && say "CA file: $SEC/ca.pem (users msgmesh/msgmesh-secret, noacl/noacl-secret)"
  echo "$BROKERS"
}

# Wait until every node (started at $1 seconds) answers; on an exit or
# timeout print the log tail, stop what runs and fail.
wait_ready() {
  local t0=$1 i
  local deadline=$((SECONDS + START_TIMEOUT))
  local pid
  until answers; do
    # kill -0, not our_pid: a child that has not exec'd java yet would not
    # match its command line.
    for pid in "${STARTED[@]}"; do
      if ! kill -0 "$pid" 2>/dev/null; then
        for ((i = 1; i <= NODES; i++)); do
          use_node "$i"
          [[ $(cat "$PIDFILE" 2>/dev/null) == "$pid" ]] && break
        done
        log_tail 60
        local logs=$LOGDIR
        stop_all
        die "broker node $i (pid $pid) exited during startup (logs in $logs)"
      fi
    done
    if ((SECONDS >= deadline)); then
      log_tail 60
      stop_all
      die "the brokers did not answer on $PLAIN_BROKERS within ${START_TIMEOUT}s (logs in $RUN); stopped them"
    fi
    sleep 0.5
  done
  say "ready in $((SECONDS - t0))s (pid $(pids), log $LOGDIR/server.log)"
}

# TERM every node at once (a cluster stopped one by one loses its quorum
# and the last nodes hang in controlled shutdown), wait 30 s, then KILL.
stop_all() {
  local running
  running=$(pids)
  if [[ -z $running ]]; then
    say "not running"
    return 0
  fi
  say "stopping (pid $running)"
  # shellcheck disable=SC2086
  kill -TERM $running 2>/dev/null || true
  local i p alive
  for ((i = 0; i < 60; i++)); do # 30 s for a clean shutdown
    alive=""
    for p in $running; do kill -0 "$p" 2>/dev/null && alive+=" $p"; done
    [[ -z $alive ]] && break
    sleep 0.5
  done
  if [[ -n $alive ]]; then
    say "still running after 30s:$alive; sending KILL"
    # shellcheck disable=SC2086
    kill -KILL $alive 2>/dev/null || true
    sleep 0.5
  fi
  for ((i = 1; i <= NODES; i++)); do
    use_node "$i"
    rm -f "$PIDFILE"
  done
  say "stopped"
}

cmd_stop() { stop_all; }

cmd_status() {
  local running
  running=$(pids)
  if [[ -z $running ]]; then
    say "not running"
    return 1
  fi
  if (($(wc -w <<<"$running") == NODES)) && answers; then
    say "running (pid $running) on $BROKERS"
    return 0
  fi
  say "processes $running are up but $PLAIN_BROKERS do not all answer (starting, stuck or a node down; see scripts/kafka.sh logs)"
  return 1
}

# One start/stop at a time per data dir (parallel test runs, two shells).
with_lock() {
  mkdir -p "$RUN"
  exec 9>"$RUN/.lock"
  command -v flock >/dev/null 2>&1 && flock 9
  "$@"
}

case "${1:-}" in
start) with_lock cmd_start ;;
stop) with_lock cmd_stop ;;
status) cmd_status ;;
brokers)
  if [[ ${2:-} == plaintext ]]; then echo "$PLAIN_BROKERS"; else echo "$BROKERS"; fi
  ;;
ca-file) echo "$SEC/ca.pem" ;;
pid)
  [[ ${2:-} =~ ^[1-9]$ ]] && ((${2} <= NODES)) || die "usage: $0 pid <node 1..$NODES>"
  use_node "$2"
  our_pid
  ;;
logs)
  for ((n = 1; n <= NODES; n++)); do
    use_node "$n"
    ((NODES > 1)) && say "==== node $n ===="
    log_tail "${2:-100}"
  done
  ;;
reset)
  with_lock cmd_stop
  for ((n = 1; n <= NODES; n++)); do
    use_node "$n"
    rm -rf "$DATADIR" "$LOGDIR"
  done
  rm -rf "$RUN/ports" "$RUN/cluster.id" "$SEC"
  say "removed the data in $RUN"
  ;;
*)
  echo "usage: $0 start|stop|status|brokers [plaintext]|ca-file|pid <node>|logs [n]|reset" >&2
  exit 2
  ;;
esac
