"""connect_runtime.spark: spark.read.format("pyconnect") reads exactly committed offset ranges.

Real local SparkSession (one per module: it takes ~5 s to start), real backends: SQLite files, and
a Tansu broker for the Kafka backend.
"""

from __future__ import annotations

import json
import logging
import os
import sys
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
    register,
)

pytestmark = pytest.mark.spark

TS0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z in ms


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (SparkSession.builder.master("local[2]").appName("test_spark")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
    # py4j logs "Closing down clientserver connection" at INFO from __del__ at interpreter exit, when
    # a handler Airflow's logging set up (in another test) may point at a stream pytest has closed
    logging.getLogger("py4j").setLevel(logging.WARNING)


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
    # 345 offsets in 7 even pieces of at most 50 (never across topic partitions): p0 5, p1 2
    assert df.rdd.getNumPartitions() == 7
    per_split = df.rdd.mapPartitions(lambda it: [sum(1 for _ in it)]).collect()
    assert sorted(per_split) == [45, 50, 50, 50, 50, 50, 50]
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
