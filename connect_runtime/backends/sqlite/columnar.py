"""Column-batch reads (``read_range_batches``): one partition's committed records as columns, per window
of offsets one aggregate query, without a per-record object where it can.

Each column comes from SQLite concatenated in one buffer (values joined by newlines, byte columns with
their lengths, integers as text) and is split only when indexed (:class:`_JoinedValues`,
:class:`_JoinedBlobs`, :class:`_JoinedInts`, :class:`_EncodedHeaders`), so columnar readers (the Spark
source's Arrow batches) build arrays straight from the buffers and decode headers in bulk. A window that
cannot come so (offsets not consecutive, null values, a value holding a newline, more bytes than SQLite
concatenates) is fetched as rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from connect_runtime.backends.base import WireHeaders
from connect_runtime.backends.sqlite.connection import _partition_reader
from connect_runtime.backends.sqlite.headers import decode_headers
from connect_runtime.backends.sqlite.schema import _GET_NEXT, OFFSET_BITS, OFFSET_LIMIT

if TYPE_CHECKING:
    from connect_runtime.backends.sqlite.connection import _Db

_Batch = tuple[Sequence[int], Sequence[bytes | None] | None, Sequence[bytes | None],
               Sequence[int | None] | None, Sequence[WireHeaders | None] | None]
"""``(offsets, keys, values, timestamps, headers)``, as :meth:`Backend.read_range_batches` yields them."""


def _read_batches(db: _Db, topic: str, p: int, start: int, end: int, *, batch_size: int, keys: bool,
                  timestamps: bool, headers: bool) -> Iterator[_Batch]:
    """:meth:`SQLiteBackend.read_range_batches` on a connection of its own (closed when done)."""
    start, end = max(0, start), min(end, OFFSET_LIMIT)
    if end <= start:
        return
    with _partition_reader(db, topic, p, start, end) as found:
        if found is None:
            return
        conn, pid = found
        shift = pid << OFFSET_BITS
        # ``end`` bounds the read, it does not promise records up to it: stop at the partition's end
        # (committed now), so a far ``end`` is not walked window by empty window
        row = conn.execute(_GET_NEXT, (pid,)).fetchone()
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
                   ) -> _Batch | None:
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
