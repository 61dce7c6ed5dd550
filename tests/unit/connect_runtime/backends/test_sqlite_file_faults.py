"""The SQLite backend's file faults (issue 10): a database file deleted or replaced while in use, and
read-only opens that create nothing and can read a file. Real files; a file in a read-only folder, inspected
by a process without the right to write: tests/integration/connect_runtime/backends/test_sqlite_read_only_folder.py."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from connect_runtime.api.errors import BackendError
from connect_runtime.backends import open_backend
from connect_runtime.runtime.offsets import offset_key, offset_value
from tests.support.records import TP0, rec

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


