"""SQL in, SQL out: a PostgreSQL table → topic (interval mode, exactly-once) → Spark totals → SQL sink upsert.

One run per day (``catchup``: 2026-01-01 to 2026-01-03)::

    seed_orders ─▶ ingest ─▶ handoff ─▶ totals ─▶ publish ─▶ load

- ``seed_orders`` stands in for the application: it creates ``shop_orders`` and
  ``daily_customer_totals`` if missing and inserts the day's orders once (``ON CONFLICT DO NOTHING``).
- ``ingest`` (:class:`PyConnectSourceOperator`, ``SqlSource``, exactly-once): the rows of
  ``shop_orders`` whose ``created_at`` lies in the data interval (``interval.start`` /
  ``interval.end``), in ``timestamp+incrementing`` mode, into the topic ``sql-shop_orders``. The source
  partition carries the interval, so each day has its own committed offsets: a backfill reads each
  day's rows once, a rerun of a day resumes after what it committed and writes nothing, and its XCom
  still names the day's records (``interval_ranges``).
- ``handoff`` / ``totals`` (``SparkSubmitOperator``): ``dags/jobs/sql_customer_totals.py`` reads exactly
  the day's records with ``spark.read.format("pyconnect")`` (typed columns) and writes the day's
  per-customer totals as a JSON-lines file named by its content (a rerun with the same totals writes
  nothing).
- ``publish`` (``DirectorySource``, exactly-once): the day's totals files into the topic
  ``sql-customer-totals``; a file already read is not read again.
- ``load`` (:class:`PyConnectSinkOperator`, ``SqlSink``): upserts the totals into
  ``daily_customer_totals`` (key ``day, customer``) up to the end of what ``publish`` committed
  (``until_offsets=publish.output``). The sink keeps its consumed offsets in the destination, in the
  same transaction as the rows (table ``pyconnect_sink_offsets``): exactly once even if killed.

A backfill of the three days, then a rerun of any day, changes nothing: no new record in either topic,
the same totals file, the same table rows.

The schedule is a ``CronDataIntervalTimetable``: each run covers one day, ``[data_interval_start,
data_interval_end)``; Airflow 3's plain ``"@daily"`` has runs with empty data intervals, and the
``ingest`` task refuses it when the file is parsed. ``airflow backfill create --dag-id
example_pyconnect_sql --from-date 2026-01-01 --to-date 2026-01-03`` (with a scheduler) runs the three
days, up to 10 DAG runs at once (Airflow's default for a backfill; the DAG's ``max_active_runs`` applies
to its catch-up only): the connector tasks ``ingest``, ``publish`` and ``load`` have no ``identity``, so
the operators give them ``max_active_tis_per_dag=1`` and Airflow runs each of them one interval at a
time (the other days' instances wait in state *scheduled*), while ``seed_orders`` and the Spark step of
different days run side by side. ``airflow dags test example_pyconnect_sql 2026-01-02`` is a manual
run, whose interval Airflow infers as the day that *ends* at that date (2026-01-01).

Database: the Airflow connection ``pyconnect_example_sql`` (PostgreSQL: host, port, schema = the
database, login, password; TLS as the Postgres provider's extras ``sslmode``, ``sslrootcert``, ``sslcert``,
``sslkey``, ``sslpassword``), e.g. ``AIRFLOW_CONN_PYCONNECT_EXAMPLE_SQL='{"conn_type": "postgres",
"host": "127.0.0.1", "port": 5432, "schema": "shop", "login": "app", "password": "...",
"extra": {"sslmode": "verify-full", "sslrootcert": "/etc/ssl/pg-ca.pem"}}'``. The connectors get the
password through their ``connection.password`` field (a ``PASSWORD`` field: masked in logs, rendered
templates and XCom) and the TLS extras through ``connection.ssl*`` (``airflow_pyconnect.sql``). Files: ``$PYCONNECT_EXAMPLE_DATA`` (default
``$AIRFLOW_HOME/pyconnect-example``)``/sql_totals``. Spark: the ``spark_default`` connection, as in
``example_orders_pipeline``.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import dag, task
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.operators.source import PyConnectSourceOperator
from airflow_pyconnect.spark import spark_submit_kwargs
from airflow_pyconnect.sql import TLS_EXTRAS, sql_connection_config

JOBS = Path(__file__).resolve().parent / "jobs"
SQL_CONN_ID = "pyconnect_example_sql"
ORDERS_PER_DAY = 60
CUSTOMERS = 7

SQL_CONNECTION = sql_connection_config(SQL_CONN_ID)
"""Connector fields from the Airflow connection, rendered when a task runs: URL, user, the password only into the
``PASSWORD`` field, the TLS extras (``sslmode``, ``sslrootcert``, ...) into ``connection.ssl*``."""

_default_data = os.environ.get("PYCONNECT_EXAMPLE_DATA") or str(
    Path(os.environ.get("AIRFLOW_HOME") or "~/airflow").expanduser() / "pyconnect-example")
DAY = "{{ data_interval_start | ds }}"
"""The day of the data interval (the rows' day; also the totals' ``day``)."""
TOTALS_DIR = "{{ var.value.get('pyconnect_example_data', " + repr(_default_data) + ") }}/sql_totals"


@dag(
    dag_id="example_pyconnect_sql",
    # a data interval of one day: interval mode reads [data_interval_start, data_interval_end). (Airflow 3's
    # plain "@daily" is a CronTriggerTimetable whose runs have empty intervals: the source refuses them.)
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=datetime(2026, 1, 1),
    end_date=datetime(2026, 1, 3),
    catchup=True,
    max_active_runs=1,  # catch-up one day at a time (a backfill has its own --max-active-runs, default 10);
    # either way the connector tasks run one interval at a time (max_active_tis_per_dag=1 by default)
    tags=["pyconnect", "example", "sql", "spark"],
    doc_md=__doc__,
)
def example_pyconnect_sql() -> None:
    @task
    def seed_orders(data_interval_start: Any = None) -> int:
        """The day's orders in ``shop_orders`` (inserted once; a rerun inserts nothing)."""
        from datetime import timedelta

        import sqlalchemy as sa
        from airflow.sdk import BaseHook

        c = BaseHook.get_connection(SQL_CONN_ID)
        tls = {k: str(c.extra_dejson[k]) for k in TLS_EXTRAS if c.extra_dejson.get(k)}  # as PostgresHook does
        url = sa.URL.create("postgresql+psycopg", username=c.login or None, password=c.password or None,
                            host=c.host, port=c.port, database=c.schema)
        day = int(data_interval_start.strftime("%Y%m%d"))
        rows = [{"id": day * 1000 + i, "customer": f"customer-{(i * 5) % CUSTOMERS:02d}",
                 "amount": f"{(i * 37) % 1000 / 10 + 0.05:.2f}",
                 "created_at": data_interval_start + timedelta(minutes=i * 24)}
                for i in range(ORDERS_PER_DAY)]
        engine = sa.create_engine(url, connect_args=tls)  # libpq keywords: the key password stays out of the URL
        try:
            with engine.begin() as conn:
                # days of a backfill seed at the same time: concurrent CREATE TABLE IF NOT EXISTS of one
                # table can fail in PostgreSQL (unique violation in pg_type), so they take turns
                conn.exec_driver_sql("SELECT pg_advisory_xact_lock(804217)")
                conn.exec_driver_sql(
                    "CREATE TABLE IF NOT EXISTS shop_orders (id BIGINT PRIMARY KEY, customer TEXT NOT NULL, "
                    "amount NUMERIC(12,2) NOT NULL, created_at TIMESTAMPTZ NOT NULL)")
                conn.exec_driver_sql(
                    "CREATE TABLE IF NOT EXISTS daily_customer_totals (day DATE, customer TEXT, "
                    "orders INTEGER NOT NULL, amount NUMERIC(14,2) NOT NULL, PRIMARY KEY (day, customer))")
                inserted = conn.execute(sa.text(
                    "INSERT INTO shop_orders (id, customer, amount, created_at) "
                    "VALUES (:id, :customer, CAST(:amount AS NUMERIC), :created_at) ON CONFLICT (id) DO NOTHING"),
                    rows).rowcount
        finally:
            engine.dispose()
        return int(inserted)

    ingest = PyConnectSourceOperator(
        task_id="ingest",
        connector_config={
            "name": "shop-orders",
            "connector.class": "connect_runtime.connectors.sql.SqlSource",
            **SQL_CONNECTION,
            "table.include.list": "shop_orders",
            "mode": "timestamp+incrementing",
            "timestamp.column.name": "created_at",
            "incrementing.column.name": "id",
            "interval.start": "{{ data_interval_start }}",
            "interval.end": "{{ data_interval_end }}",
            "topic.prefix": "sql-",
            "exactly.once.support": "required",
        },
        max_seconds=300,
        retries=2,
    )

    @task
    def handoff(source_result: dict[str, object]) -> dict[str, object]:
        """The backend URL and the day's committed ranges, for the Spark job."""
        from airflow_pyconnect.spark import spark_handoff

        return spark_handoff(source_result)

    spark_args = handoff(ingest.output)

    totals = SparkSubmitOperator(
        task_id="totals",
        application=str(JOBS / "sql_customer_totals.py"),
        name="sql_customer_totals",
        conn_id="spark_default",
        **spark_submit_kwargs(
            spark_args,
            args=["--date", DAY, "--output", TOTALS_DIR],
            conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
        ),
    )

    publish = PyConnectSourceOperator(
        task_id="publish",
        connector_config={
            "name": "customer-totals-files",
            "connector.class": "connect_runtime.connectors.files.DirectorySource",
            "directory": TOTALS_DIR,
            "pattern": DAY + "/*.jsonl",
            "format": "jsonl",
            "topic": "sql-customer-totals",
            "directory.scan.interval.ms": "0",
            "exactly.once.support": "required",
        },
        max_seconds=300,
        retries=2,
    )

    load = PyConnectSinkOperator(
        task_id="load",
        connector_config={
            "name": "customer-totals-sql",
            "connector.class": "connect_runtime.connectors.sql.SqlSink",
            **SQL_CONNECTION,
            "topics": "sql-customer-totals",
            "table.name.format": "daily_customer_totals",
            "insert.mode": "upsert",
            "pk.mode": "record_value",
            "pk.fields": "day,customer",
        },
        until_offsets=publish.output,
        max_seconds=300,
        retries=2,
    )

    seed_orders() >> ingest >> spark_args >> totals >> publish >> load


example_pyconnect_sql()
