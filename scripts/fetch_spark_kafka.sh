#!/usr/bin/env bash
# Fetch Spark's own Kafka source (org.apache.spark:spark-sql-kafka-0-10_<scala>:<version>, matching the installed
# pyspark), Spark's Avro functions (org.apache.spark:spark-avro_<scala>:<version>: from_avro) and their runtime
# dependencies from Maven Central with the ordinary Maven client, into a cache outside the
# work tree: ${PYCONNECT_SPARK_KAFKA_HOME:-~/.cache/airflow-pyconnect/spark-kafka-<version>}/jars. The Kafka
# backend's Spark handoff (connect_runtime.spark.read_kafka_range, airflow_pyconnect.spark.spark_kafka_jars) passes
# these jars to Spark. Jars pyspark already ships (Scala, Hadoop, Avro, slf4j, snappy, ...) are left out, so only the
# source, its token provider, kafka-clients, commons-pool2 and spark-avro remain. The pom is scripts/spark_kafka/pom.xml.
# Idempotent. Needs the project's Python with pyspark (.venv, or $PYTHON), Maven (mvn) and Java 17+.
set -euo pipefail
cd "$(dirname "$0")/.."

POM=scripts/spark_kafka/pom.xml
PY="${PYTHON:-.venv/bin/python}"
if ! "$PY" -c 'import pyspark' >/dev/null 2>&1; then
  echo "fetch_spark_kafka: $PY cannot import pyspark (run scripts/bootstrap.sh first, or set PYTHON)" >&2
  exit 1
fi
# the versions of the installed pyspark (connect_runtime/spark_kafka.py reads them the same way)
read -r SPARK_VERSION SCALA_VERSION PYSPARK_JARS < <(PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c \
  'from connect_runtime.spark_kafka import pyspark_versions as v; print(*v())')
HOME_DIR="${PYCONNECT_SPARK_KAFKA_HOME:-${HOME}/.cache/airflow-pyconnect/spark-kafka-${SPARK_VERSION}}"
JARS="$HOME_DIR/jars"
SOURCE_JAR="spark-sql-kafka-0-10_${SCALA_VERSION}-${SPARK_VERSION}.jar"
# the pom's content and the versions name what is in jars/: a change fetches again
STAMP="$HOME_DIR/.pom-$( (cat "$POM"; echo "$SPARK_VERSION $SCALA_VERSION") | sha256sum | cut -c1-16)"

AVRO_JAR="spark-avro_${SCALA_VERSION}-${SPARK_VERSION}.jar"

if [ -e "$STAMP" ] && [ -f "$JARS/$SOURCE_JAR" ] && [ -f "$JARS/$AVRO_JAR" ]; then
  echo "fetch_spark_kafka: Spark's Kafka source and spark-avro $SPARK_VERSION (Scala $SCALA_VERSION) are in $JARS ($(ls "$JARS" | wc -l) jars)"
  exit 0
fi
if ! command -v mvn >/dev/null 2>&1; then
  echo "fetch_spark_kafka: Maven (mvn) is required to fetch Spark's Kafka source from Maven Central and was not" \
       "found on PATH (e.g. apt-get install maven)" >&2
  exit 1
fi

mkdir -p "$HOME_DIR"
TMP="$(mktemp -d "$HOME_DIR/.fetch.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
started=$SECONDS
# runtime scope only: the module's test-jar is not served; Spark itself is `provided` there
if ! mvn -B -q -f "$POM" -Dspark.version="$SPARK_VERSION" -Dscala.binary.version="$SCALA_VERSION" \
     dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$TMP/jars" >"$TMP/mvn.log" 2>&1; then
  echo "fetch_spark_kafka: mvn dependency:copy-dependencies -f $POM (Spark $SPARK_VERSION, Scala $SCALA_VERSION) failed:" >&2
  tail -30 "$TMP/mvn.log" >&2
  exit 1
fi
# drop what pyspark ships (another version of the same artifact on the classpath would shadow or clash with it)
for jar in "$TMP"/jars/*.jar; do
  artifact="$(basename "$jar" | sed -E 's/-[0-9][^-]*\.jar$//')"
  if compgen -G "$PYSPARK_JARS/$artifact-[0-9]*.jar" >/dev/null; then
    rm -f "$jar"
  fi
done
for jar in "$SOURCE_JAR" "spark-token-provider-kafka-0-10_${SCALA_VERSION}-${SPARK_VERSION}.jar" \
           "$AVRO_JAR"; do
  if [ ! -f "$TMP/jars/$jar" ]; then
    echo "fetch_spark_kafka: $jar is missing after mvn dependency:copy-dependencies (see $POM)" >&2
    exit 1
  fi
done
rm -rf "$JARS" "$HOME_DIR"/.pom-*
mv "$TMP/jars" "$JARS"
touch "$STAMP"
echo "fetch_spark_kafka: Spark's Kafka source and spark-avro $SPARK_VERSION (Scala $SCALA_VERSION) fetched into $JARS" \
     "($(ls "$JARS" | tr '\n' ' ')) in $((SECONDS - started)) s"
