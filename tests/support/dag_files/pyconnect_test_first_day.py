"""Test DAG: a new user's first daily DAG, as docs/running.md writes it: a folder per day read by DirectorySource.

``schedule="@daily"`` with ``{{ ds }}`` (Airflow 3: a run at midnight names the day that starts then, so a live
run finds that day's folder empty). The root folder is ``$PYCONNECT_TEST_ROOT``, ``on_empty`` is
``$PYCONNECT_TEST_ON_EMPTY`` (default ``warn``); the report task (it runs whatever ``ingest`` did) writes the
ingest task's XCom to ``$PYCONNECT_TEST_OUT``.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_pyconnect.operators.source import PyConnectSourceOperator

ROOT = os.environ.get("PYCONNECT_TEST_ROOT", "/nonexistent")

with DAG(dag_id="pyconnect_test_first_day", schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False):
    ingest = PyConnectSourceOperator(
        task_id="ingest",
        pyconnect_conn_id="pyconnect_test",
        connector_config={
            "name": "first-day-orders",
            "connector.class": "connect_runtime.connectors.files.DirectorySource",
            "directory": ROOT + "/{{ ds }}",
            "pattern": "*.jsonl",
            "topic": "first-day-orders",
            "poll.idle.timeout.ms": "200",
            "directory.scan.interval.ms": "0",
        },
        on_empty=os.environ.get("PYCONNECT_TEST_ON_EMPTY", "warn"),
    )

    @task(trigger_rule="all_done")
    def report(ti=None) -> None:
        import json

        with open(os.environ["PYCONNECT_TEST_OUT"], "w") as f:
            json.dump({"ingest": ti.xcom_pull(task_ids="ingest")}, f)

    ingest >> report()
