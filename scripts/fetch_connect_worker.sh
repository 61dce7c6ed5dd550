#!/usr/bin/env bash
# Fetch Kafka Connect's worker itself (org.apache.kafka:connect-runtime, connect-json, connect-file 4.3.1 and what
# they pull, plus a log4j2 binding; the pom is bench/kafka_connect/pom.xml) from Maven Central with the ordinary
# Maven client, into a cache outside the work tree:
# ${PYCONNECT_KAFKA_CONNECT_HOME:-~/.cache/airflow-pyconnect/kafka-connect-4.3.1}/libs. 4.3.1 throughout:
# connect-file is served at 4.3.1 only, and a 4.3.1 connect-file does not load on a 4.4.0 worker (the broker stays
# Apache Kafka 4.4.0). Used by tests/integration/test_kafka_connect_offsets.py (Kafka Connect's FileStreamSource
# and our offsets admin on one offsets topic) and bench/bench_vs_kafka_connect.py (the same cache and stamp).
# Idempotent. Needs Maven (mvn) and Java 17+.
set -euo pipefail
cd "$(dirname "$0")/.."

POM=bench/kafka_connect/pom.xml
VERSION=4.3.1
HOME_DIR="${PYCONNECT_KAFKA_CONNECT_HOME:-${HOME}/.cache/airflow-pyconnect/kafka-connect-${VERSION}}"
LIBS="$HOME_DIR/libs"
# the pom's content names what is in libs/: a changed pom fetches again
STAMP="$HOME_DIR/.pom-$(sha256sum "$POM" | cut -c1-16)"

if [ -e "$STAMP" ] && [ -f "$LIBS/connect-runtime-$VERSION.jar" ]; then
  echo "fetch_connect_worker: Kafka Connect $VERSION is in $LIBS ($(ls "$LIBS" | wc -l) jars)"
  exit 0
fi
for tool in mvn java; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "fetch_connect_worker: $tool is required (Maven fetches Kafka Connect from Maven Central, Java 17+ runs" \
         "its worker) and was not found on PATH (e.g. apt-get install maven openjdk-17-jre-headless)" >&2
    exit 1
  fi
done

mkdir -p "$HOME_DIR"
TMP="$(mktemp -d "$HOME_DIR/.fetch.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
started=$SECONDS
if ! mvn -B -q -f "$POM" dependency:copy-dependencies -DincludeScope=runtime \
     -DoutputDirectory="$TMP/libs" >"$TMP/mvn.log" 2>&1; then
  echo "fetch_connect_worker: mvn dependency:copy-dependencies -f $POM failed:" >&2
  tail -30 "$TMP/mvn.log" >&2
  exit 1
fi
for jar in connect-runtime connect-json connect-file; do
  if [ ! -f "$TMP/libs/$jar-$VERSION.jar" ]; then
    echo "fetch_connect_worker: $jar-$VERSION.jar is missing after mvn dependency:copy-dependencies (see $POM)" >&2
    exit 1
  fi
done
rm -rf "$LIBS" "$HOME_DIR"/.pom-*
mv "$TMP/libs" "$LIBS"
touch "$STAMP"
echo "fetch_connect_worker: Kafka Connect $VERSION fetched into $LIBS ($(ls "$LIBS" | wc -l) jars)" \
     "in $((SECONDS - started)) s"
