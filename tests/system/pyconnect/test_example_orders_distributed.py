"""System test of ``dags/example_orders_distributed.py`` on one machine: one day through the fan-out source on the
session's Apache Kafka broker, the lake on S3 (moto), the warehouse on PostgreSQL and Spark in local mode. The
three days on Celery workers, three brokers and a Spark cluster, checked from the data:
tests/integration/test_distributed_faults.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests.support.airflow_env import conn_env
from tests.support.moto_server import S3Lake
from tests.system.utils import get_test_run, load_example

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

dag = load_example("example_orders_distributed")


@pytest.fixture
def distributed_example_env(kafka_url: str, s3_lake: S3Lake, pg_database: str) -> dict[str, str]:
    """The connection and Variables the example reads, on this session's servers."""
    return {**conn_env("pyconnect_default", kafka_url),
            "AIRFLOW_VAR_PYCONNECT_LAKE_URL": s3_lake.url,
            "AIRFLOW_VAR_PYCONNECT_LAKE_STORAGE_OPTIONS": s3_lake.storage_options_json,
            "AIRFLOW_VAR_PYCONNECT_WAREHOUSE_URL": pg_database,
            "AIRFLOW_VAR_PYCONNECT_DISTRIBUTED_RECORDS": "500"}


test_run = get_test_run(
    dag, logical_date=datetime(2026, 1, 2, tzinfo=UTC), timeout=420,
    env={"AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"})},
    env_fixtures=("distributed_example_env",),
)
