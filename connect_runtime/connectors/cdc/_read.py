"""What a run reads: the tables in the slot's exported snapshot (:class:`Snapshot`), and the slot's changes up to the
run's target LSN (:class:`Stream`), both through server-side cursors, both turned into Debezium's records.

Positions: every record has one, ``(commit_lsn, event)`` for a streamed change (its transaction's commit LSN and
the change's ordinal in it) and ``(0, n)`` for the ``n``-th snapshot record, so positions grow in the order records
are handed out. The task compares them with what ``commit_record`` saw committed to know how far the slot may move.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from connect_runtime.api.records import SourceRecord
from connect_runtime.connectors.cdc._events import TX_END_LSN, ColumnInfo, Position, TableEvents
from connect_runtime.connectors.cdc._pgoutput import (
    PG_EPOCH_US,
    Begin,
    Commit,
    Delete,
    Insert,
    Relation,
    Update,
    decode,
    lsn_text,
    parse_lsn,
)

if TYPE_CHECKING:
    import psycopg

Pos = tuple[int, int]

COLUMNS_SQL = (
    "SELECT a.attname, a.atttypid::int, a.atttypmod, NOT a.attnotnull, "
    "coalesce(a.attnum = ANY(i.indkey::int2[]), false) "
    "FROM pg_attribute a LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary "
    "WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' ORDER BY a.attnum")
"""A table's columns (by ``pg_class`` oid): name, type, modifier, nullable, in the primary key."""


def table_columns(conn: psycopg.Connection[Any], relid: int) -> list[ColumnInfo]:
    return [ColumnInfo(n, t, m, bool(opt), bool(k)) for n, t, m, opt, k in conn.execute(COLUMNS_SQL, (relid,))]


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Snapshot:
    """Every table, read in one ``REPEATABLE READ`` transaction that imported the slot's exported snapshot
    (``conn``), in batches; records of op ``r`` whose offsets carry ``snapshot: true`` and, on the last,
    ``last_snapshot_record: true``; ``source.snapshot`` is ``first``, ``true`` ..., ``last``."""

    def __init__(self, conn: psycopg.Connection[Any], tables: list[tuple[int, TableEvents]], lsn: int, tx_id: int,
                 ts_usec: int) -> None:
        self.conn, self.tables = conn, tables
        self.lsn, self.tx_id, self.ts_usec = lsn, tx_id, ts_usec
        self.count = 0
        self.done = False
        self._previous: TableEvents | None = None
        self._rows = self._all_rows()
        self._ahead: tuple[TableEvents, tuple[Any, ...]] | None = next(self._rows, None)

    def _all_rows(self) -> Iterator[tuple[TableEvents, tuple[Any, ...]]]:
        from psycopg.types.string import TextLoader

        for _, events in self.tables:
            cols = ", ".join(quote(c.name) for c in events.columns)
            with self.conn.cursor(name="pyconnect_cdc_snapshot") as cur:
                for c in events.columns:  # each value as its type's output function writes it, as pgoutput does
                    cur.adapters.register_loader(c.type_oid, TextLoader)
                cur.execute(f"SELECT {cols} FROM {quote(events.schema_name)}.{quote(events.table)}")
                while rows := cur.fetchmany(1000):
                    for row in rows:
                        yield events, tuple(row)

    def batch(self, n: int | None, positions: dict[int, Pos]) -> list[SourceRecord]:
        """Up to ``n`` rows' records (every row left when ``n`` is None); ``done`` once the last was handed out."""
        out: list[SourceRecord] = []
        while self._ahead is not None and (n is None or len(out) < n):
            events, row = self._ahead
            self._ahead = next(self._rows, None)
            self.count += 1
            last = self._ahead is None
            pos = Position(self.lsn, self.tx_id, self.ts_usec, last_snapshot=last)
            mark = _snapshot_mark(self.count == 1, last, events is not self._previous,
                                  self._ahead is None or self._ahead[0] is not events)
            self._previous = events
            record = events.event("r", pos, None, events.row(row), snapshot=mark)
            positions[id(record)] = (0, self.count)
            out.append(record)
        if self._ahead is None:
            self.done = True
        return out


_MESSAGE_TYPES = {"I": "INSERT", "U": "UPDATE", "D": "DELETE"}
"""Debezium's offset ``messageType`` of each kind of change."""


def _snapshot_mark(first: bool, last: bool, first_of_table: bool, last_of_table: bool) -> str:
    """``source.snapshot`` of a snapshot record, Debezium's: ``first`` / ``last`` of the whole snapshot, else
    ``first_in_data_collection`` / ``last_in_data_collection`` of its table, else ``true``."""
    if first:
        return "first"
    if last:
        return "last"
    if first_of_table:
        return "first_in_data_collection"
    return "last_in_data_collection" if last_of_table else "true"


class Stream:
    """The slot's changes up to ``target`` (``pg_logical_slot_peek_binary_changes``: the slot does not move), read
    through a server-side cursor on ``conn`` in batches, decoded, and turned into records. Changes at or before
    ``skip`` (what a committed offset covers) are decoded but not handed out.

    ``finished`` lists, per transaction read, ``(needs, end_lsn)``: the slot may be advanced to ``end_lsn`` once
    every record up to position ``needs`` is committed."""

    def __init__(self, conn: psycopg.Connection[Any], slot: str, publication: str, target: int, skip: Pos,
                 table_for: Callable[[Relation], TableEvents | None],
                 before: tuple[int | None, int | None] = (None, None)) -> None:
        self.conn, self.table_for = conn, table_for
        self.skip = self.emitted = skip
        self.before = before
        """What the committed offset says of the transactions before the peek's first: Debezium's ``lsn_commit``
        of the committed transaction (``skip``'s) and that transaction's end LSN when it was read to its end."""
        self.last_end: int | None = None
        """The end LSN of the last transaction this peek showed (Debezium's ``lastCommitLsn``)."""
        self.last_commit: int | None = None
        self._tail: list[SourceRecord] = []
        """The records of the current transaction's latest change, while they are still in the batch being built."""
        self.relations: dict[int, TableEvents | None] = {}
        self.txn: Begin | None = None
        self.event = 0
        self.changes = 0
        self.finished: list[tuple[Pos, int]] = []
        self.exhausted = False
        self._cur = conn.cursor(name="pyconnect_cdc_changes")
        self._cur.execute("SELECT lsn::text, xid::text::bigint, data FROM pg_logical_slot_peek_binary_changes("
                          "%s, %s::pg_lsn, NULL, 'proto_version', '1', 'publication_names', %s)",
                          (slot, lsn_text(target), publication))
        self._buffer: list[tuple[str, int, bytes]] = []
        self._i = 0

    def _next_row(self) -> tuple[str, int, bytes] | None:
        if self._i >= len(self._buffer):
            self._buffer, self._i = self._cur.fetchmany(2000), 0
            if not self._buffer:
                return None
        row = self._buffer[self._i]
        self._i += 1
        return row

    def batch(self, n: int, positions: dict[int, Pos]) -> list[SourceRecord]:
        """At least ``n`` records when that many are left (a change's records are never split), or what is left."""
        out: list[SourceRecord] = []
        self._tail = []
        while len(out) < n or self._commit_ahead():  # a transaction's last change goes out with its end
            row = self._next_row()
            if row is None:
                self.close()
                break
            lsn, xid, data = row
            msg = decode(data)
            if isinstance(msg, Begin):
                self.txn, self.event, self._tail = msg, 0, []
                self.last_commit = self.last_end if self.last_end is not None else self._before(msg.final_lsn)
            elif isinstance(msg, Commit):
                self.finished.append((self.emitted, msg.end_lsn))
                for r in self._tail:  # the records of the transaction's last change, not handed out yet
                    r.source_offset[TX_END_LSN] = msg.end_lsn  # type: ignore[index]
                self.txn, self.last_end, self._tail = None, msg.end_lsn, []
            elif isinstance(msg, Relation):
                self.relations[msg.relation_id] = self.table_for(msg)
            elif isinstance(msg, (Insert, Update, Delete)):
                records = self._change(parse_lsn(lsn), xid, msg, positions)
                if records:
                    self._tail = records
                out.extend(records)
        return out

    def _commit_ahead(self) -> bool:
        """The next message is the commit of the transaction whose records the batch ends with."""
        if not self._tail or self.exhausted:
            return False
        if self._i >= len(self._buffer):
            self._buffer, self._i = self._cur.fetchmany(2000), 0
            if not self._buffer:
                return False
        return self._buffer[self._i][2][:1] == b"C"

    def _before(self, final_lsn: int) -> int | None:
        """Debezium's ``lsn_commit`` for the peek's first transaction: the committed offset's own when it is the
        committed transaction read again, the committed transaction's end when it comes after it."""
        committed_lsn_commit, committed_end = self.before
        if final_lsn == self.skip[0]:
            return committed_lsn_commit
        return committed_end if final_lsn > self.skip[0] else None

    def _change(self, lsn: int, xid: int, msg: Insert | Update | Delete,
                positions: dict[int, Pos]) -> list[SourceRecord]:
        assert self.txn is not None, "a change outside a transaction"
        self.event += 1
        pos = (self.txn.final_lsn, self.event)
        events = self.relations.get(msg.relation_id)
        if pos <= self.skip or events is None:
            return []
        kind = "I" if isinstance(msg, Insert) else "U" if isinstance(msg, Update) else "D"
        where = Position(lsn, xid, self.txn.commit_ts + PG_EPOCH_US, self.txn.final_lsn, self.event,
                         message_type=_MESSAGE_TYPES[kind], last_commit=self.last_commit)
        if isinstance(msg, Insert):
            records = events.changes("I", where, None, None, msg.new)
        elif isinstance(msg, Update):
            records = events.changes("U", where, msg.old, msg.old_kind, msg.new)
        else:
            records = events.changes("D", where, msg.old, msg.old_kind, None)
        for r in records:
            positions[id(r)] = pos
        self.emitted = pos
        self.changes += 1
        return records

    def close(self) -> None:
        """End the read (the cursor and its transaction)."""
        if self.exhausted:
            return
        self.exhausted = True
        try:
            self._cur.close()
        finally:
            self.conn.rollback()


def now_usec() -> int:
    return time.time_ns() // 1000


__all__ = ["COLUMNS_SQL", "Pos", "Snapshot", "Stream", "now_usec", "quote", "table_columns"]
