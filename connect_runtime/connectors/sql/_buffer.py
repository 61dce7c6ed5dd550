"""SqlSink's buffer between ``put`` and the writer: records become rows (keys by ``pk.mode``, tombstones as
deletes) in runs of one table and one kind, in offset order; it keeps the next offset per partition after what
was buffered, skipping records delivered again before a rewind took effect. A record that cannot be a row is
reported (dead letter queue) after what came before it was written. A Struct value or key (a schema-aware
converter's) is taken as the row of its fields (:class:`connect_runtime.connectors.sql._typed.StructRows`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any

from connect_runtime.api.data import Struct
from connect_runtime.api.errors import DataError
from connect_runtime.api.records import SinkRecord, TopicPartition
from connect_runtime.connectors.sql._errors import short, where
from connect_runtime.connectors.sql._typed import StructRows


class Run:
    """Buffered records of one table and one kind (rows to write, or deletes), in offset order: parallel
    lists, so a batch of records is buffered with a few list extends, not an object per record."""

    __slots__ = ("is_delete", "keys", "records", "rows", "table")

    def __init__(self, table: str, is_delete: bool, keyed: bool) -> None:
        self.table = table
        self.is_delete = is_delete
        self.records: list[SinkRecord] = []
        self.keys: list[dict[str, Any] | None] | None = [] if keyed else None  # None: no keys (pk.mode=none)
        self.rows: list[dict[str, Any]] = []  # deletes: the keys


_TOPIC_PARTITION = attrgetter("topic", "partition")
_VALUE = attrgetter("value")

class Buffer:
    """Rows waiting for the writer. ``write`` writes (and empties) the buffer in the open transaction; ``report``
    hands a bad record to the dead letter queue, or raises."""

    def __init__(self, cfg: Mapping[str, Any], write: Callable[[], None],
                 report: Callable[[SinkRecord, Exception], None]) -> None:
        self.pk_mode = str(cfg["pk.mode"]).lower()
        self.pk_fields: list[str] = list(cfg["pk.fields"])
        self.delete = bool(cfg["delete.enabled"])
        self.batch_size: int = cfg["batch.size"]
        self.fmt: str = cfg["table.name.format"]
        self.write = write
        self.report = report
        self.runs: list[Run] = []
        self.buffered = 0  # records in the buffer
        self.written: dict[TopicPartition, int] = {}  # next offset after what the buffer and the transaction hold
        self.table_names: dict[str, str] = {}  # topic -> table
        self.structs = StructRows()  # Struct values (a schema-aware converter's) into rows

    def take(self) -> list[Run]:
        """The runs buffered, in order; the buffer is empty after."""
        runs, self.runs, self.buffered = self.runs, [], 0
        return runs

    def discard(self, committed: Mapping[TopicPartition, int]) -> None:
        """A rollback: forget the rows; ``written`` goes back to what the destination holds."""
        self.runs, self.buffered = [], 0
        self.written = dict(committed)

    def add(self, records: list[SinkRecord]) -> None:
        """Buffer ``records`` (one ``put``); write when ``batch.size`` records are buffered."""
        written = self.written
        keyed, delete, row_of = self.pk_mode != "none", self.delete, self.row
        names = self.table_names
        if not keyed and self._add_run(records):
            return
        # the next offset of the partition of the previous record, kept locally while records of one
        # partition follow each other (they come in runs) and stored back when the partition changes
        tp: TopicPartition | None = None
        nxt: int | None = None
        try:
            for r in records:
                topic, offset = r.topic, r.offset
                if tp is None or r.partition != tp.partition or topic != tp.topic:
                    if tp is not None and nxt is not None:
                        written[tp] = nxt
                    tp = TopicPartition(topic, r.partition)
                    nxt = written.get(tp)
                if nxt is not None and offset < nxt:
                    continue  # already written (delivered again before the rewind took effect)
                nxt = offset + 1
                table = names.get(topic)
                if table is None:
                    table = names[topic] = self.fmt.replace("${topic}", topic)
                v = r.value
                if v is None and not delete:
                    continue  # a tombstone without delete.enabled: nothing to write (the JDBC sink fails the record instead)
                try:
                    key = self.key(r) if keyed else None
                    row = (key or {}) if v is None else row_of(r, key)  # a delete: its key
                except DataError as exc:
                    if self.runs:  # write what came before first: dead letters keep the records' order
                        self.write()
                    self.report(r, exc)
                    continue
                run = self._run(table, v is None)
                run.records.append(r)
                run.rows.append(row)
                if run.keys is not None:
                    run.keys.append(key)
                self.buffered += 1
        finally:
            if tp is not None and nxt is not None:
                written[tp] = nxt
        if self.buffered >= self.batch_size:
            self.write()

    def _run(self, table: str, is_delete: bool) -> Run:
        """The buffer's last run if it is of this table and kind, else a new one."""
        buf = self.runs
        if buf and buf[-1].table == table and buf[-1].is_delete == is_delete:
            return buf[-1]
        run = Run(table, is_delete, self.pk_mode != "none")
        buf.append(run)
        return run

    def _add_run(self, records: list[SinkRecord]) -> bool:
        """The common case at once: records of one partition, all new, every value an object, no key.
        False (nothing done) when that is not the case."""
        first, last = records[0], records[-1]
        topic, partition = first.topic, first.partition
        if len(records) > 1 and not (last.partition == partition and last.topic == topic
                                     and set(map(_TOPIC_PARTITION, records)) == {(topic, partition)}):
            return False
        tp = TopicPartition(topic, partition)
        nxt = self.written.get(tp)
        if nxt is not None and first.offset < nxt:
            return False  # some were written already (delivered again before the rewind took effect)
        values = list(map(_VALUE, records))
        kinds = set(map(type, values))
        if kinds == {Struct}:
            values = self.structs.rows(values)
        elif kinds != {dict}:
            return False
        table = self.table_names.get(topic)
        if table is None:
            table = self.table_names[topic] = self.fmt.replace("${topic}", topic)
        run = self._run(table, False)
        run.records += records
        run.rows += values
        self.buffered += len(records)
        self.written[tp] = last.offset + 1  # as the loop of add() leaves it
        if self.buffered >= self.batch_size:
            self.write()
        return True

    def key(self, r: SinkRecord) -> dict[str, Any]:
        if self.pk_mode == "record_key":
            k = self.structs.plain(r.key)
            if isinstance(k, dict):
                fields = self.pk_fields or list(k)
                missing = [f for f in fields if f not in k]
                if missing:
                    raise DataError(f"SqlSink: record {where(r)} key {short(k)} lacks pk.fields {missing}")
                return {f: k[f] for f in fields}
            if k is None:
                raise DataError(f"SqlSink: record {where(r)} has no key; pk.mode=record_key needs one")
            if len(self.pk_fields) != 1:
                raise DataError(f"SqlSink: record {where(r)} has a primitive key {k!r}; pk.fields must name exactly "
                                f"one column for it, got {self.pk_fields}")
            return {self.pk_fields[0]: k}
        v = self.structs.plain(r.value)
        if not isinstance(v, dict):
            raise DataError(f"SqlSink: record {where(r)} has a {type(v).__name__} value {short(v)}; expected a "
                            "JSON object (pk.mode=record_value takes the key from its fields)")
        fields = self.pk_fields or list(v)
        missing = [f for f in fields if f not in v]
        if missing:
            raise DataError(f"SqlSink: record {where(r)} value lacks pk.fields {missing}")
        return {f: v[f] for f in fields}

    def row(self, r: SinkRecord, key: dict[str, Any] | None) -> dict[str, Any]:
        v = self.structs.plain(r.value)
        if not isinstance(v, dict):
            raise DataError(f"SqlSink: record {where(r)} has a {type(v).__name__} value {short(v)}; expected a "
                            "JSON object (one field per column)")
        if key is not None and self.pk_mode == "record_key":
            return {**v, **key}
        return v


__all__ = ["Buffer", "Run"]
