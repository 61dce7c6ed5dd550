"""Test DAG: a committed-offsets sensor that must wait (a sink run commits later).

The target, timeout and deferrable mode (``PYCONNECT_TEST_DEFERRABLE``, default true) come from the
environment set by the test; ``report`` writes the sensor's
XCom to ``$PYCONNECT_TEST_OUT``.
"""

from __future__ import annotations

import json
import os
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_pyconnect.sensors.offsets import PyConnectCommittedOffsetsSensor

with DAG(dag_id="pyconnect_test_deferral", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    wait = PyConnectCommittedOffsetsSensor(
        task_id="wait",
        pyconnect_conn_id="pyconnect_test",
        connector_name="late-sink",
        target_offsets=os.environ.get("PYCONNECT_TEST_TARGET", '{"late-events": {"0": 1}}'),
        poke_interval=0.5,
        timeout=float(os.environ.get("PYCONNECT_TEST_TIMEOUT", "120")),
        deferrable=os.environ.get("PYCONNECT_TEST_DEFERRABLE", "true") == "true",
    )

    @task
    def report(ti=None) -> None:
        with open(os.environ["PYCONNECT_TEST_OUT"], "w") as f:
            json.dump(ti.xcom_pull(task_ids="wait"), f)

    wait >> report()
