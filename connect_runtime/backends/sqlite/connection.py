"""Connections to the file: what they share (:class:`_Db`: path, pragmas, the file's identity, opening or
creating the schema, ``sqlite3`` errors translated at this edge) and one object's lazily opened connection
(:class:`_Conn`: its busy timeout bounded per call, reopened after a ``fork``).

Every ``sqlite3.Error`` leaves this backend as the runtime's error tree, chained and naming the file:
a lock held past the caller's wait is :class:`BackendUnavailableError` (try again), anything else
:class:`BackendError`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from connect_runtime.api.errors import BackendError, BackendUnavailableError
from connect_runtime.backends.sqlite.schema import _SCHEMA, SCHEMA_VERSION, _schema_version, _topic_info


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
            except BaseException:  # an interrupt too: the connection is closed, not leaked half set up
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
                    version = _schema_version(conn)
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
                if _schema_version(conn) == SCHEMA_VERSION:
                    self.identity = self._stat_identity()
                    return  # the usual case: no write lock needed to open an existing file
                with _write_transaction(conn):
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
            self.identity = self._stat_identity()
        finally:
            conn.close()

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


@contextlib.contextmanager
def _write_transaction(conn: sqlite3.Connection, on_rollback: Callable[[], None] | None = None) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` (the file's one write lock, taken up front) ... ``COMMIT``; on any failure,
    the commit's included, ``ROLLBACK`` then ``on_rollback()``, and the error goes on."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:  # an interrupt too: the write lock is never left held
        _rollback(conn)
        if on_rollback is not None:
            on_rollback()
        raise


@contextlib.contextmanager
def _partition_reader(db: _Db, topic: str, p: int, start: int, end: int
                      ) -> Iterator[tuple[sqlite3.Connection, int] | None]:
    """For one range read of ``topic[p]``: a connection of its own (closed after, errors translated) and the
    partition's ``partitions`` row id, or ``None`` when the partition does not exist."""
    conn = db.connect()
    try:
        with db.translate(f"reading {topic}[{p}] offsets [{start}, {end})"):
            pids = _topic_info(conn, topic)
            yield (conn, pids[p]) if pids is not None and 0 <= p < len(pids) else None
    finally:
        conn.close()


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

