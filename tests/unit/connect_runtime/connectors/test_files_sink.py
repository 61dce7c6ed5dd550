"""FileSink: offsets kept in the destination (manifest), truncation of unacknowledged bytes, rewinds.

Every test is a real ``run_sink`` over a real SQLite backend file. The SIGKILL test (a real
subprocess killed mid-run) is in ``tests/integration/test_cli_sink_kill.py``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.api import ConnectError, TopicPartition
from connect_runtime.backends import Backend, ProducerRecord, open_backend
from connect_runtime.connectors.files import MANIFEST, read_manifest
from connect_runtime.runtime.sink import run_sink

TOPIC = "in"


@pytest.fixture
def backend(sqlite_url: str) -> Iterator[Backend]:
    with open_backend(sqlite_url) as be:
        yield be


def fill(backend: Backend, values: list[Any], partitions: int = 2, start: int = 0, key: bool = False) -> None:
    """Value ``v`` number ``i`` goes to partition ``(start + i) % partitions``."""
    backend.create_topics({TOPIC: partitions})
    producer = backend.producer()
    try:
        producer.send([
            ProducerRecord(TOPIC, (start + i) % partitions, json.dumps(f"k{start + i}").encode() if key else None,
                           json.dumps(v).encode())
            for i, v in enumerate(values)
        ])
        producer.flush(30)
    finally:
        producer.close()


def config(out: Path, **extra: str) -> dict[str, str]:
    cfg = {"name": "archive", "connector.class": "connect_runtime.connectors.files.FileSink",
           "topics": TOPIC, "directory": str(out), "consumer.max.poll.records": "7"}
    cfg.update({k.replace("_", "."): v for k, v in extra.items()})
    return cfg


def data_file(out: Path, p: int, ext: str = "jsonl") -> Path:
    return out / TOPIC / f"partition={p}" / f"{TOPIC}-{p}.{ext}"


def lines(out: Path, p: int) -> list[Any]:
    return [json.loads(line) for line in data_file(out, p).read_text().splitlines()]


def group_committed(backend: Backend, partitions: int = 2) -> dict[int, int | None]:
    consumer = backend.consumer("connect-archive")
    try:
        got = consumer.committed([TopicPartition(TOPIC, p) for p in range(partitions)], 10)
    finally:
        consumer.close()
    return {tp.partition: off for tp, off in got.items()}


def test_writes_each_partition_with_a_manifest_and_commits_nothing_to_the_group(
    tmp_path: Path, sqlite_url: str, backend: Backend
) -> None:
    out = tmp_path / "out"
    fill(backend, list(range(40)))
    result = run_sink(config(out, tasks_max="2"), sqlite_url)
    assert result.records == 40
    assert lines(out, 0) == list(range(0, 40, 2))
    assert lines(out, 1) == list(range(1, 40, 2))
    for p in (0, 1):
        manifest = read_manifest(out / TOPIC / f"partition={p}" / MANIFEST)
        assert manifest is not None
        assert manifest["next_offset"] == 20
        assert manifest["size"] == data_file(out, p).stat().st_size
        assert manifest["file"] == f"{TOPIC}-{p}.jsonl"
    assert group_committed(backend) == {0: None, 1: None}  # pre_commit returned {}
    assert result.committed == {}


def test_restart_rewinds_to_the_manifest_without_duplicates(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    out = tmp_path / "out"
    fill(backend, list(range(10)))
    run_sink(config(out), sqlite_url)
    fill(backend, list(range(10, 16)), start=10)
    # the group has no offsets, so without the manifest's rewind this run would start at offset 0
    assert run_sink(config(out), sqlite_url).records == 6
    assert lines(out, 0) == [0, 2, 4, 6, 8, 10, 12, 14]
    assert lines(out, 1) == [1, 3, 5, 7, 9, 11, 13, 15]
    assert run_sink(config(out), sqlite_url).records == 0


def test_bytes_written_after_the_last_commit_point_are_truncated(
    tmp_path: Path, sqlite_url: str, backend: Backend
) -> None:
    out = tmp_path / "out"
    fill(backend, list(range(10)))
    run_sink(config(out), sqlite_url)
    committed_size = data_file(out, 0).stat().st_size
    # what a run killed between its write and its manifest leaves behind: records past the manifest
    with open(data_file(out, 0), "a") as f:
        f.write("10\n12\n14\n{\"torn")
    fill(backend, list(range(10, 14)), start=10)
    run_sink(config(out), sqlite_url)
    assert lines(out, 0) == [0, 2, 4, 6, 8, 10, 12]
    assert lines(out, 1) == [1, 3, 5, 7, 9, 11, 13]
    assert data_file(out, 0).stat().st_size == committed_size + len("10\n12\n")


def test_data_without_any_manifest_is_dropped_and_rewritten(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    out = tmp_path / "out"
    fill(backend, list(range(4)))
    data_file(out, 0).parent.mkdir(parents=True)
    data_file(out, 0).write_text("0\n2\n")  # a first run that died before its first commit point
    run_sink(config(out), sqlite_url)
    assert lines(out, 0) == [0, 2]
    assert lines(out, 1) == [1, 3]


def test_a_data_file_shorter_than_its_manifest_is_refused(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    out = tmp_path / "out"
    fill(backend, list(range(10)))
    run_sink(config(out), sqlite_url)
    data_file(out, 1).write_text("1\n")
    with pytest.raises(ConnectError, match=r"in-1\.jsonl has 2 bytes but its manifest recorded"):
        run_sink(config(out), sqlite_url)


def test_output_fields_wrap_each_record(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    out = tmp_path / "out"
    fill(backend, [{"a": 1}, {"a": "é"}, None], partitions=1, key=True)
    run_sink(config(out, output_fields="topic,partition,offset,key,value"), sqlite_url)
    assert lines(out, 0) == [
        {"topic": TOPIC, "partition": 0, "offset": 0, "key": "k0", "value": {"a": 1}},
        {"topic": TOPIC, "partition": 0, "offset": 1, "key": "k1", "value": {"a": "é"}},
        {"topic": TOPIC, "partition": 0, "offset": 2, "key": "k2", "value": None},
    ]
    assert '"é"' in data_file(out, 0).read_text(encoding="utf-8")


def test_csv_format_writes_one_header_and_keeps_it_across_runs(
    tmp_path: Path, sqlite_url: str, backend: Backend
) -> None:
    out = tmp_path / "out"
    fill(backend, [{"id": 1, "name": "a,b"}, {"id": 2, "name": None}], partitions=1)
    run_sink(config(out, format="csv", output_fields="offset,value"), sqlite_url)
    fill(backend, [{"id": 3, "name": "c", "tags": [1, 2]}, {"name": "d", "id": 4}], partitions=1, start=2)
    with pytest.raises(ConnectError, match=r"not among the CSV columns"):
        run_sink(config(out, format="csv", output_fields="offset,value"), sqlite_url)
    # the failed run wrote nothing durable: the file still ends after the first run's rows
    with open(data_file(out, 0, "csv"), newline="") as f:
        assert list(csv.reader(f)) == [["offset", "id", "name"], ["0", "1", "a,b"], ["1", "2", ""]]


def test_invalid_sink_config_names_the_fields(tmp_path: Path, sqlite_url: str) -> None:
    with pytest.raises(ConnectError) as err:
        run_sink(config(tmp_path, format="parquet", output_fields="value,nope"), sqlite_url)
    assert "format" in str(err.value) and "output.fields" in str(err.value)


def test_changing_the_format_of_a_written_partition_is_refused(tmp_path: Path, sqlite_url: str,
                                                               backend: Backend) -> None:
    out = tmp_path / "out"
    fill(backend, [{"a": 1}, {"a": 2}])
    run_sink(config(out), sqlite_url)
    with pytest.raises(ConnectError, match="was written as jsonl, not csv"):
        run_sink(config(out, format="csv"), sqlite_url)


def segments(out: Path, p: int = 0, ext: str = "jsonl") -> list[Path]:
    return sorted((out / TOPIC / f"partition={p}").glob(f"{TOPIC}-{p}-*.{ext}"))


def test_segments_roll_and_a_crashed_runs_segments_are_removed(
    tmp_path: Path, sqlite_url: str, backend: Backend
) -> None:
    out = tmp_path / "out"
    fill(backend, list(range(100, 130)), partitions=1)
    run_sink(config(out, file_max_bytes="20"), sqlite_url)
    segs = segments(out)
    assert len(segs) >= 4
    assert segs[0].name == f"{TOPIC}-0-{0:020d}.jsonl"
    assert [json.loads(v) for f in segs for v in f.read_text().splitlines()] == list(range(100, 130))
    manifest = read_manifest(out / TOPIC / "partition=0" / MANIFEST)
    assert manifest is not None and manifest["file"] == segs[-1].name and manifest["next_offset"] == 30
    # a run that died after rolling: bytes past the manifest in the current segment, and a new segment
    with open(segs[-1], "a") as f:
        f.write("999\n")
    (segs[-1].parent / f"{TOPIC}-0-{10**12:020d}.jsonl").write_text("998\n")
    fill(backend, list(range(130, 140)), partitions=1, start=30)
    run_sink(config(out, file_max_bytes="20"), sqlite_url)
    assert [json.loads(v) for f in segments(out) for v in f.read_text().splitlines()] == list(range(100, 140))


def test_csv_segments_each_start_with_the_header(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    out = tmp_path / "out"
    fill(backend, [{"id": i} for i in range(20)], partitions=1)
    run_sink(config(out, format="csv", file_max_bytes="15"), sqlite_url)
    segs = segments(out, ext="csv")
    assert len(segs) >= 3
    ids = []
    for seg in segs:
        with open(seg, newline="") as f:
            rows = list(csv.reader(f))
        assert rows[0] == ["id"]
        ids += [int(r[0]) for r in rows[1:]]
    assert ids == list(range(20))


def test_batched_json_lines_are_byte_for_byte_what_json_writes(tmp_path: Path, sqlite_url: str,
                                                              backend: Backend) -> None:
    """The batch encoder (one orjson call per put) writes exactly json's bytes, also where orjson's own
    would differ (NaN, exponent floats, integers beyond 64 bits, non-string keys after a transform-free
    round trip) and for bytes values (ByteArrayConverter: written as UTF-8 text)."""
    values: list[Any] = [
        {"a": 1.5e-7, "b": 1e16, "c": 1e22, "d": 0.0001, "e": -0.0, "f": 123456789.125},
        {"neg": -(2**63), "u": 2**64 - 1},
        float("nan"), float("inf"), None, "é\u2028\x7f\x1f\"\\", [1, [2, {"x": None}]], "null", "e1", 0.00001,
        {"big": 2**70},  # orjson refuses it: alone in the last batch, which json writes
    ]
    out = tmp_path / "out"
    fill(backend, values, partitions=1)
    run_sink(config(out, consumer_max_poll_records=str(len(values) - 1)), sqlite_url)
    expected = "".join(json.dumps(v, ensure_ascii=False, separators=(",", ":")) + "\n" for v in values)
    assert data_file(out, 0).read_bytes() == expected.encode("utf-8")

    raw = tmp_path / "raw"
    run_sink({**config(raw), "name": "raw", "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"}, sqlite_url)
    assert data_file(raw, 0).read_bytes() == "".join(
        json.dumps(json.dumps(v), separators=(",", ":")) + "\n" for v in values).encode()


def test_a_value_json_cannot_write_is_named_and_the_batch_before_it_kept(tmp_path: Path, sqlite_url: str,
                                                                          backend: Backend) -> None:
    """A lone surrogate (valid JSON text, not encodable as UTF-8) in the middle of a batch: the batch
    encoder gives way to the record-by-record path, which names the record; with errors.tolerance=all it is
    dead-lettered and every other record of the batch is written."""
    backend.create_topics({TOPIC: 1})
    producer = backend.producer()
    try:
        producer.send([ProducerRecord(TOPIC, 0, None, v) for v in (b'{"a":1}', b'"\\ud800"', b'{"a":3}')])
        producer.flush(30)
    finally:
        producer.close()
    with pytest.raises(ConnectError, match=r"in\[0\]@1"):
        run_sink(config(tmp_path / "none"), sqlite_url)
    out = tmp_path / "all"
    result = run_sink({**config(out), "name": "tolerant", "errors.tolerance": "all",
                       "errors.deadletterqueue.topic.name": "dlq"}, sqlite_url)
    assert (result.records, result.dead_lettered) == (3, 1)
    assert lines(out, 0) == [{"a": 1}, {"a": 3}]
