"""Test DAG: exactly-once source runs and sink runs over a secured Kafka cluster, one pair per ``pyconnect``
connection named in ``$PYCONNECT_TEST_CONNS`` (comma-separated ids; each connection says how to authenticate).
Topic and connector names end with ``$PYCONNECT_TEST_SUFFIX``; the sinks write under ``$PYCONNECT_TEST_OUT/<conn>``.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.operators.source import PyConnectSourceOperator

CONNS = [c for c in os.environ.get("PYCONNECT_TEST_CONNS", "").split(",") if c]
SUFFIX = os.environ.get("PYCONNECT_TEST_SUFFIX", "x")
OUT = os.environ.get("PYCONNECT_TEST_OUT", "/tmp/pyconnect-test-secure")

with DAG(dag_id="pyconnect_test_secure_kafka", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    for conn in CONNS:
        topic = f"secure-{conn}-{SUFFIX}"
        src = PyConnectSourceOperator(
            task_id=f"src_{conn}", pyconnect_conn_id=conn, retries=0,
            connector_config={"name": f"gen-{conn}-{SUFFIX}",
                              "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                              "topic": topic, "max.records": "200", "batch.size": "50", "tasks.max": "2",
                              "topic.creation.default.partitions": "2", "poll.idle.timeout.ms": "200"},
        )
        PyConnectSinkOperator(
            task_id=f"sink_{conn}", pyconnect_conn_id=conn, retries=0,
            connector_config={"name": f"files-{conn}-{SUFFIX}",
                              "connector.class": "connect_runtime.connectors.files.FileSink", "topics": topic,
                              "directory": f"{OUT}/{conn}", "format": "jsonl"},
            until_offsets=src.output["ranges"],
        )
