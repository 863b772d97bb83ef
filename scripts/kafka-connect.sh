#!/usr/bin/env bash
# Apache Kafka Connect itself, the reference the compatibility suites compare
# Sluice with: the worker of the broker's version, resolved from Maven
# (scripts/kafka-connect/pom.xml pins it), on the broker of scripts/kafka.sh
# (started here if it is not running; SLUICE_TEST_KAFKA_BOOTSTRAP names
# another). Prints the export lines of both:
#   eval "$(scripts/kafka-connect.sh start)"             -> distributed worker
#   eval "$(scripts/kafka-connect.sh start standalone)"  -> standalone worker
#     export SLUICE_TEST_KAFKA_BOOTSTRAP=127.0.0.1:39092
#     export KAFKA_CONNECT_URL=http://127.0.0.1:38084    (standalone: 38083)
#     export KAFKA_CONNECT_JDBC_SINK=io.debezium.connector.jdbc.JdbcSinkConnector
#                                    (empty when no JDBC sink resolved)
#     export KAFKA_CONNECT_POSTGRES_SOURCE=io.debezium.connector.postgresql.PostgresConnector
#                                    (empty when Debezium's PostgreSQL source
#                                    connector did not resolve)
#   scripts/kafka-connect.sh stop [standalone|distributed]   (both without one)
#   scripts/kafka-connect.sh status [standalone|distributed]
#   eval "$(scripts/kafka-connect.sh resolve)"   -> the jars only, no worker:
#     export KAFKA_CONNECT_HOME=~/.cache/sluice/kafka-connect-4.1.1
#                                    (libs/ and plugins/)
#     export KAFKA_CONNECT_PLUGIN_PATH=<the workers' plugin.path>
#     export KAFKA_CONNECT_JDBC_SINK=...   (as above)
#     export KAFKA_CONNECT_POSTGRES_SOURCE=...   (as above)
# `start` returns once the REST API answers /health with 200; a worker that
# is already running is reused. When the JDBC sink resolved, `start` checks
# that the worker lists it (GET /connector-plugins) and says loudly if not
# (KAFKA_CONNECT_JDBC_SINK is then empty); the same for the PostgreSQL
# source (KAFKA_CONNECT_POSTGRES_SOURCE). Distributed: its group and
# internal topics (<group>-configs, -offsets, -status) are new at each
# start, so no earlier run's connectors come back. Standalone: offsets in a
# file of its directory, emptied at each start. plugin.path holds connect-file and, where Maven
# resolves it, Debezium's JDBC sink (PostgreSQL among its dialects) and
# Debezium's PostgreSQL source connector (the reference for postgres-cdc's
# change events; its own Debezium version, debezium.postgres.version),
# each laid out as Debezium's own plugin archive: without Jackson, which
# the worker has (see resolve_all).
# Directories: $SLUICE_KAFKA_CONNECT_DIR-MODE (default
# /tmp/sluice-kafka-connect-MODE), the worker's log connect.log there, kept
# after stop. The jars are cached in $SLUICE_KAFKA_CACHE (default
# ~/.cache/sluice, as scripts/kafka.sh) and reused; a profile of the pom
# whose text changed is resolved again.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pom="$here/kafka-connect/pom.xml"

die() {
  echo "kafka-connect.sh: $*" >&2
  exit 1
}
log() { echo "kafka-connect.sh: $*" >&2; }
# A warning no one should miss in a test run's output.
loud() {
  {
    echo "###########################################################################"
    echo "# kafka-connect.sh: WARNING: $*" | fold -s -w 75 | sed '2,$s/^/#   /'
    echo "###########################################################################"
  } >&2
}

usage="usage: kafka-connect.sh start|stop|status [standalone|distributed] | resolve"
command="${1:-start}"
shift || true
mode=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    standalone | distributed) mode="$1"; shift ;;
    *) die "unknown argument '$1' ($usage)" ;;
  esac
done

prop() { sed -n "s:.*<$1>\(.*\)</$1>.*:\1:p" "$2"; }
version="$(prop kafka.version "$pom")"
broker_version="$(prop kafka.version "$here/kafka/pom.xml")"
[[ "$version" == "$broker_version" ]] \
  || die "scripts/kafka-connect/pom.xml pins Kafka $version, the broker (scripts/kafka/pom.xml) $broker_version: they must be the same"
debezium="$(prop debezium.version "$pom")"
cache="${SLUICE_KAFKA_CACHE:-$HOME/.cache/sluice}/kafka-connect-$version"
debezium_pg="$(prop debezium.postgres.version "$pom")"
jdbc_class=io.debezium.connector.jdbc.JdbcSinkConnector
pg_class=io.debezium.connector.postgresql.PostgresConnector

worker_dir() { echo "${SLUICE_KAFKA_CONNECT_DIR:-/tmp/sluice-kafka-connect}-$1"; }
rest_port() { if [[ "$1" == standalone ]]; then echo 38083; else echo 38084; fi; }

worker_pid() {
  local pidfile
  pidfile="$(worker_dir "$1")/pid"
  [[ -s "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null && cat "$pidfile"
}

find_java() {
  local java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
  command -v "$java" >/dev/null 2>&1 \
    || die "Java is not installed: Kafka Connect needs a JDK 17 or newer (apt-get install openjdk-17-jdk-headless)"
  local major
  major="$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)"
  [[ -n "$major" && "$major" -ge 17 ]] \
    || die "Java $major is too old: Kafka Connect $version needs Java 17 or newer (set JAVA_HOME)"
  echo "$java"
}

# What decides a profile's jars: the pom's properties and the profile's
# text (its dependencies and exclusions).
profile_stamp() {
  { sed -n '/<properties>/,/<\/properties>/p' "$pom"; sed -n "/<id>$1<\/id>/,/<\/profile>/p" "$pom"; } \
    | sha256sum | cut -d' ' -f1
}

# One profile of the pom into a directory of the cache, once per stamp: a
# cache resolved from another text of the profile is replaced. Sets
# `refreshed` when it resolved.
refreshed=""
resolve() {
  local profile="$1" into="$2" stamp
  stamp="$(profile_stamp "$profile")"
  [[ -f "$into/.complete" && "$(cat "$into/.complete")" == "$stamp" ]] && return 0
  command -v mvn >/dev/null 2>&1 || die "Maven is not installed: it resolves Kafka Connect $version (apt-get install maven)"
  [[ -e "$into" ]] && log "$into is not from the pom's $profile profile as it is now"
  rm -rf "$into.new"
  mkdir -p "$into.new"
  log "resolving $profile from Maven into $into"
  if ! mvn -B -q -f "$pom" -P "$profile" dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$into.new" >"$into.maven.log" 2>&1; then
    tail -5 "$into.maven.log" >&2
    rm -rf "$into.new"
    return 1
  fi
  echo "$stamp" >"$into.new/.complete"
  rm -rf "$into"
  mv "$into.new" "$into"
  refreshed=1
}

resolve_all() {
  # One resolution at a time (several suites may start a worker at once).
  mkdir -p "$cache"
  exec 9>>"$cache/.lock"
  flock -w 900 9 || die "another scripts/kafka-connect.sh has been resolving into $cache for 15 minutes"
  resolve runtime "$cache/libs" \
    || die "could not resolve Kafka Connect $version from Maven (is the registry reachable?): see $cache/libs.maven.log"
  # Each entry of plugin.path is a directory of plugins, each plugin a
  # directory of its jars (one class loader each).
  resolve file-plugin "$cache/plugins/connect-file/connect-file" \
    || die "could not resolve connect-file $version from Maven: see $cache/plugins/connect-file/connect-file.maven.log"
  # The JDBC sink is for the benchmarks and real_kafka::compat_rest; the
  # worker runs without it.
  jdbc_dir="$cache/plugins/debezium-jdbc-$debezium"
  if ! resolve jdbc-plugin "$jdbc_dir/debezium-connector-jdbc"; then
    loud "Debezium's JDBC sink $debezium did not resolve from Maven (see $jdbc_dir/debezium-connector-jdbc.maven.log): Kafka Connect runs without a JDBC sink"
    jdbc_dir=""
  fi
  # Debezium's PostgreSQL source connector is for the postgres-cdc
  # differential tests; the worker runs without it too.
  pg_dir="$cache/plugins/debezium-postgres-$debezium_pg"
  if ! resolve postgres-plugin "$pg_dir/debezium-connector-postgres"; then
    loud "Debezium's PostgreSQL source connector $debezium_pg did not resolve from Maven (see $pg_dir/debezium-connector-postgres.maven.log): Kafka Connect runs without it"
    pg_dir=""
  fi
  # No Jackson in Debezium's directories: the pom's jdbc-plugin and
  # postgres-plugin profiles exclude it, as Debezium's own plugin archives
  # leave it out, and the worker's (libs/) serves the plugins. A copy of
  # its own makes the JDBC sink's task fail as it starts
  # ("ServiceConfigurationError: com.fasterxml.jackson.databind.Module:
  # ...Jdk8Module not a subtype"): Hibernate's
  # ObjectMapper.findAndRegisterModules() gets, through ServiceLoader, the
  # worker's Jdk8Module, a subtype of the worker's Module class and not of
  # the plugin's copy. Checked here in case a new Debezium brings Jackson
  # in through another group.
  if [[ -n "$jdbc_dir" ]] && has_jackson "$jdbc_dir/debezium-connector-jdbc"; then
    loud "Debezium's JDBC sink has Jackson jars of its own (${jackson# }) in $jdbc_dir: its task would fail as it starts (Jdk8Module not a subtype). Exclude their group in the jdbc-plugin profile of $pom. Kafka Connect runs without a JDBC sink"
    jdbc_dir=""
  fi
  if [[ -n "$pg_dir" ]] && has_jackson "$pg_dir/debezium-connector-postgres"; then
    loud "Debezium's PostgreSQL source connector has Jackson jars of its own (${jackson# }) in $pg_dir: two Jackson class sets in one task. Exclude their group in the postgres-plugin profile of $pom. Kafka Connect runs without it"
    pg_dir=""
  fi
  flock -u 9
  exec 9>&-
  plugins="$cache/plugins/connect-file${jdbc_dir:+,$jdbc_dir}${pg_dir:+,$pg_dir}"
}

# Whether a plugin's directory has Jackson jars (named in `jackson`).
jackson=""
has_jackson() {
  jackson="$(find "$1" -maxdepth 1 -name 'jackson-*.jar' -printf ' %f')"
  [[ -n "$jackson" ]]
}

# Whether the running worker lists the Debezium connectors that resolved;
# says loudly of one it does not, and forgets it (KAFKA_CONNECT_JDBC_SINK or
# KAFKA_CONNECT_POSTGRES_SOURCE is then empty).
check_listed() {
  local url="$1" listed
  [[ -n "$jdbc_dir$pg_dir" ]] || return 0
  listed="$(curl -s -m 30 "$url/connector-plugins" || true)"
  if [[ -n "$jdbc_dir" && "$listed" != *"\"$jdbc_class\""* ]]; then
    loud "Debezium's JDBC sink resolved into $jdbc_dir, but Kafka Connect at $url does not list $jdbc_class in GET /connector-plugins: it runs without a JDBC sink (see $(worker_dir "$mode")/connect.log). It answered: ${listed:0:300}"
    jdbc_dir=""
  fi
  if [[ -n "$pg_dir" && "$listed" != *"\"$pg_class\""* ]]; then
    loud "Debezium's PostgreSQL source connector resolved into $pg_dir, but Kafka Connect at $url does not list $pg_class in GET /connector-plugins: it runs without it (see $(worker_dir "$mode")/connect.log). It answered: ${listed:0:300}"
    pg_dir=""
  fi
}

write_config() {
  local mode="$1" dir="$2" group="$3" plugins="$4"
  mkdir -p "$dir"
  {
    cat <<EOF
bootstrap.servers=$SLUICE_TEST_KAFKA_BOOTSTRAP
listeners=http://127.0.0.1:$(rest_port "$mode")
rest.advertised.host.name=127.0.0.1
rest.advertised.port=$(rest_port "$mode")
plugin.path=$plugins
# Every plugin here has ServiceLoader manifests: no reflective scan of the
# jars (which takes a minute on 2 cores).
plugin.discovery=service_load
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=false
value.converter.schemas.enable=false
offset.flush.interval.ms=1000
task.shutdown.graceful.timeout.ms=2000
EOF
    if [[ "$mode" == distributed ]]; then
      cat <<EOF
group.id=$group
config.storage.topic=$group-configs
offset.storage.topic=$group-offsets
status.storage.topic=$group-status
config.storage.replication.factor=-1
offset.storage.replication.factor=-1
status.storage.replication.factor=-1
offset.storage.partitions=5
status.storage.partitions=1
scheduled.rebalance.max.delay.ms=0
EOF
    else
      echo "offset.storage.file.filename=$dir/offsets"
    fi
  } >"$dir/worker.properties"
  cat >"$dir/log4j2.properties" <<EOF
status=warn
appender.file.type=File
appender.file.name=file
appender.file.fileName=$dir/connect.log
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %X{connector.context}%m (%c:%L)%n
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=file
logger.reflections.name=org.reflections
logger.reflections.level=ERROR
logger.kafka.name=org.apache.kafka.clients
logger.kafka.level=WARN
EOF
}

start_worker() {
  local mode="$1" java="$2" dir group main url deadline
  dir="$(worker_dir "$mode")"
  url="http://127.0.0.1:$(rest_port "$mode")"
  if [[ -n "$(worker_pid "$mode")" && -n "$refreshed" ]]; then
    loud "Kafka Connect ($mode) was already running and is reused, but its jars were resolved again just now: it still runs the ones from before (scripts/kafka-connect.sh stop $mode, then start)"
  fi
  if [[ -z "$(worker_pid "$mode")" ]]; then
    group="sluice-connect-$(date +%s)-$$"
    rm -f "$dir/offsets"
    write_config "$mode" "$dir" "$group" "$plugins"
    if [[ "$mode" == distributed ]]; then
      main=org.apache.kafka.connect.cli.ConnectDistributed
    else
      main=org.apache.kafka.connect.cli.ConnectStandalone
    fi
    (exec 3<>"/dev/tcp/127.0.0.1/$(rest_port "$mode")") 2>/dev/null \
      && die "port $(rest_port "$mode") is taken by another process: Kafka Connect's REST API needs it"
    : >"$dir/connect.log"
    # A small heap (2 cores and the tests share the machine), as a test
    # worker, short GC pauses.
    setsid "$java" -Xms64m -Xmx"${SLUICE_KAFKA_CONNECT_HEAP:-512m}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
      -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
      -Dlog4j2.configurationFile="$dir/log4j2.properties" \
      -cp "$cache/libs/*" "$main" "$dir/worker.properties" \
      >"$dir/stdout.log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    log "started Kafka Connect $version ($mode, pid $!$([[ "$mode" == distributed ]] && echo ", group $group")); waiting for its REST API at $url"
  fi
  deadline=$((SECONDS + ${SLUICE_KAFKA_CONNECT_START_TIMEOUT:-180}))
  until [[ "$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$url/health" || true)" == 200 ]]; do
    if [[ -z "$(worker_pid "$mode")" ]]; then
      tail -20 "$dir/connect.log" "$dir/stdout.log" >&2 2>/dev/null || true
      die "Kafka Connect ($mode) exited while starting: see $dir/connect.log"
    fi
    ((SECONDS < deadline)) \
      || die "Kafka Connect ($mode) did not answer $url/health within ${SLUICE_KAFKA_CONNECT_START_TIMEOUT:-180}s: see $dir/connect.log"
    sleep 0.5
  done
}

stop_worker() {
  local mode="$1" pid dir waited=0
  dir="$(worker_dir "$mode")"
  pid="$(worker_pid "$mode" || true)"
  [[ -n "$pid" ]] || { rm -f "$dir/pid"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do
    if ((waited == 300)); then
      log "Kafka Connect ($mode, pid $pid) did not stop within 30 s of SIGTERM: killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  rm -f "$dir/pid"
}

case "$command" in
  start)
    mode="${mode:-distributed}"
    java="$(find_java)"
    command -v curl >/dev/null 2>&1 || die "curl is not installed: it checks that the REST API answers (apt-get install curl)"
    # The broker named by SLUICE_TEST_KAFKA_BOOTSTRAP (as the tests), or
    # the one scripts/kafka.sh runs, started if it is not running.
    [[ -n "${SLUICE_TEST_KAFKA_BOOTSTRAP:-}" ]] || eval "$("$here/kafka.sh" start)"
    [[ -n "${SLUICE_TEST_KAFKA_BOOTSTRAP:-}" ]] || die "scripts/kafka.sh start printed no bootstrap servers"
    resolve_all
    start_worker "$mode" "$java"
    check_listed "http://127.0.0.1:$(rest_port "$mode")"
    log "Kafka Connect $version ($mode) at http://127.0.0.1:$(rest_port "$mode") on $SLUICE_TEST_KAFKA_BOOTSTRAP; JDBC sink: $(if [[ -n "$jdbc_dir" ]]; then echo "Debezium $debezium ($jdbc_class)"; else echo none; fi); PostgreSQL source: $(if [[ -n "$pg_dir" ]]; then echo "Debezium $debezium_pg ($pg_class)"; else echo none; fi); log $(worker_dir "$mode")/connect.log"
    echo "export SLUICE_TEST_KAFKA_BOOTSTRAP=$SLUICE_TEST_KAFKA_BOOTSTRAP"
    echo "export KAFKA_CONNECT_URL=http://127.0.0.1:$(rest_port "$mode")"
    echo "export KAFKA_CONNECT_JDBC_SINK=${jdbc_dir:+$jdbc_class}"
    echo "export KAFKA_CONNECT_POSTGRES_SOURCE=${pg_dir:+$pg_class}"
    ;;
  resolve)
    resolve_all
    echo "export KAFKA_CONNECT_HOME=$cache"
    echo "export KAFKA_CONNECT_PLUGIN_PATH=$plugins"
    echo "export KAFKA_CONNECT_JDBC_SINK=${jdbc_dir:+$jdbc_class}"
    echo "export KAFKA_CONNECT_POSTGRES_SOURCE=${pg_dir:+$pg_class}"
    ;;
  stop)
    for m in ${mode:-standalone distributed}; do stop_worker "$m"; done
    ;;
  status)
    for m in ${mode:-standalone distributed}; do
      if pid="$(worker_pid "$m")"; then echo "$m: running (pid $pid) at http://127.0.0.1:$(rest_port "$m")"; else echo "$m: stopped"; fi
    done
    ;;
  *)
    die "unknown command '$command' ($usage)"
    ;;
esac
