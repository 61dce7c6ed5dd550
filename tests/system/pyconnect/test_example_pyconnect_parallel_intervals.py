"""System test of ``dags/example_pyconnect_parallel_intervals.py``: one interval lands, ingests and reads back
exactly its own orders (``check`` fails otherwise). Intervals at the same time: tests/integration/test_airflow_scale_out.py."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.system.utils import get_test_run, load_example

dag = load_example("example_pyconnect_parallel_intervals")

test_run = get_test_run(dag, logical_date=datetime(2026, 1, 2, tzinfo=UTC))
