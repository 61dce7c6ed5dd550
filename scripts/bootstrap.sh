#!/usr/bin/env bash
# Set up .venv from the committed lock file (idempotent; fast when already installed).
# Needs only Python 3.11+, Java 17+ (for Spark) and network access to PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "bootstrap: Python 3.11+ is required (found: $("$PY" --version 2>&1 || echo none)); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if ! command -v java >/dev/null 2>&1; then
  echo "bootstrap: Java 17+ is required for Spark and was not found on PATH (e.g. apt-get install openjdk-17-jre-headless)" >&2
  exit 1
fi

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if [ ! -x .venv/bin/uv ]; then
  .venv/bin/python -m pip --version >/dev/null 2>&1 || .venv/bin/python -m ensurepip >/dev/null
  .venv/bin/python -m pip install -q --disable-pip-version-check uv==0.13.8
fi
# pyspark and pyspark-client both install into pyspark/: pinned to the same version in the lock
# (see shared/ENVIRONMENT.md), so neither overwrites the other with a different version.
.venv/bin/uv pip install -q --python .venv/bin/python -r requirements/lock.txt
.venv/bin/uv pip install -q --python .venv/bin/python --no-deps -e .
# uv keeps a ~2 GB build of the source-only pyspark packages per install; drop it.
.venv/bin/uv cache clean -q pyspark pyspark-client >/dev/null 2>&1 || true
# uv installs without bytecode, and where PYTHONDONTWRITEBYTECODE is set (CI images, containers)
# Python never caches it, so every Airflow task, DAG parse and Spark Python worker would compile
# Airflow, pandas and pyarrow from source again (`import airflow.sdk, airflow.models`: 4.8 s without
# bytecode, 2.3 s with it). Compile once per lock file (~15 s), and our own packages every time
# (up-to-date files are skipped; Python ignores a .pyc whose source changed).
SITE="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
MARK=".venv/.bytecode-$(.venv/bin/python -c 'import hashlib; print(hashlib.sha256(open("requirements/lock.txt", "rb").read()).hexdigest()[:16])')"
if [ ! -e "$MARK" ]; then
  .venv/bin/python -m compileall -q -j 0 "$SITE" >/dev/null 2>&1 || true
  touch "$MARK"
fi
.venv/bin/python -m compileall -q -j 0 connect_runtime airflow_pyconnect >/dev/null 2>&1 || true
.venv/bin/python - <<'PY'
from importlib.metadata import version
import sys
names = ["apache-airflow", "pyspark", "pyspark-client", "confluent-kafka", "airflow-pyconnect"]
print("bootstrap: .venv ready: Python %d.%d.%d, " % sys.version_info[:3] + ", ".join(f"{n} {version(n)}" for n in names))
PY
