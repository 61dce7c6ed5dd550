"""The example pipeline on the distributed deployment (issue 33): three days triggered with their logical dates
(``airflow dags trigger``), tasks on two Celery workers that share no disk, Kafka on three brokers, the
lake on S3, the Spark step on a standalone cluster. Checked from the data: every record of the topic is once in
the lake and once in PostgreSQL, Spark's totals equal totals computed from the topic, tasks ran on both workers'
hostnames, and the Spark applications ran on the cluster's master."""

from __future__ import annotations

import io
from typing import Any

import pytest

from tests.support.distributed import RECORDS_PER_DAY, deploy_module, deployment  # noqa: F401

pytestmark = pytest.mark.slow


def test_distributed_example_each_record_once_in_every_sink(deployment: Any) -> None:  # noqa: F811
    example = deploy_module("deploy.example")
    example.prepare(deployment)
    example.run_days(deployment, timeout_s=1500)
    result = example.summary(deployment, RECORDS_PER_DAY)
    out = io.StringIO()
    example.print_summary(result, out)
    assert result["ok"], out.getvalue()
    counts = result["counts"]
    assert counts["expected"] == 3 * RECORDS_PER_DAY
    assert counts["topic"] == counts["lake"] == counts["warehouse"] == counts["expected"], out.getvalue()
    hosts = {t["host"] for t in result["tasks"] if t["state"] == "success"}
    assert {"worker-a", "worker-b"} <= hosts, out.getvalue()
    assert len(result["spark_apps"]) >= len(example.DAYS), out.getvalue()
    assert all(t["state"] == "success" for t in result["tasks"]), out.getvalue()
