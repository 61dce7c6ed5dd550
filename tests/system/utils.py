"""``get_test_run``: an example DAG of ``dags/`` as a pytest test, the way Airflow's providers run their system tests.

Airflow's ``tests_common.test_utils.system_tests.get_test_run(dag)`` returns a pytest-collectable ``test_run`` that
runs ``dag.test()`` and asserts the DAG run succeeded. Ours does the same, with three differences:

- the example DAGs stay in ``dags/`` (the project's fixed layout, which the docs quote): each system test module
  loads its DAG object from that file by path (:func:`load_example`: Airflow's ``DagBag`` parsing one file, no
  database), as the DAG processor would;
- this pytest process has Airflow configured for the unit tests, so ``dag.test()`` runs in one worker process per
  session (:class:`DagTestWorker`, the ``dag_test_worker`` fixture of ``tests/system/conftest.py``) whose
  ``AIRFLOW_HOME`` is the session's migrated one (:func:`tests.support.airflow_env.shared_airflow_env`) and whose
  DAGs folder is ``dags/``. One process for all of them because ``dag.test()``'s first run in a process pays
  about 6 s of Airflow start-up (its in-process execution API); later runs pay only their tasks. Each test gives
  the run its own environment: its own embedded store (connection ``pyconnect_default``) and example data
  directory under ``tmp_path``, plus what the module passes (``env``; ``env_fixtures``: fixtures whose values are
  environment mappings, e.g. a PostgreSQL connection);
- it asserts that **every task instance** succeeded (``success`` for each task and map index), not only the
  DAG run's state, and names those that did not, with the worker's log of the run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO
from tests.support.airflow_env import AirflowEnv, conn_env

DAGS = REPO / "dags"

_WORKER = r"""
import json, os, sys, traceback
from datetime import datetime
from airflow.dag_processing.dagbag import DagBag
base_env = dict(os.environ)
for line in sys.stdin:
    req = json.loads(line)
    os.environ.clear()
    os.environ.update({**base_env, **req["env"]})
    try:
        bag = DagBag(dag_folder=req["path"], collect_dags=True)
        if bag.import_errors:
            raise RuntimeError(f"the DAG file does not import: {bag.import_errors}")
        kwargs = dict(req["kwargs"])
        if "logical_date" in kwargs:
            kwargs["logical_date"] = datetime.fromisoformat(kwargs["logical_date"])
        dag_run = bag.dags[req["dag_id"]].test(**kwargs)
        tasks = {ti.task_id + (f"[{ti.map_index}]" if ti.map_index >= 0 else ""): str(ti.state)
                 for ti in dag_run.get_task_instances()}
        result = {"run": str(dag_run.state), "tasks": tasks}
    except Exception:
        result = {"error": traceback.format_exc()}
    with open(req["result"] + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(req["result"] + ".tmp", req["result"])
    print(f"dag_test_worker: done {req['dag_id']}", flush=True)
"""


class DagTestWorker:
    """One Python process running ``dag.test()`` for each request, in an Airflow home whose DAGs folder is
    ``dags/`` (``dag.test()`` stores the DAGs of its folder's bundle before the run). Its output goes to ``log``."""

    def __init__(self, af: AirflowEnv, log: Path) -> None:
        self.log = log
        self._out = open(log, "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE, stdout=self._out,
                                     stderr=subprocess.STDOUT, cwd=af.home,
                                     env=af.env({"AIRFLOW__CORE__DAGS_FOLDER": str(DAGS)}))

    def run(self, path: str, dag_id: str, kwargs: Mapping[str, Any], env: Mapping[str, str], result: Path,
            timeout: float) -> tuple[dict[str, Any], str]:
        """``(result, the run's log)`` of ``dag.test(**kwargs)`` on ``dag_id`` of ``path``, within ``timeout`` s."""
        start = self.log.stat().st_size
        assert self.proc.stdin is not None and self.proc.poll() is None, f"the worker exited: {self._tail(0)}"
        request = {"path": path, "dag_id": dag_id, "kwargs": dict(kwargs), "env": dict(env), "result": str(result)}
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while not result.exists():
            if self.proc.poll() is not None:
                raise AssertionError(f"the dag.test() worker exited {self.proc.returncode}:\n{self._tail(start)}")
            if time.monotonic() > deadline:
                self.close()  # the next test starts a fresh worker
                raise AssertionError(f"dag.test() of {dag_id} did not finish within {timeout} s:\n{self._tail(start)}")
            time.sleep(0.1)
        return json.loads(result.read_text()), self._tail(start)

    def _tail(self, start: int, n: int = 6000) -> str:
        with open(self.log, "rb") as f:
            f.seek(start)
            return f.read().decode(errors="replace")[-n:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self._out.close()


def load_example(name: str) -> Any:
    """The DAG object ``name`` of ``dags/<name>.py`` (parsed as the DAG processor parses the file)."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS / f"{name}.py"), collect_dags=True)
    assert not bag.import_errors, bag.import_errors
    return bag.dags[name]


def get_test_run(dag: Any, *, env: Mapping[str, str] | None = None, env_fixtures: tuple[str, ...] = (),
                 prepare: Callable[[Path], object] | None = None, timeout: float = 300,
                 logical_date: datetime | None = None) -> Callable[..., None]:
    """A pytest test running ``dag.test()`` on ``dag`` and asserting every task instance succeeded.

    ``prepare(data_dir)`` runs first, given the example's data directory (``PYCONNECT_EXAMPLE_DIR`` and
    ``PYCONNECT_EXAMPLE_DATA``), e.g. to write the input files an upstream system would have dropped."""
    kwargs = {"logical_date": logical_date.isoformat()} if logical_date else {}

    @pytest.mark.airflow
    def test_run(dag_test_worker: DagTestWorker, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        run_env = {**conn_env("pyconnect_default", f"sqlite:///{tmp_path / 'pyconnect.db'}"),
                   "PYCONNECT_EXAMPLE_DIR": str(tmp_path / "data"), "PYCONNECT_EXAMPLE_DATA": str(tmp_path / "data"),
                   **(env or {})}
        for name in env_fixtures:
            run_env.update(request.getfixturevalue(name))
        if prepare is not None:
            prepare(tmp_path / "data")
        result, log = dag_test_worker.run(str(Path(dag.fileloc).resolve()), dag.dag_id, kwargs, run_env,
                                          tmp_path / "result.json", timeout)
        assert "error" not in result, f"dag.test() of {dag.dag_id} raised:\n{result.get('error')}\n{log}"
        failed = {task: state for task, state in result["tasks"].items() if state != "success"}
        assert result["tasks"] and not failed and result["run"] == "success", (
            f"{dag.dag_id}: run {result['run']}, task instances not successful: {failed}\n{log}")

    return test_run


__all__ = ["DagTestWorker", "get_test_run", "load_example"]
