"""What the built-in transformations share: the key/value split, the dict-value and Struct-value checks, and the
per-transform cache of updated schemas (Kafka Connect's ``SynchronizedCache(LRUCache(16))``).

A transform that touches fields works on a dict key/value (schemaless) as before, and on a
:class:`~connect_runtime.api.data.Struct` with its schema as Kafka Connect's do: it builds the new schema once per
input schema (cached), fills a new Struct of it, and replaces the record's ``key_schema`` / ``value_schema``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from connect_runtime.api.data import Schema, SchemaBuilder, SchemaType, Struct
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


def replaced(record: Any, field: str, new: Any, field2: str | None = None, new2: Any = None) -> Any:
    """``record.new_record(**{field: new})`` (and ``field2``: ``new2`` if given), built in one constructor call
    for the two record classes of the API (``new_record`` copies generically, which dominates a transform's
    cost)."""
    if field2 is not None:
        return record.new_record(**{field: new, field2: new2})
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


_SAME: Any = object()


class KeyOrValue:
    """Mixin of the ``$Key`` / ``$Value`` variants: which part of the record a transform works on."""

    part = "value"

    def operating(self, record: ConnectRecord) -> Any:
        return record.value

    def operating_schema(self, record: ConnectRecord) -> Schema | None:
        return record.value_schema

    def updated(self, record: ConnectRecord, new: Any, schema: Any = _SAME) -> Any:
        """The record with the value replaced (and its schema, when ``schema`` is given)."""
        if schema is _SAME:
            return replaced(record, "value", new)
        return replaced(record, "value", new, "value_schema", schema)


class OnKey(KeyOrValue):
    part = "key"

    def operating(self, record: ConnectRecord) -> Any:
        return record.key

    def operating_schema(self, record: ConnectRecord) -> Schema | None:
        return record.key_schema

    def updated(self, record: ConnectRecord, new: Any, schema: Any = _SAME) -> Any:
        if schema is _SAME:
            return replaced(record, "key", new)
        return replaced(record, "key", new, "key_schema", schema)


class SchemaCache:
    """Updated schemas by input schema, the 16 most recently used (as Kafka Connect's transforms keep them). The key
    is the input schema, or a tuple of it and what else the update depends on (``ExtractNewRecordState``'s dropped
    fields); ``make`` gets the key."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._d: OrderedDict[Hashable, Schema] = OrderedDict()

    def get(self, schema: Hashable, make: Callable[[Any], Schema]) -> Schema:
        out = self._d.get(schema)
        if out is None:
            out = make(schema)
            self._d[schema] = out
            if len(self._d) > self.size:
                self._d.popitem(last=False)
        else:
            self._d.move_to_end(schema)
        return out

    def __len__(self) -> int:
        return len(self._d)


def struct_builder(schema: Schema) -> SchemaBuilder:
    """A STRUCT builder with ``schema``'s name, version, doc, parameters and optionality and no fields (Kafka
    Connect's ``SchemaUtil.copySchemaBasics(schema, SchemaBuilder.struct())``, which leaves optionality out; kept
    here, so an optional struct stays optional)."""
    b = SchemaBuilder.struct()
    if schema.name is not None:
        b.name(schema.name)
    if schema.version is not None:
        b.version(schema.version)
    if schema.doc is not None:
        b.doc(schema.doc)
    if schema.parameters:
        b.parameters(schema.parameters)
    if schema.optional:
        b.optional()
    return b


def require_struct(transform: str, part: str, value: Any, record: ConnectRecord) -> Struct:
    """``value`` as a Struct, or a DataError (a record with a schema has a Struct key/value)."""
    if not isinstance(value, Struct):
        raise DataError(
            f"{transform} needs a Struct {part} (a record with a schema), got a {type(value).__name__} "
            f"in the record of {describe(record)}"
        )
    return value


def struct_field(transform: str, schema: Schema, name: str, record: ConnectRecord) -> Any:
    """The field ``name`` of a STRUCT schema, or a DataError naming the fields there are."""
    if schema.type is not SchemaType.STRUCT:
        raise DataError(f"{transform} needs a STRUCT schema, got {schema.type.name} in the record of "
                        f"{describe(record)}")
    f = schema.field(name)
    if f is None:
        raise DataError(f"{transform}: the schema has no field {name!r} (its fields: "
                        f"{', '.join(x.name for x in schema.fields)}) in the record of {describe(record)}")
    return f


def require_dict(transform: str, part: str, value: Any, record: ConnectRecord) -> dict[str, Any]:
    """``value`` as a dict, or a DataError: schemaless transforms work on dict keys/values only."""
    if not isinstance(value, dict):
        raise DataError(
            f"{transform} needs a dict {part} (schemaless record), got a {type(value).__name__} "
            f"in the record of {describe(record)}"
        )
    return value
