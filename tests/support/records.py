"""Records in and out of a backend for the backend tests: ``rec`` builds one, ``produce`` writes some with a plain
producer, ``read_all`` reads a partition whole, ``values`` keeps their values."""

from __future__ import annotations

from typing import Any

from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import ProducerRecord

TP0 = TopicPartition("t", 0)


def rec(value: bytes, *, topic: str = "t", partition: int | None = None, key: bytes | None = None,
        timestamp: int | None = None, headers: list[tuple[str, bytes | None]] | None = None) -> ProducerRecord:
    return ProducerRecord(topic, partition, key, value, timestamp, headers)


def values(records: Any) -> list[bytes]:
    return [r.value for r in records]


def read_all(b: Any, tp: TopicPartition = TP0) -> list[Any]:
    return list(b.read_range(tp, 0, 1 << 62))


def produce(b: Any, records: list[ProducerRecord]) -> None:
    p = b.producer()
    p.send(records)
    p.flush(5)
    p.close()
