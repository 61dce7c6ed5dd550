"""Test DAG: SqlSource and SqlSink over TLS (``sslmode=verify-full``, SCRAM passwords), their connection fields from
Airflow ``postgres`` connections through :func:`airflow_pyconnect.sql.sql_connection_config`: ``pyconnect_test_pg_tls``
(the test CA, the right password) moves the rows of ``af_orders`` into ``af_copy``; ``pyconnect_test_pg_bad`` (the
same with a wrong password) fails at once, with no retry loop inside the task."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.operators.source import PyConnectSourceOperator
from airflow_pyconnect.sql import sql_connection_config

SOURCE = {"connector.class": "connect_runtime.connectors.sql.SqlSource", "table.include.list": "af_orders",
          "mode": "incrementing", "incrementing.column.name": "id", "topic.prefix": "af-"}

with DAG(dag_id="pyconnect_test_sql_tls", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    src = PyConnectSourceOperator(task_id="src", pyconnect_conn_id="pyconnect_test", connector_config={
        "name": "af-tls-src", **SOURCE, **sql_connection_config("pyconnect_test_pg_tls")})
    PyConnectSinkOperator(task_id="sink", pyconnect_conn_id="pyconnect_test", until_offsets=src.output["ranges"],
                          connector_config={
                              "name": "af-tls-sink", "connector.class": "connect_runtime.connectors.sql.SqlSink",
                              **sql_connection_config("pyconnect_test_pg_tls"), "topics": "af-af_orders",
                              "table.name.format": "af_copy", "auto.create": "true", "insert.mode": "upsert",
                              "pk.mode": "record_value", "pk.fields": "id"})
    PyConnectSourceOperator(task_id="bad", pyconnect_conn_id="pyconnect_test", retries=0, connector_config={
        "name": "af-tls-bad", **SOURCE, **sql_connection_config("pyconnect_test_pg_bad")})
