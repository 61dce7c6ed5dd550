#!/usr/bin/env bash
# Fetch Kafka Connect's own JsonConverter (org.apache.kafka:connect-json 4.4.0) and its runtime dependencies
# (connect-api, kafka-clients, jackson) from Maven Central with the ordinary Maven client (scripts/fetch_maven_jars.sh),
# into a cache outside the work tree: ${PYCONNECT_CONNECT_JSON_HOME:-~/.cache/airflow-pyconnect/connect-json-4.4.0}/jars.
# The byte compatibility tests (tests/integration/test_connect_json_compat.py) compile a small harness against them
# (tests/support/connect_json/Harness.java). The pom is scripts/connect_json/pom.xml. Idempotent. Needs Maven (mvn)
# and Java 17+ (a JDK: javac compiles the harness).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=4.4.0
HOME_DIR="${PYCONNECT_CONNECT_JSON_HOME:-${HOME}/.cache/airflow-pyconnect/connect-json-${VERSION}}"
exec bash scripts/fetch_maven_jars.sh fetch_connect_json "Kafka Connect's JsonConverter $VERSION" \
  scripts/connect_json/pom.xml "$HOME_DIR/jars" "connect-json-$VERSION.jar" "connect-api-$VERSION.jar" \
  "kafka-clients-$VERSION.jar" -- "-Dkafka.version=$VERSION"
