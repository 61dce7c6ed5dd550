"""Daily orders pipeline: files → topic ``orders`` (exactly-once) → Parquet lake → Spark daily totals → archive.

One run per day (``catchup``: 2026-01-01 to 2026-01-03, the days of the sample data)::

    day_files ─▶ ingest ─▶ input_complete ─▶ lake ─▶ handoff ─▶ totals ─▶ archive

- ``day_files``: lists the day's input files ``<data>/orders/<ds>/*.jsonl`` and their sizes.
- ``ingest`` (:class:`PyConnectSourceOperator`, ``DirectorySource``, exactly-once): reads the day's
  files into the topic ``orders``. The source partition of a record is its file
  (``{"file": "<ds>/orders-00.jsonl"}``), so a rerun resumes each file at its committed byte offset
  and a finished file is not read again: **a rerun writes nothing twice**. Its XCom holds the
  committed ranges: ``ranges`` (this attempt's) and ``interval_ranges`` (the whole day, recorded by
  the runtime in the same transaction as each commit, so a rerun that wrote nothing still has them);
  when it committed new records it emits an Asset event for ``pyconnect://pyconnect_default/orders``
  (the downstream DAG ``example_orders_downstream`` is scheduled on it; a rerun emits none).
- ``input_complete`` (:class:`PyConnectCommittedOffsetsSensor`, ``connector_kind="source"``): waits
  until the source connector's **committed source offsets** say every input file of the day was
  read to its end (``{"done": true, "position": <file size>}``). Why the source side: the totals of
  a day are only right once the whole day is in the topic, and that is exactly what the source
  offsets record. (The archive sink cannot be the sensor's target: ``FileSink`` keeps its offsets in
  its destination, its ``pre_commit`` returns ``{}``, so its consumer group never commits anything
  and a group-offsets sensor on it would never be satisfied.)
- ``lake`` (:class:`PyConnectSinkOperator`, ``ParquetSink``): writes the day's records to Parquet files
  ``<data>/lake/topics/orders/partition=<p>/orders+<p>+<start>.parquet`` up to the end of the day's
  ranges (``until_offsets=ingest.output``), exactly once (the files are its offsets: a rerun writes
  nothing). A bounded run publishes its last file at its target, so each day is exactly a set of files.
- ``handoff``: the backend URL and the day's committed ranges for Spark
  (:func:`airflow_pyconnect.spark.spark_handoff`).
- ``totals`` (``SparkSubmitOperator``): ``dags/jobs/orders_daily_totals.py`` reads exactly those
  ranges from the lake (``--lake``: :func:`connect_runtime.spark.read_lake`, the files holding the
  day's ranges read with Spark's own ``spark.read.parquet``) and writes per-customer totals as Parquet
  partitioned by ``date``, replacing only the day's partition (``partitionOverwriteMode=dynamic``).
- ``archive`` (:class:`PyConnectSinkOperator`, ``FileSink``): appends the day's records to
  ``<data>/archive/orders/partition=0/orders-0.jsonl`` up to the end of the day's ranges
  (``until_offsets=ingest.output``),
  exactly-once (its manifest holds its offsets, so a rerun appends nothing twice).

Rerunning a day (``airflow dags test example_orders_pipeline 2026-01-02`` again, or a clear)
changes nothing: no new records in the topic, no new lake file, the same Parquet rows, no archive
line twice.

Paths: ``<data>`` is the Airflow Variable ``pyconnect_example_data`` if set, else the environment
variable ``PYCONNECT_EXAMPLE_DATA`` (read when the file is parsed), else
``$AIRFLOW_HOME/pyconnect-example``. Spark: ``spark-submit`` and ``PYSPARK_PYTHON`` come from this
virtualenv (:func:`airflow_pyconnect.spark.spark_env`); the connection ``spark_default`` must name
the master, e.g. ``AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[*]"}'``
(``scripts/run_example.py`` sets it).
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import dag, task

from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.operators.source import PyConnectSourceOperator
from airflow_pyconnect.sensors.offsets import PyConnectCommittedOffsetsSensor
from airflow_pyconnect.spark import spark_submit_kwargs

JOBS = Path(__file__).resolve().parent / "jobs"
SOURCE_NAME = "orders-files"
ARCHIVE_NAME = "orders-archive"
LAKE_NAME = "orders-lake"
LAKE_COLUMNS = {"order_id": "string", "customer": "string", "amount": "double", "items": "int64", "ts": "string",
                "channel": "string"}
"""The lake's column types (``parquet.schema``): amounts as double, summed as decimals by the Spark job."""
TOPIC = "orders"

_default_data = os.environ.get("PYCONNECT_EXAMPLE_DATA") or str(
    Path(os.environ.get("AIRFLOW_HOME") or "~/airflow").expanduser() / "pyconnect-example")
DATA = "{{ var.value.get('pyconnect_example_data', " + repr(_default_data) + ") }}"
"""The data root, rendered when a task runs (no Variable lookup at parse time)."""


@dag(
    dag_id="example_orders_pipeline",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    end_date=datetime(2026, 1, 3),
    catchup=True,
    max_active_runs=1,  # catch-up one day at a time; `airflow backfill create` ignores it, and then the
    # connector tasks (no identity) still run one day at a time: max_active_tis_per_dag=1 by default
    tags=["pyconnect", "example", "spark"],
    doc_md=__doc__,
)
def example_orders_pipeline() -> None:
    @task
    def day_files(data: str, ds: str | None = None) -> list[dict[str, object]]:
        """The day's input files and sizes, as the source offsets that say "read to the end"."""
        folder = Path(data) / "orders" / str(ds)
        files = sorted(p for p in folder.glob("*.jsonl") if not p.name.startswith("."))
        if not files:
            raise FileNotFoundError(f"no input files for {ds}: expected {folder}/*.jsonl "
                                    "(scripts/generate_sample_data.py writes them)")
        return [{"partition": {"file": f"{ds}/{p.name}"}, "offset": {"done": True, "position": p.stat().st_size}}
                for p in files]

    files = day_files(DATA)

    # [START howto_operator_pyconnect_source]
    ingest = PyConnectSourceOperator(
        task_id="ingest",
        max_seconds=300,
        connector_config={
            "name": SOURCE_NAME,
            "connector.class": "connect_runtime.connectors.files.DirectorySource",
            "directory": DATA + "/orders",
            "pattern": "{{ ds }}/*.jsonl",
            "format": "jsonl",
            "topic": TOPIC,
            "tasks.max": "1",
            "exactly.once.support": "required",
            "directory.scan.interval.ms": "0",
        },
    )
    # [END howto_operator_pyconnect_source]

    # [START howto_sensor_pyconnect_committed_offsets]
    input_complete = PyConnectCommittedOffsetsSensor(
        task_id="input_complete",
        connector_name=SOURCE_NAME,
        connector_kind="source",
        target_offsets=files,  # the day_files task's output, resolved when the sensor runs
        mode="poke",
        deferrable=False,
        poke_interval=2,
        timeout=120,
    )
    # [END howto_sensor_pyconnect_committed_offsets]

    lake = PyConnectSinkOperator(
        task_id="lake",
        connector_config={
            "name": LAKE_NAME,
            "connector.class": "connect_runtime.connectors.lake.ParquetSink",
            "topics": TOPIC,
            "path": DATA + "/lake",
            "parquet.schema": json.dumps(LAKE_COLUMNS),
        },
        until_offsets=ingest.output,  # the end of the day's committed ranges: the day's last file ends there
        max_seconds=300,
    )

    # [START howto_pyconnect_spark_handoff]
    @task
    def handoff(source_result: dict[str, object]) -> dict[str, object]:
        """The backend URL and the day's committed ranges, for the Spark job."""
        from airflow_pyconnect.spark import spark_handoff

        return spark_handoff(source_result)

    spark_args = handoff(ingest.output)

    totals = SparkSubmitOperator(
        task_id="totals",
        application=str(JOBS / "orders_daily_totals.py"),
        name="orders_daily_totals",
        conn_id="spark_default",
        **spark_submit_kwargs(
            spark_args,
            args=["--date", "{{ ds }}", "--output", DATA + "/out/orders_daily_totals", "--lake", DATA + "/lake"],
            conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"},
        ),
    )
    # [END howto_pyconnect_spark_handoff]

    # [START howto_operator_pyconnect_sink]
    archive = PyConnectSinkOperator(
        task_id="archive",
        connector_config={
            "name": ARCHIVE_NAME,
            "connector.class": "connect_runtime.connectors.files.FileSink",
            "topics": TOPIC,
            "directory": DATA + "/archive",
        },
        until_offsets=ingest.output,  # the end of the day's committed ranges (interval_ranges)
        max_seconds=300,  # a bound: the run normally ends as soon as it reached the source's ranges
    )
    # [END howto_operator_pyconnect_sink]

    files >> ingest >> input_complete >> lake >> spark_args >> totals >> archive


example_orders_pipeline()
