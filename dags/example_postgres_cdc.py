"""Change data capture: a PostgreSQL database replicated into another, exactly, by an hourly DAG.

Every hour::

    capture ─▶ replicate

- ``capture`` (:class:`PyConnectSourceOperator`, ``PostgresCdcSource``, exactly-once): the changes of
  ``public.customers`` and ``public.orders`` committed before the run started, read from the logical
  replication slot ``pyconnect_shop`` through the publication ``pyconnect_shop`` (both created by the first
  run, which also takes the initial snapshot), as Debezium's events into the topics
  ``shop.public.customers`` and ``shop.public.orders`` (``topic.prefix`` ``shop``). The slot is advanced only
  after the records' transaction committed, so a run killed at any instant, and its retry, lose and repeat
  nothing. Its XCom's ``source_offsets`` name how far it read: Debezium's offset under the partition
  ``{"server": "shop"}`` (``lsn``, ``lsn_commit``, ``txId``, ``ts_usec``).
- ``replicate`` (:class:`PyConnectSinkOperator`, ``SqlSink``): Debezium's ``ExtractNewRecordState`` turns each
  event into the row it left (tombstones kept: a delete), a ``RegexRouter`` names the table
  (``shop.public.orders`` -> ``orders``), and the sink upserts by the primary key (``pk.mode=record_key``) and
  deletes on a tombstone, in the replica database, up to what ``capture`` committed
  (``until_offsets=capture.output``). The sink keeps its offsets in the replica, in the same transaction as the
  rows. After the run the replica equals the source as it was at the last transaction ``capture`` read.

Unlike the other examples, the run does not read "its" data interval: a replication slot has one position, and
each run reads from there to the changes committed before it started. So the schedule has no catch-up
(``catchup=False``: a DAG paused for a day resumes with one run that reads the whole day), runs one at a time
(``max_active_runs=1``; the connector tasks have no ``identity``, so Airflow runs each of them one at a time
anyway), and a manual run (``airflow dags test example_postgres_cdc``) is just an earlier hourly run. While the
DAG is paused the slot keeps the WAL the runs have not read yet: docs/cdc.md ("A paused DAG") says what that costs
and how to bound it.

Connections: the Airflow connections ``pyconnect_cdc_source`` (the captured database; its user needs the
``REPLICATION`` attribute, ``SELECT`` on the tables, and to own them for the first run's ``CREATE PUBLICATION``:
docs/cdc.md "Permissions") and ``pyconnect_cdc_replica`` (the replica), of type ``postgres`` (host, port, schema
= the database, login, password, TLS extras as the Postgres provider's), e.g.
``AIRFLOW_CONN_PYCONNECT_CDC_SOURCE='{"conn_type": "postgres", "host": "db", "port": 5432, "schema": "shop",
"login": "cdc", "password": "..."}'``. The topics live on the backend of the ``pyconnect_default`` connection
(the embedded ``$AIRFLOW_HOME/pyconnect/pyconnect.db`` when it is not defined); ``capture``'s outlets are the
topics' assets (``pyconnect://pyconnect_default/shop.public.orders``, ...), updated when ``capture`` wrote to
them. The Airflow Variable ``pyconnect_cdc_batch_rows`` (default 1000) is the changes per transaction.

Retiring the pipeline: pause the DAG, then drop the slot and the publication (docs/cdc.md "Retiring a
pipeline"), or the slot keeps WAL forever.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag

from airflow_pyconnect.assets import pyconnect_asset
from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.operators.source import PyConnectSourceOperator
from airflow_pyconnect.sql import sql_connection_config

SOURCE_CONN_ID = "pyconnect_cdc_source"
REPLICA_CONN_ID = "pyconnect_cdc_replica"
PREFIX = "shop"
TABLES = ("public.customers", "public.orders")
TOPICS = tuple(f"{PREFIX}.{t}" for t in TABLES)
SLOT = PUBLICATION = "pyconnect_shop"


@dag(
    dag_id="example_postgres_cdc",
    schedule="@hourly",  # no data interval needed: each run reads from the slot's position to the run's start
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
    tags=["pyconnect", "example", "sql", "cdc"],
    doc_md=__doc__,
)
def example_postgres_cdc() -> None:
    capture = PyConnectSourceOperator(
        task_id="capture",
        connector_config={
            "name": "shop-cdc",
            "connector.class": "connect_runtime.connectors.cdc.PostgresCdcSource",
            **sql_connection_config(SOURCE_CONN_ID),
            "topic.prefix": PREFIX,
            "table.include.list": ",".join(TABLES),
            "slot.name": SLOT,
            "publication.name": PUBLICATION,
            "snapshot.mode": "initial",
            "batch.max.rows": "{{ var.value.get('pyconnect_cdc_batch_rows', '1000') }}",
            "exactly.once.support": "required",
        },
        outlets=[pyconnect_asset(t) for t in TOPICS],
        max_seconds=1800,  # a long backlog is read over several runs; each commits what it read
    )

    replicate = PyConnectSinkOperator(
        task_id="replicate",
        connector_config={
            "name": "shop-replica",
            "connector.class": "connect_runtime.connectors.sql.SqlSink",
            **sql_connection_config(REPLICA_CONN_ID),
            "topics": ",".join(TOPICS),
            "insert.mode": "upsert",
            "pk.mode": "record_key",
            "delete.enabled": "true",
            "auto.create": "true",
            "auto.evolve": "true",  # an ALTER TABLE ... ADD COLUMN at the source adds the column here
            "transforms": "unwrap,route",
            "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
            "transforms.unwrap.drop.tombstones": "false",  # the tombstone is the sink's delete
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": PREFIX.replace(".", "\\.") + "\\.[^.]+\\.(.*)",
            "transforms.route.replacement": "$1",
        },
        until_offsets=capture.output,
        max_seconds=1800,
    )

    capture >> replicate


example_postgres_cdc()
