"""PyConnectSparkSubmitOperator's shape: SparkSubmitOperator's template fields and nothing more (the connection id is
a name, never rendered), and nothing resolved when the DAG is parsed. Its run: tests/integration/test_spark_handoff_secure.py."""

from __future__ import annotations

from datetime import datetime

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG

from airflow_pyconnect.operators.spark_submit import PyConnectSparkSubmitOperator


def test_the_template_fields_are_spark_submits_and_the_connection_is_resolved_only_at_run_time() -> None:
    with DAG(dag_id="shape_spark", schedule=None, start_date=datetime(2026, 1, 1)):
        op = PyConnectSparkSubmitOperator(task_id="t", application="job.py", pyconnect_conn_id="not_defined_here")
    assert tuple(op.template_fields) == tuple(SparkSubmitOperator.template_fields)
    assert "pyconnect_conn_id" not in op.template_fields and op.pyconnect_conn_id == "not_defined_here"
    assert isinstance(op, SparkSubmitOperator)
