#!/usr/bin/env bash
# Fetch Apache Kafka 4.4.0 (the broker the Kafka tests run on) from Maven Central with the ordinary Maven
# client, into a cache outside the work tree: ${PYCONNECT_KAFKA_HOME:-~/.cache/airflow-pyconnect/kafka-4.4.0}/libs.
# The artifacts are listed in tests/support/kafka/pom.xml. Idempotent: when the jars of that pom are
# already there it only says where. Needs Maven (mvn) and Java 17+ (apt-get install maven openjdk-17-jre-headless).
set -euo pipefail
cd "$(dirname "$0")/.."

POM=tests/support/kafka/pom.xml
HOME_DIR="${PYCONNECT_KAFKA_HOME:-${HOME}/.cache/airflow-pyconnect/kafka-4.4.0}"
LIBS="$HOME_DIR/libs"
# the pom's content names what is in libs/: a changed pom fetches again
STAMP="$HOME_DIR/.pom-$(sha256sum "$POM" | cut -c1-16)"

if [ -e "$STAMP" ] && [ -f "$LIBS/kafka_2.13-4.4.0.jar" ]; then
  echo "fetch_kafka: Apache Kafka 4.4.0 is in $LIBS ($(ls "$LIBS" | wc -l) jars)"
  exit 0
fi
if ! command -v mvn >/dev/null 2>&1; then
  echo "fetch_kafka: Maven (mvn) is required to fetch Apache Kafka from Maven Central and was not found on PATH" \
       "(e.g. apt-get install maven)" >&2
  exit 1
fi
if ! command -v java >/dev/null 2>&1; then
  echo "fetch_kafka: Java 17+ is required (Maven and the broker run on it) and was not found on PATH" \
       "(e.g. apt-get install openjdk-17-jre-headless)" >&2
  exit 1
fi

mkdir -p "$HOME_DIR"
TMP="$(mktemp -d "$HOME_DIR/.fetch.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
started=$SECONDS
# -B: no colours or progress; the jars go to a fresh directory, which replaces libs/ only when complete
if ! mvn -B -q -f "$POM" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$TMP/libs" \
     >"$TMP/mvn.log" 2>&1; then
  echo "fetch_kafka: mvn dependency:copy-dependencies -f $POM failed:" >&2
  tail -30 "$TMP/mvn.log" >&2
  exit 1
fi
for jar in kafka_2.13-4.4.0 kafka-server-4.4.0 kafka-tools-4.4.0 log4j-core-2.25.5 log4j-slf4j2-impl-2.25.5; do
  if [ ! -f "$TMP/libs/$jar.jar" ]; then
    echo "fetch_kafka: $jar.jar is missing after mvn dependency:copy-dependencies (see $POM)" >&2
    exit 1
  fi
done
# the class archive a test broker wrote (tests/support/kafka_broker.py) belongs to the old jars
rm -rf "$LIBS" "$HOME_DIR"/.pom-* "$HOME_DIR"/*.jsa
mv "$TMP/libs" "$LIBS"
touch "$STAMP"
echo "fetch_kafka: Apache Kafka 4.4.0 fetched into $LIBS ($(ls "$LIBS" | wc -l) jars, $(du -sh "$LIBS" | cut -f1)) in $((SECONDS - started)) s"
