"""The example pipeline across machines: Celery workers that share no disk, a Kafka cluster, the lake on S3, a
Spark cluster and PostgreSQL. ``scripts/run_example.py --distributed`` starts all of that on one machine and runs
this DAG for three days (docs/deploying.md says what each machine needs)::

    ingest_plan ─▶ ingest [0..1] (mapped) ─▶ ingest_merge ─┬─▶ lake_plan ─▶ lake [0..1] (mapped) ─▶ lake_merge
                                                           ├─▶ warehouse (SqlSink into PostgreSQL)
                                                           └─▶ handoff ─▶ totals (spark-submit on spark://)

- ``ingest`` (:func:`fan_out_source`, ``DataGenSource``, exactly-once, ``tasks.max=2``): the day's orders, two
  connector tasks as two mapped task instances, which the executor may place on different workers; each commits
  its records and offsets in its own Kafka transaction. One connector per day (``orders-<yyyymmdd>``, seeded by
  the day), every record stamped with its ``day`` (``InsertField``).
- ``lake`` (:func:`fan_out_sink`, ``ParquetSink`` on S3, ``tasks.max=2``): the sink's two connector tasks as two
  mapped task instances over the day's committed ranges (``until_offsets``), each with its own partitions of the
  topic, on any worker; a retry of one fences its own earlier try only. ``warehouse``: one sink task, rows in
  PostgreSQL (the SqlSink keeps its offsets in the destination, in the rows' transaction). Both exactly once
  across retries and reruns.
- ``totals``: ``SparkSubmitOperator`` on the Spark cluster (client mode: the driver in the worker's task), reading
  exactly the day's committed ranges from Kafka with Spark's Kafka source, writing per-customer totals to
  PostgreSQL (``dags/jobs/orders_totals_to_sql.py``).

Configuration (environment variables and Airflow Variables, read when a task runs): the connections
``pyconnect_default`` (the Kafka backend, ``kafka://b1,b2,b3`` with the cluster settings of docs/kafka.md in its
extra) and ``spark_default`` (``spark://host:port``, deploy mode client); the Variables ``pyconnect_lake_url``
(``s3://bucket/lake``), ``pyconnect_lake_storage_options`` (JSON for s3fs: endpoint, key, secret: masked as a
secret), ``pyconnect_warehouse_url`` (a SQLAlchemy PostgreSQL URL) and ``pyconnect_distributed_records`` (records
per day, default 20000).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import dag, task

from airflow_pyconnect.operators.fanout import fan_out_source
from airflow_pyconnect.operators.fanout_sink import fan_out_sink
from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.spark import spark_submit_kwargs

JOBS = Path(__file__).resolve().parent / "jobs"
TOPIC = "orders"
LAKE_COLUMNS = {"id": "int64", "customer": "string", "amount": "double", "ts": "int64", "day": "string"}
RECORDS = "{{ var.value.get('pyconnect_distributed_records', '20000') }}"
WAREHOUSE = "{{ var.value.pyconnect_warehouse_url }}"


@dag(
    dag_id="example_orders_distributed",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    end_date=datetime(2026, 1, 3),
    catchup=True,
    max_active_runs=1,
    tags=["pyconnect", "example", "spark", "distributed"],
    doc_md=__doc__,
)
def example_orders_distributed() -> None:
    merged = fan_out_source(
        "ingest",
        {
            "name": "orders-{{ ds_nodash }}",
            "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
            "topic": TOPIC,
            "tasks.max": "2",
            "max.records": RECORDS,
            "seed": "{{ ds_nodash }}",
            "batch.size": "1000",
            "transforms": "day",
            "transforms.day.type": "org.apache.kafka.connect.transforms.InsertField$Value",
            "transforms.day.static.field": "day",
            "transforms.day.static.value": "{{ ds }}",
        },
        max_seconds=300,
        emit_asset_events=False,
        retries=2,
    )

    lake = fan_out_sink(
        "lake",
        {
            "name": "orders-lake",
            "connector.class": "connect_runtime.connectors.lake.ParquetSink",
            "topics": TOPIC,
            "tasks.max": "2",
            "path": "{{ var.value.pyconnect_lake_url }}",
            "storage.options": "{{ var.value.pyconnect_lake_storage_options }}",
            "parquet.schema": json.dumps(LAKE_COLUMNS),
        },
        until_offsets=merged.output,
        max_seconds=300,
        retries=2,
    )

    warehouse = PyConnectSinkOperator(
        task_id="warehouse",
        connector_config={
            "name": "orders-warehouse",
            "connector.class": "connect_runtime.connectors.sql.SqlSink",
            "topics": TOPIC,
            "connection.url": WAREHOUSE,
            "table.name.format": "orders",
            "auto.create": "true",
        },
        until_offsets=merged.output,
        max_seconds=300,
        retries=2,
    )

    @task
    def handoff(source_result: dict[str, object]) -> dict[str, object]:
        """The backend URL and the day's committed ranges, for the Spark job."""
        from airflow_pyconnect.spark import spark_handoff

        return spark_handoff(source_result)

    spark_args = handoff(merged.output)
    totals = SparkSubmitOperator(
        task_id="totals",
        application=str(JOBS / "orders_totals_to_sql.py"),
        name="orders_totals_to_sql",
        conn_id="spark_default",
        deploy_mode="client",
        retries=2,
        **spark_submit_kwargs(spark_args, kafka=True, args=["--date", "{{ ds }}", "--warehouse", WAREHOUSE],
                              conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
                                    "spark.executor.memory": "512m", "spark.cores.max": "2"}),
    )

    merged >> [lake, warehouse, spark_args]
    spark_args >> totals


example_orders_distributed()
