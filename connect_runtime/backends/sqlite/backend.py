"""The backend object: it opens the file, hands out producers, consumers and offset stores (each with a
connection of its own), and answers the admin calls itself (topics, atomic registry updates, range
reads) on one connection per thread; :meth:`SQLiteBackend.close` closes everything it handed out.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from connect_runtime.api.errors import BackendError, ConfigError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends.base import Backend, Capabilities, ConsumedRecord
from connect_runtime.backends.sqlite.columnar import _Batch, _read_batches
from connect_runtime.backends.sqlite.connection import _Conn, _Db, _partition_reader, _write_transaction
from connect_runtime.backends.sqlite.consumer import SQLiteConsumer, _consumed
from connect_runtime.backends.sqlite.offsets import SQLiteOffsetStore, _read_entry, _write_offsets
from connect_runtime.backends.sqlite.producers import SQLiteProducer, SQLiteTransactionalProducer
from connect_runtime.backends.sqlite.schema import (
    _SELECT_FROM,
    OFFSET_BITS,
    OFFSET_LIMIT,
    _create_topic,
    _topic_info,
)
from connect_runtime.backends.sqlite.settings import DEFAULT_BUSY_TIMEOUT_MS, _parse_settings, parse_url


class SQLiteBackend(Backend):
    """The embedded backend over one SQLite file (see the module docstring)."""

    capabilities = Capabilities(commits_check_generation=True, transaction_markers=False, commit_waits_on_io=False,
                                atomic_update_entry=True)

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
                 synchronous: str = "NORMAL", default_partitions: int = 1, cluster_id: str | None = None,
                 url: str | None = None, read_only: bool = False) -> None:
        if str(path) in ("", ":memory:"):
            raise ConfigError(errors={"backend": f"{str(path)!r} is not a file; processes must share the backend, "
                                                 "so give a file path"})
        self.path = Path(path)
        self.url = url or f"sqlite:///{self.path}"
        self.cluster_id = cluster_id
        self.default_partitions = default_partitions
        self.read_only = read_only
        self._db = _Db(self.path, busy_timeout_ms, synchronous, read_only)
        self._db.init_schema()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._own: list[_Conn] = []
        self._children: weakref.WeakSet[Any] = weakref.WeakSet()
        self._closed = False

    @classmethod
    def from_url(cls, url: str, settings: Mapping[str, Any] | None = None, *,
                 read_only: bool = False) -> SQLiteBackend:
        """Open ``sqlite:///path`` with ``busy.timeout.ms``, ``synchronous``, ``default.partitions`` and
        ``cluster.id`` settings (others are ignored: they belong to other backends); ``read_only``: see
        the module docstring."""
        path = parse_url(url)
        return cls(path, **_parse_settings(path, settings), url=url, read_only=read_only)

    def __repr__(self) -> str:
        return f"SQLiteBackend({self.url!r})"

    # connections -------------------------------------------------------------------------------

    def _register(self, child: Any) -> None:
        self._check_open()
        with self._lock:
            self._children.add(child)

    def _check_open(self) -> None:
        if self._closed:
            raise BackendError(f"SQLite backend {self.path}: used after close()")

    def _thread_conn(self) -> _Conn:
        """This thread's connection for the backend's own calls."""
        self._check_open()
        conn: _Conn | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = _Conn(self._db)
            self._local.conn = conn
            with self._lock:
                self._own.append(conn)
        return conn

    # the interface -----------------------------------------------------------------------------

    def transactional_producer(self, transactional_id: str, offset_store: str | None = None, *,
                               track_metadata: bool = False) -> SQLiteTransactionalProducer:
        return SQLiteTransactionalProducer(self, transactional_id, offset_store, track_metadata=track_metadata)

    def producer(self, *, track_metadata: bool = False) -> SQLiteProducer:
        return SQLiteProducer(self, track_metadata=track_metadata)

    def offset_store(self, name: str | None = None) -> SQLiteOffsetStore:
        return SQLiteOffsetStore(self, name)

    def update_entry(self, store: str, key: bytes, update: Callable[[bytes | None], bytes | None],
                     timeout: float = 30.0) -> bytes | None:
        """Read-modify-write one offset store entry in one write transaction (atomic across processes)."""
        self._check_open()
        conn = self._thread_conn().bounded(timeout)
        with self._thread_conn().translate(f"updating an entry of store {store!r}"), _write_transaction(conn):
            new = update(_read_entry(conn, store, key))
            _write_offsets(conn, store, [(key, new)])
        return new

    def consumer(self, group_id: str | None = None) -> SQLiteConsumer:
        return SQLiteConsumer(self, group_id)

    def create_topics(self, topics: Mapping[str, int], *, exist_ok: bool = True,
                      replication: int | None = None) -> None:  # one file: nothing to replicate
        for name, n in topics.items():
            if not isinstance(name, str) or not name:
                raise ConfigError(errors={"topic": f"expected a non-empty topic name, got {name!r}"})
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ConfigError(errors={f"partitions of {name}": f"expected an integer >= 1, got {n!r}"})
        if not topics:
            return
        c = self._thread_conn()
        conn = c.get()
        with self._db.translate(f"creating topics {sorted(topics)}"), _write_transaction(conn):
            for name, n in topics.items():
                if _topic_info(conn, name) is not None:
                    if not exist_ok:
                        raise BackendError(f"SQLite backend {self.path}: topic {name!r} already exists")
                    continue
                _create_topic(conn, name, n)

    def list_topics(self) -> dict[str, int]:
        conn = self._thread_conn().get()
        with self._db.translate("listing topics"):
            return dict(conn.execute("SELECT name, partitions FROM topics ORDER BY name"))

    def read_range(self, partition: TopicPartition, start: int, end: int, *, batch_size: int = 10_000,
                   timeout: float = 30.0) -> Iterator[ConsumedRecord]:
        """Committed records of one partition with ``start <= offset < end``, in offset order: one range
        query on a connection of its own, fetched ``batch_size`` rows at a time."""
        self._check_open()
        topic, p = TopicPartition(*partition)
        start, end = max(0, start), min(end, OFFSET_LIMIT)
        if end <= start:
            return
        with _partition_reader(self._db, topic, p, start, end) as found:
            if found is None:
                return
            conn, pid = found
            shift = pid << OFFSET_BITS
            cur = conn.execute(_SELECT_FROM, (shift + start, shift + end))
            size = max(1, batch_size)
            while True:
                rows = cur.fetchmany(size)
                if not rows:
                    break
                yield from _consumed(rows, topic, p, shift)

    def read_range_batches(
        self, partition: TopicPartition, start: int, end: int, *, batch_size: int = 10_000,
        timeout: float = 30.0, keys: bool = True, timestamps: bool = True, headers: bool = True,
    ) -> Iterator[_Batch]:
        """:meth:`read_range` as columns: per window of ``batch_size`` offsets one range query on a
        connection of its own selecting only the columns asked for, without a per-record object where it
        can: each column comes from SQLite concatenated in one buffer (values joined by newlines, byte columns
        with their lengths), split only when indexed, so columnar readers build arrays straight from the
        buffers (headers decoded in bulk); windows that cannot come so (offsets not consecutive, null
        values, a value holding a newline) are fetched as rows (:mod:`.columnar`)."""
        self._check_open()
        topic, p = TopicPartition(*partition)
        yield from _read_batches(self._db, topic, p, start, end, batch_size=batch_size, keys=keys,
                                 timestamps=timestamps, headers=headers)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            children = list(self._children)
            own, self._own = self._own, []
        for child in children:
            with contextlib.suppress(Exception):
                child.close()
        for c in own:
            c.close()
