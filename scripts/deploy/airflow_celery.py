"""Airflow 3 with the CeleryExecutor on one machine, as on several: PostgreSQL as the metadata database, Redis as
Celery's broker, an API server, a scheduler, a DAG processor, a triggerer and Celery workers of their own.

API (stable; the distributed example, its tests and the benchmarks use it)::

    with airflow_celery(base, dags_folder=..., metadata_url=..., broker_url=..., env={...}) as af:
        af.env                      # the environment every Airflow process of the deployment shares
        af.api_url                  # "http://127.0.0.1:PORT" (the UI; the execution API under /execution/)
        af.airflow("dags", "unpause", "my_dag")     # one CLI command, bounded, its output
        af.workers["worker-a"].kill()               # SIGKILL a worker's whole process group (a machine lost)
        af.workers["worker-a"].start()              # start it again, same name and directory
        af.query("SELECT ...")      # rows from the metadata database

- Each worker has its own directory (its ``AIRFLOW_HOME``: task logs, anything a task writes relative to it) and
  its own hostname as Airflow records it on the task instances it runs (``[core] hostname_callable``:
  :mod:`deploy.worker_hostname`); the workers share only the DAGs folder, as machines sharing a DAG bundle would.
- A lost worker is seen within ``heartbeat_timeout_s`` (``[scheduler] task_instance_heartbeat_timeout``, 300 s by
  default in Airflow): its running task instances are failed and, with retries left, queued again for any worker.
- Every wait is bounded and names what it waited for; on exit every process group gets SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .servers import free_port, spawn, stop_group, tail, wait_for
from .worker_hostname import WORKER_HOSTNAME_ENV

__all__ = ["AirflowCelery", "CeleryWorker", "airflow_celery"]

SCRIPTS = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 240.0


def _bin() -> Path:
    return Path(sys.executable).parent


@dataclass
class CeleryWorker:
    """One ``airflow celery worker``: its name (its hostname in Airflow), directory, environment and process."""

    name: str
    home: Path
    env: dict[str, str]
    concurrency: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.home / "worker.log"

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.proc = spawn([str(_bin() / "airflow"), "celery", "worker", "--concurrency", str(self.concurrency),
                           "--celery-hostname", f"{self.name}@%h", "--without-mingle", "--without-gossip"],
                          self.log, env=self.env, cwd=self.home)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the worker and every process it started (its task supervisors and tasks): a machine lost."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def ready(self, since: int = 0) -> bool:
        """Whether the worker said ``ready.`` in its log (after the first ``since`` bytes of it)."""
        try:
            with open(self.log, "rb") as f:
                f.seek(since)
                return b"ready." in f.read()
        except OSError:
            return False

    def restart(self, timeout_s: float = 120.0) -> None:
        """Start the worker again after :meth:`kill` (the machine back, same name) and wait until it is ready."""
        if self.alive():
            return
        since = self.log.stat().st_size if self.log.exists() else 0
        self.start()
        wait_for(f"Celery worker {self.name} to be ready again", lambda: self.ready(since), timeout_s,
                 proc=self.proc, log=self.log)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_group(self.proc, timeout_s=20)


@dataclass
class AirflowCelery:
    """The running deployment (see the module docstring)."""

    env: dict[str, str]
    api_url: str
    metadata_url: str
    workers: dict[str, CeleryWorker] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    home: Path = Path()

    def airflow(self, *args: str, timeout_s: float = 180, check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            out = subprocess.run([str(_bin() / "airflow"), *args], env=self.env, capture_output=True, text=True,
                                 timeout=timeout_s, cwd=self.home, check=False)
        except subprocess.TimeoutExpired as exc:
            raise TimeoutError(f"`airflow {' '.join(args)}` did not finish within {timeout_s:.0f} s") from exc
        if check and out.returncode != 0:
            raise RuntimeError(f"`airflow {' '.join(args)}` exited {out.returncode}:\n"
                               f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        return out

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.metadata_url.replace("postgresql+psycopg://", "postgresql://"),
                             connect_timeout=10) as conn:
            return list(conn.execute(sql, params).fetchall())

    def logs(self) -> str:
        """The tails of every process's log, for a failure message."""
        parts = [f"--- {name} ---\n{tail(self.home / f'{name}.log', 2000)}" for name in self.procs]
        parts += [f"--- {w.name} ---\n{tail(w.log, 2000)}" for w in self.workers.values()]
        return "\n".join(parts)

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"airflow {name} exited with {proc.returncode}\n{tail(self.home / f'{name}.log')}")


def _api_up(url: str) -> bool:
    try:
        urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=2).close()
        return True
    except OSError:
        return False


@contextlib.contextmanager
def airflow_celery(base: Path, *, dags_folder: Path, metadata_url: str, broker_url: str,
                   env: Mapping[str, str] | None = None, workers: tuple[str, ...] = ("worker-a", "worker-b"),
                   concurrency: int = 2, heartbeat_timeout_s: int = 30,
                   start_timeout_s: float = START_TIMEOUT_S) -> Iterator[AirflowCelery]:
    """Migrate the metadata database, start the API server, scheduler, DAG processor, triggerer and ``workers``;
    yield the :class:`AirflowCelery`; stop everything on exit."""
    home = base / "airflow"
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    api_url = f"http://127.0.0.1:{port}"
    shared = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    shared.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",  # the 5 s default fails tasks on a busy machine
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_url,
        # psycopg 3 for Airflow's async engine too (Airflow derives asyncpg otherwise, which is not installed)
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": metadata_url.replace("postgresql+psycopg://",
                                                                          "postgresql+psycopg_async://"),
        "AIRFLOW__CELERY__BROKER_URL": broker_url,
        "AIRFLOW__CELERY__RESULT_BACKEND": broker_url.rsplit("/", 1)[0] + "/1",
        "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(concurrency),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": api_url,
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{api_url}/execution/",
        # every process signs and checks the execution API's tokens with the same secret, as on machines sharing it
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(heartbeat_timeout_s),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "PATH": os.pathsep.join([str(_bin()), shared.get("PATH", "")]),
        "PYTHONUNBUFFERED": "1",
    })
    shared.update(env or {})
    af = AirflowCelery(env=shared, api_url=api_url, metadata_url=metadata_url, home=home)
    try:
        af.airflow("db", "migrate", timeout_s=300)
        for name, cmd in (("api-server", ["api-server"]), ("scheduler", ["scheduler"]),
                          ("dag-processor", ["dag-processor"]), ("triggerer", ["triggerer"])):
            af.procs[name] = spawn([str(_bin() / "airflow"), *cmd], home / f"{name}.log", env=shared, cwd=home)
        for name in workers:
            wenv = dict(shared)
            whome = base / name
            wenv.update({
                "AIRFLOW_HOME": str(whome),
                "AIRFLOW__CORE__HOSTNAME_CALLABLE": "deploy.worker_hostname.hostname",
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
                WORKER_HOSTNAME_ENV: name,
                "PYTHONPATH": os.pathsep.join(p for p in (str(SCRIPTS), shared.get("PYTHONPATH", "")) if p),
            })
            worker = CeleryWorker(name, whome, wenv, concurrency)
            worker.start()
            af.workers[name] = worker
        wait_for(f"the Airflow API server at {api_url}", lambda: _api_up(api_url), start_timeout_s,
                 proc=af.procs["api-server"], log=home / "api-server.log")
        for worker in af.workers.values():
            assert worker.proc is not None
            wait_for(f"Celery worker {worker.name} ready", worker.ready, start_timeout_s, proc=worker.proc,
                     log=worker.log)
        af.check_alive()
        yield af
    finally:
        for worker in af.workers.values():
            worker.stop()
        for proc in af.procs.values():
            stop_group(proc, timeout_s=20)


def wait_dag_runs(af: AirflowCelery, dag_id: str, count: int, timeout_s: float) -> list[tuple[Any, ...]]:
    """Wait until ``count`` runs of ``dag_id`` ended; fail naming the runs' states when one failed or the bound
    passed. Returns ``(run_id, logical_date, state)`` rows."""
    deadline = time.monotonic() + timeout_s
    rows: list[tuple[Any, ...]] = []
    while time.monotonic() < deadline:
        af.check_alive()
        rows = af.query("SELECT run_id, logical_date, state FROM dag_run WHERE dag_id = %s ORDER BY logical_date",
                        dag_id)
        if any(state == "failed" for _, _, state in rows):
            raise RuntimeError(f"a run of {dag_id} failed: {rows}\n{task_states(af, dag_id)}")
        if len([r for r in rows if r[2] == "success"]) >= count:
            return rows
        time.sleep(2)
    raise TimeoutError(f"waited {timeout_s:.0f} s for {count} successful runs of {dag_id}: {rows}\n"
                       f"{task_states(af, dag_id)}\n{af.logs()}")


def task_states(af: AirflowCelery, dag_id: str) -> list[tuple[Any, ...]]:
    """``(run_id, task_id, map_index, state, try_number, hostname)`` of every task instance of ``dag_id``."""
    return af.query("SELECT run_id, task_id, map_index, state, try_number, hostname FROM task_instance "
                    "WHERE dag_id = %s ORDER BY run_id, task_id, map_index", dag_id)


__all__ += ["task_states", "wait_dag_runs"]
