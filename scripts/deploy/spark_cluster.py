"""A Spark standalone cluster on loopback: one master and N workers, from the pip ``pyspark`` package.

The pip package has no ``sbin/start-master.sh``; each daemon here is ``bin/spark-class`` running
``org.apache.spark.deploy.master.Master`` or ``org.apache.spark.deploy.worker.Worker`` (``spark-class`` ``exec``s the
JVM, so the process is the daemon), each in a process group of its own: a worker's executors are its children and
share its group, so :meth:`SparkWorker.kill` loses the worker and its executors at once, as a machine lost would.

API (stable; the distributed example and the tests use it)::

    with spark_cluster(base_dir, workers=2) as cluster:
        cluster.master_url          # "spark://127.0.0.1:PORT", for --master / SparkSession.builder.master
        cluster.web_url             # the master's web UI, "http://127.0.0.1:PORT" (its JSON at /json)
        cluster.status()            # the master's /json: workers, activeapps, ...
        cluster.workers[0].pid      # the worker JVM's pid (its process group id too)
        cluster.workers[0].kill()   # SIGKILL the worker and the executors it started

- Ports: the master's and workers' RPC ports are 0 (each binds a free one; the master's is read back from its
  JSON), the master's web UI a free port (its JSON is how readiness and progress are seen), the workers' web UIs 0.
- Each worker has its own work dir (``base_dir/worker-N/work``: application jars, executor logs), ``cores`` cores
  and ``memory`` (default 1 core and 1g, two fit 2 shared cores; an application's ``spark.executor.memory`` must
  not exceed it). The daemons themselves run with ``SPARK_DAEMON_MEMORY`` (256m).
- ``env`` is added to every daemon's environment; executors inherit the worker's (``PYTHONPATH`` there makes a
  package importable in Python workers, as installing it on a worker machine would).
- Every wait is bounded (``start_timeout_s``) and names what it waited for; a daemon that exits while starting
  fails the start with the tail of its log. On exit every daemon's group gets SIGTERM, then SIGKILL after
  ``stop_timeout_s``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SparkCluster", "SparkWorker", "spark_cluster", "spark_home"]

DAEMON_MEMORY = "256m"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    """The installed pyspark's directory: ``bin/spark-class``, ``jars/`` (pip's pyspark is a SPARK_HOME)."""
    import pyspark  # the caller's environment must have it: the daemons run its jars

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(no log: {exc})"


def _stop_group(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM the process group, SIGKILL it after ``timeout_s``; a group already gone is fine."""
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 30.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            continue
        # the daemon is gone; its executors (same group) may linger a moment after a SIGTERM
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return


@dataclass
class SparkWorker:
    """One worker daemon: ``pid`` is its JVM and its process group; ``work_dir`` its applications' dirs."""

    index: int
    proc: subprocess.Popen[bytes]
    work_dir: Path
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL the worker and every executor it started (its process group), as losing the machine would."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def address(self) -> str | None:
        """``host:port`` of the worker's RPC endpoint, from its log line "Starting Spark worker HOST:PORT with
        ..." (its port is chosen by the worker); None before it logged it."""
        marker = "Starting Spark worker "
        for line in _lines(self.log):
            if marker in line:
                return line.split(marker, 1)[1].split(" ", 1)[0]
        return None


@dataclass
class SparkCluster:
    """A running cluster: ``master_url`` for ``--master``, ``web_url`` the master's UI, the ``workers``."""

    master_url: str
    web_url: str
    master: subprocess.Popen[bytes]
    master_log: Path
    workers: list[SparkWorker] = field(default_factory=list)

    def status(self, timeout_s: float = 5.0) -> dict[str, Any]:
        """The master's JSON (``/json``): ``workers`` (``id``, ``host``, ``state``, ``coresused``...),
        ``aliveworkers``, ``activeapps``, ``completedapps``."""
        with urllib.request.urlopen(f"{self.web_url}/json", timeout=timeout_s) as resp:
            status: dict[str, Any] = json.loads(resp.read())
            return status

    def entry(self, worker: SparkWorker) -> dict[str, Any] | None:
        """The master's entry for ``worker`` in :meth:`status` (``id``, ``state``, ``coresused``...), matched by
        the RPC address the worker logged; None until the worker registered."""
        address = worker.address()
        for entry in self.status().get("workers", []):
            if address is not None and f"{entry.get('host')}:{entry.get('port')}" == address:
                return dict(entry)
        return None


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def _daemon(cls: str, args: list[str], log: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    spark_class = spark_home() / "bin" / "spark-class"
    with open(log, "wb") as out:
        return subprocess.Popen(["bash", str(spark_class), cls, *args], env=dict(env), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def _wait(what: str, check: Any, procs: list[tuple[str, subprocess.Popen[bytes], Path]], timeout_s: float) -> Any:
    """Poll ``check()`` until it returns a truthy value; fail naming ``what`` after ``timeout_s`` or when a daemon
    in ``procs`` exits meanwhile (with its log's tail)."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        for name, proc, log in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"Spark {name} exited with {proc.returncode} while waiting for {what}; "
                                   f"the end of {log}:\n{_tail(log)}")
        try:
            value = check()
        except (OSError, ValueError) as exc:  # the UI not listening yet, or half-written JSON
            last = exc
        else:
            if value:
                return value
            last = None
        time.sleep(0.25)
    logs = "\n".join(f"--- {log}:\n{_tail(log, 10)}" for _, _, log in procs)
    raise TimeoutError(f"waited {timeout_s:.0f} s for {what} (last error: {last}); logs:\n{logs}")


def _daemon_env(base_dir: Path, env: Mapping[str, str] | None) -> dict[str, str]:
    conf_dir = base_dir / "conf"  # empty: no spark-defaults.conf or spark-env.sh from elsewhere
    conf_dir.mkdir(parents=True, exist_ok=True)
    daemon_env = dict(os.environ)
    daemon_env.update({
        "SPARK_HOME": str(spark_home()),
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        "SPARK_LOG_DIR": str(base_dir / "logs"),
    })
    daemon_env.update(env or {})
    return daemon_env


@contextlib.contextmanager
def spark_cluster(base_dir: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g",
                  env: Mapping[str, str] | None = None, start_timeout_s: float = 120.0,
                  stop_timeout_s: float = 20.0) -> Iterator[SparkCluster]:
    """Start a master and ``workers`` workers under ``base_dir``, wait until the master lists them all ALIVE, and
    yield the :class:`SparkCluster`; stop every daemon (and executor) on exit, also on failure."""
    base_dir = Path(base_dir)
    base_dir.mkdir(parents=True, exist_ok=True)
    daemon_env = _daemon_env(base_dir, env)
    web_port = _free_port()
    master_log = base_dir / "master.log"
    master = _daemon(MASTER_CLASS, ["--host", "127.0.0.1", "--port", "0", "--webui-port", str(web_port)],
                     master_log, daemon_env)
    started: list[SparkWorker] = []
    try:
        cluster = SparkCluster(master_url="", web_url=f"http://127.0.0.1:{web_port}", master=master,
                               master_log=master_log)
        watched = [("master", master, master_log)]
        url = _wait("the master's web UI to answer with its URL", lambda: cluster.status().get("url"), watched,
                    start_timeout_s)
        cluster.master_url = str(url)
        for index in range(workers):
            work_dir = base_dir / f"worker-{index}" / "work"
            work_dir.mkdir(parents=True, exist_ok=True)
            log = base_dir / f"worker-{index}.log"
            proc = _daemon(WORKER_CLASS, ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                                          "--cores", str(cores), "--memory", memory, "--work-dir", str(work_dir),
                                          cluster.master_url], log, daemon_env)
            started.append(SparkWorker(index=index, proc=proc, work_dir=work_dir, log=log))
            watched.append((f"worker {index}", proc, log))
        cluster.workers = started
        _wait(f"{workers} workers ALIVE at the master",
              lambda: sum(w.get("state") == "ALIVE" for w in cluster.status().get("workers", [])) >= workers,
              watched, start_timeout_s)
        yield cluster
    finally:
        for worker in started:
            _stop_group(worker.proc, stop_timeout_s)
        _stop_group(master, stop_timeout_s)
