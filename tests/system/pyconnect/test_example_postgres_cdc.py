"""System test of ``dags/example_postgres_cdc.py``: one hourly run captures two tables of a PostgreSQL database
(the session's ``wal_level=logical`` cluster, tests/support/postgres.py) and replicates them into another.
Runs with changes between and during them, a SIGKILLed run and the replica checked after each:
tests/integration/test_example_cdc_replica.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.system.utils import get_test_run, load_example

dag = load_example("example_postgres_cdc")


def _conn(url: str) -> str:
    u = make_url(url)
    return json.dumps({"conn_type": "postgres", "host": u.host, "port": u.port, "schema": u.database,
                       "login": u.username, "password": u.password or ""})


@pytest.fixture
def example_cdc_connections(logical_database: str, pg_database: str) -> dict[str, str]:
    """The example's source (two tables with a few rows, in a database of the logical cluster) and replica
    connections."""
    plain = make_url(logical_database).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute("CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, tier int)")
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL, qty int, note text)")
        conn.execute("INSERT INTO customers SELECT i, 'c' || i, i % 3 FROM generate_series(1, 5) i")
        conn.execute("INSERT INTO orders SELECT i, 1 + i % 5, i, NULL FROM generate_series(1, 20) i")
    return {"AIRFLOW_CONN_PYCONNECT_CDC_SOURCE": _conn(logical_database),
            "AIRFLOW_CONN_PYCONNECT_CDC_REPLICA": _conn(pg_database)}


test_run = get_test_run(dag, logical_date=datetime(2026, 1, 1, 1, tzinfo=UTC), timeout=300,
                        env_fixtures=("example_cdc_connections",))
