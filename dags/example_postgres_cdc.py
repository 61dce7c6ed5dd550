"""Change data capture: a PostgreSQL database replicated, exactly, into a warehouse table and the lake by an hourly
DAG.

Every hour::

    capture ─┬─▶ replicate   (the warehouse: tables equal to the source's)
             └─▶ lake        (the history: every change once, as a Parquet row)

- ``capture`` (:class:`PyConnectSourceOperator`, ``PostgresCdcSource``, exactly-once): the changes of
  ``public.customers`` and ``public.orders`` committed before the run started, read from the logical
  replication slot ``pyconnect_shop`` through the publication ``pyconnect_shop`` (both created by the first
  run, which also takes the initial snapshot), as Debezium's events into the topics
  ``shop.public.customers`` and ``shop.public.orders`` (``topic.prefix`` ``shop``). The slot is advanced only
  after the records' transaction committed, so a run killed at any instant, and its retry, lose and repeat
  nothing. Its XCom's ``source_offsets`` name how far it read: Debezium's offset under the partition
  ``{"server": "shop"}`` (``lsn``, ``lsn_commit``, ``txId``, ``ts_usec``).
- ``replicate`` (:class:`PyConnectSinkOperator`, ``SqlSink``): Debezium's ``ExtractNewRecordState`` turns each
  event into the row it left (``delete.tombstone.handling.mode=tombstone``, Debezium 3's default: a delete
  becomes a tombstone), a ``RegexRouter`` names the table
  (``shop.public.orders`` -> ``orders``), and the sink upserts by the primary key (``pk.mode=record_key``) and
  deletes on a tombstone, in the replica database, up to what ``capture`` committed
  (``until_offsets=capture.output``). The sink keeps its offsets in the replica, in the same transaction as the
  rows. After the run the replica equals the source as it was at the last transaction ``capture`` read.
- ``lake`` (:class:`PyConnectSinkOperator`, ``ParquetSink``): every change as one row, appended, never updated:
  ``ExtractNewRecordState`` with ``delete.tombstone.handling.mode=rewrite`` gives the row the change left (a delete: the
  event's ``before``, the key and, unless ``REPLICA IDENTITY FULL``, nulls or a ``NOT NULL`` column's stand-in, and
  ``__deleted`` ``"true"``; tombstones dropped) plus ``__op`` (``r`` snapshot, ``c``, ``u``,
  ``d``), ``__lsn`` and ``__txId`` (the change's LSN and PostgreSQL transaction: joins the changes of one
  transaction across tables) and ``__source_ts_ms`` (the commit time), and ``InsertField`` adds ``__offset``, the
  record's offset in its topic: the commit order of the table's changes (the snapshot first). Files
  ``<lake>/topics/shop.public.orders/dt=<commit day, UTC>/shop.public.orders+0+<offset>.parquet``, up to what
  ``capture`` committed; the files are the sink's offsets, so a retry writes no row twice. The table as of any
  point is the last row per key up to that ``__offset`` whose ``__op`` is not ``d``. Flat rows,
  not Debezium's envelope: one column per source column is what Spark and SQL query, and with the default
  ``REPLICA IDENTITY`` the envelope's ``before`` holds only the key anyway.

Unlike the other examples, the run does not read "its" data interval: a replication slot has one position, and
each run reads from there to the changes committed before it started. So the schedule has no catch-up
(``catchup=False``: a DAG paused for a day resumes with one run that reads the whole day), runs one at a time
(``max_active_runs=1``; the connector tasks have no ``identity``, so Airflow runs each of them one at a time
anyway), and a manual run (``airflow dags test example_postgres_cdc``) is just an earlier hourly run. While the
DAG is paused the slot keeps the WAL the runs have not read yet: docs/cdc.md ("A paused DAG") says what that costs
and how to bound it.

The two sinks read the same topics independently, each with its own offsets: one failing does not hold back the
other, and a retry of either catches up to the same ``capture`` output.

Connections: the Airflow connections ``pyconnect_cdc_source`` (the captured database; its user needs the
``REPLICATION`` attribute, ``SELECT`` on the tables, and to own them for the first run's ``CREATE PUBLICATION``:
docs/cdc.md "Permissions") and ``pyconnect_cdc_replica`` (the replica), of type ``postgres`` (host, port, schema
= the database, login, password, TLS extras as the Postgres provider's), e.g.
``AIRFLOW_CONN_PYCONNECT_CDC_SOURCE='{"conn_type": "postgres", "host": "db", "port": 5432, "schema": "shop",
"login": "cdc", "password": "..."}'``. The topics live on the backend of the ``pyconnect_default`` connection
(the embedded ``$AIRFLOW_HOME/pyconnect/pyconnect.db`` when it is not defined); ``capture``'s outlets are the
topics' assets (``pyconnect://pyconnect_default/shop.public.orders``, ...), updated when ``capture`` wrote to
them. The Airflow Variable ``pyconnect_cdc_batch_rows`` (default 1000) is the changes per transaction. The lake:
the Variables ``pyconnect_lake_url`` (an fsspec URL, ``s3://bucket/lake``; default ``<data>/lake``, ``<data>`` as
in ``example_orders_pipeline``: ``PYCONNECT_EXAMPLE_DATA`` or ``$AIRFLOW_HOME/pyconnect-example``) and
``pyconnect_lake_storage_options`` (JSON for fsspec, e.g. s3fs's endpoint and keys), the ones
``example_orders_distributed`` writes its lake with.

Retiring the pipeline: pause the DAG, then drop the slot and the publication (docs/cdc.md "Retiring a
pipeline"), or the slot keeps WAL forever.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

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

_default_data = os.environ.get("PYCONNECT_EXAMPLE_DATA") or str(
    Path(os.environ.get("AIRFLOW_HOME") or "~/airflow").expanduser() / "pyconnect-example")
LAKE = "{{ var.value.get('pyconnect_lake_url', " + repr(_default_data + "/lake") + ") }}"
"""The lake's root, rendered when the task runs (no Variable lookup at parse time)."""


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
            "transforms.unwrap.delete.tombstone.handling.mode": "tombstone",  # a delete: the sink deletes
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": PREFIX.replace(".", "\\.") + "\\.[^.]+\\.(.*)",
            "transforms.route.replacement": "$1",
        },
        until_offsets=capture.output,
        max_seconds=1800,
    )

    # [START howto_cdc_lake]
    lake = PyConnectSinkOperator(
        task_id="lake",
        connector_config={
            "name": "shop-lake",
            "connector.class": "connect_runtime.connectors.lake.ParquetSink",
            "topics": ",".join(TOPICS),
            "path": LAKE,
            "storage.options": "{{ var.value.get('pyconnect_lake_storage_options', '{}') }}",
            "transforms": "unwrap,offset",
            "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
            "transforms.unwrap.delete.tombstone.handling.mode": "rewrite",  # a delete is a row too: __deleted=true
            "transforms.unwrap.add.fields": "op,lsn,txId,source.ts_ms",  # __op, __lsn, __txId, __source_ts_ms
            "transforms.offset.type": "org.apache.kafka.connect.transforms.InsertField$Value",
            "transforms.offset.offset.field": "__offset",  # the topic's order: the table's changes in commit order
            "partitioner.class": "time",  # one folder per commit day: dt=2026-01-01
            "timestamp.extractor": "RecordField",
            "timestamp.field": "__source_ts_ms",
            "path.format": "'dt'=YYYY-MM-dd",
            "partition.duration.ms": str(24 * 3600 * 1000),
            "timezone": "UTC",
        },
        until_offsets=capture.output,
        max_seconds=1800,
    )
    # [END howto_cdc_lake]

    capture >> [replicate, lake]


example_postgres_cdc()
