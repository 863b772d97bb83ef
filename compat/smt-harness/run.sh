#!/usr/bin/env bash
# Runs Kafka Connect's own SMTs over a corpus (the reference side of the SMT
# differential, tests/compat_smt.rs):
#   compat/smt-harness/run.sh RECORDS.json CONFIGS.json OUT.jsonl
# and Kafka Connect's JsonConverter with schemas (the converter
# differential, tests/compat_converter.rs; see ConverterHarness.java):
#   compat/smt-harness/run.sh converter convert CASES.json OUT.jsonl
#   compat/smt-harness/run.sh converter file-source FILE OUT.jsonl
# Builds the harness with Maven the first time (and after pom.xml or the
# source changes) into $SLUICE_KAFKA_CACHE/smt-harness (default
# ~/.cache/sluice/smt-harness): classes and dependency jars live there, never
# in the clone. Needs Java 17+ and Maven; fails, saying so, without them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

die() {
  echo "smt-harness: $*" >&2
  exit 1
}

main=dev.sluice.compat.SmtHarness
if [[ "${1:-}" == converter ]]; then
  # The converter differential's reference (tests/compat_converter.rs):
  # Kafka Connect's JsonConverter, and FileStreamSource through it.
  main=dev.sluice.compat.ConverterHarness
  shift
  [[ $# -eq 3 ]] || die "usage: run.sh converter convert|file-source INPUT OUT.jsonl"
else
  [[ $# -eq 3 ]] || die "usage: run.sh RECORDS.json CONFIGS.json OUT.jsonl"
fi

java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
command -v "$java" >/dev/null 2>&1 \
  || die "Java is not installed: the SMT differential runs Kafka Connect's SMTs on Java 17 or newer (apt-get install openjdk-17-jdk-headless, or scripts/setup.sh)"
major="$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)"
[[ -n "$major" && "$major" -ge 17 ]] \
  || die "Java ${major:-?} is too old: Kafka Connect 4 needs Java 17 or newer (set JAVA_HOME)"

cache="${SLUICE_KAFKA_CACHE:-$HOME/.cache/sluice}/smt-harness"
# What the build depends on; a change rebuilds.
stamp="$(cd "$here" && find pom.xml src -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
# One build at a time, and none while a harness runs (the SMT and converter
# differentials run in parallel): exclusive to build, shared to run (the
# Java process keeps descriptor 9, so its lock, until it ends).
mkdir -p "$(dirname "$cache")"
exec 9>"$cache.lock"
flock 9
if [[ "$(cat "$cache/complete" 2>/dev/null)" != "$stamp" ]]; then
  command -v mvn >/dev/null 2>&1 \
    || die "Maven is not installed: it builds the SMT harness and resolves Kafka Connect (apt-get install maven, or scripts/setup.sh)"
  rm -rf "$cache/target" "$cache/libs"
  mkdir -p "$cache"
  echo "smt-harness: building with Maven into $cache" >&2
  if ! mvn -B -q -f "$here/pom.xml" -Dharness.build.dir="$cache/target" \
      compile dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$cache/libs" >"$cache/maven.log" 2>&1; then
    tail -20 "$cache/maven.log" >&2
    die "the Maven build failed (is the registry reachable?): see $cache/maven.log"
  fi
  echo "$stamp" >"$cache/complete"
fi
flock -s 9

exec "$java" -Xss4m -Xmx512m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
  -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
  -cp "$cache/target/classes:$cache/libs/*" "$main" "$@"
