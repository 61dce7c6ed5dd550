"""The README's first command, ``scripts/run_example.py``, and its ``--ui`` on a port that is not 8080.

- The example's runs go through the LocalExecutor (``airflow dags test --use-executor`` against a
  short-lived API server), so every task instance has a log the UI's log view can show; the script
  checks that through the UI's own REST call and fails otherwise.
- ``--ui --port P``: ``airflow standalone`` on P; the example's task logs are served there; unpausing the
  example DAG queues only its bounded catch-up (``end_date``), never a run per day since 2026-01-01;
  and a scheduled run's tasks execute (task execution reaches the API on P, not on 8080).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_airflow_backfill import _query
from tests.support.airflow_env import stop_group
from tests.support.ports import free_port

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "example_orders_pipeline"
BOUND_S = 300


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYSPARK", "PYCONNECT"))}


class Api:
    def __init__(self, port: int, home: Path) -> None:
        self.base = f"http://localhost:{port}"
        passwords = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())
        user, password = next(iter(passwords.items()))
        self.token = self.call("POST", "/auth/token", {"username": user, "password": password},
                               auth=False)["access_token"]

    def call(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.base + path, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def log_events(self, run_id: str, task_id: str, try_number: int = 1) -> list[str]:
        got = self.call("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{urllib.parse.quote(run_id, safe='')}/"
                               f"taskInstances/{task_id}/logs/{try_number}?full_content=true")
        return [str(e.get("event", "")) for e in got["content"] if isinstance(e, dict)]


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://localhost:{port}/api/v2/monitor/health", timeout=2):
            return True
    except OSError:
        return False


def test_run_example_then_its_ui_on_another_port(tmp_path: Path) -> None:
    home = tmp_path / "example"
    run = subprocess.run([sys.executable, "scripts/run_example.py", "--home", str(home), "--days", "1",
                          "--rerun", ""], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "run_example: OK" in run.stdout
    assert "Task logs shown by the UI's log API: 7 of 7 task instances" in run.stdout, run.stdout[-2000:]
    af_home = home / "airflow"
    (manual_run,) = _query(af_home, "SELECT run_id FROM dag_run WHERE dag_id = ?", DAG_ID)

    port = free_port()
    log = tmp_path / "ui.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "scripts/run_example.py", "--home", str(home), "--ui",
                                 "--port", str(port)], cwd=REPO, env=_env(), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + BOUND_S
        while not _healthy(port):
            assert proc.poll() is None, "run_example --ui exited:\n" + log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, f"no API on port {port} after {BOUND_S} s:\n" + \
                log.read_text(errors="replace")[-3000:]
            time.sleep(1)
        api = Api(port, af_home)

        # the example's task logs, as the UI's log view fetches them
        ingest = api.log_events(manual_run[0], "ingest")
        assert any("source connector" in e for e in ingest), ingest[-10:]
        assert any("sink connector" in e.lower() for e in api.log_events(manual_run[0], "archive"))

        # unpausing queues the bounded catch-up only (end_date), never a run per day since 2026-01-01
        api.call("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False})
        # "Clear" in the UI reruns the example's run through the scheduler and the LocalExecutor: its tasks
        # execute (task execution reaches the API on `port`, not 8080) and the rerun writes nothing twice
        run_id = manual_run[0]
        api.call("POST", f"/api/v2/dags/{DAG_ID}/clearTaskInstances",
                 {"dag_run_id": run_id, "dry_run": False, "only_failed": False, "reset_dag_runs": True})
        deadline = time.monotonic() + BOUND_S
        sql = "SELECT task_id, state, try_number FROM task_instance WHERE run_id = ? AND task_id = 'archive'"
        while (state := _query(af_home, sql, run_id)) != [("archive", "success", 2)]:
            failed = _query(af_home, "SELECT task_id, state FROM task_instance WHERE run_id = ? AND state = 'failed'",
                            run_id)
            assert not failed, failed
            assert proc.poll() is None, "run_example --ui exited:\n" + log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, f"the cleared run did not finish within {BOUND_S} s ({state}):\n" \
                + log.read_text(errors="replace")[-3000:]
            time.sleep(2)
        events = api.log_events(run_id, "ingest", 2)
        assert any("source connector" in e and ": 0 records" in e for e in events), events[-10:]  # nothing twice
        runs = _query(af_home, "SELECT run_type, logical_date FROM dag_run WHERE dag_id = ?", DAG_ID)
        scheduled = [d for kind, d in runs if kind == "scheduled"]
        assert len(scheduled) <= 3 and all(str(d).startswith("2026-01-0") for d in scheduled), runs
    finally:
        stop_group(proc, grace=90)
