#!/usr/bin/env bash
# Copy a pom's dependencies (runtime scope, with what they pull) from Maven Central into a cache directory outside
# the work tree, with the ordinary Maven client: the one step scripts/fetch_connect_json.sh and
# scripts/fetch_connect_worker.sh share.
#
#   bash scripts/fetch_maven_jars.sh LABEL WHAT POM DIR REQUIRED_JAR... [-- MVN_ARG...]
#
# LABEL prefixes every message (the calling script's name), WHAT names the artifacts in them; DIR receives the jars
# (replaced only once the copy is complete; its parent keeps a stamp named after the pom's hash, so a changed pom
# fetches again); every REQUIRED_JAR must be there afterwards. Idempotent: when the pom's jars are there it only says
# where. Needs Maven (mvn) and Java 17+.
set -euo pipefail
cd "$(dirname "$0")/.."

LABEL=$1 WHAT=$2 POM=$3 DIR=$4
shift 4
REQUIRED=()
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do REQUIRED+=("$1"); shift; done
[ "$#" -gt 0 ] && shift
HOME_DIR="$(dirname "$DIR")"
STAMP="$HOME_DIR/.pom-$(sha256sum "$POM" | cut -c1-16)"

if [ -e "$STAMP" ] && [ -f "$DIR/${REQUIRED[0]}" ]; then
  echo "$LABEL: $WHAT is in $DIR ($(ls "$DIR" | wc -l) jars)"
  exit 0
fi
for tool in mvn java; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "$LABEL: $tool is required (Maven fetches $WHAT from Maven Central, Java 17+ runs it) and was not found on" \
         "PATH (e.g. apt-get install maven openjdk-17-jdk-headless)" >&2
    exit 1
  fi
done

mkdir -p "$HOME_DIR"
TMP="$(mktemp -d "$HOME_DIR/.fetch.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
started=$SECONDS
if ! mvn -B -q -f "$POM" "$@" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$TMP/jars" \
     >"$TMP/mvn.log" 2>&1; then
  echo "$LABEL: mvn dependency:copy-dependencies -f $POM failed:" >&2
  tail -30 "$TMP/mvn.log" >&2
  exit 1
fi
for jar in "${REQUIRED[@]}"; do
  if [ ! -f "$TMP/jars/$jar" ]; then
    echo "$LABEL: $jar is missing after mvn dependency:copy-dependencies (see $POM)" >&2
    exit 1
  fi
done
rm -rf "$DIR" "$HOME_DIR"/.pom-*
mv "$TMP/jars" "$DIR"
touch "$STAMP"
echo "$LABEL: $WHAT fetched into $DIR ($(ls "$DIR" | wc -l) jars) in $((SECONDS - started)) s"
