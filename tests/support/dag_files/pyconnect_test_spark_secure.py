"""Test DAG: a source run on a secured Kafka connection handed to a real ``spark-submit`` job by
``PyConnectSparkSubmitOperator``, the credentials resolved in the worker from the same connection.

- ``$PYCONNECT_TEST_SPARK_CONN``: the ``pyconnect`` connection (source and task ``spark``);
- ``$PYCONNECT_TEST_SPARK_REFUSED``: one whose password is wrong (task ``spark_refused`` must fail before
  ``spark-submit``, as must ``spark_cluster``, in cluster deploy mode);
- ``$PYCONNECT_TEST_SPARK_MTLS``: the same principal by its client certificate (task ``spark_mtls``, whose job only
  checks what it was handed, for ``$PYCONNECT_TEST_SPARK_MTLS_BACKEND``, the mTLS listener);
- ``$PYCONNECT_TEST_SPARK_TOPIC`` and ``$PYCONNECT_TEST_SPARK_CONNECTOR``: the names the principal is granted;
- ``$PYCONNECT_TEST_SPARK_APP``: the job; ``$PYCONNECT_TEST_SPARK_OUT``: the directory where each Spark task's job
  writes what it read (``<task_id>.json``).

Without them the DAG has no task.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from airflow.sdk import DAG, task

from airflow_pyconnect.operators.source import PyConnectSourceOperator
from airflow_pyconnect.operators.spark_submit import PyConnectSparkSubmitOperator
from airflow_pyconnect.spark import spark_handoff, spark_submit_kwargs

CONN = os.environ.get("PYCONNECT_TEST_SPARK_CONN", "")
REFUSED = os.environ.get("PYCONNECT_TEST_SPARK_REFUSED", "")
MTLS = os.environ.get("PYCONNECT_TEST_SPARK_MTLS", "")
MTLS_BACKEND = os.environ.get("PYCONNECT_TEST_SPARK_MTLS_BACKEND") or None
TOPIC = os.environ.get("PYCONNECT_TEST_SPARK_TOPIC", "")
CONNECTOR = os.environ.get("PYCONNECT_TEST_SPARK_CONNECTOR", "")
APP = os.environ.get("PYCONNECT_TEST_SPARK_APP", "")
OUT = os.environ.get("PYCONNECT_TEST_SPARK_OUT", "/tmp/pyconnect-test-spark-secure")

with DAG(dag_id="pyconnect_test_spark_secure", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    if CONN:
        src = PyConnectSourceOperator(
            task_id="src", pyconnect_conn_id=CONN, retries=0,
            connector_config={"name": CONNECTOR, "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                              "topic": TOPIC, "max.records": "200", "batch.size": "50", "tasks.max": "2",
                              "poll.idle.timeout.ms": "200"},
        )

        @task(retries=0)
        def handoff(result: dict[str, Any]) -> dict[str, Any]:
            return spark_handoff(result, pyconnect_conn_id=CONN)

        handed = handoff(src.output)
        spark_tasks = [("spark", CONN, "client", None), ("spark_refused", REFUSED, "client", None),
                       ("spark_cluster", CONN, "cluster", None), ("spark_mtls", MTLS, "client", MTLS_BACKEND)]
        for task_id, conn, mode, backend in spark_tasks:
            if not conn:
                continue
            only = ["--settings-only"] if backend else []
            spark = PyConnectSparkSubmitOperator(
                task_id=task_id, pyconnect_conn_id=conn, application=APP, name=task_id, retries=0, deploy_mode=mode,
                **spark_submit_kwargs(handed, kafka=True, backend=backend,
                                      args=["--out", f"{OUT}/{task_id}.json", *only],
                                      conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}),
            )
            handed >> spark
