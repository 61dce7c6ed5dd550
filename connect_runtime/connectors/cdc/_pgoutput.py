"""PostgreSQL's ``pgoutput`` messages, protocol version 1, decoded from bytes (pure Python, :mod:`struct`).

The normative text is PostgreSQL's "Logical Replication Message Formats" (protocol.sgml,
https://www.postgresql.org/docs/15/protocol-logicalrep-message-formats.html). Each message is one row's ``data`` of
``pg_logical_slot_peek_binary_changes(slot, upto_lsn, NULL, 'proto_version', '1', 'publication_names', ...)``;
:func:`decode` turns it into one of the dataclasses below. Tuple data is in text format (``pgoutput`` sends binary
only with the ``binary`` option, which this connector never sets); a column is :data:`NULL`, :data:`UNCHANGED_TOAST`
(an unchanged TOASTed value the server did not send) or its text.

Timestamps are microseconds since 2000-01-01 UTC (PostgreSQL's epoch) and kept as such; LSNs are integers (the
``X/Y`` text form is :func:`lsn_text`, read back by :func:`parse_lsn`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from connect_runtime.api.errors import DataError

PG_EPOCH_US: Final = 946_684_800_000_000
"""2000-01-01 UTC in microseconds since the Unix epoch (PostgreSQL's timestamps count from there)."""


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NULL: Final = None
"""A column that is SQL NULL (``n``)."""
UNCHANGED_TOAST: Final = _Marker("UNCHANGED_TOAST")
"""A TOASTed column the update did not change; the server does not send its value (``u``)."""

ColumnValue = str | _Marker | None
"""A column of tuple data: its text, ``None`` for NULL, or :data:`UNCHANGED_TOAST`."""


@dataclass(frozen=True, slots=True)
class Begin:
    final_lsn: int
    """The LSN of the transaction's commit record."""
    commit_ts: int
    """Commit time, microseconds since 2000-01-01 UTC."""
    xid: int


@dataclass(frozen=True, slots=True)
class Commit:
    flags: int
    commit_lsn: int
    """The LSN of the commit record (``Begin.final_lsn``)."""
    end_lsn: int
    """The end of the commit record: a slot confirmed up to here has consumed the transaction."""
    commit_ts: int


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type_oid: int
    type_modifier: int
    """``atttypmod``: -1 when none (e.g. ``numeric`` without precision)."""
    key: bool
    """Part of the replica identity (with ``REPLICA IDENTITY FULL``: every column)."""


@dataclass(frozen=True, slots=True)
class Relation:
    relation_id: int
    namespace: str
    """The schema name (``pg_catalog`` is sent as the empty string)."""
    name: str
    replica_identity: str
    """``d`` default (primary key), ``n`` nothing, ``f`` full, ``i`` an index."""
    columns: tuple[Column, ...]


@dataclass(frozen=True, slots=True)
class TypeInfo:
    type_oid: int
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class Insert:
    relation_id: int
    new: tuple[ColumnValue, ...]


@dataclass(frozen=True, slots=True)
class Update:
    relation_id: int
    old: tuple[ColumnValue, ...] | None
    """The old row: the old key (``old_kind`` ``K``, other columns NULL) when the key changed under the default
    identity, the whole old row (``O``) under ``REPLICA IDENTITY FULL``, else None."""
    old_kind: str | None
    new: tuple[ColumnValue, ...]


@dataclass(frozen=True, slots=True)
class Delete:
    relation_id: int
    old: tuple[ColumnValue, ...]
    old_kind: str
    """``K``: the key columns only (others NULL); ``O``: the whole old row (``REPLICA IDENTITY FULL``)."""


@dataclass(frozen=True, slots=True)
class Truncate:
    options: int
    """Bit 1: ``CASCADE``; bit 2: ``RESTART IDENTITY``."""
    relation_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Origin:
    lsn: int
    name: str


Message = Begin | Commit | Relation | TypeInfo | Insert | Update | Delete | Truncate | Origin

_Q = struct.Struct(">Q")
_BEGIN = struct.Struct(">QqI")
_COMMIT = struct.Struct(">BQQq")
_I = struct.Struct(">I")
_H = struct.Struct(">H")
_REL_COL = struct.Struct(">Ii")


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def take(self, st: struct.Struct) -> tuple[int, ...]:
        out = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return out

    def byte(self) -> str:
        b = self.buf[self.pos:self.pos + 1]
        if not b:
            raise DataError("pgoutput message ends early")
        self.pos += 1
        return chr(b[0])

    def string(self) -> str:
        end = self.buf.index(0, self.pos)
        s = self.buf[self.pos:end].decode()
        self.pos = end + 1
        return s

    def tuple_data(self) -> tuple[ColumnValue, ...]:
        # one loop over the bytes with the position in a local (the hot path of a stream: every column of every
        # row); a message cut short raises IndexError or struct.error, which decode() names
        buf, pos = self.buf, self.pos
        (n,) = _H.unpack_from(buf, pos)
        pos += 2
        values: list[ColumnValue] = []
        append, length_at = values.append, _I.unpack_from
        for i in range(n):
            kind = buf[pos]
            pos += 1
            if kind == 116:  # 't'
                (length,) = length_at(buf, pos)
                pos += 4
                append(buf[pos:pos + length].decode())
                pos += length
            elif kind == 110:  # 'n'
                append(NULL)
            elif kind == 117:  # 'u'
                append(UNCHANGED_TOAST)
            else:
                raise DataError(f"pgoutput tuple data: column {i} has kind {chr(kind)!r}, expected 'n', 'u' or 't' "
                                "(binary tuple data is never asked for)")
        self.pos = pos
        return tuple(values)


def _relation(r: _Reader) -> Relation:
    (rel,) = r.take(_I)
    namespace, name, ident = r.string(), r.string(), r.byte()
    (n,) = r.take(_H)
    cols = []
    for _ in range(n):
        flags = r.buf[r.pos]
        r.pos += 1
        col = r.string()
        oid, mod = r.take(_REL_COL)
        cols.append(Column(col, oid, mod, bool(flags & 1)))
    return Relation(rel, namespace, name, ident, tuple(cols))


def _update(r: _Reader) -> Update:
    (rel,) = r.take(_I)
    kind = r.byte()
    old, old_kind = None, None
    if kind in ("K", "O"):
        old, old_kind = r.tuple_data(), kind
        kind = r.byte()
    if kind != "N":
        raise DataError(f"pgoutput Update: expected the new tuple ('N'), got {kind!r}")
    return Update(rel, old, old_kind, r.tuple_data())


def _delete(r: _Reader) -> Delete:
    (rel,) = r.take(_I)
    kind = r.byte()
    if kind not in ("K", "O"):
        raise DataError(f"pgoutput Delete: expected the old key ('K') or old tuple ('O'), got {kind!r}")
    return Delete(rel, r.tuple_data(), kind)


def _insert(r: _Reader) -> Insert:
    (rel,) = r.take(_I)
    kind = r.byte()
    if kind != "N":
        raise DataError(f"pgoutput Insert: expected the new tuple ('N'), got {kind!r}")
    return Insert(rel, r.tuple_data())


def _truncate(r: _Reader) -> Truncate:
    (n,) = r.take(_I)
    options = r.buf[r.pos]
    r.pos += 1
    return Truncate(options, tuple(r.take(_I)[0] for _ in range(n)))


def decode(data: bytes) -> Message | None:
    """One ``pgoutput`` message (protocol version 1). ``None`` for a kind this connector does not use (a logical
    decoding message ``M``, sent only when asked for); :class:`DataError` for bytes that are not a message."""
    r = _Reader(bytes(data))
    kind = r.byte()
    try:
        if kind == "B":
            return Begin(*r.take(_BEGIN))
        if kind == "C":
            return Commit(*r.take(_COMMIT))
        if kind == "R":
            return _relation(r)
        if kind == "I":
            return _insert(r)
        if kind == "U":
            return _update(r)
        if kind == "D":
            return _delete(r)
        if kind == "T":
            return _truncate(r)
        if kind == "Y":
            (oid,) = r.take(_I)
            return TypeInfo(oid, r.string(), r.string())
        if kind == "O":
            (lsn,) = r.take(_Q)
            return Origin(lsn, r.string())
    except (struct.error, ValueError, IndexError, UnicodeDecodeError) as exc:
        raise DataError(f"pgoutput message {kind!r} of {len(data)} bytes cannot be decoded: {exc}") from None
    if kind == "M":
        return None
    raise DataError(f"pgoutput message of unknown kind {kind!r} ({len(data)} bytes; protocol version 1)")


def parse_lsn(text: str) -> int:
    """``16/B374D848`` as an integer."""
    hi, _, lo = str(text).partition("/")
    try:
        return (int(hi, 16) << 32) | int(lo, 16)
    except ValueError:
        raise DataError(f"expected an LSN like 16/B374D848, got {text!r}") from None


def lsn_text(lsn: int) -> str:
    """An LSN in PostgreSQL's ``X/Y`` form."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


__all__ = [
    "NULL",
    "PG_EPOCH_US",
    "UNCHANGED_TOAST",
    "Begin",
    "Column",
    "ColumnValue",
    "Commit",
    "Delete",
    "Insert",
    "Message",
    "Origin",
    "Relation",
    "Truncate",
    "TypeInfo",
    "Update",
    "decode",
    "lsn_text",
    "parse_lsn",
]
