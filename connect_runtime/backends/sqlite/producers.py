"""Producers: ``send`` buffers in memory, one short write transaction writes the buffer.

A write (a plain producer's ``flush``, a transactional producer's ``commit_transaction``) is
``BEGIN IMMEDIATE`` → (transactional: the fencing checks of :mod:`.fencing`) → offsets assigned per
partition from the ``partitions.next_offset`` high-water row → the rows inserted with ``executemany``
→ (transactional: source offsets and extra entries, :mod:`.offsets`) → the high-water rows advanced →
``COMMIT``. Readers never see uncommitted records because nothing is written before the commit; an
abort drops the buffer.

Records are grouped by topic partition, send order kept within each; a record without a partition
goes where :func:`connect_runtime.backends.base.default_partition` says (inlined in the per-record
loop), a record without a timestamp gets the commit time (one clock read per write).
"""

from __future__ import annotations

import sqlite3
import time
import zlib
from collections.abc import Sequence
from itertools import count
from typing import TYPE_CHECKING, Any

from connect_runtime.api.errors import (
    BackendError,
    BackendUnavailableError,
    ConfigError,
    DataError,
    ProducerFencedError,
)
from connect_runtime.api.records import RecordMetadata, TopicPartition
from connect_runtime.backends.base import (
    ExtraEntries,
    OffsetEntry,
    Producer,
    ProducerRecord,
    Ranges,
    TransactionalProducer,
    Written,
)
from connect_runtime.backends.sqlite.connection import _Conn, _write_transaction
from connect_runtime.backends.sqlite.fencing import _bump_epoch, _current_epoch, _newer_generation
from connect_runtime.backends.sqlite.headers import encode_headers
from connect_runtime.backends.sqlite.offsets import _write_offsets, _write_source_offsets
from connect_runtime.backends.sqlite.schema import (
    _GET_NEXT,
    _INSERT_RECORD,
    _SET_NEXT,
    DEFAULT_OFFSET_STORE,
    MAX_OFFSET,
    OFFSET_BITS,
    _create_topic,
    _topic_info,
)

if TYPE_CHECKING:
    from connect_runtime.backends.sqlite.backend import SQLiteBackend


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
            with self._conn.translate(f"writing {len(records)} records"), \
                    _write_transaction(conn, self._topics.clear):  # topics it created do not exist
                written = self._write(conn, records)
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
                # the policy of base.default_partition, inlined: no function call per record
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
        with self._conn.translate(f"initialising transactional id {self.transactional_id!r}"), \
                _write_transaction(conn):
            epoch = _bump_epoch(conn, self.transactional_id)
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
            ), _write_transaction(conn, self._topics.clear):  # topics it created do not exist
                newer = _newer_generation(conn, self.generation_guard)
                if newer is not None:
                    self._fenced_generation = newer
                    raise self._fenced_error()
                current = _current_epoch(conn, self.transactional_id)
                if current != self._epoch:
                    self._fenced_by = current
                    raise self._fenced_error()
                written = self._write(conn, records) if records else Written({}, [] if self._track else None)
                if offsets:
                    _write_source_offsets(conn, self.offset_store_name, offsets)
                more = extra(written) if callable(extra) else extra
                for store, entries in (more or {}).items():
                    if entries:
                        _write_offsets(conn, store, entries)
        except BackendUnavailableError:
            self._in_txn = True  # nothing was written: the caller may retry the commit or abort
            raise
        except BaseException:  # an interrupt too: the transaction is over, its records are dropped
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

