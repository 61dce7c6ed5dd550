"""Ranges and input partitions of the ``pyconnect`` data source (pure Python, no Spark job needed)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import InputPartition

from connect_runtime import ranges as ranges_format
from connect_runtime.api.errors import ConfigError
from connect_runtime.api.records import TopicPartition

DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000
"""About what Spark puts in one 128 MB split of a JSON file of ~100-byte records. Records are read in
``read.batch.size`` batches whatever the size, so a partition's size bounds the work a retried task redoes,
not memory; every extra wave of tasks costs a Python worker round trip, so fewer, larger pieces win."""

Spans = list[tuple[int, int]]


def parse_ranges(ranges: str | Mapping[str, Any]) -> dict[TopicPartition, Spans]:
    """The ``ranges`` option (either form of :mod:`connect_runtime.ranges`, or a whole source run result,
    as a mapping or its JSON text) per topic partition: sorted, disjoint, non-empty spans.

    :raises ConfigError: naming the part that is malformed.
    """
    if isinstance(ranges, str):
        try:
            data: Any = json.loads(ranges)
        except ValueError as exc:
            raise ConfigError(errors={"ranges": f"expected JSON, got {ranges[:200]!r} ({exc})"}) from exc
    else:
        data = ranges
    try:
        spans = ranges_format.parse(data)
    except ranges_format.RangesFormatError as exc:
        raise ConfigError(errors={"ranges": str(exc)}) from exc
    return {TopicPartition(topic, p): list(s) for topic, parts in sorted(spans.items())
            for p, s in sorted(parts.items())}


class OffsetRangePartition(InputPartition):
    """One Spark input partition: the offset spans ``[from, to)`` of one topic partition it reads."""

    def __init__(self, topic: str, partition: int, spans: Sequence[tuple[int, int]]) -> None:
        self.topic = topic
        self.partition = partition
        self.spans = [(int(a), int(b)) for a, b in spans]

    @property
    def start(self) -> int:
        return self.spans[0][0]

    @property
    def end(self) -> int:
        return self.spans[-1][1]

    @property
    def size(self) -> int:
        return sum(b - a for a, b in self.spans)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, OffsetRangePartition)
                and (self.topic, self.partition, self.spans) == (other.topic, other.partition, other.spans))

    def __hash__(self) -> int:
        return hash((self.topic, self.partition, tuple(self.spans)))

    def __repr__(self) -> str:
        return f"OffsetRangePartition({self.topic!r}, {self.partition}, {self.spans})"


def plan_partitions(ranges: Mapping[TopicPartition, Sequence[tuple[int, int]]],
                    max_records: int = DEFAULT_MAX_RECORDS_PER_PARTITION,
                    min_partitions: int = 1) -> list[OffsetRangePartition]:
    """Input partitions for ranges, sized evenly: at least ``min_partitions`` of them (so every core or
    executor gets a share) and none longer than ``max_records`` offsets. A piece never spans two topic
    partitions; it may hold several spans of one (exact span lists of many small spans stay few tasks)."""
    if max_records < 1:
        raise ConfigError(errors={"max.records.per.partition": f"expected at least 1, got {max_records}"})
    if min_partitions < 1:
        raise ConfigError(errors={"min.partitions": f"expected at least 1, got {min_partitions}"})
    total = sum(b - a for spans in ranges.values() for a, b in spans)
    if total <= 0:
        return []
    pieces = -(-total // max_records)
    pieces = min(total, -(-pieces // min_partitions) * min_partitions)  # a multiple of the cores: no stragglers
    size = -(-total // pieces)
    out: list[OffsetRangePartition] = []
    for tp, spans in sorted(ranges.items()):
        current: Spans = []
        room = size
        for a, b in spans:
            while a < b:
                take = min(room, b - a)
                current.append((a, a + take))
                a += take
                room -= take
                if room == 0:
                    out.append(OffsetRangePartition(tp.topic, tp.partition, current))
                    current, room = [], size
        if current:
            out.append(OffsetRangePartition(tp.topic, tp.partition, current))
    return out


__all__ = ["DEFAULT_MAX_RECORDS_PER_PARTITION", "OffsetRangePartition", "parse_ranges", "plan_partitions"]
