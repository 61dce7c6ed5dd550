"""System test of ``dags/example_pyconnect_fanout.py``: plan, three mapped connector tasks, merge, report."""

from __future__ import annotations

from tests.system.utils import get_test_run, load_example

dag = load_example("example_pyconnect_fanout")

test_run = get_test_run(dag)
