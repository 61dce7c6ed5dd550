"""System test of ``dags/example_pyconnect_backfill.py``: one daily interval, source then the archive sink bounded
by its ranges. Three intervals, a cleared rerun and ``airflow backfill create``: tests/integration/test_airflow_backfill.py."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.system.utils import get_test_run, load_example

dag = load_example("example_pyconnect_backfill")

test_run = get_test_run(dag, logical_date=datetime(2026, 1, 2, tzinfo=UTC))
