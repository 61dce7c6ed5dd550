#!/usr/bin/env bash
# Fetch Debezium's PostgreSQL connector (io.debezium:debezium-connector-postgres 3.6.1.Final and what it pulls,
# without Kafka's own jars, which the worker provides; the pom is scripts/debezium/pom.xml) from Maven Central with
# the ordinary Maven client (scripts/fetch_maven_jars.sh), into a cache outside the work tree:
# ${PYCONNECT_DEBEZIUM_HOME:-~/.cache/airflow-pyconnect/debezium-3.6.1}/plugins/debezium-connector-postgres, one
# Kafka Connect plugin directory (put .../plugins on the worker's plugin.path). Run in Kafka Connect's own worker
# (scripts/fetch_connect_worker.sh) by tests/integration/test_cdc_debezium.py and bench/bench_cdc.py.
# Idempotent. Needs Maven (mvn) and Java 17+ (Debezium 3 requires 17).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=3.6.1
HOME_DIR="${PYCONNECT_DEBEZIUM_HOME:-${HOME}/.cache/airflow-pyconnect/debezium-${VERSION}}"
exec bash scripts/fetch_maven_jars.sh fetch_debezium "Debezium's PostgreSQL connector $VERSION.Final" \
  scripts/debezium/pom.xml "$HOME_DIR/plugins/debezium-connector-postgres" \
  "debezium-connector-postgres-$VERSION.Final.jar" "debezium-connector-common-$VERSION.Final.jar"
