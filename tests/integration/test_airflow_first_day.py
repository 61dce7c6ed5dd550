"""A new user's first day: a daily DAG over a folder per day (``{{ ds }}``), run with ``airflow dags test`` (Airflow's
``dag.test()``) in the session's real Airflow home. A run that reads nothing says why: an empty folder is a warning
naming the folder (or a failure with ``on_empty="fail"``), a rerun of a committed day says it was committed before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.airflow_env import AirflowEnv, conn_env, shared_airflow_env

pytestmark = pytest.mark.airflow

DAG_ID = "pyconnect_test_first_day"
DAY = "2026-11-28"


@pytest.fixture(scope="module")
def af(tmp_path_factory: pytest.TempPathFactory) -> AirflowEnv:
    return shared_airflow_env(tmp_path_factory)


def run_day(af: AirflowEnv, tmp_path: Path, on_empty: str = "warn") -> tuple[dict[str, Any] | None, str]:
    """``airflow dags test`` of DAY: the ingest task's XCom (None when it pushed none) and the run's output."""
    out = tmp_path / "out.json"
    out.unlink(missing_ok=True)
    env = {**conn_env("pyconnect_test", f"sqlite:///{tmp_path / 'store.db'}"), "PYCONNECT_TEST_ROOT": str(tmp_path),
           "PYCONNECT_TEST_ON_EMPTY": on_empty, "PYCONNECT_TEST_OUT": str(out)}
    run = af.airflow("dags", "test", DAG_ID, DAY, extra_env=env, check=False)
    logs = run.stdout + run.stderr
    assert out.exists(), f"the report task did not run:\n{logs[-6000:]}"
    return json.loads(out.read_text())["ingest"], logs


def test_empty_folder_warns_naming_it_then_data_then_committed_before(af: AirflowEnv, tmp_path: Path) -> None:
    folder = tmp_path / DAY
    folder.mkdir()
    xcom, logs = run_day(af, tmp_path)
    assert xcom is not None, logs[-4000:]
    assert xcom["records"] == 0 and xcom["empty"]["reason"] == "no_input", xcom
    assert xcom["empty"]["looked_at"][0]["where"] == str(folder)
    warning = [line for line in logs.splitlines() if "is empty: no input found at" in line]
    assert warning and "warning" in warning[0].lower().split("]")[0] and str(folder) in warning[0], logs[-4000:]
    assert "committed before" not in logs

    (folder / "orders.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(5)))
    xcom, logs = run_day(af, tmp_path)
    assert xcom is not None and xcom["records"] == 5 and xcom["empty"] is None, xcom
    assert "is empty" not in logs

    xcom, logs = run_day(af, tmp_path, on_empty="fail")  # a rerun is never an empty interval
    assert xcom is not None and xcom["records"] == 0 and xcom["interval_records"] == 5, xcom
    assert xcom["empty"]["reason"] == "committed_before", xcom
    assert "This attempt wrote nothing new: the interval was committed before (it holds 5 records)" in logs
    assert "is empty" not in logs


def test_empty_folder_fails_with_on_empty_fail_or_skips_with_skip(af: AirflowEnv, tmp_path: Path) -> None:
    folder = tmp_path / DAY
    folder.mkdir()
    xcom, logs = run_day(af, tmp_path, on_empty="fail")
    assert xcom is None, xcom  # the task failed: no return value
    failed = [line for line in logs.splitlines() if "is empty: no input found at" in line and "on_empty='fail'" in line]
    assert failed and str(folder) in failed[0], logs[-4000:]
    assert "failed" in logs.lower()

    xcom, logs = run_day(af, tmp_path, on_empty="skip")
    assert xcom is None, xcom  # skipped: no return value, the report task ran (all_done)
    skipped = [line for line in logs.splitlines() if "is empty: no input found at" in line and "on_empty='skip'" in line]
    assert skipped and str(folder) in skipped[0], logs[-4000:]
    assert any("Skipping task." in line and "on_empty='skip'" in line for line in logs.splitlines()), logs[-4000:]


CONTROL_DAG = '''
from datetime import datetime
from airflow.sdk import DAG
from airflow.providers.standard.operators.empty import EmptyOperator

with DAG(dag_id="first_day_control", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    EmptyOperator(task_id="noop")
'''


def _query(home: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    import sqlite3

    db = sqlite3.connect(f"file:{home / 'airflow.db'}?mode=ro", uri=True, timeout=10)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def _wait(what: str, check: Any, bound: float, proc: Any, log: Path) -> None:
    import time

    deadline = time.monotonic() + bound
    while not check():
        assert proc.poll() is None, "airflow standalone exited:\n" + log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"waited {bound} s for {what}\n" + log.read_text()[-3000:]
        time.sleep(1)


def test_a_backfill_of_a_paused_dag_waits_until_it_is_unpaused(tmp_path: Path) -> None:
    """docs/running.md: ``backfill create`` on a paused DAG succeeds, its run stays queued while the scheduler runs
    other DAGs' runs, and it runs once the DAG is unpaused."""
    import shutil

    from tests.support.airflow_env import DAG_FILES, stop_group
    from tests.support.ports import free_port

    home = tmp_path / "home"
    (home / "dags").mkdir(parents=True)
    shutil.copy(DAG_FILES / f"{DAG_ID}.py", home / "dags")
    (home / "dags" / "first_day_control.py").write_text(CONTROL_DAG)
    (tmp_path / DAY).mkdir()
    (tmp_path / DAY / "orders.jsonl").write_text('{"id": 1}\n{"id": 2}\n')
    af = AirflowEnv(home)
    port = free_port()
    env = {**conn_env("pyconnect_test", f"sqlite:///{tmp_path / 'store.db'}"), "PYCONNECT_TEST_ROOT": str(tmp_path),
           "PYCONNECT_TEST_OUT": str(tmp_path / "out.json"),
           "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__HOST": "127.0.0.1",
           "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
           # other sessions on this machine may run Airflow too: no fixed log server port
           "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
           "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
           "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False", "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5"}
    af.airflow("db", "migrate", extra_env=env, timeout=180)
    log = tmp_path / "standalone.log"
    standalone = af.popen("standalone", extra_env=env, log=log, new_session=True)
    try:
        stored = "SELECT count(*) FROM dag WHERE dag_id IN (?, ?)"
        _wait("the DAG processor to store both DAGs", lambda: (home / "airflow.db").exists() and _query(
            home, stored, DAG_ID, "first_day_control") == [(2,)], 300, standalone, log)
        assert _query(home, "SELECT is_paused FROM dag WHERE dag_id = ?", DAG_ID) == [(1,)]  # paused at creation
        details = af.airflow("dags", "details", DAG_ID, extra_env=env).stdout
        assert any("is_paused" in line and "True" in line for line in details.splitlines()), details
        for attempt in range(6):  # the SQLite metadata DB may be locked by the scheduler: the create rolls back
            created = af.airflow("backfill", "create", "--dag-id", DAG_ID, "--from-date", DAY, "--to-date", DAY,
                                 extra_env=env, check=False)
            if created.returncode == 0:
                break
            assert "database is locked" in created.stdout + created.stderr and attempt < 5, created
        runs = "SELECT state FROM dag_run WHERE dag_id = ?"
        assert _query(home, runs, DAG_ID) == [("queued",)]
        # the scheduler goes on working: a run of another DAG, triggered after the backfill, runs to the end...
        af.airflow("dags", "unpause", "first_day_control", extra_env=env)
        af.airflow("dags", "trigger", "first_day_control", extra_env=env)
        _wait("the control DAG's run", lambda: _query(home, runs, "first_day_control") == [("success",)], 240,
              standalone, log)
        # ...while the paused DAG's backfill run still waits, with no task started
        assert _query(home, runs, DAG_ID) == [("queued",)]
        assert _query(home, "SELECT count(*) FROM task_instance WHERE dag_id = ? AND start_date IS NOT NULL",
                      DAG_ID) == [(0,)]
        af.airflow("dags", "unpause", DAG_ID, extra_env=env)
        _wait("the backfill run after unpausing", lambda: _query(home, runs, DAG_ID) == [("success",)], 240,
              standalone, log)
    finally:
        stop_group(standalone, grace=10, settle=5)
    assert json.loads((tmp_path / "out.json").read_text())["ingest"]["records"] == 2
