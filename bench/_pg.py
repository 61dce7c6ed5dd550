"""A throwaway PostgreSQL cluster for the SQL benchmarks: ``with pg_cluster() as url: ...``.

As ``tests/support/postgres.py`` does it: ``initdb`` into a temp dir (as the ``postgres`` user when run
as root: PostgreSQL refuses root), ``pg_ctl start`` on a free loopback port with ``fsync=off``, and
``pg_ctl stop -m immediate`` plus removal of the dir at the end, also after a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _bin_dir() -> Path:
    from scripts.deploy.servers import pg_bin_dir

    found = pg_bin_dir()
    if found is not None:
        return found
    raise SystemExit("no PostgreSQL binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql/*/bin: "
                     "apt-get install -y postgresql")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(*cmd: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=timeout, check=False)


@contextmanager
def pg_cluster(options: str = "") -> Iterator[str]:
    """``postgresql+psycopg://postgres@127.0.0.1:PORT/postgres`` of a cluster that lives for the block; ``options``:
    more server settings (``-c wal_level=logical``)."""
    bindir = _bin_dir()
    root = Path(tempfile.mkdtemp(prefix="pyconnect-bench-pg-"))
    data = root / "data"
    port = _free_port()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    root.chmod(0o755)
    started = False
    try:
        init = _as_postgres(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
                            "-E", "UTF8", "--no-sync")
        if init.returncode != 0:
            raise SystemExit(f"initdb failed: {init.stdout[-2000:]} {init.stderr[-2000:]}")
        opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=20 {options}"
        start = _as_postgres(str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(root / "log"),
                             "-w", "-t", "60", "start")
        started = True
        if start.returncode != 0:
            log = (root / "log").read_text() if (root / "log").exists() else ""
            raise SystemExit(f"pg_ctl start failed: {start.stdout} {start.stderr} {log[-2000:]}")
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        if started:
            _as_postgres(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "-t", "60", "stop")
        shutil.rmtree(root, ignore_errors=True)


def psycopg_url(url: str) -> str:
    """The libpq form of a ``postgresql+psycopg://`` SQLAlchemy URL (for ``psycopg.connect``)."""
    return url.replace("postgresql+psycopg://", "postgresql://")
