"""Columnar reads of a committed offset range (the Spark data source's path): one ``consume`` call per batch of
a ``read_committed`` consumer of its own, straight into columns, no per-record ``ConsumedRecord``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import confluent_kafka as ck

from connect_runtime.api.records import TopicPartition
from connect_runtime.backends.base import WireHeaders
from connect_runtime.backends.kafka._client import _GROUPLESS_CONSUMER_CODES, _NOT_AVAILABLE, _consume

if TYPE_CHECKING:
    from connect_runtime.backends.kafka.backend import KafkaBackend

Columns = tuple[Sequence[int], Sequence[bytes | None] | None, Sequence[bytes | None], Sequence[int | None] | None,
                Sequence[WireHeaders | None] | None]
"""offsets, keys, values, timestamps, headers (``None`` for a column not asked for)."""


def read_range_batches(backend: KafkaBackend, partition: TopicPartition, start: int, end: int, *, batch_size: int,
                       timeout: float, keys: bool, timestamps: bool, headers: bool) -> Iterator[Columns]:
    """What :meth:`KafkaBackend.read_range_batches` returns (see there)."""
    tp = TopicPartition(*partition)
    consumer = backend.consumer(None)
    try:
        consumer.assign({tp: start})
        client = consumer._c
        position = start
        size = max(1, batch_size)
        while position < end:
            try:
                msgs = _consume(client, min(size, end - position), timeout)
            except ck.KafkaException as exc:
                raise backend.translate(exc, f"reading {tp.topic}[{tp.partition}]") from exc
            offs: list[int] = []
            ks: list[bytes | None] = []
            vs: list[bytes | None] = []
            ts: list[int | None] = []
            hs: list[WireHeaders | None] = []
            done = False
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() in _GROUPLESS_CONSUMER_CODES:
                        continue
                    raise backend.translate(ck.KafkaException(err), f"reading {tp.topic}[{tp.partition}]")
                off = m.offset()
                if off >= end:
                    done = True
                    break
                offs.append(off)
                vs.append(m.value())
                if keys:
                    ks.append(m.key())
                if timestamps:
                    kind, stamp = m.timestamp()
                    ts.append(None if kind == _NOT_AVAILABLE else stamp)
                if headers:
                    hs.append(m.headers())
            if offs:
                position = offs[-1] + 1
                yield offs, ks if keys else None, vs, ts if timestamps else None, hs if headers else None
            if done:
                return
            if not offs and consumer.end_offsets([tp], timeout)[tp] <= position:
                return  # nothing more is committed (bounded: end_offsets fails when the cluster is away)
    finally:
        consumer.close()
