"""System test of ``dags/example_orders_downstream.py`` run by hand (no triggering asset event: ``order_stats``
reads no range and reports zero orders through the hook's backend)."""

from __future__ import annotations

from tests.system.utils import get_test_run, load_example

dag = load_example("example_orders_downstream")

test_run = get_test_run(dag)
