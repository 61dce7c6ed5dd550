"""System test of ``dags/example_orders_pipeline.py``: one day of sample orders through source, lake, Spark
(spark-submit in local mode) and sink. Three days, the totals checked and a rerun:
tests/integration/test_example_pipeline.py."""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from tests.support import REPO
from tests.system.utils import get_test_run, load_example

pytestmark = pytest.mark.spark

DAY = date(2026, 1, 2)

dag = load_example("example_orders_pipeline")


def sample_orders(data: Path) -> None:
    """The day's input files, as ``scripts/generate_sample_data.py`` writes them (what the README's example uses)."""
    spec = importlib.util.spec_from_file_location("generate_sample_data", REPO / "scripts" / "generate_sample_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.generate(data / "orders", DAY, 1)


test_run = get_test_run(
    dag, logical_date=datetime(DAY.year, DAY.month, DAY.day, tzinfo=UTC), prepare=sample_orders, timeout=420,
    env={"AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"})},
)
