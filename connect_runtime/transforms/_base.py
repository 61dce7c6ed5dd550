"""What the built-in transformations share: the key/value split and the dict-value check."""

from __future__ import annotations

from typing import Any

from connect_runtime.api.errors import DataError
from connect_runtime.api.records import ConnectRecord, SinkRecord, SourceRecord


def describe(record: ConnectRecord) -> str:
    """A short name of a record for error messages (never its key or value)."""
    if isinstance(record, SinkRecord):
        return f"topic {record.topic!r} partition {record.partition} offset {record.offset}"
    return f"topic {record.topic!r}"


def _slots(cls: type) -> set[str]:
    return {s for klass in cls.__mro__ for s in getattr(klass, "__slots__", ())}


# The fast copies below name every field; should the record classes ever grow one, fall back.
_FAST_SOURCE = _slots(SourceRecord) == {
    "source_partition", "source_offset", "topic", "partition", "key", "value", "timestamp", "headers", "key_schema",
    "value_schema"}
_FAST_SINK = _slots(SinkRecord) == {"topic", "partition", "offset", "key", "value", "timestamp", "headers",
                                    "key_schema", "value_schema"}


def replaced(record: Any, field: str, new: Any) -> Any:
    """``record.new_record(**{field: new})``, built in one constructor call for the two record
    classes of the API (``new_record`` copies generically, which dominates a transform's cost)."""
    cls = type(record)
    if cls is SourceRecord and _FAST_SOURCE:
        fields = {
            "source_partition": record.source_partition, "source_offset": record.source_offset,
            "topic": record.topic, "partition": record.partition, "key": record.key,
            "value": record.value, "timestamp": record.timestamp, "headers": record.headers,
            "key_schema": record.key_schema, "value_schema": record.value_schema,
        }
        fields[field] = new
        return SourceRecord(**fields)
    if cls is SinkRecord and _FAST_SINK:
        fields = {
            "topic": record.topic, "partition": record.partition, "offset": record.offset,
            "key": record.key, "value": record.value, "timestamp": record.timestamp,
            "headers": record.headers, "key_schema": record.key_schema, "value_schema": record.value_schema,
        }
        fields[field] = new
        return SinkRecord(**fields)
    return record.new_record(**{field: new})


class KeyOrValue:
    """Mixin of the ``$Key`` / ``$Value`` variants: which part of the record a transform works on."""

    part = "value"

    def operating(self, record: ConnectRecord) -> Any:
        return record.value

    def updated(self, record: ConnectRecord, new: Any) -> Any:
        return replaced(record, "value", new)


class OnKey(KeyOrValue):
    part = "key"

    def operating(self, record: ConnectRecord) -> Any:
        return record.key

    def updated(self, record: ConnectRecord, new: Any) -> Any:
        return replaced(record, "key", new)


def require_dict(transform: str, part: str, value: Any, record: ConnectRecord) -> dict[str, Any]:
    """``value`` as a dict, or a DataError: schemaless transforms work on dict keys/values only."""
    if not isinstance(value, dict):
        raise DataError(
            f"{transform} needs a dict {part} (schemaless record), got a {type(value).__name__} "
            f"in the record of {describe(record)}"
        )
    return value
