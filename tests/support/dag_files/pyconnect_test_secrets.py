"""Test DAG: a connector secret declared ``Type.PASSWORD`` under a harmless name (``signing.key``),
rendered from a Variable whose name is not secret either, through a source operator and a fan-out;
a source whose secrets hide inside other values (the password in a URL's user-info, an options map's
``secret``) and whose error quotes them; then the idioms: a sink bounded by ``src.output["ranges"]`` (an XComArg), and a sensor on that
``FileSink``'s group, which must fail at once (the sink keeps its offsets in its destination).
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_pyconnect.operators.fanout import fan_out_source
from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.operators.source import PyConnectSourceOperator
from airflow_pyconnect.sensors.offsets import PyConnectCommittedOffsetsSensor

CONFIG = {
    "name": "signed-gen",
    "connector.class": "tests.support.signed_connector.SignedDataGenSource",
    "topic": "signed-events",
    "max.records": "40",
    "batch.size": "10",
    "signing.key": "{{ var.value.pc_plain_value }}",
}

with DAG(dag_id="pyconnect_test_secrets", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    src = PyConnectSourceOperator(task_id="src", pyconnect_conn_id="pyconnect_test", connector_config=CONFIG)
    fan = fan_out_source("fan", {**CONFIG, "name": "signed-fan", "tasks.max": "2"},
                         pyconnect_conn_id="pyconnect_test")
    sink = PyConnectSinkOperator(
        task_id="sink",
        pyconnect_conn_id="pyconnect_test",
        connector_config={"name": "signed-archive", "connector.class": "connect_runtime.connectors.files.FileSink",
                          "topics": "signed-events",
                          "directory": os.environ.get("PYCONNECT_TEST_OUT", "/tmp") + "-archive"},
        until_offsets=src.output["ranges"],
    )
    never = PyConnectCommittedOffsetsSensor(
        task_id="never", pyconnect_conn_id="pyconnect_test", connector_name="signed-archive",
        target_offsets=src.output, poke_interval=1, timeout=600, mode="poke", deferrable=False,
    )
    sink >> never
    typo = PyConnectSourceOperator(  # a misspelt key: a config error, no retry (issue 25)
        task_id="typo", pyconnect_conn_id="pyconnect_test", retries=3,
        connector_config={"name": "typo-gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                          "topic": "typo-events", "max.records": "5", "exactly.once.suport": "required"},
    )
    leaky = PyConnectSourceOperator(  # secrets inside other values; its error quotes them all (and it fails)
        task_id="leaky", pyconnect_conn_id="pyconnect_test", retries=0,
        connector_config={
            "name": "leaky", "connector.class": "tests.support.signed_connector.LeakySource",
            "topic": "leaky-events", "max.records": "10", "signing.key": "{{ var.value.pc_plain_value }}",
            "connection.url": "postgresql+psycopg://svc:{{ var.value.pc_url_password }}@db.example:5432/orders",
            "storage.options": '{"key": "AKIDEXAMPLE", "secret": "{{ var.value.pc_options_secret }}"}',
        },
    )
