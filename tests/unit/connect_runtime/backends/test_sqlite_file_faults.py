"""The SQLite backend's file faults (issue 10): a database file deleted or replaced while in use, and
read-only opens that create nothing and can inspect a file the user may only read. Real files; the
read-only-folder case runs a real subprocess without the right to write (``setpriv`` drops root's
``CAP_DAC_OVERRIDE``, so permission bits apply to it as to any user)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from connect_runtime.api.errors import BackendError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.runtime.offsets import offset_key, offset_value

REPO = Path(__file__).resolve().parents[4]
TP0 = TopicPartition("t", 0)


def rec(value: bytes) -> ProducerRecord:
    return ProducerRecord("t", None, None, value, None, None)


def without_write_rights(cmd: list[str]) -> list[str]:
    """``cmd`` run so that file permission bits bind it (root normally bypasses them)."""
    if os.geteuid() != 0:
        return cmd
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and setpriv is missing: cannot run a process that file modes bind")
    caps = "-dac_override,-dac_read_search,-fowner"
    return [setpriv, "--bounding-set", caps, "--inh-caps", caps, *cmd]


# -- the file deleted or replaced mid-run ---------------------------------------------------------


def test_commit_after_the_file_was_deleted_fails_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "data.db"
    backend = open_backend(f"sqlite:///{path}")
    try:
        producer = backend.transactional_producer("c-0")
        producer.init_transactions(5)
        producer.begin_transaction()
        producer.send([rec(b"1")])
        producer.commit_transaction([(offset_key("c", {"p": 0}), offset_value({"n": 1}))], 5)
        path.unlink()
        producer.begin_transaction()
        producer.send([rec(b"2")])
        with pytest.raises(BackendError, match="was deleted") as info:
            producer.commit_transaction([(offset_key("c", {"p": 0}), offset_value({"n": 2}))], 5)
        assert str(path) in str(info.value)
        plain = backend.producer()
        plain.send([rec(b"3")])
        with pytest.raises(BackendError, match="was deleted"):
            plain.flush(5)
        store = backend.offset_store()
        with pytest.raises(BackendError, match="was deleted"):
            store.put([(offset_key("c", {"p": 0}), None)], 5)
        consumer = backend.consumer("g")
        with pytest.raises(BackendError, match="was deleted"):
            consumer.commit({TP0: 1}, 5)
    finally:
        backend.close()
    assert not path.exists()  # nothing recreated an empty file behind the user's back


def test_commit_after_the_file_was_replaced_fails(tmp_path: Path) -> None:
    path, other = tmp_path / "data.db", tmp_path / "other.db"
    open_backend(f"sqlite:///{other}").close()
    backend = open_backend(f"sqlite:///{path}")
    try:
        producer = backend.producer()
        producer.send([rec(b"1")])
        producer.flush(5)
        os.replace(other, path)  # e.g. a restored copy moved over the live file
        producer.send([rec(b"2")])
        with pytest.raises(BackendError, match=f"{path}.*replaced by another file"):
            producer.flush(5)
        with pytest.raises(BackendError, match="replaced by another file"):
            backend.transactional_producer("c-0").init_transactions(5)
    finally:
        backend.close()


def test_an_untouched_file_keeps_working_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "data.db"
    for value in (b"1", b"2"):
        backend = open_backend(f"sqlite:///{path}")
        try:
            producer = backend.producer()
            producer.send([rec(value)])
            producer.flush(5)
        finally:
            backend.close()
    backend = open_backend(f"sqlite:///{path}", read_only=True)
    try:
        assert [r.value for r in backend.read_range(TP0, 0, 10)] == [b"1", b"2"]
    finally:
        backend.close()


# -- read-only opens --------------------------------------------------------------------------------


def test_read_only_open_of_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "wrong" / "folder" / "typo.db"
    with pytest.raises(BackendError, match="no such file") as info:
        open_backend(f"sqlite:///{path}", read_only=True)
    assert str(path) in str(info.value)
    assert not (tmp_path / "wrong").exists()


def test_read_only_open_refuses_a_file_that_is_not_a_pyconnect_database(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE x(a)")
    before = path.read_bytes()
    with pytest.raises(BackendError, match="not a pyconnect database"):
        open_backend(f"sqlite:///{path}", read_only=True)
    assert path.read_bytes() == before
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(BackendError, match="not a regular file"):
        open_backend(f"sqlite:///{tmp_path / 'dir.db'}", read_only=True)


def test_read_only_backend_reads_and_refuses_every_write(tmp_path: Path) -> None:
    path = tmp_path / "data.db"
    writer = open_backend(f"sqlite:///{path}")
    try:
        producer = writer.producer()
        producer.send([rec(b"a"), rec(b"b")])
        producer.flush(5)
    finally:
        writer.close()
    backend = open_backend(f"sqlite:///{path}", read_only=True)
    try:
        assert backend.list_topics() == {"t": 1}
        assert [r.value for r in backend.read_range(TP0, 0, 10)] == [b"a", b"b"]
        consumer = backend.consumer("g")
        assert consumer.end_offsets([TP0], 5) == {TP0: 2}
        assert consumer.committed([TP0], 5) == {TP0: None}
        producer = backend.producer()
        producer.send([rec(b"c")])
        with pytest.raises(BackendError, match="readonly"):
            producer.flush(5)
        with pytest.raises(BackendError, match="readonly"):
            backend.create_topics({"u": 1})
        with pytest.raises(BackendError, match="readonly"):
            consumer.commit({TP0: 1}, 5)
    finally:
        backend.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM records").fetchone() == (2,)


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
