"""What the built-in transformations share: the key/value split and the dict-value check."""

from __future__ import annotations

from typing import Any

from connect_runtime.api.errors import DataError
from connect_runtime.api.records import ConnectRecord, SinkRecord


def describe(record: ConnectRecord) -> str:
    """A short name of a record for error messages (never its key or value)."""
    if isinstance(record, SinkRecord):
        return f"topic {record.topic!r} partition {record.partition} offset {record.offset}"
    return f"topic {record.topic!r}"


class KeyOrValue:
    """Mixin of the ``$Key`` / ``$Value`` variants: which part of the record a transform works on."""

    part = "value"

    def operating(self, record: ConnectRecord) -> Any:
        return record.value

    def updated(self, record: ConnectRecord, new: Any) -> Any:
        return record.new_record(value=new)  # type: ignore[attr-defined]


class OnKey(KeyOrValue):
    part = "key"

    def operating(self, record: ConnectRecord) -> Any:
        return record.key

    def updated(self, record: ConnectRecord, new: Any) -> Any:
        return record.new_record(key=new)  # type: ignore[attr-defined]


def require_dict(transform: str, part: str, value: Any, record: ConnectRecord) -> dict[str, Any]:
    """``value`` as a dict, or a DataError: schemaless transforms work on dict keys/values only."""
    if not isinstance(value, dict):
        raise DataError(
            f"{transform} needs a dict {part} (schemaless record), got a {type(value).__name__} "
            f"in the record of {describe(record)}"
        )
    return value
