"""The consumer: Kafka's consumer over the file, assignment-based (the runtime assigns partitions).

Everything in the file is committed, so every read is ``read_committed``. ``poll`` reads the assigned,
unpaused partitions in turn (a rotating start, so no partition starves), one range query each on the
records' row ids. Group offsets live in ``group_offsets``; a group commit checks the consumer's
``generation_guard`` (and a fanned-out sink task's ``task_guard``) inside its write transaction (:mod:`.fencing`).
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from connect_runtime.api.errors import BackendError, ConfigError, DataError, ProducerFencedError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends.base import ConsumedRecord, Consumer
from connect_runtime.backends.sqlite.connection import _Conn, _write_transaction
from connect_runtime.backends.sqlite.fencing import _newer_generation
from connect_runtime.backends.sqlite.headers import decode_headers
from connect_runtime.backends.sqlite.schema import (
    _GET_NEXT,
    _SELECT_FROM,
    MAX_OFFSET,
    OFFSET_BITS,
    OFFSET_LIMIT,
    _topic_info,
)

if TYPE_CHECKING:
    from connect_runtime.backends.sqlite.backend import SQLiteBackend

_new = tuple.__new__


def _consumed(rows: list[Any], topic: str, p: int, shift: int) -> list[ConsumedRecord]:
    """The records of ``records`` rows ``(id, key, value, ts, headers)`` of one partition, whose offsets are
    the row ids less ``shift``: one call per batch, each record built by ``tuple.__new__`` (no per-field
    arguments) in one comprehension."""
    dec = decode_headers
    cr = ConsumedRecord
    return [_new(cr, (topic, p, rid - shift, k, v, t, None if h is None else dec(h))) for rid, k, v, t, h in rows]


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
                    out.extend(_consumed(rows, topic, p, shift))
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
        with self._conn.translate(f"committing offsets of group {self.group_id!r}"), _write_transaction(conn):
            guard = self.generation_guard
            newest = _newer_generation(conn, guard)  # a newer run of the sink connector fences this one's commits
            if guard is not None and newest is not None:
                raise ProducerFencedError(
                    f"group {self.group_id!r}: offset commit refused, nothing committed: this run is "
                    f"generation {guard[2]} of its sink connector and generation {newest} has started "
                    f"since (SQLite backend {self._db.path})")
            task = self.task_guard
            newer_try = _newer_generation(conn, task)  # a later try of the same fanned-out task fences this one
            if task is not None and newer_try is not None:
                raise ProducerFencedError(
                    f"group {self.group_id!r}: offset commit refused, nothing committed: this is try {task[2]} of "
                    f"its fanned-out sink task and try {newer_try} of the same task has started since (SQLite "
                    f"backend {self._db.path})")
            conn.executemany(
                "INSERT INTO group_offsets(group_id, topic, partition, next_offset) VALUES (?,?,?,?)"
                " ON CONFLICT(group_id, topic, partition) DO UPDATE SET next_offset = excluded.next_offset",
                rows,
            )

    def close(self) -> None:
        self._conn.close()


def _check_offset(tp: TopicPartition, offset: Any) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise DataError(f"offset of {tp.topic}[{tp.partition}]: expected an integer >= 0, got {offset!r}")
    return offset
