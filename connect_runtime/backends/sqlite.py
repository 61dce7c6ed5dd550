"""The embedded backend: records, source offsets, group offsets and producer epochs in one SQLite file.

URL: ``sqlite:///path/to/file.db`` (``sqlite:////abs/path.db`` for an absolute path, ``sqlite:///rel.db``
relative to the working directory). ``:memory:`` is refused: the processes of a deployment (Airflow
task instances, retries, a Spark reader) must all see the same file. Parent directories and the
schema are created on open.

Settings (``open_backend(url, settings)``):

- ``busy.timeout.ms`` (default 30000): how long a writer waits for the write lock (and a reader for
  a checkpoint) before :class:`BackendUnavailableError`. Blocking calls that take a ``timeout`` wait
  at most the smaller of the two.
- ``synchronous`` (``NORMAL`` default, ``FULL``, ``EXTRA``): SQLite's ``PRAGMA synchronous`` in WAL
  mode. With ``NORMAL`` a committed transaction survives a crash or ``SIGKILL`` of the writing
  process (the WAL is in the OS page cache), but the last commits may be rolled back by a power loss
  or an OS crash; the file is never corrupted either way. ``FULL`` fsyncs the WAL at every commit,
  so commits also survive a power loss, at the price of one fsync per transaction.
- ``default.partitions`` (default 1): partition count of topics created on first write.
- ``cluster.id`` (default none): prefix of transactional ids; without it, ids have no prefix.

Read-only (``open_backend(url, settings, read_only=True)``, what ``pyconnect offsets get`` and
``topics list|read`` use): nothing is created, neither the file nor its folders nor the schema; a path
that names no file, or a file without this backend's schema, is a :class:`BackendError` naming the
path. Connections open with SQLite's ``mode=ro``; a file in a folder the user cannot write (so SQLite
cannot create the WAL's ``-shm`` index) is opened ``immutable`` when it has no pending WAL content,
else the error says why it cannot be read. Every write on a read-only backend fails.

The file's identity (``st_dev``, ``st_ino``) is recorded when the backend opens it and checked before
every write transaction (one ``stat`` per commit) and whenever a connection opens: a database file
deleted or replaced (``rm``, ``mv``, a restored copy) while a run uses it makes the next commit fail
with a :class:`BackendError` naming the path, instead of committing into an unlinked file that nobody
will ever read again. (Deleting or replacing a live SQLite file is unsafe in SQLite itself: the old
file's ``-wal`` left next to the path may be applied to whatever file is opened there next. The check
stops this backend writing more; it cannot undo that.)

How it works:

- One short SQLite transaction per transaction boundary. Producers buffer ``send`` in memory; a
  commit (or a non-transactional ``flush``) is ``BEGIN IMMEDIATE`` → check this producer's epoch →
  assign offsets per partition from the ``partitions.next_offset`` high-water row → ``executemany``
  the rows → upsert/delete source offsets → advance the high-water rows → ``COMMIT``. Readers never
  see uncommitted records because nothing is written before the commit; abort drops the buffer.
- ``BEGIN IMMEDIATE`` takes the single write lock up front, so offsets are assigned race-free by any
  number of processes writing the same file (WAL mode: readers never block the writer).
- Fencing (KIP-618): ``init_transactions`` bumps the epoch of its ``transactional_id`` in its own
  transaction; a commit whose producer no longer holds the current epoch raises
  :class:`ProducerFencedError` and writes nothing.
- A record without a partition goes to ``crc32(key) % partitions``, or partition 0 without a key;
  a record without a timestamp gets the commit time (ms, one clock read per commit). Topics are
  created on first write with ``default.partitions``; a partition index out of range is a
  :class:`DataError` naming the topic and partition, and the whole commit writes nothing.
- Records are kept forever (no retention): ``beginning_offsets`` is 0 for every partition today.
- Every producer, consumer and offset store opens its own connection (lazily, on first use, so an
  object may be created by one thread and used by another); the :class:`SQLiteBackend` keeps one
  connection per thread for its own calls, and closes everything on :meth:`SQLiteBackend.close`.

Schema::

    topics(id INTEGER PRIMARY KEY, name TEXT UNIQUE, partitions)
    partitions(id INTEGER PRIMARY KEY, topic_id, partition, next_offset)   UNIQUE (topic_id, partition)
    records(id INTEGER PRIMARY KEY, key, value, ts, headers)               id = partitions.id << 40 | offset
    source_offsets(store, key, value)                        PK (store, key)              WITHOUT ROWID
    group_offsets(group_id, topic, partition, next_offset)    PK (group_id, topic, partition) WITHOUT ROWID
    producer_epochs(transactional_id, epoch)                  PK (transactional_id)        WITHOUT ROWID
    topic_records                                             a view: topic, partition, offset, key, ...

A record's row id packs its partition (the ``partitions`` row id, high bits) and its offset (low 40
bits, up to 10^12 records per partition): the records table is SQLite's fastest structure, a
single integer-keyed B-tree, appended to in key order, and one partition's offset range is one
contiguous key range. This writes about 25 % faster than a ``WITHOUT ROWID`` table keyed by
``(topic, partition, offset)``. The ``topic_records`` view shows the records with their topic,
partition and offset for people inspecting the file with ``sqlite3``.

Headers are stored as ``NULL`` when a record has none, else in a small binary encoding (see
:func:`encode_headers`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sqlite3
import struct
import threading
import time
import weakref
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import count
from pathlib import Path
from typing import Any

from connect_runtime.api.errors import (
    BackendError,
    BackendUnavailableError,
    ConfigError,
    DataError,
    ProducerFencedError,
)
from connect_runtime.api.records import RecordMetadata, TopicPartition
from connect_runtime.backends.base import (
    INTERNAL_STORES,
    Backend,
    Capabilities,
    ConsumedRecord,
    Consumer,
    ExtraEntries,
    OffsetEntry,
    OffsetStore,
    Producer,
    ProducerRecord,
    Ranges,
    TransactionalProducer,
    WireHeaders,
    Written,
)

log = logging.getLogger(__name__)

DEFAULT_OFFSET_STORE = "connect-offsets"
DEFAULT_BUSY_TIMEOUT_MS = 30_000
SCHEMA_VERSION = 2
OFFSET_BITS = 40
"""Low bits of a record's row id holding its offset; the high bits are its partition's row id."""
OFFSET_LIMIT = 1 << OFFSET_BITS
MAX_OFFSET = OFFSET_LIMIT - 1
_SYNCHRONOUS = ("NORMAL", "FULL", "EXTRA")
_SETTINGS = ("busy.timeout.ms", "synchronous", "default.partitions", "cluster.id")
_SQL_VARS = 500  # parameters per IN (...) query, well below SQLite's limit

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS topics(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
    " partitions INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS partitions(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL,"
    " partition INTEGER NOT NULL, next_offset INTEGER NOT NULL, UNIQUE(topic_id, partition))",
    "CREATE TABLE IF NOT EXISTS records(id INTEGER PRIMARY KEY, key BLOB, value BLOB, ts INTEGER, headers BLOB)",
    "CREATE TABLE IF NOT EXISTS source_offsets(store TEXT NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL,"
    " PRIMARY KEY(store, key)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS group_offsets(group_id TEXT NOT NULL, topic TEXT NOT NULL,"
    " partition INTEGER NOT NULL, next_offset INTEGER NOT NULL,"
    " PRIMARY KEY(group_id, topic, partition)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS producer_epochs(transactional_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL)"
    " WITHOUT ROWID",
    "CREATE VIEW IF NOT EXISTS topic_records AS SELECT t.name AS topic, p.partition AS partition,"
    f" r.id & {MAX_OFFSET} AS offset, r.key AS key, r.value AS value, r.ts AS ts, r.headers AS headers"
    f" FROM records r JOIN partitions p ON p.id = r.id >> {OFFSET_BITS} JOIN topics t ON t.id = p.topic_id",
)

_INSERT_RECORD = "INSERT INTO records(id, key, value, ts, headers) VALUES (?,?,?,?,?)"
_UPSERT_OFFSET = (
    "INSERT INTO source_offsets(store, key, value) VALUES (?,?,?)"
    " ON CONFLICT(store, key) DO UPDATE SET value = excluded.value"
)
_DELETE_OFFSET = "DELETE FROM source_offsets WHERE store = ? AND key = ?"
_GET_NEXT = "SELECT next_offset FROM partitions WHERE id = ?"
_SET_NEXT = "UPDATE partitions SET next_offset = ? WHERE id = ?"
_SELECT_FROM = "SELECT id, key, value, ts, headers FROM records WHERE id >= ? AND id < ? ORDER BY id"


# -- headers ---------------------------------------------------------------------------------------

_HDR_VERSION = 1
_u8 = struct.Struct(">B")
_name_len = struct.Struct(">H")
_value_len = struct.Struct(">i")


def encode_headers(headers: WireHeaders | None) -> bytes | None:
    """Headers as stored: ``None`` when there are none, else version byte ``1`` then per header
    ``uint16`` name length, UTF-8 name, ``int32`` value length (``-1`` for a ``None`` value), value.
    A ``str`` value is stored as its UTF-8 bytes."""
    if not headers:
        return None
    parts = [_u8.pack(_HDR_VERSION)]
    try:
        for name, value in headers:
            raw_name = name.encode()
            parts.append(_name_len.pack(len(raw_name)))
            parts.append(raw_name)
            if value is None:
                parts.append(_value_len.pack(-1))
            else:
                if isinstance(value, str):
                    value = value.encode()
                elif not isinstance(value, bytes):
                    value = bytes(memoryview(value))
                parts.append(_value_len.pack(len(value)))
                parts.append(value)
    except (AttributeError, TypeError, ValueError, struct.error) as exc:
        raise DataError(
            f"headers {headers!r} cannot be stored: expected (name, value) pairs with a str name "
            f"(< 64 KiB) and a bytes, str or None value: {exc}"
        ) from exc
    return b"".join(parts)


def decode_headers(data: bytes | None) -> WireHeaders | None:
    """The inverse of :func:`encode_headers`."""
    if data is None:
        return None
    if not data or data[0] != _HDR_VERSION:
        raise DataError(f"stored headers have an unknown encoding (first byte {data[:1]!r})")
    out: WireHeaders = []
    pos, end = 1, len(data)
    while pos < end:
        (n,) = _name_len.unpack_from(data, pos)
        pos += 2
        name = data[pos:pos + n].decode()
        pos += n
        (m,) = _value_len.unpack_from(data, pos)
        pos += 4
        if m < 0:
            out.append((name, None))
        else:
            out.append((name, bytes(data[pos:pos + m])))
            pos += m
    return out


# -- URL and settings ------------------------------------------------------------------------------


def parse_url(url: str) -> Path:
    """The database path of a ``sqlite:///path`` URL (ConfigError naming ``backend`` otherwise)."""
    expected = "expected sqlite:///path/to/file.db (sqlite:////absolute/path.db or sqlite:///relative.db)"
    if not url.lower().startswith("sqlite://"):
        raise ConfigError(errors={"backend": f"{expected}, got {url!r}"})
    rest = url[len("sqlite://"):]
    if not rest.startswith("/"):
        raise ConfigError(errors={"backend": f"{expected}; {url!r} names a host, the SQLite backend has none"})
    path = rest[1:]
    if not path:
        raise ConfigError(errors={"backend": f"{expected}; {url!r} has no file path"})
    if path == ":memory:" or path.startswith("file::memory:") or "mode=memory" in path:
        raise ConfigError(
            errors={"backend": f"{url!r} is an in-memory database; processes must share the backend, "
                               "so give a file path: sqlite:///path/to/file.db"}
        )
    return Path(path)


def _int_setting(settings: Mapping[str, Any], name: str, default: int, minimum: int,
                 errors: dict[str, str]) -> int:
    raw = settings.get(name, default)
    try:
        if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
            raise ValueError
        value = int(raw)
    except (TypeError, ValueError):
        errors[name] = f"expected an integer >= {minimum}, got {raw!r}"
        return default
    if value < minimum:
        errors[name] = f"expected an integer >= {minimum}, got {raw!r}"
        return default
    return value


# -- connections and errors ------------------------------------------------------------------------


def _is_busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class _Db:
    """What every connection of one backend shares: the file, the pragmas, error translation."""

    def __init__(self, path: Path, busy_timeout_ms: int, synchronous: str, read_only: bool = False) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self.synchronous = synchronous
        self.read_only = read_only
        self.immutable = False
        self.identity: tuple[int, int] | None = None
        """``(st_dev, st_ino)`` of the file this backend opened (set by :meth:`init_schema`)."""

    def connect(self) -> sqlite3.Connection:
        with self.translate("opening"):
            if self.read_only:
                uri = Path(os.path.abspath(self.path)).as_uri() + ("?immutable=1" if self.immutable else "?mode=ro")
                conn = sqlite3.connect(uri, uri=True, timeout=self.busy_timeout_ms / 1000, isolation_level=None,
                                       check_same_thread=False, cached_statements=64)
            else:
                conn = sqlite3.connect(
                    str(self.path),
                    timeout=self.busy_timeout_ms / 1000,
                    isolation_level=None,
                    check_same_thread=False,
                    cached_statements=64,
                )
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
                conn.execute(f"PRAGMA synchronous = {self.synchronous}")
                if self.identity is not None:
                    self.check_identity()
            except BaseException:
                conn.close()
                raise
        return conn

    def _stat_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def check_identity(self) -> None:
        """Fail (:class:`BackendError`) when the database file was deleted or replaced since it was opened:
        a commit now would go to a file no path leads to, and be lost. One ``stat``; called before
        every write transaction."""
        if self.identity is None:
            return
        now = self._stat_identity()
        if now == self.identity:
            return
        what = "deleted" if now is None else "replaced by another file"
        raise BackendError(
            f"SQLite backend {self.path}: the database file was {what} while this backend had it open; "
            f"refusing to write (a commit would go to a file no path leads to and be lost). Records this run "
            f"committed before may be lost with the old file; restore it or start again on a new file"
        )

    @contextlib.contextmanager
    def translate(self, what: str, waited_ms: int | None = None) -> Iterator[None]:
        """Turn ``sqlite3`` errors into the runtime's error tree, chained, naming the file."""
        try:
            yield
        except sqlite3.Error as exc:
            if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
                ms = self.busy_timeout_ms if waited_ms is None else waited_ms
                raise BackendUnavailableError(
                    f"SQLite backend {self.path}: {what}: the database stayed locked by another writer "
                    f"for longer than the {ms} ms this call may wait (busy.timeout.ms={self.busy_timeout_ms}, "
                    f"or the call's timeout if shorter): {exc}"
                ) from exc
            raise BackendError(f"SQLite backend {self.path}: {what} failed: {exc}") from exc

    def _open_read_only(self) -> None:
        """Check that the file exists and has the schema, without creating anything."""
        if not self.path.is_file():
            where = "no such file" if not self.path.exists() else "not a regular file"
            raise BackendError(
                f"SQLite backend {self.path}: {where}; a read-only command never creates a database "
                f"(check --backend / the connection's path)")
        wal = Path(f"{self.path}-wal")
        for attempt in ("ro", "immutable"):
            self.immutable = attempt == "immutable"
            try:
                conn = self.connect()
            except BackendError:
                if attempt == "immutable":
                    raise
                continue
            try:
                with self.translate("reading the schema"):
                    version = self._schema_version(conn)
                break
            except BackendError as exc:
                cause = str(exc.__cause__ or exc).lower()
                if attempt == "immutable" or not ("readonly" in cause or "unable to open" in cause):
                    raise
                if wal.exists() and wal.stat().st_size > 0:
                    raise BackendError(
                        f"SQLite backend {self.path}: cannot open it read-only: SQLite needs to create "
                        f"{self.path}-shm (its folder is not writable for this user) to read the pending "
                        f"write-ahead log {wal}; open it once with write access to checkpoint it") from exc
            finally:
                conn.close()
        if version != SCHEMA_VERSION:
            raise BackendError(
                f"SQLite backend {self.path}: not a pyconnect database (schema version {version}, expected "
                f"{SCHEMA_VERSION}); a read-only command never creates the schema")
        self.identity = self._stat_identity()

    def init_schema(self) -> None:
        if self.read_only:
            self._open_read_only()
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BackendUnavailableError(
                f"SQLite backend {self.path}: the store cannot be reached: cannot create its directory "
                f"{self.path.parent}: {exc.strerror or exc}") from exc
        conn = self.connect()
        try:
            with self.translate("creating the schema"):
                self._enable_wal(conn)
                if self._schema_version(conn) == SCHEMA_VERSION:
                    self.identity = self._stat_identity()
                    return  # the usual case: no write lock needed to open an existing file
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for stmt in _SCHEMA:
                        conn.execute(stmt)
                    row = conn.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
                    if row is None:
                        conn.execute("INSERT INTO meta(name, value) VALUES ('schema_version', ?)",
                                     (str(SCHEMA_VERSION),))
                    elif int(row[0]) != SCHEMA_VERSION:
                        raise BackendError(
                            f"SQLite backend {self.path}: schema version {row[0]} is not the supported "
                            f"version {SCHEMA_VERSION}"
                        )
                    conn.execute("COMMIT")
                except BaseException:
                    _rollback(conn)
                    raise
            self.identity = self._stat_identity()
        finally:
            conn.close()

    @staticmethod
    def _schema_version(conn: sqlite3.Connection) -> int | None:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone() is None:
            return None
        row = conn.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
        return None if row is None else int(row[0])

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching to WAL needs an exclusive lock and may report SQLITE_BUSY without waiting; retry
        # until the busy timeout (another process is usually doing the very same switch).
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        delay = 0.005
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() == "wal":
                    return
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() == "wal":
                    return
                raise BackendError(f"SQLite backend {self.path}: cannot switch to WAL mode (got {mode!r})")
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.1)


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


_inherited: list[sqlite3.Connection] = []
"""Connections a forked child inherited from its parent: never used nor closed in the child (SQLite
forbids carrying a connection across ``fork``), only kept from being garbage-collected."""


class _Conn:
    """A lazily opened connection owned by one object (used by one thread at a time)."""

    def __init__(self, db: _Db) -> None:
        self.db = db
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self.closed = False
        self.timeout_ms = db.busy_timeout_ms

    def get(self) -> sqlite3.Connection:
        conn = self._conn
        if conn is None or self._pid != os.getpid():
            if self.closed:
                raise BackendError(f"SQLite backend {self.db.path}: used after close()")
            if conn is not None:  # opened before a fork: the child opens its own
                _inherited.append(conn)
            conn = self._conn = self.db.connect()
            self._pid = os.getpid()
            self.timeout_ms = self.db.busy_timeout_ms
        return conn

    def bounded(self, timeout: float | None) -> sqlite3.Connection:
        """The connection, its busy timeout set to ``min(timeout, busy.timeout.ms)``, for a write
        transaction: the file's identity is checked first (:meth:`_Db.check_identity`)."""
        self.db.check_identity()
        conn = self.get()
        ms = self.db.busy_timeout_ms
        if timeout is not None:
            ms = max(0, min(ms, int(timeout * 1000)))
        if ms != self.timeout_ms:
            conn.execute(f"PRAGMA busy_timeout = {ms}")
            self.timeout_ms = ms
        return conn

    def translate(self, what: str) -> contextlib.AbstractContextManager[None]:
        return self.db.translate(what, self.timeout_ms)

    def close(self) -> None:
        self.closed = True
        conn, self._conn = self._conn, None
        if conn is not None and self._pid != os.getpid():
            _inherited.append(conn)
        elif conn is not None:
            _rollback(conn)
            with contextlib.suppress(sqlite3.Error):
                conn.close()


# -- topics ----------------------------------------------------------------------------------------


def _topic_info(conn: sqlite3.Connection, name: str) -> tuple[int, ...] | None:
    """The ``partitions`` row id of each partition of a topic (index = partition), ``None`` if absent.
    A topic's partitions never change once created, so callers may cache this."""
    rows = conn.execute(
        "SELECT p.partition, p.id FROM topics t JOIN partitions p ON p.topic_id = t.id"
        " WHERE t.name = ? ORDER BY p.partition",
        (name,),
    ).fetchall()
    if not rows:
        return None
    return tuple(pid for _, pid in rows)


def _create_topic(conn: sqlite3.Connection, name: str, partitions: int) -> tuple[int, ...]:
    """Create a topic inside the caller's write transaction (or return the existing one)."""
    info = _topic_info(conn, name)
    if info is not None:
        return info
    if not name or not isinstance(name, str):
        raise DataError(f"invalid topic name {name!r}: expected a non-empty string")
    cur = conn.execute("INSERT INTO topics(name, partitions) VALUES (?, ?)", (name, partitions))
    tid = cur.lastrowid
    assert tid is not None
    conn.executemany(
        "INSERT INTO partitions(topic_id, partition, next_offset) VALUES (?, ?, 0)",
        [(tid, p) for p in range(partitions)],
    )
    info = _topic_info(conn, name)
    assert info is not None and len(info) == partitions
    return info


# -- producers -------------------------------------------------------------------------------------


class SQLiteProducer(Producer):
    """Non-transactional producer: ``send`` buffers, ``flush`` writes everything in one transaction."""

    def __init__(self, backend: SQLiteBackend, *, track_metadata: bool = False) -> None:
        self._backend = backend
        self._db = backend._db
        self._conn = _Conn(backend._db)
        self._track = track_metadata
        self._buffer: list[Any] = []
        self._topics: dict[str, tuple[int, ...]] = {}  # name -> partition row ids; fixed once created
        backend._register(self)

    # the buffered path -------------------------------------------------------------------------

    def send(self, records: Sequence[ProducerRecord]) -> None:
        self._check_open()
        self._buffer.extend(records)

    def flush(self, timeout: float) -> Written:
        """Write everything sent since the last flush in one transaction. If the write lock could not
        be had in time (:class:`BackendUnavailableError`) the records stay buffered for the next
        flush; after any other error they are dropped."""
        self._check_open()
        records, self._buffer = self._buffer, []
        if not records:
            return Written({}, [] if self._track else None)
        try:
            conn = self._conn.bounded(timeout)
            with self._conn.translate(f"writing {len(records)} records"):
                conn.execute("BEGIN IMMEDIATE")
                try:
                    written = self._write(conn, records)
                    conn.execute("COMMIT")
                except BaseException:
                    self._rolled_back(conn)
                    raise
        except BackendUnavailableError:
            self._buffer[:0] = records
            raise
        return written

    def close(self) -> None:
        self._buffer = []
        self._conn.close()

    def _check_open(self) -> None:
        if self._conn.closed:
            raise BackendError(f"SQLite backend {self._db.path}: producer used after close()")

    def _rolled_back(self, conn: sqlite3.Connection) -> None:
        _rollback(conn)
        self._topics.clear()  # topics created by the rolled back transaction do not exist

    # writing inside the caller's BEGIN IMMEDIATE ------------------------------------------------

    def _resolve_topics(self, conn: sqlite3.Connection, names: set[str]) -> dict[str, tuple[int, ...]]:
        topics = self._topics
        for name in names:
            if name not in topics:
                info = _topic_info(conn, name)
                if info is None:
                    if not isinstance(name, str) or not name:
                        raise DataError(f"invalid topic name {name!r}: expected a non-empty string")
                    info = _create_topic(conn, name, self._backend.default_partitions)
                topics[name] = info
        return topics

    def _write(self, conn: sqlite3.Connection, records: list[Any]) -> Written:
        """Assign offsets and insert ``records``; the caller holds the write lock."""
        now = int(time.time() * 1000)
        try:
            names = {r[0] for r in records}
        except (TypeError, IndexError, KeyError) as exc:
            raise DataError(f"expected ProducerRecord tuples, got {records[0]!r}") from exc
        topics = self._resolve_topics(conn, names)
        groups: dict[tuple[str, int], list[Any]]
        order: list[tuple[str, int]] | None = None
        if len(names) == 1 and len(topics[next(iter(names))]) == 1 and {r[1] for r in records} <= _NONE_OR_ZERO:
            groups = {(next(iter(names)), 0): records}  # the common case: one topic with one partition
        else:
            groups, order = self._group(records, topics)
        ranges: Ranges = {}
        bases: dict[tuple[str, int], int] = {}
        execute = conn.execute
        for (name, p), recs in groups.items():
            pid = topics[name][p]
            (base,) = execute(_GET_NEXT, (pid,)).fetchone()
            n = len(recs)
            if base + n > MAX_OFFSET:
                raise BackendError(f"SQLite backend {self._db.path}: partition {name}[{p}] is full "
                                   f"({MAX_OFFSET + 1} offsets)")
            first = (pid << OFFSET_BITS) + base
            try:
                conn.executemany(_INSERT_RECORD, _rows(recs, first, now))
            except (sqlite3.ProgrammingError, sqlite3.InterfaceError) as exc:
                raise DataError(f"a record for {name}[{p}] cannot be stored: key, value and timestamp must be "
                                f"bytes, bytes and int (or None): {exc}") from exc
            execute(_SET_NEXT, (base + n, pid))
            ranges[TopicPartition(name, p)] = (base, base + n)
            bases[(name, p)] = base
        metadata: list[RecordMetadata] | None = None
        if self._track:
            metadata = []
            if order is None:
                ((name, p),) = groups
                offsets: Any = count(bases[(name, p)])
                for r in records:
                    metadata.append(RecordMetadata(name, p, next(offsets), _ts(r, now)))
            else:
                nxt = dict(bases)
                for r, gp in zip(records, order, strict=True):
                    off = nxt[gp]
                    nxt[gp] = off + 1
                    metadata.append(RecordMetadata(gp[0], gp[1], off, _ts(r, now)))
        return Written(ranges, metadata)

    def _group(self, records: list[Any], topics: dict[str, tuple[int, ...]]
               ) -> tuple[dict[tuple[str, int], list[Any]], list[tuple[str, int]]]:
        """Records grouped by (topic, partition), send order kept within each group; and each record's
        (topic, partition) in send order."""
        groups: dict[tuple[str, int], list[Any]] = {}
        order: list[tuple[str, int]] = []
        crc32 = zlib.crc32
        for i, r in enumerate(records):
            name, p = r[0], r[1]
            nparts = len(topics[name])
            if p is None:
                key = r[2]
                if key is None or nparts == 1:
                    p = 0
                else:
                    try:
                        p = crc32(key) % nparts
                    except TypeError as exc:
                        raise DataError(f"record {i} of the batch (topic {name!r}): key {key!r} is not bytes") from exc
            elif not (type(p) is int and 0 <= p < nparts):
                raise DataError(
                    f"record {i} of the batch: topic {name!r} has {nparts} partition(s) (0..{nparts - 1}), "
                    f"it cannot be written to partition {p!r}"
                )
            gp = (name, p)
            g = groups.get(gp)
            if g is None:
                g = groups[gp] = []
            g.append(r)
            order.append(gp)
        return groups, order


_NONE_OR_ZERO = frozenset((None, 0))


def _ts(r: Any, now: int) -> int:
    ts = r[4] if len(r) > 4 else None
    return now if ts is None else int(ts)


def _rows(recs: list[Any], first: int, now: int) -> list[tuple[Any, ...]]:
    """The ``records`` rows of one partition's records, row ids from ``first`` on."""
    enc = encode_headers
    try:
        return [(rid, k, v, now if ts is None else ts, enc(h) if h else None)
                for rid, (_, _, k, v, ts, h) in zip(count(first), recs)]
    except ValueError:  # a short plain tuple somewhere: pad them all, then again
        return [(rid, k, v, now if ts is None else ts, enc(h) if h else None)
                for rid, (_, _, k, v, ts, h) in zip(count(first), map(_full, recs))]


def _full(r: Any) -> tuple[Any, ...]:
    """A short plain tuple (``topic, partition, key, value[, timestamp[, headers]]``) padded to 6 fields."""
    t = tuple(r)
    if not 4 <= len(t) <= 6:
        raise DataError(f"expected a ProducerRecord (topic, partition, key, value, timestamp, headers), got {r!r}")
    return t + (None,) * (6 - len(t))


class SQLiteTransactionalProducer(SQLiteProducer, TransactionalProducer):
    """A task's transactional producer: one SQLite transaction per ``commit_transaction``."""

    def __init__(self, backend: SQLiteBackend, transactional_id: str, offset_store: str | None,
                 *, track_metadata: bool = False) -> None:
        super().__init__(backend, track_metadata=track_metadata)
        if not isinstance(transactional_id, str) or not transactional_id:
            raise ConfigError(errors={"transactional.id": f"expected a non-empty string, got {transactional_id!r}"})
        self.transactional_id = transactional_id
        self.offset_store_name = offset_store or DEFAULT_OFFSET_STORE
        self._epoch: int | None = None
        self._in_txn = False
        self._fenced_by: int | None = None

    def init_transactions(self, timeout: float) -> None:
        self._check_open()
        conn = self._conn.bounded(timeout)
        with self._conn.translate(f"initialising transactional id {self.transactional_id!r}"):
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT epoch FROM producer_epochs WHERE transactional_id = ?",
                                   (self.transactional_id,)).fetchone()
                epoch = 0 if row is None else row[0] + 1
                conn.execute(
                    "INSERT INTO producer_epochs(transactional_id, epoch) VALUES (?, ?)"
                    " ON CONFLICT(transactional_id) DO UPDATE SET epoch = excluded.epoch",
                    (self.transactional_id, epoch),
                )
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
        self._epoch = epoch
        self._in_txn = False
        self._buffer = []

    @property
    def epoch(self) -> int | None:
        """This producer's epoch (``None`` before ``init_transactions``)."""
        return self._epoch

    def begin_transaction(self) -> None:
        self._check_ready()
        if self._in_txn:
            raise BackendError(
                f"transactional id {self.transactional_id!r}: begin_transaction() while a transaction is open"
            )
        self._in_txn = True
        self._buffer = []

    def send(self, records: Sequence[ProducerRecord]) -> None:
        if not self._in_txn:
            self._check_ready()
            raise BackendError(
                f"transactional id {self.transactional_id!r}: send() outside a transaction; "
                "call begin_transaction() first"
            )
        self._buffer.extend(records)

    def flush(self, timeout: float) -> Written:
        """Records of a transactional producer are written only by :meth:`commit_transaction`; this
        writes nothing and reports nothing."""
        self._check_ready()
        return Written({}, [] if self._track else None)

    def commit_transaction(self, offsets: Sequence[OffsetEntry], timeout: float,
                           extra: ExtraEntries | None = None) -> Written:
        """Write the buffered records, ``offsets`` and ``extra`` in one SQLite transaction, if this producer
        still holds the current epoch and its connector generation (:attr:`generation_guard`) is still the
        newest (else :class:`ProducerFencedError`, nothing written). Offsets of a connector-specific store
        are also written to the global store in the same transaction (KIP-618). If the write lock
        could not be had in time (:class:`BackendUnavailableError`) the transaction stays open, so the
        caller may retry the commit or abort; after any other error it is over and nothing was written."""
        self._check_ready()
        if not self._in_txn:
            raise BackendError(
                f"transactional id {self.transactional_id!r}: commit_transaction() without begin_transaction()"
            )
        records = self._buffer
        self._in_txn = False
        try:
            conn = self._conn.bounded(timeout)
            with self._conn.translate(
                f"committing a transaction of {self.transactional_id!r} ({len(records)} records, "
                f"{len(offsets)} offsets)"
            ):
                conn.execute("BEGIN IMMEDIATE")
                try:
                    guard = self.generation_guard
                    if guard is not None:
                        newest = _registry_generation(conn, guard[0], guard[1])
                        if newest is not None and newest != guard[2]:
                            self._fenced_generation = newest
                            raise self._fenced_error()
                    row = conn.execute("SELECT epoch FROM producer_epochs WHERE transactional_id = ?",
                                       (self.transactional_id,)).fetchone()
                    current = None if row is None else row[0]
                    if current != self._epoch:
                        self._fenced_by = current
                        raise self._fenced_error()
                    written = self._write(conn, records) if records else Written({}, [] if self._track else None)
                    if offsets:
                        _write_offsets(conn, self.offset_store_name, offsets)
                        if self.offset_store_name != DEFAULT_OFFSET_STORE and self.offset_store_name not in INTERNAL_STORES:
                            _write_offsets(conn, DEFAULT_OFFSET_STORE, offsets)
                    more = extra(written) if callable(extra) else extra
                    for store, entries in (more or {}).items():
                        if entries:
                            _write_offsets(conn, store, entries)
                    conn.execute("COMMIT")
                except BaseException:
                    self._rolled_back(conn)
                    raise
        except BackendUnavailableError:
            self._in_txn = True  # nothing was written: the caller may retry the commit or abort
            raise
        except BaseException:
            self._buffer = []
            raise
        self._buffer = []
        return written

    def abort_transaction(self, timeout: float) -> None:
        self._check_open()
        self._buffer = []
        self._in_txn = False

    def _fenced_error(self) -> ProducerFencedError:
        newer = getattr(self, "_fenced_generation", None)
        if newer is not None and self.generation_guard is not None:
            return ProducerFencedError(
                f"transactional id {self.transactional_id!r} was fenced: it belongs to generation "
                f"{self.generation_guard[2]} of its connector, and generation {newer} has started since "
                f"(SQLite backend {self._db.path})")
        return ProducerFencedError(
            f"transactional id {self.transactional_id!r} was fenced: this producer has epoch {self._epoch}, "
            f"a newer instance initialised epoch {self._fenced_by} (SQLite backend {self._db.path})"
        )

    def _check_ready(self) -> None:
        self._check_open()
        if self._epoch is None:
            raise BackendError(
                f"transactional id {self.transactional_id!r}: call init_transactions() before using the producer"
            )
        if self._fenced_by is not None:
            raise self._fenced_error()


def _registry_generation(conn: sqlite3.Connection, store: str, key: bytes) -> int | None:
    """The generation held by a registry entry (a JSON object with ``"generation"``), or None."""
    row = conn.execute("SELECT value FROM source_offsets WHERE store = ? AND key = ?", (store, key)).fetchone()
    if row is None:
        return None
    try:
        gen = json.loads(row[0]).get("generation")
    except (ValueError, AttributeError):
        return None
    return gen if isinstance(gen, int) else None


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


# -- offset store ----------------------------------------------------------------------------------


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
        with self._conn.translate(f"writing {len(entries)} offsets to store {self.name!r}"):
            conn.execute("BEGIN IMMEDIATE")
            try:
                _write_offsets(conn, self.name, entries)
                if self.name != DEFAULT_OFFSET_STORE and self.name not in INTERNAL_STORES:
                    _write_offsets(conn, DEFAULT_OFFSET_STORE, entries)  # KIP-618: mirrored to the global store
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise

    def close(self) -> None:
        self._conn.close()


# -- consumer --------------------------------------------------------------------------------------

_new = tuple.__new__


class SQLiteConsumer(Consumer):
    """A consumer over committed records (everything in the file is committed)."""

    def __init__(self, backend: SQLiteBackend, group_id: str | None) -> None:
        self.group_id = group_id
        self._db = backend._db
        self._conn = _Conn(backend._db)
        self._positions: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        self._topics: dict[str, tuple[int, ...]] = {}
        self._rotate = 0
        backend._register(self)

    def _pid(self, conn: sqlite3.Connection, tp: TopicPartition) -> int | None:
        """The ``partitions`` row id of a topic partition, ``None`` if it does not exist (yet)."""
        pids = self._topics.get(tp.topic)
        if pids is None:
            pids = _topic_info(conn, tp.topic)
            if pids is None:
                return None
            self._topics[tp.topic] = pids
        return pids[tp.partition] if 0 <= tp.partition < len(pids) else None

    def partitions(self, topics: Sequence[str] = (), pattern: str | None = None) -> list[TopicPartition]:
        if isinstance(topics, str):
            topics = [topics]
        regex = None
        if pattern is not None:
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                raise ConfigError(errors={"topics.regex": f"invalid regular expression {pattern!r}: {exc}"}) from exc
        conn = self._conn.get()
        with self._conn.translate("listing partitions"):
            rows = conn.execute("SELECT name, partitions FROM topics ORDER BY name").fetchall()
        wanted = set(topics)
        out: list[TopicPartition] = []
        for name, n in rows:
            if name in wanted or (regex is not None and regex.fullmatch(name)):
                out.extend(TopicPartition(name, p) for p in range(n))
        return out

    def committed(self, partitions: Sequence[TopicPartition], timeout: float) -> dict[TopicPartition, int | None]:
        out: dict[TopicPartition, int | None] = {TopicPartition(*tp): None for tp in partitions}
        if self.group_id is None or not out:
            return out
        conn = self._conn.get()
        with self._conn.translate(f"reading committed offsets of group {self.group_id!r}"):
            for topic, p, off in conn.execute(
                "SELECT topic, partition, next_offset FROM group_offsets WHERE group_id = ?", (self.group_id,)
            ):
                tp = TopicPartition(topic, p)
                if tp in out:
                    out[tp] = off
        return out

    def end_offsets(self, partitions: Sequence[TopicPartition], timeout: float) -> dict[TopicPartition, int]:
        conn = self._conn.get()
        out: dict[TopicPartition, int] = {}
        with self._conn.translate("reading end offsets"):
            for tp in partitions:
                tp = TopicPartition(*tp)
                pid = self._pid(conn, tp)
                row = None if pid is None else conn.execute(_GET_NEXT, (pid,)).fetchone()
                out[tp] = 0 if row is None else row[0]
        return out

    def beginning_offsets(self, partitions: Sequence[TopicPartition], timeout: float) -> dict[TopicPartition, int]:
        conn = self._conn.get()
        out: dict[TopicPartition, int] = {}
        with self._conn.translate("reading beginning offsets"):
            for tp in partitions:
                tp = TopicPartition(*tp)
                pid = self._pid(conn, tp)
                if pid is None:
                    out[tp] = 0
                    continue
                row = conn.execute("SELECT MIN(id) FROM records WHERE id >= ? AND id < ?",
                                   (pid << OFFSET_BITS, (pid + 1) << OFFSET_BITS)).fetchone()
                if row[0] is None:  # empty: the beginning is the end
                    out[tp] = conn.execute(_GET_NEXT, (pid,)).fetchone()[0]
                else:
                    out[tp] = row[0] & MAX_OFFSET
        return out

    def assign(self, positions: Mapping[TopicPartition, int]) -> None:
        new: dict[TopicPartition, int] = {}
        for tp, off in positions.items():
            tp = TopicPartition(*tp)
            new[tp] = _check_offset(tp, off)
        self._positions = new
        self._paused &= set(new)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        tp = TopicPartition(*partition)
        if tp not in self._positions:
            raise BackendError(f"seek on {tp.topic}[{tp.partition}], which is not assigned to this consumer")
        self._positions[tp] = _check_offset(tp, offset)

    def position(self, partition: TopicPartition) -> int:
        """The next offset :meth:`poll` returns for an assigned partition."""
        return self._positions[TopicPartition(*partition)]

    def assignment(self) -> list[TopicPartition]:
        return list(self._positions)

    def pause(self, partitions: Sequence[TopicPartition]) -> None:
        for tp in partitions:
            tp = TopicPartition(*tp)
            if tp not in self._positions:
                raise BackendError(f"pause of {tp.topic}[{tp.partition}], which is not assigned to this consumer")
            self._paused.add(tp)

    def resume(self, partitions: Sequence[TopicPartition]) -> None:
        for tp in partitions:
            self._paused.discard(TopicPartition(*tp))

    def paused(self) -> list[TopicPartition]:
        return list(self._paused)

    def poll(self, max_records: int, timeout: float) -> list[ConsumedRecord]:
        if max_records <= 0:
            return []
        deadline = time.monotonic() + max(0.0, timeout)
        delay = 0.002
        while True:
            batch = self._fetch(max_records)
            if batch:
                return batch
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.05)

    def _fetch(self, max_records: int) -> list[ConsumedRecord]:
        active = [tp for tp in self._positions if tp not in self._paused]
        if not active:
            return []
        conn = self._conn.get()
        n = len(active)
        start = self._rotate % n
        self._rotate = start + 1
        out: list[ConsumedRecord] = []
        dec = decode_headers
        cr = ConsumedRecord
        with self._conn.translate("polling records"):
            for i in range(n):
                tp = active[(start + i) % n]
                want = max_records - len(out)
                if want <= 0:
                    break
                pid = self._pid(conn, tp)
                if pid is None:
                    continue
                shift = pid << OFFSET_BITS
                topic, p = tp
                pos = min(self._positions[tp], OFFSET_LIMIT)  # past the end: nothing, not the next partition
                rows = conn.execute(_SELECT_FROM + " LIMIT ?", (shift + pos, shift + OFFSET_LIMIT, want)).fetchall()
                if rows:
                    out.extend(
                        [_new(cr, (topic, p, rid - shift, k, v, t, None if h is None else dec(h)))
                         for rid, k, v, t, h in rows]
                    )
                    self._positions[tp] = rows[-1][0] - shift + 1
        return out

    def commit(self, offsets: Mapping[TopicPartition, int], timeout: float) -> None:
        if not offsets:
            return
        if self.group_id is None:
            raise BackendError("commit() on a consumer without a group_id: there is no group to commit for")
        rows = []
        for tp, off in offsets.items():
            tp = TopicPartition(*tp)
            rows.append((self.group_id, tp.topic, tp.partition, _check_offset(tp, off)))
        conn = self._conn.bounded(timeout)
        with self._conn.translate(f"committing offsets of group {self.group_id!r}"):
            conn.execute("BEGIN IMMEDIATE")
            try:
                guard = self.generation_guard
                if guard is not None:  # a newer run of the sink connector fences this one's commits
                    newest = _registry_generation(conn, guard[0], guard[1])
                    if newest is not None and newest != guard[2]:
                        raise ProducerFencedError(
                            f"group {self.group_id!r}: offset commit refused, nothing committed: this run is "
                            f"generation {guard[2]} of its sink connector and generation {newest} has started "
                            f"since (SQLite backend {self._db.path})")
                conn.executemany(
                    "INSERT INTO group_offsets(group_id, topic, partition, next_offset) VALUES (?,?,?,?)"
                    " ON CONFLICT(group_id, topic, partition) DO UPDATE SET next_offset = excluded.next_offset",
                    rows,
                )
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise

    def close(self) -> None:
        self._conn.close()


def _check_offset(tp: TopicPartition, offset: Any) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise DataError(f"offset of {tp.topic}[{tp.partition}]: expected an integer >= 0, got {offset!r}")
    return offset


# -- the backend -----------------------------------------------------------------------------------


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
        settings = dict(settings or {})
        errors: dict[str, str] = {}
        busy = _int_setting(settings, "busy.timeout.ms", DEFAULT_BUSY_TIMEOUT_MS, 0, errors)
        partitions = _int_setting(settings, "default.partitions", 1, 1, errors)
        sync = str(settings.get("synchronous", "NORMAL")).upper()
        if sync not in _SYNCHRONOUS:
            errors["synchronous"] = f"expected one of {', '.join(_SYNCHRONOUS)}, got {settings.get('synchronous')!r}"
        cluster = settings.get("cluster.id")
        if cluster is not None and (not isinstance(cluster, str) or not cluster):
            errors["cluster.id"] = f"expected a non-empty string, got {cluster!r}"
        if errors:
            raise ConfigError(errors=errors)
        unknown = sorted(str(k) for k in settings if k not in _SETTINGS)
        if unknown:
            log.warning("SQLite backend %s: ignoring settings it does not use: %s (it uses %s)",
                        path, ", ".join(unknown), ", ".join(_SETTINGS))
        return cls(path, busy_timeout_ms=busy, synchronous=sync, default_partitions=partitions,
                   cluster_id=cluster, url=url, read_only=read_only)

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
        with self._thread_conn().translate(f"updating an entry of store {store!r}"):
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT value FROM source_offsets WHERE store = ? AND key = ?",
                                   (store, key)).fetchone()
                new = update(None if row is None else bytes(row[0]))
                _write_offsets(conn, store, [(key, new)])
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
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
        with self._db.translate(f"creating topics {sorted(topics)}"):
            conn.execute("BEGIN IMMEDIATE")
            try:
                for name, n in topics.items():
                    if _topic_info(conn, name) is not None:
                        if not exist_ok:
                            raise BackendError(f"SQLite backend {self.path}: topic {name!r} already exists")
                        continue
                    _create_topic(conn, name, n)
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise

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
        conn = self._db.connect()
        try:
            with self._db.translate(f"reading {topic}[{p}] offsets [{start}, {end})"):
                pids = _topic_info(conn, topic)
                if pids is None or not 0 <= p < len(pids):
                    return
                shift = pids[p] << OFFSET_BITS
                cur = conn.execute(_SELECT_FROM, (shift + start, shift + end))
                dec = decode_headers
                cr = ConsumedRecord
                size = max(1, batch_size)
                while True:
                    rows = cur.fetchmany(size)
                    if not rows:
                        break
                    yield from [_new(cr, (topic, p, rid - shift, k, v, t, None if h is None else dec(h)))
                                for rid, k, v, t, h in rows]
        finally:
            conn.close()

    def read_range_batches(
        self, partition: TopicPartition, start: int, end: int, *, batch_size: int = 10_000,
        timeout: float = 30.0, keys: bool = True, timestamps: bool = True, headers: bool = True,
    ) -> Iterator[tuple[Sequence[int], Sequence[bytes | None] | None, Sequence[bytes | None],
                        Sequence[int | None] | None, Sequence[WireHeaders | None] | None]]:
        """:meth:`read_range` as columns: per window of ``batch_size`` offsets one range query on a
        connection of its own selecting only the columns asked for, without a per-record object where it
        can: each column comes from SQLite concatenated in one buffer (values joined by newlines, byte columns
        with their lengths), split only when indexed, so columnar readers build arrays straight from the
        buffers (headers decoded in bulk); windows that cannot come so (offsets not consecutive, null
        values, a value holding a newline) are fetched as rows."""
        self._check_open()
        topic, p = TopicPartition(*partition)
        start, end = max(0, start), min(end, OFFSET_LIMIT)
        if end <= start:
            return
        conn = self._db.connect()
        try:
            with self._db.translate(f"reading {topic}[{p}] offsets [{start}, {end})"):
                pids = _topic_info(conn, topic)
                if pids is None or not 0 <= p < len(pids):
                    return
                shift = pids[p] << OFFSET_BITS
                # ``end`` bounds the read, it does not promise records up to it: stop at the partition's end
                # (committed now), so a far ``end`` is not walked window by empty window
                row = conn.execute(_GET_NEXT, (pids[p],)).fetchone()
                end = min(end, int(row[0]) if row is not None else start)
                wanted = [c for c, on in (("key", keys), ("ts", timestamps), ("headers", headers)) if on]
                size = max(1, batch_size)
                joined = conn.execute("PRAGMA encoding").fetchone()[0] == "UTF-8"  # blobs concatenate as is
                conn.execute(f"PRAGMA mmap_size = {_SCAN_MMAP_BYTES}")  # a scan reads pages in place, not copied
                lo = start
                while lo < end:
                    hi = min(end, lo + size)
                    window = _joined_window(conn, shift, lo, hi, wanted) if joined else None
                    if window is not None:
                        if window[0]:
                            yield window
                    else:
                        rows = conn.execute(
                            f"SELECT id - ?, value{''.join(', ' + c for c in wanted)} FROM records"
                            " WHERE id >= ? AND id < ? ORDER BY id", (shift, shift + lo, shift + hi)).fetchall()
                        if rows:
                            cols = dict(zip(["offset", "value", *wanted], zip(*rows, strict=True), strict=True))
                            hdrs = cols.get("headers")
                            yield (cols["offset"], cols.get("key"), cols["value"], cols.get("ts"),
                                   None if hdrs is None else _EncodedHeaders(hdrs))
                    lo = hi
        finally:
            conn.close()

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



# -- columnar reads (read_range_batches) -----------------------------------------------------------

_SCAN_MMAP_BYTES = 1 << 30
"""How much of the file a columnar scan maps (SQLite maps at most the file's size): pages are read in place
instead of copied into the page cache (safe here: the store never truncates its file under a reader)."""

# Per window one pass over a rowid range. SQLite visits the rows, and so concatenates each column, in
# rowid order (offset order within a partition). Byte columns come concatenated with their lengths as
# text (-1 for null; CAST AS BLOB so text-typed cells count bytes); the values joined by newlines.
_WINDOW_COLUMNS = {
    "value": ("count(value)", "CAST(group_concat(value, x'0a') AS BLOB)"),
    "key": ("CAST(group_concat(ifnull(key, x''), '') AS BLOB)", "group_concat(ifnull(length(CAST(key AS BLOB)), -1))"),
    "ts": ("count(ts)", "group_concat(ts)"),
    "headers": ("CAST(group_concat(ifnull(headers, x''), '') AS BLOB)",
                "group_concat(ifnull(length(CAST(headers AS BLOB)), -1))"),
}


class _JoinedValues(Sequence[bytes]):
    """The values of a window of consecutive records as SQLite concatenated them: ``joined`` is the
    values separated by newlines, no value containing one and none null, so splitting it is exact (done
    only when a value is indexed). Readers that parse newline-delimited JSON use ``joined`` as is."""

    __slots__ = ("_split", "joined", "n")

    def __init__(self, joined: bytes, n: int) -> None:
        self.joined = joined
        self.n = n
        self._split: list[bytes] | None = None

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: Any) -> Any:
        if self._split is None:
            self._split = self.joined.split(b"\n") if self.n else []
        return self._split[index]


class _JoinedBlobs(Sequence[bytes | None]):
    """Byte strings (or nulls) of a window of records as SQLite concatenated them: ``data`` and their
    lengths, ``lengths`` (comma-separated text, ``-1`` for null). Split only when indexed; columnar
    readers build their arrays from the two directly."""

    __slots__ = ("_items", "data", "lengths", "n")

    def __init__(self, data: bytes, lengths: str, n: int) -> None:
        self.data = data
        self.lengths = lengths
        self.n = n
        self._items: list[bytes | None] | None = None

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: Any) -> Any:
        if self._items is None:
            items: list[bytes | None] = []
            pos = 0
            for size in (map(int, self.lengths.split(",")) if self.n else ()):
                if size < 0:
                    items.append(None)
                else:
                    items.append(self.data[pos:pos + size])
                    pos += size
            self._items = items
        return self._items[index]


class _JoinedInts(Sequence[int]):
    """Integers of a window of records as SQLite concatenated them: ``text``, comma-separated."""

    __slots__ = ("_items", "n", "text")

    def __init__(self, text: str, n: int) -> None:
        self.text = text
        self.n = n
        self._items: list[int] | None = None

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: Any) -> Any:
        if self._items is None:
            self._items = [int(v) for v in self.text.split(",")] if self.n else []
        return self._items[index]


class _EncodedHeaders(Sequence[WireHeaders | None]):
    """Per-record headers as stored (``encoded``, :func:`encode_headers`'s bytes or ``None``), decoded
    when indexed: columnar readers decode ``encoded`` in bulk."""

    __slots__ = ("encoded",)

    def __init__(self, encoded: Sequence[bytes | None]) -> None:
        self.encoded = encoded

    def __len__(self) -> int:
        return len(self.encoded)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [decode_headers(h) for h in self.encoded[index]]
        return decode_headers(self.encoded[index])


def _joined_window(conn: sqlite3.Connection, shift: int, lo: int, hi: int, wanted: Sequence[str]
                   ) -> tuple[Sequence[int], Sequence[bytes | None] | None, Sequence[bytes | None],
                              Sequence[int | None] | None, Sequence[WireHeaders | None] | None] | None:
    """The window ``[lo, hi)`` from one aggregate query, when it comes exact: every offset of it present (the
    usual case: offsets are assigned at commit, one after another, and ranges name committed records), no
    null value or timestamp and no value holding a newline. Offsets are a ``range``; ``None`` when the
    caller must fetch rows instead (also for a window only partly stored: the rows say which offsets are)."""
    sql = ", ".join(c for name in ("value", *wanted) for c in _WINDOW_COLUMNS[name])
    try:
        row = conn.execute(f"SELECT count(*), {sql} FROM records WHERE id >= ? AND id < ?",
                           (shift + lo, shift + hi)).fetchone()
    except sqlite3.DataError:  # the window's bytes exceed SQLite's maximum string length
        return None
    n, non_null, joined = row[:3]
    if not n:
        return range(0), None, _JoinedValues(b"", 0), None, None
    # ids are unique integers, so hi - lo rows in [lo, hi) are exactly the offsets lo .. hi - 1
    if n != hi - lo or non_null != n or joined.count(b"\n") != n - 1:
        return None
    cols: dict[str, Any] = {}
    at = 3
    for name in wanted:
        first_col, second = row[at], row[at + 1]
        at += 2
        if name == "ts":
            if first_col != n or second.count(",") != n - 1:
                return None
            cols[name] = _JoinedInts(second, n)
        else:
            if second.count(",") != n - 1:
                return None
            blobs = _JoinedBlobs(first_col, second, n)
            cols[name] = _EncodedHeaders(blobs) if name == "headers" else blobs
    return range(lo, hi), cols.get("key"), _JoinedValues(joined, n), cols.get("ts"), cols.get("headers")

__all__ = [
    "DEFAULT_OFFSET_STORE",
    "SQLiteBackend",
    "SQLiteConsumer",
    "SQLiteOffsetStore",
    "SQLiteProducer",
    "SQLiteTransactionalProducer",
    "decode_headers",
    "encode_headers",
    "parse_url",
]
