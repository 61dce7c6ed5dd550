"""The columnar read path of the Spark source, without a Spark session: the SQLite backend's column batches
(buffers concatenated by SQLite, split only when indexed) hold exactly the committed records, and the Arrow
batches built from them equal those built from plain per-record lists."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest

from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend

pytest.importorskip("pyspark")

from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from connect_runtime.spark._arrow import METADATA_COLUMNS, BatchBuilder
from connect_runtime.spark._source import _metadata_struct

pytestmark = pytest.mark.spark  # imports pyspark (through connect_runtime.spark)

TS0 = 1_767_225_600_000
TP = TopicPartition("t", 0)

# keys, values and headers that the concatenated buffers must get exactly right
TRICKY: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None]] = [
    (b"k0", b'{"n": 0, "tag": "a"}', [("h", b"0")]),
    (None, b'{"n": 1, "tag": "b"}', None),                                  # no key, no headers
    (b"", b'{"n": 2}', [("h", None), ("", b""), ("\u00e9", "\u00fc".encode())]),
    (b"k,3\n", b'{"n": 3,\n "tag": "pretty"}', [("bad", b"\xff\xfe")]),     # newline in the value
    (b"k4", None, [("h", b"4")]),                                           # tombstone
    (b"k5", b"", [("h", b"5" * 3000)]),                                     # empty value
    (b"\x00k6", b"not json", [("h", b"6")]),
    (b"k7", b'{"n": "seven"}', [("h", b"7"), ("h", b"7b")]),
]


def _clean(i: int) -> tuple[bytes, bytes, list[tuple[str, bytes | None]]]:
    return f"k{i}".encode(), json.dumps({"n": i, "tag": f"t{i % 3}"}).encode(), [("h", str(i).encode())]


@pytest.fixture
def url(sqlite_url: str) -> str:
    """p0: 40 clean records, the tricky ones, 40 clean records, in three transactions."""
    with open_backend(sqlite_url) as backend:
        backend.create_topics({"t": 1})
        producer = backend.transactional_producer("w")
        producer.init_transactions(10)
        for batch in ([_clean(i) for i in range(40)], TRICKY, [_clean(i) for i in range(100, 140)]):
            producer.begin_transaction()
            producer.send([ProducerRecord("t", 0, k, v, TS0 + j, h) for j, (k, v, h) in enumerate(batch)])
            producer.commit_transaction([], 10)
        producer.close()
    return sqlite_url


def _materialise(col: Sequence[Any] | None) -> list[Any] | None:
    return None if col is None else [col[i] for i in range(len(col))]


@pytest.mark.parametrize("batch_size", [1, 3, 8, 1000])
@pytest.mark.parametrize("flags", [(False, False, False), (True, True, True), (True, False, True)])
def test_column_batches_hold_exactly_the_records(url: str, batch_size: int, flags: tuple[bool, bool, bool]) -> None:
    keys, stamps, headers = flags
    with open_backend(url) as backend:
        want = list(backend.read_range(TP, 5, 85))
        got: list[tuple[Any, ...]] = []
        joined_windows = 0
        for offs, ks, vs, ts, hs in backend.read_range_batches(TP, 5, 85, batch_size=batch_size, keys=keys,
                                                               timestamps=stamps, headers=headers):
            assert len(offs) == len(vs) and len(offs) <= batch_size
            joined_windows += isinstance(getattr(vs, "joined", None), bytes)
            cols = [list(offs), _materialise(ks), _materialise(vs), _materialise(ts), _materialise(hs)]
            for i in range(len(offs)):
                got.append(tuple(None if c is None else c[i] for c in cols))
    assert [g[0] for g in got] == [r.offset for r in want] == list(range(5, 85))
    assert [g[2] for g in got] == [r.value for r in want]
    assert [g[1] for g in got] == ([r.key for r in want] if keys else [None] * 80)
    assert [g[3] for g in got] == ([r.timestamp for r in want] if stamps else [None] * 80)
    assert [g[4] for g in got] == ([r.headers for r in want] if headers else [None] * 80)
    # windows of clean records come as one buffer; the one window holding tricky records is fetched as rows
    if batch_size == 1000:
        assert joined_windows == 0
    else:
        assert joined_windows >= 8


def _schema(metadata: Sequence[str], typed: bool) -> StructType:
    fields = list(_metadata_struct(metadata, "json", "json").fields)
    if typed:
        fields += [StructField("n", IntegerType()), StructField("tag", StringType()),
                   StructField("_corrupt_record", StringType())]
    return StructType(fields)


class _Plain:
    """The same records as plain per-record lists (what a backend without buffers hands over)."""

    @staticmethod
    def batches(url: str, start: int, end: int, size: int) -> list[tuple[Any, ...]]:
        with open_backend(url) as backend:
            recs = list(backend.read_range(TP, start, end))
        return [tuple(list(c) for c in zip(*[(r.offset, r.key, r.value, r.timestamp, r.headers)
                                              for r in recs[i:i + size]], strict=True))
                for i in range(0, len(recs), size)]


@pytest.mark.parametrize("metadata", [tuple(METADATA_COLUMNS), ("topic", "partition", "offset", "key", "timestamp",
                                                                  "headers"), ()])
@pytest.mark.parametrize("mode", ["PERMISSIVE", "DROPMALFORMED"])
def test_arrow_batches_equal_those_built_from_plain_lists(url: str, metadata: tuple[str, ...], mode: str) -> None:
    typed = "value" not in metadata
    builder = BatchBuilder(_schema(metadata, typed), metadata, "json", "json", typed, mode, "_corrupt_record")
    with open_backend(url) as backend:
        fast = [builder.build("t", 0, cols) for cols in backend.read_range_batches(
            TP, 0, 88, batch_size=16, keys=builder.keys, timestamps=builder.timestamps, headers=builder.headers)]
    plain = [builder.build("t", 0, cols) for cols in _Plain.batches(url, 0, 88, 16)]
    fast_table = pa.Table.from_batches([b for b in fast if b is not None])
    plain_table = pa.Table.from_batches([b for b in plain if b is not None])
    assert fast_table.equals(plain_table)
    if typed:
        rows = fast_table.to_pylist()
        by_n = [r["n"] for r in rows]
        assert by_n[:40] == list(range(40)) and by_n[-40:] == list(range(100, 140))
        # the pretty-printed value parses (alone) and the tombstone is all null; the other three do not match
        assert [r["n"] for r in rows[40:45]] == [0, 1, 2, 3, None]
        corrupt = [r["_corrupt_record"] for r in rows if r["_corrupt_record"] is not None]
        assert corrupt == (["", "not json", '{"n": "seven"}'] if mode == "PERMISSIVE" else [])
    if "headers" in metadata:
        headers = fast_table.column("headers").to_pylist()
        assert headers[43] == [{"key": "bad", "value": "\ufffd\ufffd"}]
        assert headers[42] == [{"key": "h", "value": None}, {"key": "", "value": ""}, {"key": "\u00e9", "value": "\u00fc"}]
        assert headers[41] is None


@pytest.mark.parametrize("batch_size", [7, 1000])
def test_a_range_reaching_past_the_stored_records_reads_only_those(url: str, batch_size: int) -> None:
    with open_backend(url) as backend:
        got = [(o, v) for offs, _k, vs, _t, _h in backend.read_range_batches(TP, 80, 200, batch_size=batch_size)
               for o, v in zip(list(offs), _materialise(vs) or [], strict=True)]
        assert got == [(r.offset, r.value) for r in backend.read_range(TP, 80, 200)]
        assert [o for o, _v in got] == list(range(80, 88))
        assert list(backend.read_range_batches(TP, 88, 200, batch_size=batch_size)) == []


@pytest.mark.kafka
def test_kafka_column_batches_hold_exactly_the_records(fresh_kafka_url: str) -> None:
    """The Kafka backend's batch read (one consume per batch, columns from the messages) gives what
    read_range gives, across transaction markers, and stops at the range's end and the partition's end."""
    with open_backend(fresh_kafka_url) as backend:
        backend.create_topics({"t": 1})
        producer = backend.transactional_producer("w")
        producer.init_transactions(30)
        for batch in ([_clean(i) for i in range(30)], TRICKY, [_clean(i) for i in range(100, 130)]):
            producer.begin_transaction()
            producer.send([ProducerRecord("t", 0, k, v, TS0 + j, h) for j, (k, v, h) in enumerate(batch)])
            producer.commit_transaction([], 30)
        producer.close()
        # offsets: 0..29, a marker, 31..38, a marker, 40..69, a marker
        for start, end, size, count, wait in ((0, 70, 7, 68, 30), (5, 50, 1000, 43, 30), (31, 40, 3, 8, 30),
                                              (60, 500, 4, 10, 2)):  # past the partition's end: bounded wait
            want = list(backend.read_range(TP, start, end, timeout=wait))
            got = [(o, k, v, t, h) for cols in backend.read_range_batches(TP, start, end, batch_size=size,
                                                                          timeout=wait)
                   for o, k, v, t, h in zip(*cols, strict=True)]
            assert got == [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in want]
            assert len(got) == count
        only_values = list(backend.read_range_batches(TP, 0, 70, keys=False, timestamps=False, headers=False,
                                                      timeout=30))
        assert [k is None and t is None and h is None for _o, k, _v, t, h in only_values] == [True] * len(only_values)
        assert [o for offs, *_ in only_values for o in offs] == [*range(30), *range(31, 39), *range(40, 70)]


def test_a_window_longer_than_sqlite_allows_is_fetched_as_rows(url: str) -> None:
    """SQLite refuses a concatenation past its maximum length: that window comes as rows, complete."""
    import sqlite3

    from connect_runtime.backends.sqlite import OFFSET_BITS, parse_url
    from connect_runtime.backends.sqlite.columnar import _joined_window
    from connect_runtime.backends.sqlite.schema import _topic_info

    conn = sqlite3.connect(parse_url(url))
    try:
        pids = _topic_info(conn, "t")
        assert pids is not None
        shift = pids[0] << OFFSET_BITS
        assert _joined_window(conn, shift, 0, 40, ["key", "ts", "headers"]) is not None
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 200)
        assert _joined_window(conn, shift, 0, 40, ["key", "ts", "headers"]) is None
        assert _joined_window(conn, shift, 0, 2, []) is not None  # short windows still come joined
    finally:
        conn.close()
