"""Test DAG: a directory source and a sink with a dead letter topic, for the metrics and progress lines.

The source reads the text files of ``$PYCONNECT_TEST_DIR`` (each line a string value); the sink parses each value
as JSON, so a line that is not JSON goes to the dead letter topic (``errors.tolerance=all``), and sleeps in each put
so that it logs progress lines. The backend is the
connection ``pyconnect_test``; the report task writes both XComs to ``$PYCONNECT_TEST_OUT``.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.operators.source import PyConnectSourceOperator

with DAG(dag_id="pyconnect_test_metrics", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    src = PyConnectSourceOperator(
        task_id="src",
        pyconnect_conn_id="pyconnect_test",
        connector_config={
            "name": "metrics-src",
            "connector.class": "connect_runtime.connectors.files.DirectorySource",
            "directory": os.environ.get("PYCONNECT_TEST_DIR", "/nonexistent"),
            "topic": "metrics-events",
            "format": "text",
            "batch.size": "10",
            "file.final.ms": "0",
            "value.converter": "connect_runtime.converters.StringConverter",
        },
    )
    sink = PyConnectSinkOperator(
        task_id="sink",
        pyconnect_conn_id="pyconnect_test",
        connector_config={
            "name": "metrics-sink",
            "connector.class": "tests.support.sink_helpers.RecordingSinkConnector",
            "topics": "metrics-events",
            "log.path": os.environ.get("PYCONNECT_TEST_SINK_LOG", "/nonexistent/sink.log"),
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": "metrics-dlq",
            "consumer.max.poll.records": "10",
            "put.sleep.ms": "100",  # 5 puts: the run outlasts progress.interval.ms
            "progress.interval.ms": "200",
        },
        until_offsets=src.output,
        max_seconds=60,
    )

    @task
    def report(ti=None) -> None:
        import json

        with open(os.environ["PYCONNECT_TEST_OUT"], "w") as f:
            json.dump({t: ti.xcom_pull(task_ids=t) for t in ("src", "sink")}, f)

    sink >> report()
