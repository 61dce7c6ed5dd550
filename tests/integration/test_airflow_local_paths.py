"""What may not cross machines (issue 33.3): under an executor that may run tasks on several machines, a connector
whose store or destination is on the worker's own disk fails before moving any record, with one error naming the
path, the executor and the fix; ``[pyconnect] workers_share_disk`` turns the check off; ``LocalExecutor`` never
checks. Real Airflow (``airflow dags test``, ``[core] executor`` as configured), the embedded store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.support.airflow_env import AirflowEnv, conn_env, shared_airflow_env

DAG_ID = "pyconnect_test_local_paths"


@pytest.fixture(scope="module")
def af(tmp_path_factory: pytest.TempPathFactory) -> AirflowEnv:
    return shared_airflow_env(tmp_path_factory)


_DAYS = iter(f"2026-02-{d:02d}" for d in range(1, 29))


def _run(af: AirflowEnv, tmp_path: Path, **settings: str) -> tuple[dict[str, str], str]:
    """``airflow dags test`` of the DAG on a day of its own: the task states and the run's output."""
    env = {**conn_env("pyconnect_test", f"sqlite:///{tmp_path / 'store.db'}"),
           "PYCONNECT_TEST_LP_OUT": str(tmp_path / "out"), **settings}
    day = next(_DAYS)
    run = af.airflow("dags", "test", DAG_ID, day, extra_env=env, check=False, timeout=240)
    with sqlite3.connect(af.home / "airflow.db") as conn:
        rows = conn.execute("SELECT ti.task_id, ti.state FROM task_instance ti JOIN dag_run r ON r.run_id = ti.run_id "
                            "AND r.dag_id = ti.dag_id WHERE ti.dag_id = ? AND date(r.logical_date) = ?",
                            (DAG_ID, day)).fetchall()
    return dict(rows), run.stdout + run.stderr


def _records_in_store(tmp_path: Path) -> int:
    db = tmp_path / "store.db"
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return sum(conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables if t.startswith("topic"))


def test_the_embedded_store_under_celery_fails_before_moving_anything(af: AirflowEnv, tmp_path: Path) -> None:
    states, output = _run(af, tmp_path, AIRFLOW__CORE__EXECUTOR="CeleryExecutor")
    assert states["source"] == "failed" and states["sink"] in ("upstream_failed", None), states
    assert f"the embedded store {tmp_path / 'store.db'}" in output
    assert "CeleryExecutor" in output and "Kafka backend" in output and "nothing was moved" in output
    assert _records_in_store(tmp_path) == 0
    assert not (tmp_path / "out").exists()


def test_a_file_sink_on_the_workers_disk_under_celery_fails_naming_it(af: AirflowEnv, tmp_path: Path) -> None:
    # the store accepted as shared (the user said so), the FileSink's directory still refused: ext4/tmpfs here
    states, output = _run(af, tmp_path, AIRFLOW__CORE__EXECUTOR="CeleryExecutor",
                          AIRFLOW__PYCONNECT__ALLOW_EMBEDDED_DEFAULT="True")
    assert states == {"source": "success", "sink": "failed"}, states
    assert f"the FileSink directory {tmp_path / 'out'} is on this worker's own disk" in output
    assert "NFS or CephFS" in output and "workers_share_disk" in output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.jsonl"))


def test_workers_share_disk_and_the_local_executor_run_as_before(af: AirflowEnv, tmp_path: Path) -> None:
    for i, settings in enumerate(({"AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                                   "AIRFLOW__PYCONNECT__WORKERS_SHARE_DISK": "True"},
                                  {"AIRFLOW__CORE__EXECUTOR": "LocalExecutor"})):
        run_dir = tmp_path / str(i)
        run_dir.mkdir()
        states, output = _run(af, run_dir, **settings)
        assert states == {"source": "success", "sink": "success"}, (settings, output[-3000:])
        lines = [json.loads(x) for f in (run_dir / "out").rglob("*.jsonl") for x in f.read_text().splitlines()]
        assert sorted(v["id"] for v in lines) == list(range(40))
