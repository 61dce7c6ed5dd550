"""System test of ``dags/example_pyconnect_asset_watch.py`` run by hand (no triggering event: the archive sink has
nothing to read). The watcher firing one run per committed batch: tests/integration/test_airflow_asset_watch.py."""

from __future__ import annotations

from tests.system.utils import get_test_run, load_example

dag = load_example("example_pyconnect_asset_watch")

test_run = get_test_run(dag)
