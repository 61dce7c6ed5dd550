"""Source offsets on Kafka, stored the way Kafka Connect stores them (the rule: the package docstring, "Source
offsets"): :class:`KafkaOffsetStore`, one compacted topic per store read to its end; :func:`murmur2_partition`,
the partitioning of offset records (Kafka Connect's, not ``base.default_partition``); :class:`_OffsetsWriter`,
the backend's writes of offset records outside a transaction and the KIP-618 mirror to the global topic."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from connect_runtime.api.records import TopicPartition
from connect_runtime.backends.base import INTERNAL_STORES, OffsetEntry, OffsetStore, canonical_offset_key
from connect_runtime.backends.closing import CloseWhenIdle
from connect_runtime.backends.kafka.ends import _EndReader

if TYPE_CHECKING:
    from connect_runtime.backends.kafka.backend import KafkaBackend
    from connect_runtime.backends.kafka.producers import KafkaPlainProducer

log = logging.getLogger(__name__)


def murmur2_partition(key: bytes, partitions: int) -> int:
    """Kafka's default partition of a keyed record: ``toPositive(murmur2(key)) % partitions``."""
    m = 0x5BD1E995
    length = len(key)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    whole = length & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(key[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= key[whole + 2] << 16
    if rest >= 2:
        h ^= key[whole + 1] << 8
    if rest >= 1:
        h ^= key[whole]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


class _OffsetsWriter:
    """The backend's writes of offset records outside a transaction: one long-lived plain producer shared by
    every store of the backend (a fresh producer's first flush waits for its connection and metadata, ~0.5-0.8 s
    on Tansu, once per registry write otherwise), one writer at a time, and the KIP-618 mirror."""

    def __init__(self, backend: KafkaBackend) -> None:
        self.backend = backend
        self._lock = threading.Lock()
        self._producer: KafkaPlainProducer | None = None
        # one write at a time; the producer is never closed under a write (a task abandoned after TasksStuck)
        self._writes = CloseWhenIdle(self._close_producer)

    def producer(self) -> KafkaPlainProducer:
        with self._lock:
            if self._producer is None:
                self._producer = self.backend.producer()
            return self._producer

    def write_offsets(self, topic: str, partitions: int, entries: Sequence[OffsetEntry], timeout: float) -> None:
        """Write offset records through the backend's shared plain producer and wait for them (serialised:
        one writer at a time, so a flush's errors belong to its own records)."""
        with self._writes.call():
            producer = self.producer()
            try:
                producer.send_offsets(topic, partitions, entries)
                producer.flush(timeout)
            except BaseException:  # an interrupt too: a producer in an unknown state is replaced
                with self._lock:
                    broken = self._producer if self._producer is producer else None
                    if broken is not None:
                        self._producer = None
                if broken is not None:
                    broken.close()
                raise

    def mirror_offsets(self, entries: Sequence[OffsetEntry], attempts: int = 3) -> None:
        """KIP-618: also write a connector-specific store's offsets to the global offsets topic.
        Retried a bounded number of times; a failure is logged, never raised."""
        if not entries:
            return
        last: BaseException | None = None
        for attempt in range(1, attempts + 1):
            try:
                topic, partitions = self.backend.offsets_topic(None, "Write")
                self.write_offsets(topic, partitions, entries, self.backend.connect_timeout)
                return
            except Exception as exc:
                last = exc
                log.warning("kafka backend %s: writing %d offsets to the global offsets topic failed "
                            "(attempt %d of %d): %s", self.backend.bootstrap, len(entries), attempt, attempts, exc)
        log.error("kafka backend %s: gave up writing %d offsets to the global offsets topic: %s",
                  self.backend.bootstrap, len(entries), last)

    def close(self) -> None:
        """Never under a write in flight: a writer still inside closes the producer when its write returns."""
        self._writes.close()

    def _close_producer(self) -> None:
        with self._lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            producer.close()


class KafkaOffsetStore(OffsetStore):
    """Source offsets in a compacted topic, read to its end on each ``get``/``read_all``."""

    def __init__(self, backend: KafkaBackend, name: str | None) -> None:
        self.backend = backend
        self.name = name
        self._topic: tuple[str, int] | None = None
        self._reader: _EndReader | None = None
        self._values: dict[bytes, bytes] = {}
        self._positions: dict[TopicPartition, int] = {}

    @property
    def topic(self) -> str:
        return self._ensure()[0]

    def _ensure(self) -> tuple[str, int]:
        if self._topic is None:
            self._topic = self.backend.offsets_topic(self.name)
        return self._topic

    def _catch_up(self) -> None:
        topic, partitions = self._ensure()
        if self._reader is None:
            self._reader = _EndReader(self.backend)
        for p in range(partitions):
            # 0, not OFFSET_BEGINNING (a ListOffsets round that costs a fresh consumer ~0.5 s); a log
            # that starts later is handled by auto.offset.reset=earliest
            self._positions.setdefault(TopicPartition(topic, p), 0)
        values = self._values
        positions = self._positions

        def apply(m: Any) -> None:
            key = m.key()
            positions[TopicPartition(m.topic(), m.partition())] = m.offset() + 1
            if key is None:
                return
            key = canonical_offset_key(key)
            value = m.value()
            if value is None:
                values.pop(key, None)
            else:
                values[key] = value

        deadline = time.monotonic() + self.backend.read_timeout
        ends = self._reader.read(dict(positions), deadline, f"offsets topic {topic!r}", apply)
        for tp, end in ends.items():
            if end >= 0 and (positions[tp] < 0 or end > positions[tp]):
                positions[tp] = end

    def get(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        self._catch_up()
        out: dict[bytes, bytes] = {}
        for key in keys:
            value = self._values.get(canonical_offset_key(key))
            if value is not None:
                out[key] = value
        return out

    def read_all(self) -> dict[bytes, bytes]:
        self._catch_up()
        return dict(self._values)

    def put(self, entries: Sequence[OffsetEntry], timeout: float) -> None:
        if not entries:
            return
        topic, partitions = self._ensure()
        # through the backend's one long-lived offsets producer (see _OffsetsWriter)
        self.backend.offsets_writer.write_offsets(topic, partitions, entries, timeout)
        if self.name is not None and topic != self.backend.default_offsets_topic and self.name not in INTERNAL_STORES:
            self.backend.offsets_writer.mirror_offsets(entries)

    def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()

