"""Test DAG: one slow exactly-once source task; two attempts of it run at once in the fencing test.

The poll delay comes from the Airflow Variable ``fence_poll_delay_ms`` (``AIRFLOW_VAR_FENCE_POLL_DELAY_MS``),
so the test makes the first attempt slow enough to still be running when its successor starts."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_pyconnect.operators.source import PyConnectSourceOperator

with DAG(dag_id="pyconnect_test_fencing", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    PyConnectSourceOperator(
        task_id="gen",
        pyconnect_conn_id="pyconnect_test",
        connector_config={
            "name": "fence-gen",
            "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
            "topic": "fence-events",
            "max.records": "1200",
            "batch.size": "5",
            "poll.delay.ms": "{{ var.value.get('fence_poll_delay_ms', '60') }}",
        },
        max_seconds=120,
        retries=1,
    )
