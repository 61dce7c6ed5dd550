"""A real Airflow 3 environment for tests: one migrated ``AIRFLOW_HOME`` per pytest session.

``airflow db migrate`` runs once per session (a marker file in the session's base temp dir says it
ran; a file lock keeps parallel workers from racing), whichever test module asks first. Every
Airflow command runs in a subprocess with ``AIRFLOW_HOME`` and ``DAGS_FOLDER`` pointing there, so
nothing leaks between the test process and Airflow. The test DAG files of
``tests/support/dag_files`` and the repository's ``dags/`` are copied into the
DAGs folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import REPO

BIN = Path(sys.executable).parent
DAG_FILES = Path(__file__).resolve().parent / "dag_files"


POLICY_ENTRY_POINT = Path(__file__).resolve().parent / "policy_entry_point"
"""A directory declaring ``pyproject.toml``'s ``airflow.policy`` entry point, put on the path of Airflow's
processes when the installed airflow-pyconnect predates it (an editable install made before the entry point
existed), so they load the provider's cluster policy as an install of this checkout does."""


@functools.cache
def _policy_path() -> list[str]:
    from importlib.metadata import entry_points

    declared = any(e.value == "airflow_pyconnect.policy" for e in entry_points(group="airflow.policy"))
    return [] if declared else [str(POLICY_ENTRY_POINT)]


@dataclass
class AirflowEnv:
    home: Path

    @property
    def dags(self) -> Path:
        return self.home / "dags"

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update({
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            # A task's supervisor gives the API server 5 s per call by default ([workers] execution_api_timeout);
            # on a busy 2-core CI machine the first call of three tasks starting at once timed out and the tasks
            # failed before running (Airflow's own advice under load: raise it)
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",
            "PYTHONPATH": os.pathsep.join([str(REPO), *_policy_path(), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        })
        env.update(extra or {})
        return env

    def airflow(self, *args: str, extra_env: Mapping[str, str] | None = None, timeout: float = 240,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run one ``airflow`` CLI command (bounded by ``timeout`` seconds) and return its output."""
        cmd = [str(BIN / "airflow"), *args]
        try:
            out = subprocess.run(cmd, env=self.env(extra_env), capture_output=True, text=True, timeout=timeout,
                                 cwd=self.home)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"`airflow {' '.join(args)}` did not finish within {timeout} s:\n"
                                 f"{_tail(exc.stdout)}\n{_tail(exc.stderr)}") from exc
        if check and out.returncode != 0:
            raise AssertionError(f"`airflow {' '.join(args)}` exited {out.returncode}:\n"
                                 f"{_tail(out.stdout)}\n{_tail(out.stderr)}")
        return out

    def popen(self, *args: str, extra_env: Mapping[str, str] | None = None, log: Path,
              new_session: bool = False) -> subprocess.Popen[bytes]:
        """Start ``airflow`` in the background, output to ``log`` (the caller bounds the wait); ``new_session``:
        in a process group of its own, for :func:`stop_group` (``airflow standalone`` and its children)."""
        f = open(log, "wb")  # noqa: SIM115 - closed by the caller through the process
        return subprocess.Popen([str(BIN / "airflow"), *args], env=self.env(extra_env), stdout=f,
                                stderr=subprocess.STDOUT, cwd=self.home, start_new_session=new_session)

    def query(self, sql: str, *args: object) -> list[tuple[object, ...]]:
        """Rows of ``sql`` on this home's metadata database (SQLite, opened read-only)."""
        import sqlite3

        db = sqlite3.connect(f"file:{self.home / 'airflow.db'}?mode=ro", uri=True, timeout=10)
        try:
            return db.execute(sql, args).fetchall()
        finally:
            db.close()

    def python(self, code: str, extra_env: Mapping[str, str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run Python code in this environment (bounded), failing with its output if it fails."""
        out = subprocess.run([sys.executable, "-c", code], env=self.env(extra_env), capture_output=True,
                             text=True, timeout=timeout, cwd=self.home)
        if out.returncode != 0:
            raise AssertionError(f"python exited {out.returncode}:\n{_tail(out.stdout)}\n{_tail(out.stderr)}")
        return out


def _tail(text: str | bytes | None, n: int = 6000) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return text[-n:]


def conn_env(conn_id: str, url: str) -> dict[str, str]:
    """An ``AIRFLOW_CONN_*`` variable defining a ``pyconnect`` connection to ``url``."""
    import json

    return {f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps({"conn_type": "pyconnect", "host": url})}


def shared_airflow_env(tmp_path_factory: pytest.TempPathFactory) -> AirflowEnv:
    """The session's migrated Airflow home (created by the first caller, reused by the others)."""
    base = tmp_path_factory.getbasetemp()
    home = base / "airflow_home"
    with open(base / "airflow_home.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        env = AirflowEnv(home)
        if not (home / ".migrated").exists():
            env.dags.mkdir(parents=True, exist_ok=True)
            for src in [*DAG_FILES.glob("*.py"), REPO / "dags" / "example_pyconnect_backfill.py"]:
                shutil.copy(src, env.dags / src.name)
            t0 = time.monotonic()
            env.airflow("db", "migrate", timeout=180)
            (home / ".migrated").write_text(f"{time.monotonic() - t0:.1f}\n")
    return env


def stop_group(proc: subprocess.Popen[bytes], grace: float, settle: float = 0.0) -> None:
    """Stop an Airflow process a test started in a session of its own (``start_new_session=True``: the server
    or ``airflow standalone`` and every process it started): SIGINT to the group, ``grace`` seconds for the leader to
    exit (else SIGTERM to it), ``settle`` seconds for the rest, then SIGKILL to whatever is left of the group. The
    tests check their data afterwards, on files no process of the group still writes. A group that is already gone
    (a server that exited at start-up) is fine."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.terminate()
    time.sleep(settle)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def metadata_rows(home: Path, sql: str, *args: object) -> list[tuple[object, ...]]:
    """Rows of a query on the metadata database (SQLite, read-only) of the Airflow home ``home``."""
    import sqlite3

    db = sqlite3.connect(f"file:{home / 'airflow.db'}?mode=ro", uri=True, timeout=10)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


__all__ = ["REPO", "AirflowEnv", "conn_env", "metadata_rows", "shared_airflow_env", "stop_group"]
