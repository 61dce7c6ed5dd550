"""Debezium's change events: per table the Key, Value and Envelope schemas, the ``source`` block, and the records
(``op`` r/c/u/d, a delete followed by a tombstone, a key change as delete + tombstone + create, as Debezium does).

Names: ``<prefix>.<schema>.<table>.Key`` / ``.Value`` / ``.Envelope``; topic ``<prefix>.<schema>.<table>``; the
source block ``io.debezium.connector.postgresql.Source``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from connect_runtime.api.data import Schema, SchemaBuilder, Struct
from connect_runtime.api.errors import DataError
from connect_runtime.api.records import Headers, SourceRecord
from connect_runtime.connectors.cdc._pgoutput import UNCHANGED_TOAST, ColumnValue
from connect_runtime.connectors.cdc._types import column_type, zero

CONNECTOR = "postgresql"
VERSION = "0.1.0"
ENVELOPE_VERSION = 2
"""The Envelope schema's version, Debezium 3.6's."""
UNAVAILABLE = "__debezium_unavailable_value"
"""Debezium's ``unavailable.value.placeholder``: an unchanged TOASTed value the server did not send."""

SOURCE_SCHEMA = (
    SchemaBuilder.struct().name("io.debezium.connector.postgresql.Source").version(1)
    .field("version", Schema.STRING_SCHEMA)
    .field("connector", Schema.STRING_SCHEMA)
    .field("name", Schema.STRING_SCHEMA)
    .field("ts_ms", Schema.INT64_SCHEMA)
    .field("snapshot", SchemaBuilder.string().optional().name("io.debezium.data.Enum").version(1)
           .parameter("allowed", "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental")
           .default_value("false").build())
    .field("db", Schema.STRING_SCHEMA)
    .field("sequence", Schema.OPTIONAL_STRING_SCHEMA)
    .field("ts_us", Schema.OPTIONAL_INT64_SCHEMA)
    .field("ts_ns", Schema.OPTIONAL_INT64_SCHEMA)
    .field("schema", Schema.STRING_SCHEMA)
    .field("table", Schema.STRING_SCHEMA)
    .field("txId", Schema.OPTIONAL_INT64_SCHEMA)
    .field("lsn", Schema.OPTIONAL_INT64_SCHEMA)
    .field("xmin", Schema.OPTIONAL_INT64_SCHEMA)
    .field("origin", Schema.OPTIONAL_STRING_SCHEMA)
    .field("origin_lsn", Schema.OPTIONAL_INT64_SCHEMA)
    .build())
"""Debezium 3.6's, field for field (``origin`` / ``origin_lsn``: the replication origin, null here as there)."""

TRANSACTION_SCHEMA = (
    SchemaBuilder.struct().optional().name("event.block").version(1)
    .field("id", Schema.STRING_SCHEMA)
    .field("total_order", Schema.INT64_SCHEMA)
    .field("data_collection_order", Schema.INT64_SCHEMA)
    .build())


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    type_oid: int
    type_modifier: int
    optional: bool
    key: bool
    """Part of the primary key (the record key)."""


TX_COMMIT_LSN = "tx_commit_lsn"
"""This connector's offset key: the LSN of the change's own transaction's commit record (with ``event``, the
position the exactly-once filter compares; Debezium's ``lsn_commit`` is the end of the transaction before)."""
TX_END_LSN = "tx_end_lsn"
"""This connector's offset key, on the records of a transaction's last change only: the transaction's end LSN
(what ``lsn_commit`` and ``source.sequence[0]`` of the next transaction say, when the next run starts after it)."""


@dataclass(frozen=True)
class Position:
    """Where a change is: what Debezium's offset says, plus this connector's own position of it (its transaction's
    commit LSN and the change's ordinal in that transaction)."""

    lsn: int
    tx_id: int
    ts_usec: int
    commit_lsn: int | None = None
    """This transaction's commit LSN; None for a snapshot record."""
    event: int = 0
    last_snapshot: bool = False
    message_type: str | None = None
    """Debezium's ``messageType`` of a streamed change: ``INSERT``, ``UPDATE`` or ``DELETE``."""
    last_commit: int | None = None
    """Debezium's ``lastCommitLsn``: the end LSN of the transaction streamed before this one (None: none yet since
    the snapshot, or not known)."""

    def offset(self) -> dict[str, Any]:
        """Debezium's offset keys (``lsn_commit`` absent while ``last_commit`` is None, as Debezium's), and this
        connector's ``tx_commit_lsn`` and ``event`` (docs/cdc.md, Offsets)."""
        if self.commit_lsn is None:
            return {"last_snapshot_record": self.last_snapshot, "lsn": self.lsn, "txId": self.tx_id,
                    "ts_usec": self.ts_usec, "snapshot": True}
        out: dict[str, Any] = {"lsn": self.lsn, "lsn_proc": self.lsn, "txId": self.tx_id, "ts_usec": self.ts_usec,
                               TX_COMMIT_LSN: self.commit_lsn, "event": self.event}
        if self.last_commit is not None:
            out["lsn_commit"] = self.last_commit
        if self.message_type is not None:
            out["messageType"] = self.message_type
        return out


@dataclass
class TableEvents:
    """One table's schemas and the records of its changes."""

    prefix: str
    db: str
    schema_name: str
    table: str
    columns: Sequence[ColumnInfo]
    context: Headers = field(default_factory=list)
    """Headers every record carries after its own (Debezium's context headers: :func:`context_headers`)."""
    topic: str = field(init=False)

    def __post_init__(self) -> None:
        base = f"{self.prefix}.{self.schema_name}.{self.table}"
        self.topic = base
        self.types = [column_type(c.type_oid, c.type_modifier, c.optional, c.name) for c in self.columns]
        value = SchemaBuilder.struct().name(f"{base}.Value").optional()
        for c, t in zip(self.columns, self.types, strict=True):
            value = value.field(c.name, t.schema)
        self.value_schema = value.build()
        keys = [(c, t) for c, t in zip(self.columns, self.types, strict=True) if c.key]
        self.key_index = [i for i, c in enumerate(self.columns) if c.key]
        self.key_schema: Schema | None = None
        if keys:
            kb = SchemaBuilder.struct().name(f"{base}.Key")
            for c, _t in keys:
                kb = kb.field(c.name, column_type(c.type_oid, c.type_modifier, False, c.name).schema)
            self.key_schema = kb.build()
        self.envelope_schema = (
            SchemaBuilder.struct().name(f"{base}.Envelope").version(ENVELOPE_VERSION)
            .field("before", self.value_schema).field("after", self.value_schema)
            .field("source", SOURCE_SCHEMA).field("transaction", TRANSACTION_SCHEMA)
            .field("op", Schema.STRING_SCHEMA).field("ts_ms", Schema.OPTIONAL_INT64_SCHEMA)
            .field("ts_us", Schema.OPTIONAL_INT64_SCHEMA).field("ts_ns", Schema.OPTIONAL_INT64_SCHEMA)
            .build())
        self.partition = {"server": self.prefix}

    def row(self, values: Sequence[ColumnValue], *, key_only: bool = False) -> Struct:
        """A Value struct of a tuple's texts. ``key_only``: an old key (other columns sent as NULL): a required
        non-key column gets a stand-in (:func:`~connect_runtime.connectors.cdc._types.zero`)."""
        if len(values) != len(self.columns):
            raise DataError(f"{self.topic}: a row of {len(values)} columns, the table has {len(self.columns)} "
                            f"({', '.join(c.name for c in self.columns)})")
        out: list[Any] = []
        for c, t, v in zip(self.columns, self.types, values, strict=True):
            if v is UNCHANGED_TOAST:
                out.append(_unavailable(t.schema, f"{self.topic}.{c.name}"))
            elif v is None:
                if key_only and not c.key and not c.optional:
                    out.append(zero(t.schema))
                elif not c.optional:
                    raise DataError(f"{self.topic}: column {c.name!r} is NOT NULL, and the row has NULL in it")
                else:
                    out.append(None)
            else:
                out.append(t.convert(str(v)))
        # each value comes from its column's converter (_types), of its field's type by construction: not validated
        # again (Struct.put's checks were half the CPU of a stream)
        return Struct.from_values(self.value_schema, out)

    def key(self, row: Struct) -> Struct | None:
        if self.key_schema is None:
            return None
        values = row._values
        return Struct.from_values(self.key_schema, [values[i] for i in self.key_index])

    def _source(self, pos: Position, snapshot: str) -> Struct:
        seq = _sequence(pos.last_commit, pos.lsn)
        return Struct.from_values(SOURCE_SCHEMA, [
            VERSION, CONNECTOR, self.prefix, pos.ts_usec // 1000, snapshot, self.db, seq, pos.ts_usec,
            pos.ts_usec * 1000, self.schema_name, self.table, pos.tx_id, pos.lsn, None, None, None])

    def _record(self, pos: Position, key: Struct | None, value: Struct | None,
                headers: Headers | None = None) -> SourceRecord:
        if self.context:
            headers = [*headers, *self.context] if headers else list(self.context)
        return SourceRecord(source_partition=self.partition, source_offset=pos.offset(), topic=self.topic,
                            key=key, key_schema=self.key_schema, value=value,
                            value_schema=None if value is None else self.envelope_schema, headers=headers)

    def event(self, op: str, pos: Position, before: Struct | None, after: Struct | None,
              snapshot: str = "false", headers: Headers | None = None) -> SourceRecord:
        now_ns = time.time_ns()
        env = Struct.from_values(self.envelope_schema, [before, after, self._source(pos, snapshot), None, op,
                                                        now_ns // 1_000_000, now_ns // 1000, now_ns])
        return self._record(pos, self.key(after if after is not None else before), env,  # type: ignore[arg-type]
                            headers)

    def tombstone(self, pos: Position, before: Struct, headers: Headers | None = None) -> SourceRecord:
        return self._record(pos, self.key(before), None, headers)

    def changes(self, kind: str, pos: Position, old: Sequence[ColumnValue] | None, old_kind: str | None,
                new: Sequence[ColumnValue] | None) -> list[SourceRecord]:
        """The records of one change: ``I``nsert -> c; ``U``pdate -> u (before: the old row under REPLICA IDENTITY
        FULL, else null), or d + tombstone + c when the key changed (Debezium's primary key update: the d and the
        tombstone with the header ``__debezium.newkey``, the c with ``__debezium.oldkey``); ``D``elete
        -> d + tombstone."""
        if kind == "I":
            assert new is not None
            return [self.event("c", pos, None, self.row(new))]
        if kind == "U":
            assert new is not None
            after = self.row(new)
            before = None if old is None else self.row(old, key_only=old_kind == "K")
            if before is not None and self.key_schema is not None:
                old_key, new_key = self.key(before), self.key(after)
                if old_key != new_key:
                    assert old_key is not None and new_key is not None
                    to_new: Headers = [(NEWKEY_HEADER, header_text(new_key))]
                    return [self.event("d", pos, before, None, headers=to_new),
                            self.tombstone(pos, before, headers=list(to_new)),
                            self.event("c", pos, None, after, headers=[(OLDKEY_HEADER, header_text(old_key))])]
            return [self.event("u", pos, before if old_kind == "O" else None, after)]
        assert old is not None
        before = self.row(old, key_only=old_kind == "K")
        out = [self.event("d", pos, before, None)]
        if self.key_schema is not None:
            out.append(self.tombstone(pos, before))
        return out


NEWKEY_HEADER = "__debezium.newkey"
"""Debezium's header on the delete and the tombstone of a primary key change: the new key."""
OLDKEY_HEADER = "__debezium.oldkey"
"""Debezium's header on the create of a primary key change: the old key."""


CONTEXT_HEADER = "__debezium.context."


def context_headers(prefix: str, task_id: int, run_id: str) -> Headers:
    """Debezium 3's context headers (``extended.headers.enabled``, its default), in its order: the logical name
    (``topic.prefix``), the task's number, the connector (``postgresql``) and the run's id (a UUID), as bytes."""
    return [(CONTEXT_HEADER + "connectorLogicalName", prefix.encode()), (CONTEXT_HEADER + "taskId",
            str(task_id).encode()), (CONTEXT_HEADER + "connectorName", CONNECTOR.encode()),
            (CONTEXT_HEADER + "runId", run_id.encode())]


def header_text(value: Any) -> bytes:
    """A header value as Kafka Connect's default header converter (``SimpleHeaderConverter``, through
    ``Values.convertToString``) writes a key Struct Debezium puts in a header: ``{"id":2}``, strings quoted with
    ``"`` and ``\\`` escaped, numbers and booleans bare, bytes in base64, null as ``null``. The runtime's headers
    are bytes or text without a schema, so the key is rendered here, in the worker default's bytes."""
    return _header_part(value, embedded=False).encode()


def _header_part(value: Any, embedded: bool) -> str:
    import base64
    from decimal import Decimal

    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, Decimal)):
        return str(value) if not isinstance(value, Decimal) else format(value, "f")
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (bytes, bytearray)):
        text = base64.b64encode(bytes(value)).decode()
        return f'"{text}"' if embedded else text
    if isinstance(value, Struct):
        return "{" + ",".join(f"{_header_part(f.name, True)}:{_header_part(value.get(f.name), True)}"
                              for f in value.schema.fields) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_header_part(v, True) for v in value) + "]"
    text = str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"' if embedded else text


def _sequence(last_commit: int | None, lsn: int) -> str:
    """``source.sequence``: the JSON text of ``[last_commit, lsn]`` as strings, Debezium's (the end of the transaction
    before, null when unknown, and the change's LSN), as ``json.dumps`` without spaces writes it (the LSNs are digits
    only, so no escaping is needed)."""
    return f'["{last_commit}","{lsn}"]' if last_commit is not None else f'[null,"{lsn}"]'


def _unavailable(schema: Schema, where: str) -> Any:
    from connect_runtime.api.data import SchemaType

    if schema.type == SchemaType.STRING:
        return UNAVAILABLE
    if schema.type == SchemaType.BYTES and schema.name is None:
        return UNAVAILABLE.encode()
    if schema.type == SchemaType.ARRAY and schema.value_schema is not None \
            and schema.value_schema.type == SchemaType.STRING:
        return [UNAVAILABLE]
    raise DataError(f"{where}: an unchanged TOASTed value of type {schema.name or schema.type.name} has no "
                    "placeholder here yet (REPLICA IDENTITY FULL sends it)")


__all__ = ["CONNECTOR", "CONTEXT_HEADER", "NEWKEY_HEADER", "OLDKEY_HEADER", "SOURCE_SCHEMA", "TX_COMMIT_LSN",
           "TX_END_LSN", "UNAVAILABLE", "ColumnInfo", "Position", "TableEvents", "context_headers", "header_text"]
