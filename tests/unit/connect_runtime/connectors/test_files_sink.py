"""FileSink: offsets kept in the destination (manifest and file names), whole files published at the
commit point, in-flight files of dead runs removed, rewinds, version-1 directories taken over.

Every test is a real ``run_sink`` over a real SQLite backend file. The SIGKILL test (a real
subprocess killed mid-run) is in ``tests/integration/test_cli_sink_kill.py``.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.api import ConnectError, TopicPartition
from connect_runtime.backends import Backend, ProducerRecord, open_backend
from connect_runtime.connectors.files import MANIFEST, committed_files, read_manifest
from connect_runtime.connectors.files.atomic import file_name
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


def files(out: Path, p: int, ext: str = "jsonl") -> list[Path]:
    return committed_files(out, TOPIC, p, ext)


def data_bytes(out: Path, p: int, ext: str = "jsonl") -> bytes:
    return b"".join(f.read_bytes() for f in files(out, p, ext))


def lines(out: Path, p: int) -> list[Any]:
    return [json.loads(line) for line in data_bytes(out, p).decode().splitlines()]


def visible(out: Path) -> list[str]:
    """Every name a reader of the directory sees (hidden names left out)."""
    return sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file() and not f.name.startswith("."))


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
        assert manifest["next_offset"] == 20 and manifest["version"] == 2
        assert manifest["generation"] == 0
        # one commit point, one whole file named by the offsets it holds (first and last, inclusive)
        assert [f.name for f in files(out, p)] == [file_name(TopicPartition(TOPIC, p), 0, 19, "jsonl")]
    assert visible(out) == sorted([f"{TOPIC}/partition={p}/{n}" for p in (0, 1) for n in
                                   (MANIFEST, file_name(TopicPartition(TOPIC, p), 0, 19, "jsonl"))])
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
    assert [f.name for f in files(out, 0)] == [file_name(TopicPartition(TOPIC, 0), 0, 4, "jsonl"),
                                               file_name(TopicPartition(TOPIC, 0), 5, 7, "jsonl")]
    assert run_sink(config(out), sqlite_url).records == 0


def test_in_flight_files_of_a_run_that_died_are_removed_and_never_visible(
    tmp_path: Path, sqlite_url: str, backend: Backend
) -> None:
    out = tmp_path / "out"
    fill(backend, list(range(10)))
    run_sink(config(out), sqlite_url)
    part = out / TOPIC / "partition=0"
    # what a run killed before its commit point leaves: a hidden in-flight file no data-file glob matches
    (part / ".inflight-7-12345-5.jsonl.tmp").write_text('10\n12\n{"torn')
    assert [f.name for f in part.glob("*.jsonl")] == [file_name(TopicPartition(TOPIC, 0), 0, 4, "jsonl")]
    fill(backend, list(range(10, 14)), start=10)
    run_sink(config(out), sqlite_url)
    assert lines(out, 0) == [0, 2, 4, 6, 8, 10, 12]
    assert lines(out, 1) == [1, 3, 5, 7, 9, 11, 13]
    assert not [f for f in part.iterdir() if f.name.startswith(".inflight-")]


def test_a_file_published_just_before_a_crash_counts_as_committed(tmp_path: Path, sqlite_url: str,
                                                                  backend: Backend) -> None:
    """A crash after the rename (the commit point) but before the manifest was rewritten: the file's name
    says what it holds, so the next run goes on after it (no duplicate, no gap)."""
    out = tmp_path / "out"
    fill(backend, list(range(10)), partitions=1)
    run_sink(config(out), sqlite_url)
    fill(backend, [10, 11], partitions=1, start=10)
    part = out / TOPIC / "partition=0"
    (part / file_name(TopicPartition(TOPIC, 0), 10, 11, "jsonl")).write_text("10\n11\n")
    fill(backend, [12, 13], partitions=1, start=12)
    assert run_sink(config(out), sqlite_url).records == 2
    assert lines(out, 0) == list(range(14))


def test_a_version_1_directory_is_taken_over(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    """One growing file and a manifest with its committed size (what earlier versions wrote): bytes past the
    size and segments started after it are removed, the file stays as committed data, the run goes on."""
    out = tmp_path / "out"
    fill(backend, list(range(8)), partitions=1)
    part = out / TOPIC / "partition=0"
    part.mkdir(parents=True)
    (part / f"{TOPIC}-0.jsonl").write_text("0\n1\n2\n3\n4\n5\n")  # 4 and 5 are past the committed size
    (part / MANIFEST).write_text(json.dumps({"version": 1, "topic": TOPIC, "partition": 0, "format": "jsonl",
                                             "file": f"{TOPIC}-0.jsonl", "size": 8, "next_offset": 4}))
    assert run_sink(config(out), sqlite_url).records == 4
    assert lines(out, 0) == list(range(8))
    assert [f.name for f in files(out, 0)] == [f"{TOPIC}-0.jsonl", file_name(TopicPartition(TOPIC, 0), 4, 7, "jsonl")]
    manifest = read_manifest(part / MANIFEST)
    assert manifest is not None and manifest["version"] == 2 and manifest["legacy"] == [f"{TOPIC}-0.jsonl"]


def test_a_version_1_file_shorter_than_its_manifest_is_refused(tmp_path: Path, sqlite_url: str,
                                                               backend: Backend) -> None:
    out = tmp_path / "out"
    fill(backend, list(range(4)), partitions=1)
    part = out / TOPIC / "partition=0"
    part.mkdir(parents=True)
    (part / f"{TOPIC}-0.jsonl").write_text("0\n")
    (part / MANIFEST).write_text(json.dumps({"version": 1, "file": f"{TOPIC}-0.jsonl", "size": 4, "next_offset": 2}))
    with pytest.raises(ConnectError, match=r"in-0\.jsonl has 2 bytes but its manifest recorded 4"):
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
    assert '"é"' in data_bytes(out, 0).decode("utf-8")


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
    assert [f.name for f in files(out, 0, "csv")] == [file_name(TopicPartition(TOPIC, 0), 0, 1, "csv")]
    with open(files(out, 0, "csv")[0], newline="") as f:
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


def test_files_roll_at_file_max_bytes_and_each_is_whole(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    out = tmp_path / "out"
    fill(backend, list(range(100, 130)), partitions=1)
    run_sink(config(out, file_max_bytes="20"), sqlite_url)
    segs = files(out, 0)
    assert len(segs) >= 4
    assert segs[0].name.startswith(f"{TOPIC}+0+{0:020d}+")
    assert [json.loads(v) for f in segs for v in f.read_text().splitlines()] == list(range(100, 130))
    # contiguous: each file starts right after the previous one's last offset
    bounds = [tuple(int(x) for x in f.stem.split("+")[2:]) for f in segs]
    assert bounds[0][0] == 0 and bounds[-1][1] == 29
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(bounds))
    manifest = read_manifest(out / TOPIC / "partition=0" / MANIFEST)
    assert manifest is not None and manifest["next_offset"] == 30
    fill(backend, list(range(130, 140)), partitions=1, start=30)
    run_sink(config(out, file_max_bytes="20"), sqlite_url)
    assert [json.loads(v) for f in files(out, 0) for v in f.read_text().splitlines()] == list(range(100, 140))


def test_csv_files_each_start_with_the_header(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    out = tmp_path / "out"
    fill(backend, [{"id": i} for i in range(20)], partitions=1)
    run_sink(config(out, format="csv", file_max_bytes="15"), sqlite_url)
    segs = files(out, 0, "csv")
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
    assert data_bytes(out, 0) == expected.encode("utf-8")

    raw = tmp_path / "raw"
    run_sink({**config(raw), "name": "raw", "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"}, sqlite_url)
    assert data_bytes(raw, 0) == "".join(
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
