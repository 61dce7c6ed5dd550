#!/usr/bin/env bash
# Fetch Kafka Connect's worker itself (org.apache.kafka:connect-runtime, connect-json, connect-file 4.3.1 and what
# they pull, plus a log4j2 binding; the pom is bench/kafka_connect/pom.xml) from Maven Central with the ordinary
# Maven client (scripts/fetch_maven_jars.sh), into a cache outside the work tree:
# ${PYCONNECT_KAFKA_CONNECT_HOME:-~/.cache/airflow-pyconnect/kafka-connect-4.3.1}/libs. 4.3.1 throughout:
# connect-file is served at 4.3.1 only, and a 4.3.1 connect-file does not load on a 4.4.0 worker (the broker stays
# Apache Kafka 4.4.0). Used by tests/integration/test_kafka_connect_offsets.py (Kafka Connect's FileStreamSource
# and our offsets admin on one offsets topic, tests/support/kafka_connect.py) and bench/bench_vs_kafka_connect.py.
# Idempotent. Needs Maven (mvn) and Java 17+.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=4.3.1
HOME_DIR="${PYCONNECT_KAFKA_CONNECT_HOME:-${HOME}/.cache/airflow-pyconnect/kafka-connect-${VERSION}}"
exec bash scripts/fetch_maven_jars.sh fetch_connect_worker "Kafka Connect $VERSION" bench/kafka_connect/pom.xml \
  "$HOME_DIR/libs" "connect-runtime-$VERSION.jar" "connect-json-$VERSION.jar" "connect-file-$VERSION.jar"
