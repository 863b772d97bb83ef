#!/usr/bin/env bash
# A real Apache Kafka for the tests and benchmarks, in KRaft mode on loopback,
# resolved from Maven (scripts/kafka/pom.xml pins the version). Prints the
# export line for its bootstrap servers:
#   eval "$(scripts/kafka.sh start)"              -> SLUICE_TEST_KAFKA_BOOTSTRAP=127.0.0.1:39092
#   eval "$(scripts/kafka.sh start --brokers 3)"  -> SLUICE_TEST_KAFKA3_BOOTSTRAP=...
#   scripts/kafka.sh stop [--brokers 1|3]         (both clusters without --brokers)
#   scripts/kafka.sh reset [--brokers 1|3]        stop and delete the data: the next
#                                                 start formats a new cluster
#   scripts/kafka.sh kill NODE --brokers 3        SIGKILL one broker (failover tests);
#                                                 `start` brings back any node not running
#   scripts/kafka.sh status [--brokers 1|3]
# Each node is a combined broker and controller. One broker: ports 39092
# (clients) and 39093 (controller). Three brokers: 39192/39193, 39194/39195,
# 39196/39197, replication factor 3 and min.insync.replicas 2 for every topic
# and for the transaction state log. Data and logs live in
# $SLUICE_KAFKA_DIR-N (default /tmp/sluice-kafka-N, N the broker count); each
# node's log is node-ID/server.log there, kept after stop for failures. The
# jars are cached in $SLUICE_KAFKA_CACHE (default ~/.cache/sluice) and reused.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pom="$here/kafka/pom.xml"

die() {
  echo "kafka.sh: $*" >&2
  exit 1
}

command="${1:-start}"
shift || true
brokers=""
node=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --brokers) brokers="${2:-}"; shift 2 ;;
    --brokers=*) brokers="${1#--brokers=}"; shift ;;
    [0-9]*) node="$1"; shift ;;
    *) die "unknown argument '$1' (usage: kafka.sh start|stop|reset|status|kill NODE [--brokers 1|3])" ;;
  esac
done
[[ -z "$brokers" || "$brokers" == 1 || "$brokers" == 3 ]] \
  || die "--brokers must be 1 or 3, not '$brokers'"

version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")"
cache="${SLUICE_KAFKA_CACHE:-$HOME/.cache/sluice}/kafka-$version"

cluster_dir() { echo "${SLUICE_KAFKA_DIR:-/tmp/sluice-kafka}-$1"; }
client_port() { if [[ "$1" == 1 ]]; then echo 39092; else echo $((39190 + 2 * $2)); fi; }
controller_port() { echo $(($(client_port "$1" "$2") + 1)); }
bootstrap() {
  local n="$1" out="" id
  for ((id = 1; id <= n; id++)); do
    out+="${out:+,}127.0.0.1:$(client_port "$n" "$id")"
  done
  echo "$out"
}
export_name() { if [[ "$1" == 1 ]]; then echo SLUICE_TEST_KAFKA_BOOTSTRAP; else echo SLUICE_TEST_KAFKA3_BOOTSTRAP; fi; }

node_pid() {
  local pidfile="$(cluster_dir "$1")/node-$2/pid"
  [[ -s "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null && cat "$pidfile"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

find_java() {
  local java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
  command -v "$java" >/dev/null 2>&1 \
    || die "Java is not installed: the broker needs a JDK 17 or newer (apt-get install openjdk-17-jdk-headless)"
  local major
  major="$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)"
  [[ -n "$major" && "$major" -ge 17 ]] \
    || die "Java $major is too old: Apache Kafka $version's broker needs Java 17 or newer (set JAVA_HOME)"
  echo "$java"
}

resolve_jars() {
  if [[ -f "$cache/complete" ]]; then
    return
  fi
  command -v mvn >/dev/null 2>&1 || die "Maven is not installed: it resolves Apache Kafka $version (apt-get install maven)"
  mkdir -p "$cache"
  echo "kafka.sh: resolving Apache Kafka $version from Maven into $cache" >&2
  if ! mvn -B -q -f "$pom" dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$cache/libs" >"$cache/maven.log" 2>&1; then
    tail -5 "$cache/maven.log" >&2
    die "could not resolve Apache Kafka $version from Maven (is the registry reachable?): see $cache/maven.log"
  fi
  touch "$cache/complete"
}

write_config() {
  local n="$1" id="$2" dir voters="" i min_isr=1
  dir="$(cluster_dir "$n")/node-$id"
  for ((i = 1; i <= n; i++)); do
    voters+="${voters:+,}$i@127.0.0.1:$(controller_port "$n" "$i")"
  done
  [[ "$n" -ge 3 ]] && min_isr=2
  mkdir -p "$dir/data"
  cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=$id
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$(client_port "$n" "$id"),CONTROLLER://127.0.0.1:$(controller_port "$n" "$id")
advertised.listeners=PLAINTEXT://127.0.0.1:$(client_port "$n" "$id")
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data
num.partitions=1
default.replication.factor=$n
min.insync.replicas=$min_isr
offsets.topic.replication.factor=$n
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$n
transaction.state.log.min.isr=$min_isr
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=$n
share.coordinator.state.topic.min.isr=$min_isr
group.initial.rebalance.delay.ms=0
# Tests restart members within seconds; let a dead transaction be aborted soon.
transaction.abort.timed.out.transaction.cleanup.interval.ms=5000
transaction.remove.expired.transaction.cleanup.interval.ms=60000
group.consumer.session.timeout.ms=10000
group.consumer.min.session.timeout.ms=5000
group.consumer.heartbeat.interval.ms=1000
group.consumer.min.heartbeat.interval.ms=500
log.segment.bytes=67108864
log.retention.hours=24
num.io.threads=2
num.network.threads=2
num.recovery.threads.per.data.dir=1
background.threads=2
EOF
  cat >"$dir/log4j2.properties" <<EOF
status=warn
appender.file.type=File
appender.file.name=file
appender.file.fileName=$dir/server.log
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=file
logger.kafka.name=kafka
logger.kafka.level=INFO
logger.request.name=kafka.request.logger
logger.request.level=WARN
logger.state.name=state.change.logger
logger.state.level=WARN
EOF
}

start_node() {
  local n="$1" id="$2" java="$3" dir heap
  dir="$(cluster_dir "$n")/node-$id"
  [[ -n "$(node_pid "$n" "$id")" ]] && return
  write_config "$n" "$id"
  if [[ ! -f "$dir/data/meta.properties" ]]; then
    "$java" -Xmx256m -cp "$cache/libs/*" -Dlog4j2.configurationFile="$dir/log4j2.properties" \
      kafka.tools.StorageTool format --ignore-formatted --cluster-id="$(cluster_id "$n")" \
      -c "$dir/server.properties" >"$dir/format.log" 2>&1 \
      || { cat "$dir/format.log" >&2; die "formatting node $id's KRaft storage failed: see $dir/format.log"; }
  fi
  # A broker of a test cluster: small heap (the machine has 2 cores and the
  # tests, the worker and PostgreSQL share them), short GC pauses.
  heap="${SLUICE_KAFKA_HEAP:-768m}"
  [[ "$n" -ge 3 ]] && heap="${SLUICE_KAFKA_HEAP:-512m}"
  setsid "$java" -Xms128m -Xmx"$heap" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$dir/log4j2.properties" \
    -cp "$cache/libs/*" kafka.Kafka "$dir/server.properties" \
    >"$dir/stdout.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
}

cluster_id() {
  local file
  file="$(cluster_dir "$1")/cluster-id"
  mkdir -p "$(dirname "$file")"
  # A KRaft cluster id is 16 bytes in URL-safe base64 without padding. One
  # in 32 begins with '-', which a command line takes for an option (Kafka's
  # own Uuid.randomUuid draws again then; so does this, and the id is
  # passed as --cluster-id=ID, which reads a leading '-' as part of it).
  while [[ ! -s "$file" || "$(head -c 1 "$file")" == - ]]; do
    head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=' >"$file"
  done
  cat "$file"
}

wait_ready() {
  local n="$1" id deadline=$((SECONDS + ${SLUICE_KAFKA_START_TIMEOUT:-120})) dir
  for ((id = 1; id <= n; id++)); do
    dir="$(cluster_dir "$n")/node-$id"
    # "started" is logged once the broker is registered and unfenced.
    until port_open "$(client_port "$n" "$id")" \
        && grep -qs "Kafka Server started" "$dir/server.log"; do
      if [[ -z "$(node_pid "$n" "$id")" ]]; then
        tail -20 "$dir/server.log" "$dir/stdout.log" >&2 2>/dev/null || true
        die "broker $id of $n exited while starting: see $dir/server.log"
      fi
      ((SECONDS < deadline)) || die "broker $id of $n did not start within ${SLUICE_KAFKA_START_TIMEOUT:-120}s: see $dir/server.log"
      sleep 0.5
    done
  done
}

stop_cluster() {
  local n="$1" id pid dir waited
  for ((id = 1; id <= n; id++)); do
    pid="$(node_pid "$n" "$id" || true)"
    [[ -n "$pid" ]] && kill -TERM "$pid" 2>/dev/null || true
  done
  for ((id = 1; id <= n; id++)); do
    dir="$(cluster_dir "$n")/node-$id"
    waited=0
    while pid="$(node_pid "$n" "$id")"; do
      if ((waited >= 300)); then kill -KILL "$pid" 2>/dev/null || true; fi
      sleep 0.1
      waited=$((waited + 1))
    done
    rm -f "$dir/pid"
  done
}

case "$command" in
  start)
    n="${brokers:-1}"
    java="$(find_java)"
    resolve_jars
    for ((id = 1; id <= n; id++)); do
      start_node "$n" "$id" "$java"
    done
    wait_ready "$n"
    echo "kafka.sh: Apache Kafka $version, $n broker(s) at $(bootstrap "$n"), logs in $(cluster_dir "$n")" >&2
    echo "export $(export_name "$n")=$(bootstrap "$n")"
    ;;
  stop)
    if [[ -n "$brokers" ]]; then
      stop_cluster "$brokers"
    else
      stop_cluster 1
      stop_cluster 3
    fi
    ;;
  reset)
    for n in ${brokers:-1 3}; do
      stop_cluster "$n"
      rm -rf "$(cluster_dir "$n")"
    done
    ;;
  kill)
    n="${brokers:-1}"
    [[ -n "$node" ]] || die "kill needs a node id (1..$n)"
    pid="$(node_pid "$n" "$node" || true)"
    [[ -n "$pid" ]] || die "broker $node of $n is not running"
    kill -KILL "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    ;;
  status)
    n="${brokers:-1}"
    for ((id = 1; id <= n; id++)); do
      if pid="$(node_pid "$n" "$id")"; then echo "broker $id: running (pid $pid)"; else echo "broker $id: stopped"; fi
    done
    ;;
  *)
    die "unknown command '$command' (usage: kafka.sh start|stop|reset|status|kill NODE [--brokers 1|3])"
    ;;
esac
