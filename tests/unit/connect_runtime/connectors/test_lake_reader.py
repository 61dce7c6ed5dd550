"""Resolving a committed range to the ParquetSink files that hold it (``files_for``, ``ranges.interval_spans``):
exact files, ranges across several files and partitions, commit groups of the field partitioner, a gap, a range
not on file boundaries, an incomplete group; and a real sink run per interval (``until_offsets``) cutting files on
the intervals' ends. On local files and ``memory://``; Spark's read of the files is in
tests/integration/connect_runtime/test_spark_lake.py."""

from __future__ import annotations

import json
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from connect_runtime.api import TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.lake import LakeFile, LakeRangeError, files_for
from connect_runtime.connectors.lake._config import LakeConfig
from connect_runtime.connectors.lake.store import Lake, encode_file, file_name
from connect_runtime.ranges import RangesFormatError, interval_spans
from connect_runtime.runtime.sink import run_sink

TOPIC = "orders"


def put(root: str, p: int, start: int, end: int, *, encoded: str | None = None, group_size: int = 1,
        rows: int | None = None) -> None:
    """A data file as the ParquetSink publishes it: [start, end) of orders-p, ``rows`` rows (default end - start)."""
    lake = Lake(LakeConfig(path=root, partitioner="default"))
    n = end - start if rows is None else rows
    table = pa.table({"n": list(range(start, start + n))})
    data = encode_file(table, start=start, end=end, generation=1, connector="lake", group_size=group_size,
                       codec="snappy")
    tp = TopicPartition(TOPIC, p)
    lake.publish(f"{lake.dir_of(tp, encoded or f'partition={p}')}/{file_name(tp, start)}", data)


def spans(found: list[LakeFile]) -> list[tuple[int, int, int]]:
    return [(f.partition, f.start, f.end) for f in found]


def test_exact_files_of_a_range_across_several_files_and_partitions(root: str) -> None:
    for a, b in [(0, 100), (100, 250), (250, 300), (300, 400)]:
        put(root, 0, a, b)
    put(root, 1, 0, 50)
    put(root, 1, 50, 90)
    found = files_for(root, {TOPIC: {0: [(100, 300)], "1": [(0, 90)]}})
    assert spans(found) == [(0, 100, 250), (0, 250, 300), (1, 0, 50), (1, 50, 90)]
    assert found[0].url.endswith(f"/topics/{TOPIC}/partition=0/{TOPIC}+0+0000000100.parquet")
    assert found[0].url.startswith(root.split("://")[0] + "://")
    assert found[0].rows == 150
    # spans with a gap between them (another writer's records): each span's files, nothing between
    assert spans(files_for(root, {TOPIC: {0: [(0, 100), (300, 400)]}})) == [(0, 0, 100), (0, 300, 400)]
    assert files_for(root, {TOPIC: {0: [(5, 5)]}}) == []


def test_a_range_not_on_file_boundaries_names_the_span_and_the_file(root: str) -> None:
    put(root, 0, 0, 100)
    put(root, 0, 100, 200)
    with pytest.raises(LakeRangeError, match=r"orders-0 \[50, 200\): the span starts inside "
                                             r"orders\+0\+0000000000\.parquet, which holds \[0, 100\)"):
        files_for(root, {TOPIC: {0: [(50, 200)]}})
    with pytest.raises(LakeRangeError, match=r"orders-0 \[0, 150\): the span ends inside "
                                             r"orders\+0\+0000000100\.parquet, which holds \[100, 200\)"):
        files_for(root, {TOPIC: {0: [(0, 150)]}})


def test_offsets_no_file_holds_are_a_gap_named_with_the_next_file(root: str) -> None:
    put(root, 0, 0, 100)
    put(root, 0, 150, 200)
    with pytest.raises(LakeRangeError, match=r"orders-0 \[0, 200\): no file under .* holds offsets \[100, 150\) "
                                             r"\(the next file starts at 150\)"):
        files_for(root, {TOPIC: {0: [(0, 200)]}})
    with pytest.raises(LakeRangeError, match=r"holds offsets \[200, 300\): the sink has not written them"):
        files_for(root, {TOPIC: {0: [(150, 300)]}})
    with pytest.raises(LakeRangeError, match=r"orders-3 \[0, 10\): no file"):
        files_for(root, {TOPIC: {3: [(0, 10)]}})


def test_commit_groups_of_the_field_partitioner_and_an_incomplete_group(root: str) -> None:
    put(root, 0, 0, 10, encoded="channel=web", group_size=2, rows=6)
    put(root, 0, 0, 10, encoded="channel=app", group_size=2, rows=4)
    put(root, 0, 10, 20, encoded="channel=web", group_size=2, rows=5)  # its app file was never published
    found = files_for(root, {TOPIC: {0: [(0, 10)]}})
    assert sorted((f.url.split("/")[-2], f.start, f.end, f.rows) for f in found) == [
        ("channel=app", 0, 10, 4), ("channel=web", 0, 10, 6)]
    with pytest.raises(LakeRangeError, match=r"the commit group at offset 10 has 1 of its 2 files"):
        files_for(root, {TOPIC: {0: [(0, 20)]}})


def test_interval_spans_takes_a_source_result_a_handoff_ranges_or_json() -> None:
    result = {"connector": "orders-files", "records": 0, "ranges": {},
              "interval_ranges": {TOPIC: {"0": [381, 760]}}}
    assert interval_spans(result) == {TOPIC: {0: [(381, 760)]}}
    assert interval_spans(json.dumps(result)) == {TOPIC: {0: [(381, 760)]}}
    assert interval_spans({"backend": "sqlite:///x.db", "ranges": {TOPIC: {"0": [[0, 4], [9, 12]]}}, "records": 7}) \
        == {TOPIC: {0: [(0, 4), (9, 12)]}}
    assert interval_spans({TOPIC: {"1": [0, 5]}}) == {TOPIC: {1: [(0, 5)]}}
    with pytest.raises(RangesFormatError, match="sink run's result says where the run stopped"):
        interval_spans({"connector": "lake", "records": 3, "committed": {TOPIC: {"0": 3}}})
    with pytest.raises(RangesFormatError, match=r"^ranges: ranges of topic 'orders' partition 0"):
        interval_spans({TOPIC: {"0": "oops"}})


def test_a_sink_run_per_interval_cuts_files_on_the_intervals_ends(sqlite_url: str, tmp_path: Path) -> None:
    """What the example pipeline does: one bounded ParquetSink run per data interval (until_offsets = the source's
    ranges); each interval is then exactly a set of files, whatever flush.size cut inside it."""
    root = f"file://{tmp_path / 'lake'}"
    with open_backend(sqlite_url) as backend:
        backend.create_topics({TOPIC: 1})
        producer = backend.producer()
        producer.send([ProducerRecord(TOPIC, 0, None, json.dumps({"n": i}).encode()) for i in range(50)])
        producer.flush(30)
        producer.close()
    config = {"name": "lake", "connector.class": "connect_runtime.connectors.lake.ParquetSink", "topics": TOPIC,
              "path": root, "flush.size": "8"}
    days = [{TOPIC: {"0": [0, 21]}}, {TOPIC: {"0": [21, 50]}}]
    for day in days:
        run_sink(config, sqlite_url, until_offsets=day, max_seconds=60)
    read = []
    for day in days:
        files = files_for(root, interval_spans(day))
        assert files[0].start == day[TOPIC]["0"][0] and files[-1].end == day[TOPIC]["0"][1]
        for f in files:
            with fsspec.open(f.url, "rb") as fh:
                read.append([r["n"] for r in pq.read_table(fh).to_pylist()])
    assert [n for part in read for n in part] == list(range(50))
    assert [len(part) for part in read] == [8, 8, 5, 8, 8, 8, 5]
