"""Source offsets (Kafka Connect's offset backing store) as rows of ``source_offsets``: a store is a
name, an entry a key/value pair of bytes, a ``None`` value deletes it, the last entry of a key in one
write wins (as in a compacted offsets topic). Offsets written to a connector-specific store are also
written to the global store, ``connect-offsets``, in the same transaction (KIP-618), except for the
runtime's internal stores (``base.INTERNAL_STORES``).

:class:`SQLiteOffsetStore` is the store interface; :func:`_write_source_offsets` is what every writer
(the store's ``put``, a transactional producer's commit) uses inside its write transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from connect_runtime.api.errors import DataError
from connect_runtime.backends.base import INTERNAL_STORES, OffsetEntry, OffsetStore
from connect_runtime.backends.sqlite.connection import _Conn, _write_transaction
from connect_runtime.backends.sqlite.schema import DEFAULT_OFFSET_STORE

if TYPE_CHECKING:
    from connect_runtime.backends.sqlite.backend import SQLiteBackend

_SQL_VARS = 500  # parameters per IN (...) query, well below SQLite's limit
_UPSERT_OFFSET = (
    "INSERT INTO source_offsets(store, key, value) VALUES (?,?,?)"
    " ON CONFLICT(store, key) DO UPDATE SET value = excluded.value"
)
_DELETE_OFFSET = "DELETE FROM source_offsets WHERE store = ? AND key = ?"


class SQLiteOffsetStore(OffsetStore):
    """Source offsets of one named store (rows of ``source_offsets`` with ``store = name``)."""

    def __init__(self, backend: SQLiteBackend, name: str | None) -> None:
        self.name = name or DEFAULT_OFFSET_STORE
        self._db = backend._db
        self._conn = _Conn(backend._db)
        backend._register(self)

    def get(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        keys = list(dict.fromkeys(bytes(k) for k in keys))
        out: dict[bytes, bytes] = {}
        if not keys:
            return out
        conn = self._conn.get()
        with self._conn.translate(f"reading offsets of store {self.name!r}"):
            for i in range(0, len(keys), _SQL_VARS):
                chunk = keys[i:i + _SQL_VARS]
                marks = ",".join("?" * len(chunk))
                for k, v in conn.execute(
                    f"SELECT key, value FROM source_offsets WHERE store = ? AND key IN ({marks})",
                    (self.name, *chunk),
                ):
                    out[k] = v
        return out

    def read_all(self) -> dict[bytes, bytes]:
        conn = self._conn.get()
        with self._conn.translate(f"reading offsets of store {self.name!r}"):
            return dict(conn.execute("SELECT key, value FROM source_offsets WHERE store = ?", (self.name,)))

    def put(self, entries: Sequence[OffsetEntry], timeout: float) -> None:
        if not entries:
            return
        conn = self._conn.bounded(timeout)
        with self._conn.translate(f"writing {len(entries)} offsets to store {self.name!r}"), \
                _write_transaction(conn):
            _write_source_offsets(conn, self.name, entries)

    def close(self) -> None:
        self._conn.close()


def _write_source_offsets(conn: sqlite3.Connection, store: str, entries: Sequence[OffsetEntry]) -> None:
    """Write source offsets to ``store`` and, for a connector-specific store, to the global store too
    (KIP-618), inside the caller's write transaction."""
    _write_offsets(conn, store, entries)
    if store != DEFAULT_OFFSET_STORE and store not in INTERNAL_STORES:
        _write_offsets(conn, DEFAULT_OFFSET_STORE, entries)  # KIP-618: mirrored to the global store


def _read_entry(conn: sqlite3.Connection, store: str, key: bytes) -> bytes | None:
    """One entry's value as stored, ``None`` if absent."""
    row = conn.execute("SELECT value FROM source_offsets WHERE store = ? AND key = ?", (store, key)).fetchone()
    return None if row is None else bytes(row[0])


def _write_offsets(conn: sqlite3.Connection, store: str, entries: Sequence[OffsetEntry]) -> None:
    # the last entry of a key wins, as in a compacted offsets topic
    latest: dict[bytes, bytes | None] = {}
    for key, value in entries:
        if not isinstance(key, bytes | bytearray | memoryview):
            raise DataError(f"offset store {store!r}: key {key!r} is not bytes")
        if value is not None and not isinstance(value, bytes | bytearray | memoryview):
            raise DataError(f"offset store {store!r}: value {value!r} of key {key!r} is not bytes or None")
        latest[bytes(key)] = value
    upserts = [(store, k, v) for k, v in latest.items() if v is not None]
    deletes = [(store, k) for k, v in latest.items() if v is None]
    if upserts:
        conn.executemany(_UPSERT_OFFSET, upserts)
    if deletes:
        conn.executemany(_DELETE_OFFSET, deletes)
