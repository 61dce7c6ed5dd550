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
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def slow_iterations(default_ci: int, default_full: int) -> int:
    """Iterations of a slow reliability loop: PYCONNECT_SLOW_ITERATIONS wins; CI runs the bounded count."""
    env = os.environ.get("PYCONNECT_SLOW_ITERATIONS")
    if env:
        return int(env)
    return default_ci if os.environ.get("CI") else default_full
