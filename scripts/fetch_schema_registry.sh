#!/usr/bin/env bash
# Fetch Apicurio Registry 3.0.9 (a Schema Registry server; the schema tests talk to its Confluent-compatible API
# under /apis/ccompat/v7) from Maven Central with the ordinary Maven client, into a cache outside the work tree:
# ${PYCONNECT_SCHEMA_REGISTRY_HOME:-~/.cache/airflow-pyconnect/apicurio-registry-3.0.9}, holding the Quarkus
# application as Apicurio publishes it (apicurio-registry-app-3.0.9-runner.jar and lib/). The artifact is named in
# scripts/schema_registry/pom.xml (io.apicurio:apicurio-registry-app:3.0.9, classifier `all`, a tar.gz); tests
# start it with tests/support/schema_registry.py. Idempotent: when that pom's registry is there it only says where.
# Needs Maven (mvn), tar and Java 17+ (which runs it).
set -euo pipefail
cd "$(dirname "$0")/.."

POM=scripts/schema_registry/pom.xml
VERSION=3.0.9
HOME_DIR="${PYCONNECT_SCHEMA_REGISTRY_HOME:-${HOME}/.cache/airflow-pyconnect/apicurio-registry-${VERSION}}"
RUNNER="apicurio-registry-app-${VERSION}-runner.jar"
ARCHIVE="apicurio-registry-app-${VERSION}-all.tar.gz"
# the pom's content names what is unpacked there: a changed pom fetches again
STAMP="$HOME_DIR/.pom-$(sha256sum "$POM" | cut -c1-16)"

if [ -e "$STAMP" ] && [ -f "$HOME_DIR/$RUNNER" ]; then
  echo "fetch_schema_registry: Apicurio Registry $VERSION is in $HOME_DIR ($(ls "$HOME_DIR/lib" | wc -l) jars in lib/)"
  exit 0
fi
if ! command -v mvn >/dev/null 2>&1; then
  echo "fetch_schema_registry: Maven (mvn) is required to fetch Apicurio Registry from Maven Central and was not" \
       "found on PATH (e.g. apt-get install maven)" >&2
  exit 1
fi

mkdir -p "$HOME_DIR"
TMP="$(mktemp -d "$HOME_DIR/.fetch.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
started=$SECONDS
if ! mvn -B -q -f "$POM" dependency:copy -DoutputDirectory="$TMP" -Dfetch.build.directory="$TMP/build" \
     >"$TMP/mvn.log" 2>&1; then
  echo "fetch_schema_registry: mvn dependency:copy -f $POM (io.apicurio:apicurio-registry-app:$VERSION:tar.gz:all)" \
       "failed:" >&2
  tail -30 "$TMP/mvn.log" >&2
  exit 1
fi
if [ ! -f "$TMP/$ARCHIVE" ]; then
  echo "fetch_schema_registry: $ARCHIVE is missing after mvn dependency:copy (see $POM)" >&2
  exit 1
fi
mkdir "$TMP/app"
if ! tar --no-same-owner -xzf "$TMP/$ARCHIVE" -C "$TMP/app"; then
  echo "fetch_schema_registry: unpacking $ARCHIVE failed" >&2
  exit 1
fi
rm -f "$TMP/$ARCHIVE"
if [ ! -f "$TMP/app/$RUNNER" ] || [ ! -d "$TMP/app/lib" ]; then
  echo "fetch_schema_registry: $ARCHIVE holds no $RUNNER and lib/ (see $POM)" >&2
  exit 1
fi
# the unpacked application replaces what was there only when complete
find "$HOME_DIR" -mindepth 1 -maxdepth 1 ! -name "$(basename "$TMP")" -exec rm -rf {} +
mv "$TMP/app"/* "$HOME_DIR"/
touch "$STAMP"
echo "fetch_schema_registry: Apicurio Registry $VERSION fetched into $HOME_DIR ($(ls "$HOME_DIR/lib" | wc -l) jars in" \
     "lib/, $(du -sh "$HOME_DIR" | cut -f1)) in $((SECONDS - started)) s"
