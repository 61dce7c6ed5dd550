"""Every shared test helper and fixture; tests import from here, never from one another.

- ``REPO``, ``PYTHON``, :func:`slow_iterations`: the checkout, the interpreter subprocesses run, and how long a
  slow reliability loop runs.
- Connectors the tests name in ``connector.class``: ``source_connectors`` (scripted and planning sources,
  probes, ``read_topic``), ``sink_helpers`` (recording and ledger sinks; ``python -m`` entry for a sink run in
  its own process), ``signed_connector`` (secrets inside values).
- Processes tests start and kill: ``source_run`` (``run_source`` in a subprocess), ``contract_worker`` (the
  contract suite's backend worker), ``sqlite_worker`` (the SQLite backend's cross-process tests); ``contract``
  holds the contract suite's helpers that start and wait for them.
- Servers as pytest plugins (``tests/conftest.py``): ``kafka_broker`` (Apache Kafka 4.4.0 and Tansu, the jars of
  ``kafka/pom.xml``), ``kafka_cluster`` (three KRaft nodes), ``postgres`` (a throwaway PostgreSQL),
  ``schema_registry`` (Apicurio Registry: a Schema Registry server with Confluent's API, fetched by
  ``scripts/fetch_schema_registry.sh``).
- Airflow: ``airflow_env`` (one migrated ``AIRFLOW_HOME`` per session) and the test DAGs in ``dag_files/``.
- Data in and out: ``records`` (backend records for the backend tests), ``sql`` (SqlSink tests: produce, query,
  execute, an opened SqlSinkTask).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import NoReturn

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def in_ci() -> bool:
    """Whether this is CI (``.ci/run`` exports ``CI=true``), where a test needing a fetched tool fails, never skips."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def cache_home(env: str, name: str) -> Path:
    """Where a fetch script put a tool: ``$<env>`` if set, else ``~/.cache/airflow-pyconnect/<name>``."""
    configured = os.environ.get(env, "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "airflow-pyconnect" / name


def find_java(tool: str = "java") -> str | None:
    """``tool`` (``java``, ``javac``) on PATH, else under ``$JAVA_HOME/bin``; ``None`` if neither has it."""
    found = shutil.which(tool)
    java_home = os.environ.get("JAVA_HOME", "")
    if found is None and java_home and Path(java_home, "bin", tool).is_file():
        found = str(Path(java_home, "bin", tool))
    return found


def unavailable(message: str, in_ci_too: str) -> NoReturn:
    """A tool a test needs is missing: fail in CI (``message`` and ``in_ci_too``, why CI must have it), skip
    elsewhere, printing why."""
    import pytest

    if in_ci():
        pytest.fail(f"{message} ({in_ci_too})", pytrace=False)
    print(f"SKIP: {message}", file=sys.stderr)
    pytest.skip(message)


def slow_iterations(default_ci: int, default_full: int) -> int:
    """Iterations of a slow reliability loop: PYCONNECT_SLOW_ITERATIONS wins; CI runs the bounded count."""
    env = os.environ.get("PYCONNECT_SLOW_ITERATIONS")
    if env:
        return int(env)
    return default_ci if os.environ.get("CI") else default_full
