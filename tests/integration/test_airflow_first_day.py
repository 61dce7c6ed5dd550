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


def test_empty_folder_fails_with_on_empty_fail(af: AirflowEnv, tmp_path: Path) -> None:
    folder = tmp_path / DAY
    folder.mkdir()
    xcom, logs = run_day(af, tmp_path, on_empty="fail")
    assert xcom is None, xcom  # the task failed: no return value
    failed = [line for line in logs.splitlines() if "is empty: no input found at" in line and "on_empty='fail'" in line]
    assert failed and str(folder) in failed[0], logs[-4000:]
    assert "failed" in logs.lower()
