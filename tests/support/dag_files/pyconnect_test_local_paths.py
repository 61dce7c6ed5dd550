"""tests/integration/test_airflow_local_paths.py: a source on the embedded store, then a FileSink into
``$PYCONNECT_TEST_LP_OUT``: the two kinds of path another worker cannot see."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.operators.source import PyConnectSourceOperator

with DAG("pyconnect_test_local_paths", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    source = PyConnectSourceOperator(task_id="source", pyconnect_conn_id="pyconnect_test", connector_config={
        "name": "lp-gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource", "topic": "lp",
        "max.records": "40"})
    sink = PyConnectSinkOperator(task_id="sink", pyconnect_conn_id="pyconnect_test", connector_config={
        "name": "lp-files", "connector.class": "connect_runtime.connectors.files.FileSink", "topics": "lp",
        "directory": os.environ.get("PYCONNECT_TEST_LP_OUT", "/nonexistent")}, until_offsets=source.output)
    source >> sink
