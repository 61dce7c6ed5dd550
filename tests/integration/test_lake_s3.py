"""ParquetSink on S3 through a real moto server (tests/support/moto_server.py): layout and recovery from the
objects, objects never replaced (If-None-Match), an unreachable bucket named, and SIGKILL loops (a ``run_sink``
subprocess killed at a random point of its work, on observed progress, rerun to the end: every record in exactly one object, no gap, no overlap;
``PYCONNECT_SLOW_ITERATIONS`` scales them), on S3 and on local files."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import fsspec
import pyarrow.parquet as pq
import pytest

from connect_runtime.api import TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.lake import ParquetSink, committed_files
from connect_runtime.runtime.sink import run_sink
from tests.support import slow_iterations
from tests.support.kills import kill_loop
from tests.support.moto_server import S3Lake
from tests.support.sink_helpers import run_sink_killed_on_progress

TOPIC = "events"
PARTS = 2


def fill(url: str, n: int, start: int = 0) -> None:
    with open_backend(url) as backend:
        backend.create_topics({TOPIC: PARTS})
        producer = backend.producer()
        try:
            producer.send([ProducerRecord(TOPIC, i % PARTS, None, json.dumps({"i": i, "amount": i / 4,
                                                                                "shard": f"s{i % 3}"}).encode())
                           for i in range(start, start + n)])
            producer.flush(60)
        finally:
            producer.close()


def config(root: str, options: str = "{}", **extra: str) -> dict[str, str]:
    cfg = {"name": "lake", "connector.class": "connect_runtime.connectors.lake.ParquetSink", "topics": TOPIC,
           "path": root, "storage.options": options, "consumer.max.poll.records": "500", "flush.size": "997",
           "offset.flush.interval.ms": "20", "tasks.max": "2"}
    cfg.update(extra)
    return cfg


def read_ids(root: str, p: int, options: dict[str, Any]) -> list[int]:
    out: list[int] = []
    fsspec.core.url_to_fs(root, **options)[0].invalidate_cache()  # the process's filesystem object is shared
    for url in committed_files(root, TOPIC, p, storage_options=options):
        with fsspec.open(url, "rb", **options) as fh:
            out.extend(pq.read_table(fh, columns=["i"]).column("i").to_pylist())
    return out


def everything(root: str, options: dict[str, Any]) -> list[str]:
    fs, path = fsspec.core.url_to_fs(root, **options)
    fs.invalidate_cache()
    try:
        return sorted(fs.find(path))
    except FileNotFoundError:
        return []


def test_s3_layout_recovery_and_no_replace(s3_lake: S3Lake, sqlite_url: str) -> None:
    fill(sqlite_url, 3000)
    cfg = config(s3_lake.url, s3_lake.storage_options_json)
    result = run_sink(cfg, sqlite_url)
    assert result.records == 3000
    opts = s3_lake.storage_options
    for p in range(PARTS):
        assert read_ids(s3_lake.url, p, opts) == list(range(p, 3000, PARTS))
    names = everything(s3_lake.url, opts)
    assert names[0].endswith(f"lake/topics/{TOPIC}/partition=0/{TOPIC}+0+{0:010d}.parquet")
    assert all(n.endswith(".parquet") for n in names) and len(names) == 4  # 997 + 503 per partition
    fill(sqlite_url, 10, start=3000)
    assert run_sink(cfg, sqlite_url).records == 10
    assert ParquetSink().read_offsets(cfg).offsets == {TopicPartition(TOPIC, p): 1505 for p in range(PARTS)}
    # a conditional create never replaces an object
    from connect_runtime.connectors.lake._config import LakeConfig
    from connect_runtime.connectors.lake.store import FileExists, Lake
    lake = Lake(LakeConfig.parse(cfg))
    with pytest.raises(FileExists):
        lake.publish(names[0], b"not parquet")


def test_an_unreachable_bucket_is_named_and_no_secret_shown(s3_lake: S3Lake, sqlite_url: str) -> None:
    fill(sqlite_url, 10)
    cfg = config(f"s3://no-such-bucket-{s3_lake.bucket}/lake", s3_lake.storage_options_json)
    with pytest.raises(Exception, match=f"no-such-bucket-{s3_lake.bucket}") as info:
        run_sink(cfg, sqlite_url)
    assert "testing-secret-value" not in str(info.value)


def _kill_loop(root: str, options: dict[str, Any], sqlite_url: str, tmp_path: Path, n: int, kills: int,
               **extra: str) -> None:
    """``kills`` runs SIGKILLed on observed progress (records the lake holds, from its file names and footers) at
    a random point of their work; a run that ends first does not count and the topic grows by half
    (tests/support/kills.py), then a run to the end: every record in exactly one file."""
    fill(sqlite_url, n)
    total = [n]
    cfg = config(root, json.dumps(options), **extra)
    rng = random.Random(11)

    def committed() -> int:
        return sum(ParquetSink().read_offsets(cfg).offsets.values())

    def grow() -> None:
        more = total[0] // 2
        fill(sqlite_url, more, start=total[0])
        total[0] += more

    kill_loop(lambda: run_sink_killed_on_progress(cfg, sqlite_url, rng, committed, total[0]), grow, kills=kills,
              what="a ParquetSink run")
    run_sink(cfg, sqlite_url)
    n = total[0]
    for p in range(PARTS):
        got = read_ids(root, p, options)  # a commit group's files are in offset order by group, not inside one
        assert sorted(got) == list(range(p, n, PARTS)), f"partition {p}: a gap or an overlap"
        if "partitioner.class" not in extra:
            assert got == list(range(p, n, PARTS))
    assert not [x for x in everything(root, options) if not x.endswith(".parquet") or "/." in x]


@pytest.mark.slow
def test_sigkill_loop_on_s3(s3_lake: S3Lake, sqlite_url: str, tmp_path: Path) -> None:
    _kill_loop(s3_lake.url, s3_lake.storage_options, sqlite_url, tmp_path, 60_000, slow_iterations(2, 5))


@pytest.mark.slow
def test_sigkill_loop_on_local_files(sqlite_url: str, tmp_path: Path) -> None:
    _kill_loop(f"file://{tmp_path / 'lake'}", {}, sqlite_url, tmp_path, 200_000, slow_iterations(2, 5))


def test_sigkill_loop_under_the_field_partitioner(sqlite_url: str, tmp_path: Path) -> None:
    """Commit groups of 3 files (shard=s0/s1/s2) per topic partition: a kill between a group's files leaves an
    incomplete group the rerun completes; every record in exactly one file, each file in its shard's directory."""
    root = f"file://{tmp_path / 'lake'}"
    _kill_loop(root, {}, sqlite_url, tmp_path, 120_000, slow_iterations(2, 5),
               **{"partitioner.class": "field", "partition.field.name": "shard", "flush.size": "499"})
    for p in range(PARTS):
        for url in committed_files(root, TOPIC, p):
            shard = url.rsplit("/", 2)[-2]
            with fsspec.open(url, "rb") as fh:
                assert {f"shard=s{i % 3}" for i in pq.read_table(fh, columns=["i"]).column("i").to_pylist()} \
                    <= {shard}, url
