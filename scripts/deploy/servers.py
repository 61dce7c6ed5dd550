"""The plain servers of the distributed deployment: Redis (Celery's broker), PostgreSQL (Airflow's metadata
database and the SQL sink's destination) and a moto S3 server (the lake, since workers share no disk).

Each is a context manager that starts the server on a free loopback port in a process group of its own, waits for
it with a bound (naming what it waited for and the tail of its log when it fails) and stops it on exit, also after
a failure. PostgreSQL runs as the ``postgres`` user when started by root (it refuses root), from a directory it owns.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["free_port", "moto_s3", "pg_bin_dir", "postgres_server", "redis_server", "stop_group", "wait_for"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return f"(no log at {path})"


def wait_for(what: str, ready: Callable[[], bool], timeout_s: float, *, proc: subprocess.Popen[bytes] | None = None,
             log: Path | None = None) -> None:
    """Poll ``ready`` until true; fail after ``timeout_s`` seconds, or at once when ``proc`` exited, naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with {proc.returncode} while starting\n"
                               + (tail(log) if log else ""))
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s:.0f} s for {what}\n" + (tail(log) if log else ""))
        time.sleep(0.2)


def stop_group(proc: subprocess.Popen[bytes], timeout_s: float = 15.0) -> None:
    """SIGTERM the process group of ``proc`` (started with ``start_new_session``), SIGKILL it after ``timeout_s``."""
    for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def spawn(cmd: list[str], log: Path, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in a process group of its own, its output to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                cwd=cwd, start_new_session=True)


@contextlib.contextmanager
def redis_server(base: Path, timeout_s: float = 30.0) -> Iterator[str]:
    """Debian's ``redis-server`` without persistence; yields ``redis://127.0.0.1:PORT/0``."""
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(binary).exists():
        raise RuntimeError("redis-server not found: apt-get install -y redis-server (.ci/run installs it)")
    port = free_port()
    base.mkdir(parents=True, exist_ok=True)
    log = base / "redis.log"
    proc = spawn([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                  "--dir", str(base)], log)
    try:
        wait_for(f"redis-server on 127.0.0.1:{port}", lambda: _answers(port), timeout_s, proc=proc, log=log)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop_group(proc)


def pg_bin_dir() -> Path | None:
    """The directory of PostgreSQL's ``initdb`` and ``pg_ctl`` (on PATH, else Debian's newest
    ``/usr/lib/postgresql/*/bin``); None when there is none. The tests' and benchmarks' clusters use it too."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).parent
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(d, "pg_ctl").exists() and Path(d, "initdb").exists():
            return Path(d)
    return None


def _pg_bin() -> Path:
    found = pg_bin_dir()
    if found is not None:
        return found
    raise RuntimeError("no PostgreSQL binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql/*/bin: "
                       "apt-get install -y postgresql (.ci/run installs it)")


def _as_postgres(*cmd: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=timeout_s, check=False)


@contextlib.contextmanager
def postgres_server(databases: tuple[str, ...] = ()) -> Iterator[str]:
    """A throwaway PostgreSQL cluster (trust auth on loopback, ``max_connections`` for a scheduler, an API server,
    two workers and their tasks); ``databases`` created in it. Yields the server URL
    ``postgresql+psycopg://postgres@127.0.0.1:PORT`` (append ``/<database>``). Its directory is a temp dir of its
    own (the ``postgres`` user must reach it), removed on exit."""
    bindir = _pg_bin()
    base = Path(tempfile.mkdtemp(prefix="pyconnect-deploy-pg-"))
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
    base.chmod(0o755)
    data, log, port = base / "data", base / "postgres.log", free_port()
    init = _as_postgres(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                        "--no-sync")
    if init.returncode != 0:
        raise RuntimeError(f"initdb failed: {init.stdout[-2000:]} {init.stderr[-2000:]}")
    opts = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300"
    start = _as_postgres(str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(log), "-w", "-t", "60",
                         "start")
    try:
        if start.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {start.stdout} {start.stderr} {tail(log)}")
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", autocommit=True,
                             connect_timeout=30) as conn:
            for name in databases:
                conn.execute(f'CREATE DATABASE "{name}"')
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        _as_postgres(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "-t", "60", "stop")
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def moto_s3(base: Path, timeout_s: float = 60.0) -> Iterator[str]:
    """A moto S3 server; yields its endpoint ``http://127.0.0.1:PORT`` (any key and secret are accepted)."""
    port = free_port()
    log = base / "moto.log"
    proc = spawn([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], log)
    endpoint = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
            return True
        except OSError:
            return False

    try:
        wait_for(f"the moto S3 server on {endpoint}", up, timeout_s, proc=proc, log=log)
        yield endpoint
    finally:
        stop_group(proc)
