"""Test DAG: source -> sensor (source offsets) -> sink -> sensor (sink group) -> report.

Committed ranges flow through XCom as rendered templates (no native rendering). The backend is the
connection ``pyconnect_test`` (an ``AIRFLOW_CONN_PYCONNECT_TEST`` variable set by the test); the
report task writes every XCom it pulled to ``$PYCONNECT_TEST_OUT``.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG, AssetAlias, task

from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.operators.source import PyConnectSourceOperator
from airflow_pyconnect.sensors.offsets import PyConnectCommittedOffsetsSensor

SRC = "{{ ti.xcom_pull(task_ids='src') }}"

with DAG(dag_id="pyconnect_test_pipeline", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    src = PyConnectSourceOperator(
        task_id="src",
        pyconnect_conn_id="pyconnect_test",
        connector_config={
            "name": "pipe-gen",
            "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
            "topic": "pipe-events",
            "max.records": "500",
            "batch.size": "100",
            "tasks.max": "2",
            "seed": "{{ logical_date.year }}",
            "sasl.jaas.config": "org.example.Login required secret='{{ var.value.get('pipe_secret', 'jaas-secret-123') }}';",
        },
        outlets=[AssetAlias("pyconnect-test-alias")],
    )
    wait_src = PyConnectCommittedOffsetsSensor(
        task_id="wait_src",
        pyconnect_conn_id="pyconnect_test",
        connector_kind="source",
        connector_name="pipe-gen",
        target_offsets=SRC,
        poke_interval=1,
        timeout=60,
        deferrable=False,
    )
    sink = PyConnectSinkOperator(
        task_id="sink",
        pyconnect_conn_id="pyconnect_test",
        connector_config={
            "name": "pipe-sink",
            "connector.class": "tests.support.sink_helpers.RecordingSinkConnector",
            "topics": "pipe-events",
            "log.path": os.environ.get("PYCONNECT_TEST_SINK_LOG", "/nonexistent/sink.log"),
        },
        until_offsets=SRC,
        max_seconds=60,
    )
    wait_sink = PyConnectCommittedOffsetsSensor(
        task_id="wait_sink",
        pyconnect_conn_id="pyconnect_test",
        connector_name="pipe-sink",
        target_offsets=SRC,
        poke_interval=1,
        timeout=60,
        deferrable=True,
    )

    @task
    def report(ti=None) -> None:
        import json

        out = {t: ti.xcom_pull(task_ids=t) for t in ("src", "wait_src", "sink", "wait_sink")}
        with open(os.environ["PYCONNECT_TEST_OUT"], "w") as f:
            json.dump(out, f)

    src >> wait_src >> sink >> wait_sink >> report()
