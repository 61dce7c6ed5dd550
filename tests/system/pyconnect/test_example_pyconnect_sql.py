"""System test of ``dags/example_pyconnect_sql.py``: one day from a PostgreSQL table (the session's throwaway
cluster, tests/support/postgres.py) through Spark back into PostgreSQL. Three days and a rerun checked against
SQL: tests/integration/test_example_sql.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest

from tests.system.utils import get_test_run, load_example

pytestmark = pytest.mark.spark

dag = load_example("example_pyconnect_sql")


@pytest.fixture
def example_sql_connection(pg_database: str) -> dict[str, str]:
    """The example's ``pyconnect_example_sql`` connection to a fresh database of the session's cluster."""
    url = urlsplit(pg_database)
    return {"AIRFLOW_CONN_PYCONNECT_EXAMPLE_SQL": json.dumps({
        "conn_type": "postgres", "host": url.hostname, "port": url.port, "schema": url.path.lstrip("/"),
        "login": url.username, "password": url.password})}


test_run = get_test_run(
    dag, logical_date=datetime(2026, 1, 2, tzinfo=UTC), timeout=420,
    env={"AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"})},
    env_fixtures=("example_sql_connection",),
)
