"""Records and their coordinates, as connector authors see them.

A ``SourceRecord`` is what a source task returns from ``poll()``; a ``SinkRecord`` is what a sink task
receives in ``put()``. Values are plain Python objects (dict, list, str, number, bytes, None); the
configured converters turn them into bytes on the way to a topic and back on the way out.
Headers are a list of ``(name, value)`` pairs (``value`` is ``str``, ``bytes`` or ``None``), in order,
and names may repeat, as in Kafka.

``key_schema`` / ``value_schema`` are the Connect schemas (:class:`~connect_runtime.api.data.Schema`) of the key
and value, as in Kafka Connect's records; ``None`` for schemaless data (plain JSON values), which keeps working
unchanged. A schema-aware converter (Avro, JSON with ``schemas.enable=true``) sets them on the sink side and
reads them on the source side.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from connect_runtime.api.data import Schema

Headers = list[tuple[str, "str | bytes | None"]]


class TopicPartition(NamedTuple):
    """A partition of a topic. Hashable and positional: ``TopicPartition("orders", 0)``."""

    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """Where a record was durably written (KIP-416): topic, partition, offset and timestamp (ms)."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None


class ConnectRecord:
    """Fields shared by source and sink records."""

    __slots__ = ("headers", "key", "key_schema", "partition", "timestamp", "topic", "value", "value_schema")

    topic: str
    partition: int | None
    key: Any
    value: Any
    timestamp: int | None
    headers: Headers | None
    key_schema: Schema | None
    value_schema: Schema | None

    def __getattr__(self, name: str) -> Any:
        # only for a slot never set: records built with object.__new__ and plain stores (the runtime's and
        # connectors' fast paths, written before records had schemas) are schemaless
        if name in _SCHEMA_SLOTS:
            return None
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in _all_slots(type(self)))

    __hash__ = None  # type: ignore[assignment]  # records are mutable values, not keys

    def __repr__(self) -> str:
        fields = ", ".join(f"{s}={getattr(self, s)!r}" for s in _all_slots(type(self)))
        return f"{type(self).__name__}({fields})"


_SCHEMA_SLOTS = frozenset({"key_schema", "value_schema"})


def _all_slots(cls: type) -> list[str]:
    out: list[str] = []
    for klass in reversed(cls.__mro__):
        out.extend(getattr(klass, "__slots__", ()))
    return out


class SourceRecord(ConnectRecord):
    """A record produced by a source task.

    ``source_partition`` and ``source_offset`` are small JSON-serialisable dicts that say where in the
    external system the record came from; the runtime commits the latest ``source_offset`` per
    ``source_partition`` when the record is committed, and gives it back through the
    ``OffsetStorageReader`` on the next run. ``partition=None`` lets the backend choose a partition
    (by key hash, or the first partition for a record without key).
    """

    __slots__ = ("source_offset", "source_partition")

    def __init__(
        self,
        *,
        source_partition: Mapping[str, Any] | None,
        source_offset: Mapping[str, Any] | None,
        topic: str,
        value: Any,
        key: Any = None,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Headers | None = None,
        key_schema: Schema | None = None,
        value_schema: Schema | None = None,
    ) -> None:
        self.source_partition = source_partition
        self.source_offset = source_offset
        self.topic = topic
        self.partition = partition
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers
        self.key_schema = key_schema
        self.value_schema = value_schema

    def new_record(self, **changes: Any) -> SourceRecord:
        """A copy with some fields replaced (what transforms use); the source coordinates are kept."""
        fields = {s: getattr(self, s) for s in _all_slots(SourceRecord)}
        fields.update(changes)
        return SourceRecord(**fields)


class SinkRecord(ConnectRecord):
    """A record delivered to a sink task: its topic, partition and ``offset`` in the topic, and the
    key, value and headers decoded by the converters."""

    __slots__ = ("offset",)

    partition: int

    def __init__(
        self,
        *,
        topic: str,
        partition: int,
        offset: int,
        value: Any,
        key: Any = None,
        timestamp: int | None = None,
        headers: Headers | None = None,
        key_schema: Schema | None = None,
        value_schema: Schema | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers
        self.key_schema = key_schema
        self.value_schema = value_schema

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def new_record(self, **changes: Any) -> SinkRecord:
        """A copy with some fields replaced (what transforms use)."""
        fields = {s: getattr(self, s) for s in _all_slots(SinkRecord)}
        fields.update(changes)
        return SinkRecord(**fields)


__all__ = [
    "ConnectRecord",
    "Headers",
    "RecordMetadata",
    "SinkRecord",
    "SourceRecord",
    "TopicPartition",
]
