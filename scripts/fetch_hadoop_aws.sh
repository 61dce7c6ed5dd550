#!/usr/bin/env bash
# Fetch Hadoop's S3A filesystem (org.apache.hadoop:hadoop-aws, matching pyspark's Hadoop) and the AWS SDK v2 modules
# it loads, from Maven Central with the ordinary Maven client, into a cache outside the work tree:
# ${PYCONNECT_HADOOP_AWS_HOME:-~/.cache/airflow-pyconnect/hadoop-aws-<hadoop version>}/jars. A Spark job reading the
# lake on S3 (read_lake(..., url_scheme="s3a")) passes them as --jars (docs/spark.md, "On a Spark cluster"). Jars
# whose artifact pyspark already ships (netty, httpclient, commons-*, slf4j) are left out. The pom is
# scripts/hadoop_aws/pom.xml. Idempotent. Needs the project's Python with pyspark (.venv, or $PYTHON), mvn, Java 17+.
set -euo pipefail
cd "$(dirname "$0")/.."

POM=scripts/hadoop_aws/pom.xml
PY="${PYTHON:-.venv/bin/python}"
PYSPARK_JARS="$("$PY" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
HADOOP_JAR="$(cd "$PYSPARK_JARS" && ls hadoop-client-api-*.jar | head -1)"
HADOOP_VERSION="${HADOOP_JAR#hadoop-client-api-}"
HADOOP_VERSION="${HADOOP_VERSION%.jar}"
HOME_DIR="${PYCONNECT_HADOOP_AWS_HOME:-${HOME}/.cache/airflow-pyconnect/hadoop-aws-${HADOOP_VERSION}}"
JARS="$HOME_DIR/jars"
STAMP="$HOME_DIR/.pom-$( (cat "$POM"; echo "$HADOOP_VERSION") | sha256sum | cut -c1-16)"

if [ -e "$STAMP" ] && [ -f "$JARS/hadoop-aws-$HADOOP_VERSION.jar" ]; then
  echo "fetch_hadoop_aws: hadoop-aws $HADOOP_VERSION and the AWS SDK modules are in $JARS ($(ls "$JARS" | wc -l) jars)"
  exit 0
fi
command -v mvn >/dev/null 2>&1 || { echo "fetch_hadoop_aws: Maven (mvn) is required and was not found on PATH" >&2; exit 1; }
mkdir -p "$HOME_DIR"
TMP="$(mktemp -d "$HOME_DIR/.fetch.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
if ! mvn -B -q -f "$POM" -Dhadoop.version="$HADOOP_VERSION" dependency:copy-dependencies -DincludeScope=runtime \
     -DoutputDirectory="$TMP/jars" >"$TMP/mvn.log" 2>&1; then
  echo "fetch_hadoop_aws: mvn dependency:copy-dependencies -f $POM (Hadoop $HADOOP_VERSION) failed:" >&2
  tail -30 "$TMP/mvn.log" >&2
  exit 1
fi
for jar in "$TMP"/jars/*.jar; do  # an artifact pyspark ships stays pyspark's (one version on the classpath)
  artifact="$(basename "$jar" | sed -E 's/-[0-9][^-]*\.jar$//')"
  if compgen -G "$PYSPARK_JARS/$artifact-[0-9]*.jar" >/dev/null; then rm -f "$jar"; fi
done
[ -f "$TMP/jars/hadoop-aws-$HADOOP_VERSION.jar" ] || { echo "fetch_hadoop_aws: hadoop-aws-$HADOOP_VERSION.jar missing" >&2; exit 1; }
rm -rf "$JARS" "$HOME_DIR"/.pom-*
mv "$TMP/jars" "$JARS"
touch "$STAMP"
echo "fetch_hadoop_aws: hadoop-aws $HADOOP_VERSION and $(($(ls "$JARS" | wc -l) - 1)) AWS SDK jars fetched into $JARS"
