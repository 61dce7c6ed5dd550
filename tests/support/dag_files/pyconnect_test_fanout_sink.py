"""Test DAG: a source fanned out, then a sink fanned out over the partitions it wrote::

    gen_plan ─▶ gen [0..1] ─▶ gen_merge ─┬▶ files_plan ─▶ files [0..n-1] ─▶ files_merge ─┬▶ report
                                         └▶ lake_plan ─▶ lake [0..1] ─▶ lake_merge ───────┘

The sink is a FileSink (``$PYCONNECT_TEST_DIR``) with ``tasks.max`` ``$PYCONNECT_TEST_SINK_TASKS`` over the topic's
partitions (the test creates it), up to what the source committed (``until_offsets=gen_merge.output``). Beside it,
a ParquetSink into ``$PYCONNECT_TEST_LAKE`` with ``tasks.max`` 2, whose ``storage.options`` (a PASSWORD field its
task configs carry) holds a secret that must never reach XCom or the log. The report task writes the merged results
and both plan XComs to ``$PYCONNECT_TEST_OUT``. The backend is the connection ``pyconnect_test``.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_pyconnect.operators.fanout import fan_out_source
from airflow_pyconnect.operators.fanout_sink import fan_out_sink

TOPIC = "fan-sink-events"

with DAG(dag_id="pyconnect_test_fanout_sink", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    merged = fan_out_source(
        "gen",
        {"name": "fan-sink-gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
         "topic": TOPIC, "tasks.max": "2", "max.records": "1200", "batch.size": "50"},
        pyconnect_conn_id="pyconnect_test",
        max_seconds=120,
    )
    sunk = fan_out_sink(
        "files",
        {"name": "fan-sink-files", "connector.class": "connect_runtime.connectors.files.FileSink", "topics": TOPIC,
         "tasks.max": os.environ.get("PYCONNECT_TEST_SINK_TASKS", "4"),
         "directory": os.environ.get("PYCONNECT_TEST_DIR", "/nonexistent/out"), "fsync": "false",
         "consumer.max.poll.records": "40"},
        pyconnect_conn_id="pyconnect_test",
        until_offsets=merged.output,
        max_seconds=120,
    )
    lake = fan_out_sink(
        "lake",
        {"name": "fan-sink-lake", "connector.class": "connect_runtime.connectors.lake.ParquetSink", "topics": TOPIC,
         "tasks.max": "2", "path": os.environ.get("PYCONNECT_TEST_LAKE", "/nonexistent/lake"),
         "storage.options": '{"auto_mkdir": true, "fan_token": "fan-secret-456"}'},
        pyconnect_conn_id="pyconnect_test",
        until_offsets=merged.output,
        max_seconds=120,
    )

    @task
    def report(source: dict, sink: dict, lake: dict, ti=None) -> None:  # type: ignore[no-untyped-def]
        import json

        out = {"source": source, "sink": sink, "lake": lake,
               "plan": ti.xcom_pull(task_ids="files_plan", key="plan"),
               "lake_plan": ti.xcom_pull(task_ids="lake_plan", key="plan")}
        with open(os.environ["PYCONNECT_TEST_OUT"], "w") as f:
            json.dump(out, f)

    report(merged.output, sunk.output, lake.output)
