#!/usr/bin/env bash
# Fetch Kafka Connect's own JsonConverter (org.apache.kafka:connect-json 4.4.0) and its runtime dependencies
# (connect-api, kafka-clients, jackson) from Maven Central with the ordinary Maven client, into a cache outside the
# work tree: ${PYCONNECT_CONNECT_JSON_HOME:-~/.cache/airflow-pyconnect/connect-json-4.4.0}/jars. The byte
# compatibility tests (tests/integration/test_connect_json_compat.py) compile a small harness against them
# (tests/support/connect_json/Harness.java). The pom is scripts/connect_json/pom.xml. Idempotent. Needs Maven (mvn)
# and Java 17+.
set -euo pipefail
cd "$(dirname "$0")/.."

POM=scripts/connect_json/pom.xml
VERSION=4.4.0
HOME_DIR="${PYCONNECT_CONNECT_JSON_HOME:-${HOME}/.cache/airflow-pyconnect/connect-json-${VERSION}}"
JARS="$HOME_DIR/jars"
# the pom's content names what is in jars/: a changed pom fetches again
STAMP="$HOME_DIR/.pom-$(sha256sum "$POM" | cut -c1-16)"

if [ -e "$STAMP" ] && [ -f "$JARS/connect-json-$VERSION.jar" ]; then
  echo "fetch_connect_json: Kafka Connect's JsonConverter $VERSION is in $JARS ($(ls "$JARS" | wc -l) jars)"
  exit 0
fi
for tool in mvn java javac; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "fetch_connect_json: $tool is required (Maven fetches connect-json from Maven Central, a JDK 17+ compiles" \
         "and runs the harness) and was not found on PATH (e.g. apt-get install maven openjdk-17-jdk-headless)" >&2
    exit 1
  fi
done

mkdir -p "$HOME_DIR"
TMP="$(mktemp -d "$HOME_DIR/.fetch.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
started=$SECONDS
if ! mvn -B -q -f "$POM" -Dkafka.version="$VERSION" dependency:copy-dependencies -DincludeScope=runtime \
     -DoutputDirectory="$TMP/jars" >"$TMP/mvn.log" 2>&1; then
  echo "fetch_connect_json: mvn dependency:copy-dependencies -f $POM failed:" >&2
  tail -30 "$TMP/mvn.log" >&2
  exit 1
fi
for jar in "connect-json-$VERSION.jar" "connect-api-$VERSION.jar" "kafka-clients-$VERSION.jar"; do
  if [ ! -f "$TMP/jars/$jar" ]; then
    echo "fetch_connect_json: $jar is missing after mvn dependency:copy-dependencies (see $POM)" >&2
    exit 1
  fi
done
rm -rf "$JARS" "$HOME_DIR"/.pom-*
mv "$TMP/jars" "$JARS"
touch "$STAMP"
echo "fetch_connect_json: Kafka Connect's JsonConverter $VERSION fetched into $JARS" \
     "($(ls "$JARS" | tr '\n' ' ')) in $((SECONDS - started)) s"
