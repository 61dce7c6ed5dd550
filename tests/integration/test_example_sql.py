"""The SQL example DAG end to end: real Airflow 3 (`airflow dags test`), a real PostgreSQL (session
cluster), real Spark (local mode), the embedded SQLite backend, in a temporary AIRFLOW_HOME.

A backfill of three days, then a rerun of day two: the totals table in PostgreSQL equals the totals
computed with SQL straight from ``shop_orders``; each topic holds each row / total once; the rerun
changes nothing (topics, totals files, table rows); the database password never reaches the task logs.
About 2.5 minutes (spark-submit per day).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_example_pipeline import DAG_TEST_TIMEOUT_S, DAYS, _airflow, _env

DAG_ID = "example_pyconnect_sql"
PASSWORD = "pw-4-shop-Zq81"  # the test's own throwaway role

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.timeout(1500)]


def _query(url: str, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        return [tuple(r) for r in conn.execute(sql)]


def _topic(home: Path, topic: str) -> list[bytes | None]:
    from connect_runtime.api.records import TopicPartition
    from connect_runtime.backends import open_backend

    with open_backend(f"sqlite:///{home / 'airflow' / 'pyconnect' / 'pyconnect.db'}") as backend:
        parts = backend.list_topics()[topic]
        return [r.value for p in range(parts) for r in backend.read_range(TopicPartition(topic, p), 0, 1 << 62)]


def _files(data: Path) -> dict[str, bytes]:
    return {str(p.relative_to(data / "sql_totals")): p.read_bytes() for p in sorted((data / "sql_totals").glob("*/*.jsonl"))}


def test_sql_example_backfill_of_three_days_then_a_rerun_changes_nothing(tmp_path: Path, pg_database: str) -> None:
    import psycopg

    db = pg_database.rsplit("/", 1)[1]
    admin = pg_database.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS shop_app")
        conn.execute(f"CREATE ROLE shop_app LOGIN PASSWORD '{PASSWORD}'")
        conn.execute(f'GRANT ALL ON DATABASE "{db}" TO shop_app')
        conn.execute("GRANT ALL ON SCHEMA public TO shop_app")
    host_port = pg_database.split("@", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)

    home = tmp_path
    env = _env(home)
    env["AIRFLOW_CONN_PYCONNECT_EXAMPLE_SQL"] = json.dumps({
        "conn_type": "postgres", "host": host, "port": int(port), "schema": db, "login": "shop_app",
        "password": PASSWORD})
    (home / "airflow").mkdir()
    _airflow(env, "db", "migrate", log=home / "migrate.log", timeout=300)
    for day in DAYS:
        _airflow(env, "dags", "test", DAG_ID, day, log=home / f"{day}.log", timeout=DAG_TEST_TIMEOUT_S)

    # the totals table equals the totals computed in SQL from the source table, per day and customer
    expected = _query(admin, "SELECT created_at::date, customer, count(*), sum(amount) FROM shop_orders "
                             "GROUP BY 1, 2 ORDER BY 1, 2")
    assert len(expected) == 3 * 7 and sum(r[2] for r in expected) == 3 * 60
    table = _query(admin, "SELECT day, customer, orders, amount FROM daily_customer_totals ORDER BY 1, 2")
    assert table == expected

    # each source row once in its topic, each total once in the other; the sink's offsets in the destination
    source_topic = _topic(home, "sql-shop_orders")
    rows = [json.loads(v) for v in source_topic if v is not None]
    assert sorted(r["id"] for r in rows) == sorted(i for (i,) in _query(admin, "SELECT id FROM shop_orders"))
    assert len({r["id"] for r in rows}) == len(rows) == 180
    totals = [json.loads(v) for v in _topic(home, "sql-customer-totals") if v is not None]
    assert len(totals) == len({(t["day"], t["customer"]) for t in totals}) == 21
    stored = _query(admin, "SELECT topic, next_offset FROM pyconnect_sink_offsets WHERE connector = 'customer-totals-sql'")
    assert stored == [("sql-customer-totals", 21)]

    data = home / "data"
    files = _files(data)
    days = sorted({str(r[0]) for r in expected})
    assert sorted(p.split("/")[0] for p in files) == days  # one totals file per data interval's day

    # a rerun of day two changes nothing
    _airflow(env, "dags", "test", DAG_ID, DAYS[1], log=home / "rerun.log", timeout=DAG_TEST_TIMEOUT_S)
    assert _topic(home, "sql-shop_orders") == source_topic
    assert [json.loads(v) for v in _topic(home, "sql-customer-totals") if v is not None] == totals
    assert _files(data) == files
    assert _query(admin, "SELECT day, customer, orders, amount FROM daily_customer_totals ORDER BY 1, 2") == table
    rerun = (home / "rerun.log").read_text(errors="replace")
    decoder = json.JSONDecoder()
    summaries = [decoder.raw_decode(line.split("SQL_CUSTOMER_TOTALS ", 1)[1])[0]
                 for line in rerun.splitlines() if "SQL_CUSTOMER_TOTALS {" in line]
    # the rerun's Spark job read the day's 60 rows again (the interval's remembered ranges), wrote no file
    assert [(s["date"], s["input_records"], s["customers"], s["written"]) for s in summaries] == [
        (days[1], 60, 7, False)]

    for log in [*(home / f"{d}.log" for d in DAYS), home / "rerun.log"]:
        assert PASSWORD not in log.read_text(errors="replace"), f"the database password is in {log.name}"
    task_logs = list((home / "airflow" / "logs").rglob("*")) if (home / "airflow" / "logs").exists() else []
    for f in task_logs:
        if f.is_file():
            assert PASSWORD not in f.read_text(errors="replace"), f"the database password is in {f}"
