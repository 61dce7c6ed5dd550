"""connect_runtime.spark: spark.read.format("pyconnect") reads exactly committed offset ranges.

Real local SparkSession (one per module: it takes ~5 s to start), real backends: SQLite files, and
a Tansu broker for the Kafka backend.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from connect_runtime.api.errors import ConfigError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.spark import (
    OffsetRangePartition,
    parse_json_value,
    parse_ranges,
    plan_partitions,
    read_ranges,
)

pytestmark = pytest.mark.spark

TS0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z in ms


@pytest.fixture(scope="module")
def spark(spark_session: object) -> object:
    return spark_session  # the one session of the process (tests/support/spark.py says why)

def _records(topic: str, partition: int, tag: str, first: int, n: int) -> list[ProducerRecord]:
    return [
        ProducerRecord(topic, partition, json.dumps({"k": i}).encode(),
                       json.dumps({"n": i, "tag": tag, "amount": i * 1.5}).encode(),
                       TS0 + i, [("source", f"{tag}-{i}".encode()), ("empty", None)])
        for i in range(first, first + n)
    ]


def _fill(url: str, *, with_uncommitted: bool) -> None:
    """topic ``t`` (2 partitions): p0 offsets 0..259 committed, p1 offsets 0..99 committed.

    With ``with_uncommitted``: an aborted transaction between them, and a transaction still open
    (records sent, never committed) when the reads happen.
    """
    with open_backend(url) as backend:
        backend.create_topics({"t": 2})
        producer = backend.transactional_producer("test-writer")
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.send(_records("t", 0, "committed", 0, 250) + _records("t", 1, "committed", 0, 100))
        producer.commit_transaction([], 10)
        if with_uncommitted:
            producer.begin_transaction()
            producer.send(_records("t", 0, "aborted", 1000, 40))
            producer.abort_transaction(10)
        producer.begin_transaction()
        producer.send(_records("t", 0, "committed", 250, 10))
        producer.commit_transaction([], 10)
        producer.close()


@pytest.fixture
def filled_sqlite(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'pyconnect.db'}"
    _fill(url, with_uncommitted=True)
    # a transaction left open while Spark reads: its records must never show up
    with open_backend(url) as backend:
        pending = backend.transactional_producer("test-pending")
        pending.init_transactions(10)
        pending.begin_transaction()
        pending.send(_records("t", 0, "open", 2000, 25))
        pending.flush(10)
        yield url
        pending.abort_transaction(10)
        pending.close()


def _rows(df: object) -> list[tuple[str, int, int, str, str]]:
    return sorted((r.topic, r.partition, r.offset, r.key, r.value) for r in df.collect())  # type: ignore[attr-defined]


def test_reads_exactly_the_committed_records_of_the_ranges(spark: object, filled_sqlite: str) -> None:
    ranges = {"t": {"0": [10, 255], "1": [0, 100]}}
    df = read_ranges(spark, filled_sqlite, ranges)
    rows = _rows(df)
    assert [(t, p, o) for t, p, o, _, _ in rows] == (
        [("t", 0, o) for o in range(10, 255)] + [("t", 1, o) for o in range(100)])
    values = [json.loads(v) for *_, v in rows]
    assert {v["tag"] for v in values} == {"committed"}
    assert [json.loads(v)["n"] for t, p, o, k, v in rows if p == 0] == list(range(10, 255))
    assert all(json.loads(k)["k"] == o for t, p, o, k, v in rows)


def test_only_committed_records_appear_even_when_the_range_reaches_past_them(spark: object,
                                                                              filled_sqlite: str) -> None:
    df = read_ranges(spark, filled_sqlite, '{"t": {"0": [0, 100000]}}')
    rows = _rows(df)
    assert [o for _, _, o, _, _ in rows] == list(range(260))
    assert {json.loads(v)["tag"] for *_, v in rows} == {"committed"}


def test_large_ranges_are_split_into_input_partitions(spark: object, filled_sqlite: str) -> None:
    df = (spark.read.format("pyconnect").option("backend", filled_sqlite)  # type: ignore[attr-defined]
          .option("ranges", '{"t": {"0": [10, 255], "1": [0, 100]}}')
          .option("max.records.per.partition", "50").load())
    # 345 offsets: 7 pieces of at most 50, rounded up to 8 (a multiple of min.partitions, default 2), so
    # pieces of 44, never across topic partitions: p0 44 x 5 + 25, p1 44 x 2 + 12
    assert df.rdd.getNumPartitions() == 9
    per_split = df.rdd.mapPartitions(lambda it: [sum(1 for _ in it)]).collect()
    assert sorted(per_split) == [12, 25, 44, 44, 44, 44, 44, 44, 44]
    assert [o for _, p, o, _, _ in _rows(df) if p == 0] == list(range(10, 255))


def test_reading_the_same_ranges_twice_gives_the_same_rows(spark: object, filled_sqlite: str) -> None:
    ranges = '{"t": {"0": [0, 260], "1": [5, 60]}}'
    first = read_ranges(spark, filled_sqlite, ranges, max_records_per_partition=64).collect()
    # more records are committed after the first read: the same ranges still read the same rows
    with open_backend(filled_sqlite) as backend:
        producer = backend.producer()
        producer.send(_records("t", 0, "later", 260, 30) + _records("t", 1, "later", 100, 30))
        producer.flush(10)
        producer.close()
    second = read_ranges(spark, filled_sqlite, ranges, max_records_per_partition=64).collect()
    assert sorted(map(tuple, first)) == sorted(map(tuple, second))
    assert len(first) == 260 + 55


def test_offsets_outside_the_ranges_are_excluded(spark: object, filled_sqlite: str) -> None:
    ranges = {"t": {"0": [[3, 7], [100, 102], [5, 9]], "1": [99, 100]}}
    offsets = [(p, o) for _, p, o, _, _ in _rows(read_ranges(spark, filled_sqlite, ranges))]
    assert offsets == [(0, 3), (0, 4), (0, 5), (0, 6), (0, 7), (0, 8), (0, 100), (0, 101), (1, 99)]


def test_empty_ranges_read_no_rows(spark: object, filled_sqlite: str) -> None:
    assert read_ranges(spark, filled_sqlite, {}).count() == 0
    assert read_ranges(spark, filled_sqlite, {"t": {"0": [5, 5]}}).count() == 0
    # a whole source run result is accepted too (its ranges are used)
    result = {"connector": "c", "records": 0, "ranges": {}, "source_offsets": []}
    assert read_ranges(spark, filled_sqlite, result).count() == 0


def test_columns_timestamp_headers_and_parsed_values(spark: object, filled_sqlite: str) -> None:
    df = read_ranges(spark, filled_sqlite, {"t": {"1": [7, 9]}})
    assert [f.name for f in df.schema.fields] == ["topic", "partition", "offset", "key", "value",
                                                  "timestamp", "headers"]
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert rows[0].timestamp.replace(tzinfo=UTC) == datetime.fromtimestamp((TS0 + 7) / 1000, UTC)
    assert [(h.key, h.value) for h in rows[0].headers] == [("source", "committed-7"), ("empty", None)]
    parsed = parse_json_value(df, "n int, tag string, amount double").select("offset", "value.*")
    assert sorted(tuple(r) for r in parsed.collect()) == [(7, 7, "committed", 10.5), (8, 8, "committed", 12.0)]


def test_string_and_bytes_converters(spark: object, filled_sqlite: str) -> None:
    df = read_ranges(spark, filled_sqlite, {"t": {"1": [0, 1]}}, key_converter="bytes",
                     value_converter="org.apache.kafka.connect.storage.StringConverter")
    assert df.schema["key"].dataType.typeName() == "binary"
    row = df.first()
    assert bytes(row.key) == b'{"k": 0}'
    assert json.loads(row.value)["n"] == 0


def test_missing_or_bad_options_name_every_field(spark: object) -> None:
    with pytest.raises(Exception) as info:
        spark.read.format("pyconnect").option("ranges", "not json").option(  # type: ignore[attr-defined]
            "max.records.per.partition", "0").load()
    text = str(info.value)
    assert "backend" in text and "ranges" in text and "max.records.per.partition" in text


def test_reads_from_the_kafka_backend_too(spark: object, fresh_kafka_url: str) -> None:
    _fill(fresh_kafka_url, with_uncommitted=False)  # Tansu shows aborted records: not tested there
    with open_backend(fresh_kafka_url) as backend:
        consumer = backend.consumer(None)
        ends = consumer.end_offsets([TopicPartition("t", 0), TopicPartition("t", 1)], 10)
        consumer.close()
    df = read_ranges(spark, fresh_kafka_url, {"t": {"0": [0, ends[TopicPartition("t", 0)]], "1": [20, 30]}},
                     max_records_per_partition=100)
    values = [json.loads(r.value) for r in df.collect()]
    assert sorted(v["n"] for v in values if v["n"] < 1000 and v["tag"] == "committed") == sorted(
        list(range(260)) + list(range(20, 30)))
    assert len(values) == 270


# ------------------------------------------------------------------ planning (no Spark job needed)


def test_parse_ranges_shapes_merge_and_errors() -> None:
    assert parse_ranges('{"a": {"1": [5, 9], "0": [[0, 3], [2, 4], [4, 6], [8, 8]]}}') == {
        TopicPartition("a", 0): [(0, 6)], TopicPartition("a", 1): [(5, 9)]}
    assert parse_ranges({"connector": "c", "ranges": {"a": {"0": [0, 1]}}, "records": 1}) == {
        TopicPartition("a", 0): [(0, 1)]}
    for bad, named in (({"a": {"x": [0, 1]}}, "partition 'x'"), ({"a": {"0": [3, "9"]}}, "partition 0"),
                       ({"a": {"1": [5, 2]}}, "[5, 2]"), ("[1", "expected JSON")):
        with pytest.raises(ConfigError) as info:
            parse_ranges(bad)  # type: ignore[arg-type]
        assert named in str(info.value)


def test_plan_partitions_splits_evenly() -> None:
    parts = plan_partitions({TopicPartition("a", 0): [(0, 10), (20, 21)]}, max_records=4)
    assert [p.spans for p in parts] == [[(0, 4)], [(4, 8)], [(8, 10), (20, 21)]]
    assert parts[0] == OffsetRangePartition("a", 0, [(0, 4)])
    # min.partitions: 2 cores share one small range; exact span lists stay few partitions
    two = plan_partitions({TopicPartition("a", 0): [(0, 10)]}, max_records=100, min_partitions=2)
    assert [p.spans for p in two] == [[(0, 5)], [(5, 10)]]
    many = plan_partitions({TopicPartition("a", 0): [(i * 10, i * 10 + 2) for i in range(100)]}, 1000, 2)
    assert [p.size for p in many] == [100, 100] and many[1].spans[0] == (500, 502)
    assert plan_partitions({TopicPartition("a", 0): [(0, 3)]}, 100, 8) == [
        OffsetRangePartition("a", 0, [(i, i + 1)]) for i in range(3)]
    with pytest.raises(ConfigError):
        plan_partitions({}, max_records=0)


# ------------------------------------------------------------------ typed columns (schema option)

ORDER_SCHEMA = ("n int, tag string, amount double, price decimal(10,2), day date, at timestamp, "
                "item struct<sku: string, qty: long>, tags array<string>")


def _order(i: int) -> dict[str, object]:
    return {"n": i, "tag": f"t{i % 3}", "amount": i * 1.5, "price": f"{i}.{i % 100:02d}", "day": "2026-01-02",
            "at": f"2026-01-01T00:00:{i % 60:02d}Z", "item": {"sku": f"s{i}", "qty": i * 10},
            "tags": [f"a{i}", "b"], "ignored": {"x": 1}}


def _send(url: str, topic: str, partition: int, values: list[bytes | None], tid: str = "typed-writer") -> tuple[int, int]:
    """Commit ``values`` to one partition in one transaction; returns the committed [from, to)."""
    with open_backend(url) as backend:
        backend.create_topics({topic: 2})
        producer = backend.transactional_producer(tid)
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.send([ProducerRecord(topic, partition, f"k{i}".encode(), v, TS0 + i, [("h", f"{i}".encode())])
                       for i, v in enumerate(values)])
        written = producer.commit_transaction([], 10)
        producer.close()
    return written.ranges[TopicPartition(topic, partition)]


def test_typed_columns_equal_the_input(spark: object, sqlite_url: str) -> None:
    from decimal import Decimal

    a, b = _send(sqlite_url, "orders", 0, [json.dumps(_order(i)).encode() for i in range(300)])
    df = read_ranges(spark, sqlite_url, {"orders": {"0": [a, b]}}, schema=ORDER_SCHEMA, read_batch_size=64)
    assert df.columns == ["topic", "partition", "offset", "key", "timestamp", "headers", "n", "tag", "amount",
                          "price", "day", "at", "item", "tags"]
    rows = sorted(df.collect(), key=lambda r: r.n)
    assert len(rows) == 300
    for i, r in enumerate(rows):
        want = _order(i)
        assert (r.n, r.tag, r.amount, r.item.sku, r.item.qty, r.tags) == (
            i, want["tag"], i * 1.5, f"s{i}", i * 10, [f"a{i}", "b"])
        assert r.price == Decimal(str(want["price"])) and str(r.day) == "2026-01-02"
        assert r.at.replace(tzinfo=UTC) == datetime(2026, 1, 1, 0, 0, i % 60, tzinfo=UTC)
        assert (r.topic, r.partition, r.offset, r.key) == ("orders", 0, a + i, f"k{i}")
        assert [(h.key, h.value) for h in r.headers] == [("h", str(i))]
    # the StructType JSON form of the schema gives the same columns; metadata columns can be dropped
    as_json = read_ranges(spark, sqlite_url, {"orders": {"0": [a, b]}}, schema=df.select("n", "tag").schema,
                          metadata_columns="offset")
    assert as_json.columns == ["offset", "n", "tag"]
    assert sorted(tuple(r) for r in as_json.collect()) == [(a + i, i, f"t{i % 3}") for i in range(300)]


MIXED: list[bytes | None] = [
    b'{"n": 1, "tag": "a"}',
    b"not json",
    b'{"n": "two", "tag": "b"}',        # a string where an int is declared
    b'{"n": 3, "tag": "c"}',
    b"[1, 2]",                          # not an object
    None,                               # a tombstone: all null, not malformed
    b'{"n": 1.5}',                      # a fraction where an int is declared
    b"",                                # empty
    b'{"n": 7,\n "tag": "g"}',          # pretty-printed: valid
    b'{"n": 8, "tag": 8}',              # a number where a string is declared
    b'{"n": 9, "tag": "i", "extra": [1]}',
]
GOOD = {0: (1, "a"), 3: (3, "c"), 5: (None, None), 8: (7, "g"), 10: (9, "i")}


def _mode_df(spark: object, url: str, span: tuple[int, int], mode: str, schema: str) -> object:
    return read_ranges(spark, url, {"m": {"1": list(span)}}, schema=schema, mode=mode, metadata_columns="offset",
                       read_batch_size=4)


def test_malformed_records_follow_the_mode(spark: object, sqlite_url: str) -> None:
    a, b = _send(sqlite_url, "m", 1, MIXED * 3)
    span = (a, b)
    bad = [i for i in range(len(MIXED)) if i not in GOOD]
    permissive = _mode_df(spark, sqlite_url, span, "PERMISSIVE", "n int, tag string, _corrupt_record string")
    rows = {r.offset - a: (r.n, r.tag, r._corrupt_record) for r in permissive.collect()}
    assert len(rows) == 3 * len(MIXED)
    for k in range(3):
        for i, v in enumerate(MIXED):
            got = rows[k * len(MIXED) + i]
            if i in GOOD:
                assert got == (*GOOD[i], None), (i, got)
            else:
                assert got == (None, None, (v or b"").decode()), (i, got)
    # PERMISSIVE without the corrupt record column: the records stay, with null columns
    no_col = _mode_df(spark, sqlite_url, span, "PERMISSIVE", "n int, tag string")
    assert no_col.count() == 3 * len(MIXED) and no_col.where("n is null").count() == 3 * (len(bad) + 1)
    dropped = _mode_df(spark, sqlite_url, span, "DROPMALFORMED", "n int, tag string")
    assert sorted((r.offset - a) % len(MIXED) for r in dropped.collect()) == sorted(list(GOOD) * 3)
    with pytest.raises(Exception) as info:
        _mode_df(spark, sqlite_url, span, "FAILFAST", "n int, tag string").collect()  # type: ignore[attr-defined]
    text = str(info.value)
    assert f"record m[1] offset {a + 1}" in text and "FAILFAST" in text
    # a valid record set reads the same under FAILFAST
    assert _mode_df(spark, sqlite_url, (a, a + 1), "FAILFAST", "n int, tag string").count() == 1


def test_bad_schema_options_are_named(spark: object, sqlite_url: str) -> None:
    _send(sqlite_url, "m", 0, [b"{}"])
    for options, named in (({"mode": "LENIENT"}, "mode"), ({"metadata_columns": "offset,nope"}, "metadata.columns"),
                           ({"schema": "m map<string, int>"}, "schema.m"),
                           ({"schema": "offset long"}, "also metadata columns"),
                           ({"schema": "x int, _corrupt_record int"}, "must be a string")):
        opts = {"schema": "x int", **options}
        with pytest.raises(Exception) as info:
            read_ranges(spark, sqlite_url, {"m": {"0": [0, 1]}}, **opts).collect()  # type: ignore[attr-defined]
        assert named in str(info.value), (options, str(info.value)[:2000])


def test_ranges_split_across_input_partitions_read_each_record_once(spark: object, sqlite_url: str) -> None:
    a, b = _send(sqlite_url, "s", 0, [json.dumps({"n": i}).encode() for i in range(1000)])
    df = read_ranges(spark, sqlite_url, {"s": {"0": [a, b]}}, schema="n int", metadata_columns="partition",
                     min_partitions=2, max_records_per_partition=300, read_batch_size=100)
    assert df.rdd.getNumPartitions() == 4  # 1000 offsets: 4 pieces of 250 (a multiple of the 2 cores)
    assert sorted(df.rdd.mapPartitions(lambda it: [sum(1 for _ in it)]).collect()) == [250] * 4
    assert sorted(r.n for r in df.collect()) == list(range(1000))


@pytest.mark.parametrize("backend_kind", ["sqlite", pytest.param("kafka", marks=pytest.mark.kafka)])
def test_exact_span_lists_skip_other_writers_records(spark: object, backend_kind: str, sqlite_url: str,
                                                     request: pytest.FixtureRequest) -> None:
    url = sqlite_url if backend_kind == "sqlite" else request.getfixturevalue("fresh_kafka_url")
    ours: list[list[int]] = []
    for k in range(3):
        ours.append(list(_send(url, "x", 0, [json.dumps({"who": "us", "n": k * 10 + i}).encode() for i in range(10)],
                               tid="us")))
        _send(url, "x", 0, [json.dumps({"who": "them", "n": i}).encode() for i in range(5)], tid="them")
    df = read_ranges(spark, url, {"x": {"0": ours}}, schema="who string, n int", metadata_columns="offset")
    rows = sorted((r.n, r.who) for r in df.collect())
    assert rows == [(n, "us") for n in range(30)]


# ------------------------------------------------------------------ streaming reader


def _stream_once(spark: object, url: str, out: Path, checkpoint: Path) -> None:
    query = (spark.readStream.format("pyconnect")  # type: ignore[attr-defined]
             .option("backend", url).option("topics", "st").option("schema", "n int, batch int")
             .option("metadata.columns", "partition,offset").option("max.records.per.trigger", "37")
             .load()
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(180), "the availableNow query did not finish within 180 s"
    finally:
        query.stop()
    assert query.exception() is None, query.exception()


def _commit_batch(url: str, batch: int, n: int) -> None:
    with open_backend(url) as backend:
        backend.create_topics({"st": 2})
        producer = backend.transactional_producer("stream-writer")
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.send([ProducerRecord("st", i % 2, None, json.dumps({"n": i, "batch": batch}).encode(), TS0 + i, None)
                       for i in range(n)])
        producer.commit_transaction([], 10)
        producer.close()


@pytest.mark.parametrize("backend_kind", ["sqlite", pytest.param("kafka", marks=pytest.mark.kafka)])
def test_streaming_available_now_reads_each_committed_record_once(spark: object, backend_kind: str,
                                                                 sqlite_url: str, tmp_path: Path,
                                                                 request: pytest.FixtureRequest) -> None:
    url = sqlite_url if backend_kind == "sqlite" else request.getfixturevalue("fresh_kafka_url")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    _commit_batch(url, 1, 100)
    _stream_once(spark, url, out, checkpoint)
    expected = {(1, i) for i in range(100)}

    def written() -> list[tuple[int, int]]:
        return [(r.batch, r.n) for r in spark.read.parquet(str(out)).collect()]  # type: ignore[attr-defined]

    assert sorted(written()) == sorted(expected)
    # nothing new: a run from the checkpoint writes nothing
    _stream_once(spark, url, out, checkpoint)
    assert len(written()) == 100
    # new committed records, and on SQLite a transaction still open while the query runs: only the
    # committed ones are read, each once, by a query restarted from the checkpoint
    _commit_batch(url, 2, 50)
    expected |= {(2, i) for i in range(50)}
    if backend_kind == "sqlite":
        with open_backend(url) as backend:
            pending = backend.transactional_producer("stream-pending")
            pending.init_transactions(10)
            pending.begin_transaction()
            pending.send([ProducerRecord("st", 0, None, b'{"n": -1, "batch": 99}', TS0, None)])
            pending.flush(10)
            _stream_once(spark, url, out, checkpoint)
            pending.abort_transaction(10)
            pending.close()
    else:
        _stream_once(spark, url, out, checkpoint)
    got = written()
    assert len(got) == len(set(got)) and set(got) == expected
    _commit_batch(url, 3, 30)
    expected |= {(3, i) for i in range(30)}
    _stream_once(spark, url, out, checkpoint)
    got = written()
    assert len(got) == len(set(got)) == 180 and set(got) == expected
