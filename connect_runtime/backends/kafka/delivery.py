"""Delivery reports of the Kafka producers (the rule: the package docstring, "Delivery reports").

:class:`_DeliveryTracker` collects the reports since the last flush or commit: per-partition ranges for
``Written.ranges``, the first error, optional per-record metadata. :class:`_SparseSender` is the send path
of a transactional producer that settles each record's partition itself, by the rule of
:func:`connect_runtime.backends.base.default_partition`, and asks for a report of only the first and last
record per partition of each send."""

from __future__ import annotations

import collections
import itertools
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import confluent_kafka as ck

from connect_runtime.api.records import RecordMetadata, TopicPartition
from connect_runtime.backends.base import ProducerRecord, Ranges, Written
from connect_runtime.backends.kafka._client import _NOT_AVAILABLE, _unwrap

if TYPE_CHECKING:
    from connect_runtime.backends.kafka.producers import _KafkaProducerBase

PURGED = frozenset({ck.KafkaError._PURGE_QUEUE, ck.KafkaError._PURGE_INFLIGHT})
"""Delivery errors of records purged because something else failed (a transaction in an abortable state)."""

_POLL_EVERY = 1000
"""Produce calls between two ``poll(0)`` (serves delivery reports while a big batch is queued)."""


class _DeliveryTracker:
    """Delivery reports since the last flush/commit: per-partition ranges, errors, optional metadata."""

    __slots__ = ("count", "error", "error_topic", "metadata", "ranges", "track")

    def __init__(self, track: bool) -> None:
        self.track = track
        self.reset()

    def reset(self) -> None:
        self.ranges: dict[tuple[str, int], list[int]] = {}
        self.error: ck.KafkaError | None = None
        self.error_topic: str | None = None
        self.metadata: list[RecordMetadata | None] = []
        self.count = 0

    def on_delivery(self, err: ck.KafkaError | None, msg: Any) -> None:
        if err is not None:
            # the first error, but a cause before a record purged because of it (a transaction that failed)
            if self.error is None or (self.error.code() in PURGED and err.code() not in PURGED):
                self.error, self.error_topic = err, msg.topic()
            return
        off = msg.offset()
        r = self.ranges.get((msg.topic(), msg.partition()))
        if r is None:
            self.ranges[(msg.topic(), msg.partition())] = [off, off]
        elif off > r[1]:  # reports of one partition come in offset order: the common case
            r[1] = off
        elif off < r[0]:
            r[0] = off

    def indexed(self, index: int) -> Callable[[ck.KafkaError | None, Any], None]:
        def report(err: ck.KafkaError | None, msg: Any) -> None:
            self.on_delivery(err, msg)
            if err is None:
                ts_type, ts = msg.timestamp()
                self.metadata[index] = RecordMetadata(
                    msg.topic(), msg.partition(), msg.offset(), None if ts_type == _NOT_AVAILABLE else ts)
        return report

    def written(self) -> Written:
        ranges: Ranges = {TopicPartition(t, p): (r[0], r[1] + 1) for (t, p), r in self.ranges.items()}
        meta: list[RecordMetadata] | None = None
        if self.track:
            meta = [m for m in self.metadata if m is not None]
        return Written(ranges, meta)


class _SparseSender:
    """The send path of a producer with sparse delivery reports (see the module docstring)."""

    __slots__ = ("_producer",)

    def __init__(self, producer: _KafkaProducerBase) -> None:
        self._producer = producer

    def send(self, records: Sequence[ProducerRecord]) -> None:
        """Transactional send without per-record delivery reports.

        A record that fails delivery fails the transaction (commit_transaction raises), so the
        reports are only needed for ``Written.ranges``: ``[first, last + 1)`` per partition of the
        transaction. Each record's partition is settled here, as the "consistent" partitioner would
        (``crc32(key) % partitions``, partition 0 without a key), and only the first and last record
        per partition of this send get a report. A record of a topic whose partition count is not
        known gets a report of its own and librdkafka's partitioner.
        """
        if self._send_one_partition(records):
            return
        owner = self._producer
        produce = owner._produce
        poll = owner._poll
        report = owner.tracker.on_delivery
        counts: dict[str, int] = {}
        crc32 = zlib.crc32
        parts: list[int] = []
        append = parts.append
        unknown = False
        for rec in records:
            partition = rec[1]
            if partition is None:
                key = rec[2]
                if key is None:
                    partition = 0
                else:
                    topic = rec[0]
                    n = counts.get(topic)
                    if n is None:
                        n = counts[topic] = owner._partition_count(topic)
                    if n:  # base.default_partition, inlined
                        partition = crc32(key) % n
                    else:
                        partition = -1
                        unknown = True
            append(partition)
        total = len(records)
        # indices that get a delivery report: first and last per (topic, partition)
        marked: set[int]
        if not total:
            return
        topic0 = records[0][0]
        if not unknown and parts.count(parts[0]) == total and all(rec[0] == topic0 for rec in records):
            marked = {0, total - 1}  # the common case: one topic, one partition
        else:
            pairs = [(rec[0], p) for rec, p in zip(records, parts, strict=True)]
            marked = set({tp: i for i, tp in enumerate(pairs)}.values())
            marked.update({tp: i for i, tp in reversed(list(enumerate(pairs)))}.values())
            if unknown:
                marked.update(i for i, p in enumerate(parts) if p < 0)
        try:
            for lo in range(0, total, _POLL_EVERY):
                if lo:
                    poll(0)
                for i in range(lo, min(total, lo + _POLL_EVERY)):
                    rec = records[i]
                    if len(rec) == 6:
                        topic, _, key, value, ts, headers = rec
                    else:  # a plain tuple of 4 or 5 fields
                        topic, key, value = rec[0], rec[2], rec[3]
                        ts = rec[4] if len(rec) > 4 else None
                        headers = None
                    args = (topic, value, key, parts[i], report if i in marked else None, None, ts or 0,
                            headers or None)
                    try:
                        produce(*args)
                    except BufferError:
                        owner._queue_full(args, {})
        except (ck.KafkaException, SystemError) as exc:
            raise owner._failure(_unwrap(exc), "sending records") from exc
        owner.tracker.count += total

    def _send_one_partition(self, records: Sequence[ProducerRecord]) -> bool:
        """:meth:`send` for its common case, without a Python step per record: every record a
        6-field ``ProducerRecord`` of one topic and one partition (given, or ``None`` with no key, which the
        "consistent" partitioner maps to partition 0), no headers. The records are turned into columns with
        one ``zip`` and queued by ``map`` over ``produce``; only the first and the last get a delivery
        report. Returns False (nothing queued) when the batch is not of that shape."""
        total = len(records)
        if total < 3 or set(map(len, records)) != {6}:
            return False
        topics, parts, keys, values, stamps, headers = zip(*records, strict=True)
        if len(set(topics)) != 1 or any(headers):
            return False
        part_set = set(parts)
        if len(part_set) != 1:
            return False
        partition = part_set.pop()
        if partition is None:
            if set(keys) != {None}:
                return False
            partition = 0
        elif type(partition) is not int or partition < 0:
            return False
        topic = topics[0]
        if None in stamps:
            stamps = tuple([t or 0 for t in stamps])
        owner = self._producer
        produce = owner._produce
        report = owner.tracker.on_delivery
        try:
            for lo in range(0, total, _POLL_EVERY):
                if lo:
                    owner._poll(0)
                hi = min(total, lo + _POLL_EVERY)
                i = lo
                while i < hi:
                    first, last = i == 0, hi == total
                    if first or (last and i == hi - 1):  # the records that get a delivery report
                        args = (topic, values[i], keys[i], partition, report, None, stamps[i], None)
                        try:
                            produce(*args)
                        except BufferError:
                            owner._queue_full(args, {})
                        i += 1
                        continue
                    end = hi - 1 if last else hi
                    # produce(topic, value, key, partition, on_delivery, callback, timestamp, headers) per record;
                    # ``pulled`` counts the records map took, so a full queue can resume right after the one
                    # it refused
                    pulled = itertools.count(i + 1)
                    try:
                        collections.deque(map(produce, itertools.compress(itertools.repeat(topic), pulled),
                                              values[i:end], keys[i:end], itertools.repeat(partition),
                                              itertools.repeat(None), itertools.repeat(None), stamps[i:end]), 0)
                        i = end
                    except BufferError:
                        j = next(pulled) - 2  # the refused record
                        owner._queue_full((topic, values[j], keys[j], partition, None, None, stamps[j], None), {})
                        i = j + 1
        except (ck.KafkaException, SystemError) as exc:
            raise owner._failure(_unwrap(exc), "sending records") from exc
        owner.tracker.count += total
        return True
