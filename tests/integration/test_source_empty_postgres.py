"""An SqlSource run on PostgreSQL that reads nothing says where it looked (the table, the database URL without its
password, the rows' interval): the password given in ``connection.password`` never reaches the result."""

from __future__ import annotations

import json

from connect_runtime.runtime.source import run_source
from tests.support.sql import execute

SECRET = "pw-s3cret-9"


def test_an_empty_interval_of_a_table_names_it_without_the_password(pg_database: str, sqlite_url: str) -> None:
    execute(pg_database, "CREATE TABLE orders (id INTEGER PRIMARY KEY, ts TIMESTAMP NOT NULL)",
            "INSERT INTO orders VALUES (1, '2026-11-27 12:00')")  # the day before the interval
    config = {"name": "pg-orders", "connector.class": "connect_runtime.connectors.sql.SqlSource",
              "connection.url": pg_database, "connection.password": SECRET, "table.include.list": "orders",
              "mode": "timestamp", "timestamp.column.name": "ts", "interval.start": "2026-11-28T00:00:00Z",
              "interval.end": "2026-11-29T00:00:00Z", "poll.idle.timeout.ms": "100"}
    result = run_source(config, sqlite_url).to_dict()
    assert result["records"] == 0 and SECRET not in json.dumps(result), result
    empty = result["empty"]
    assert empty["reason"] == "no_input", empty
    assert "orders on postgresql" in empty["message"] and "no row" in empty["message"], empty
    assert "rows with ts in [2026-11-28T00:00:00Z, 2026-11-29T00:00:00Z)" in empty["message"], empty
    # no table left to read: the connector's report, without the password either
    none = run_source({**config, "table.include.list": "", "table.exclude.list": "orders"}, sqlite_url).to_dict()
    assert none["empty"]["reason"] == "no_input" and SECRET not in json.dumps(none), none
