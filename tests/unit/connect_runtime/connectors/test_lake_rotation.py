"""ParquetSink's ``rotate.interval.ms`` with Kafka Connect S3's semantics (``TopicPartitionWriter.rotateOnTime``):
a record whose time (``timestamp.extractor``) is at least the interval past the open file's first record's starts
the next file (the record goes there); a late record (earlier than the first) does not rotate; the next file's
base is its own first record. With ``Wallclock`` the time is when the record arrives; a commit point also
publishes a file open that long (the S3 sink's ``rotate.schedule.interval.ms``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from connect_runtime.api import SinkRecord, TopicPartition
from connect_runtime.connectors.lake._config import LakeConfig
from connect_runtime.connectors.lake._partitioner import timestamp_extractor
from connect_runtime.connectors.lake._writer import PartitionWriter
from connect_runtime.connectors.lake.store import Lake, recover

TOPIC = "orders"
TP = TopicPartition(TOPIC, 0)
T0 = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)


def writer(root: str, **extra: str) -> PartitionWriter:
    cfg = LakeConfig.parse({"name": "lake", "topics": TOPIC, "path": root, "flush.size": "100",
                            **{k.replace("_", "."): v for k, v in extra.items()}})
    w = PartitionWriter(Lake(cfg), TP, generation=0, encode=None, ts=timestamp_extractor(cfg), reporter=None)
    assert w.claim() is None
    return w


def ranges(root: str) -> list[tuple[int, int]]:
    lake = Lake(LakeConfig.parse({"name": "lake", "topics": TOPIC, "path": root}))
    assert not recover(lake, TP).incomplete
    return sorted((f.start, f.end) for f in map(lake.footer, lake.data_files(TP)))


def test_record_time_rotation_is_kafka_connects(root: str) -> None:
    seconds = [0, 30, 59.999, -10, 60, 61, 120, 121]
    records = [SinkRecord(topic=TOPIC, partition=0, offset=i,
                          value={"id": i, "at": (T0 + timedelta(seconds=s)).isoformat()})
               for i, s in enumerate(seconds)]
    w = writer(root, rotate_interval_ms="60000", timestamp_extractor="RecordField", timestamp_field="at")
    assert w.add(records[:4]) is False  # 59.999 s is not yet the interval; the late record stays in the file
    assert w.add(records[4:]) is True
    w.commit(8, closing=True)
    # 60 s past the first record starts [4, ...); 120 s is 60 s past that file's first record (60 s)
    assert ranges(root) == [(0, 4), (4, 6), (6, 8)]


def test_wallclock_rotation_by_arrival_and_at_commit_points(root: str) -> None:
    records = [SinkRecord(topic=TOPIC, partition=0, offset=i, value={"id": i}) for i in range(8)]
    w = writer(root, rotate_interval_ms="1000", timestamp_extractor="Wallclock")
    assert w.add(records[:3]) is False
    assert w.add(records[3:4]) is False  # arrived within the interval
    assert w.open is not None
    w.open.opened_at -= 1.5  # the group's first record arrived 1.5 s ago
    assert w.add(records[4:6]) is True  # these arrive past the interval: the next group starts with them
    w.commit(6, closing=False)
    assert ranges(root) == [(0, 4)]
    assert w.open is not None
    w.commit(6, closing=False)  # a commit point before the interval: the open group stays open
    assert ranges(root) == [(0, 4)]
    w.open.opened_at -= 1.5
    w.commit(6, closing=False)  # a commit point past it publishes it (rotate.schedule.interval.ms)
    assert ranges(root) == [(0, 4), (4, 6)]
    assert w.add(records[6:]) is False
    w.commit(8, closing=True)
    assert ranges(root) == [(0, 4), (4, 6), (6, 8)]


@pytest.mark.parametrize("extractor", ["Record", "Wallclock"])
def test_rotation_off_keeps_one_file_per_flush_size(root: str, extractor: str) -> None:
    records = [SinkRecord(topic=TOPIC, partition=0, offset=i, value={"id": i}, timestamp=i * 3_600_000)
               for i in range(5)]
    w = writer(root, timestamp_extractor=extractor)
    assert w.add(records) is False
    w.commit(5, closing=True)
    assert ranges(root) == [(0, 5)]
