"""A SQLite database in a folder the user may only read can be inspected (issue 10): a real subprocess without
the right to write (``setpriv`` drops root's ``CAP_DAC_OVERRIDE``, so permission bits apply to it as to any user)
opens it read-only, with and without records still in the WAL."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from connect_runtime.backends import open_backend
from tests.support import REPO
from tests.support.records import rec


def without_write_rights(cmd: list[str]) -> list[str]:
    """``cmd`` run so that file permission bits bind it (root normally bypasses them)."""
    if os.geteuid() != 0:
        return cmd
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and setpriv is missing: cannot run a process that file modes bind")
    caps = "-dac_override,-dac_read_search,-fowner"
    return [setpriv, "--bounding-set", caps, "--inh-caps", caps, *cmd]


_READER = """
import json, sys
sys.path.insert(0, {repo!r})
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import open_backend
b = open_backend(sys.argv[1], read_only=True)
print(json.dumps({{"topics": b.list_topics(),
                   "values": [r.value.decode() for r in b.read_range(TopicPartition("t", 0), 0, 10)]}}))
b.close()
"""


@pytest.mark.parametrize("pending_wal", [False, True])
def test_a_file_in_a_read_only_folder_can_be_inspected(tmp_path: Path, pending_wal: bool) -> None:
    folder = tmp_path / "ro"
    path = folder / "data.db"
    writer = open_backend(f"sqlite:///{path}")
    producer = writer.producer()
    producer.send([rec(b"x"), rec(b"y")])
    producer.flush(5)
    keep_open = None
    if pending_wal:  # a reader connection keeps the WAL (and its records) from being checkpointed away
        keep_open = sqlite3.connect(path)
        keep_open.execute("PRAGMA wal_autocheckpoint = 0")
        producer.send([rec(b"z")])
        producer.flush(5)
    else:
        writer.close()
    script = tmp_path / "reader.py"
    script.write_text(_READER.format(repo=str(REPO)))
    path.chmod(0o444)
    folder.chmod(0o555)
    try:
        if not pending_wal:
            assert sorted(p.name for p in folder.iterdir()) == ["data.db"]  # no -shm to read the WAL with
        proc = subprocess.run(without_write_rights([sys.executable, str(script), f"sqlite:///{path}"]),
                              capture_output=True, text=True, timeout=60)
    finally:
        folder.chmod(0o755)
        path.chmod(0o644)
        if keep_open is not None:
            keep_open.close()
            writer.close()
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got == {"topics": {"t": 1}, "values": ["x", "y", "z"] if pending_wal else ["x", "y"]}
