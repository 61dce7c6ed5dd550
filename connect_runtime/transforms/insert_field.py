"""``InsertField$Value`` / ``InsertField$Key``: add fields to a dict value (or key).

Fields (each names the field to add; unset = not added):

- ``static.field`` + ``static.value``: a constant string.
- ``topic.field``: the record's topic.
- ``partition.field``: the record's partition (left out while a source record has none yet).
- ``offset.field``: the record's offset (sink records only).
- ``timestamp.field``: the record's timestamp in ms since the epoch (left out when it has none).

A field name may end in ``!`` (required) or ``?`` (optional, the default), as Kafka Connect accepts; the mark
is dropped from the name and sets the added field's schema. A tombstone (``None``) passes through unchanged. A
:class:`~connect_runtime.api.data.Struct` key/value (a record with a schema) gets its schema plus the added fields
(topic and static value ``STRING``, partition ``INT32``, offset ``INT64``, timestamp the ``Timestamp`` logical
type, a ``datetime`` in UTC), built once per input schema, and the record's schema becomes it, as in Kafka
Connect; any other non-dict raises DataError. The input record and its value are never modified: the result holds
a copy.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config import ConfigDef, Type, non_empty_string
from connect_runtime.api.data import Schema, SchemaBuilder, Struct, Timestamp
from connect_runtime.api.errors import ConfigError, DataError
from connect_runtime.api.records import ConnectRecord, SinkRecord
from connect_runtime.api.transforms import Transformation
from connect_runtime.transforms._base import (
    KeyOrValue,
    OnKey,
    SchemaCache,
    describe,
    require_dict,
    struct_builder,
)

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)

_FIELDS = ("topic.field", "partition.field", "offset.field", "timestamp.field", "static.field")


def _field_name(name: str, value: Any) -> None:
    if value is not None:
        non_empty_string(name, value.rstrip("!?"))


def _config_def() -> ConfigDef:
    cd = ConfigDef()
    for name in _FIELDS:
        cd.define(name, Type.STRING, default=None, validator=_field_name,
                  doc=f"Field to hold the record's {name.split('.')[0]} (unset: not added).")
    return cd.define("static.value", Type.STRING, default=None, doc="Value of static.field.")


class InsertField(KeyOrValue, Transformation[ConnectRecord]):
    """Adds the configured fields to a dict value; see the module docstring."""

    CONFIG = _config_def()

    def config_def(self) -> ConfigDef:
        return self.CONFIG

    def configure(self, configs: Mapping[str, Any]) -> None:
        values = self.CONFIG.parse(configs)
        names = {k: (v.rstrip("!?") if v is not None else None) for k, v in values.items() if k in _FIELDS}
        self.required = {k for k, v in values.items() if k in _FIELDS and v is not None and v.endswith("!")}
        self.schemas = SchemaCache()
        self.topic_field = names["topic.field"]
        self.partition_field = names["partition.field"]
        self.offset_field = names["offset.field"]
        self.timestamp_field = names["timestamp.field"]
        self.static_field = names["static.field"]
        self.static_value = values["static.value"]
        if not any(names.values()):
            raise ConfigError(errors={"static.field": "expected at least one of " + ", ".join(_FIELDS)})
        if self.static_field is not None and self.static_value is None:
            raise ConfigError(errors={"static.value": "expected a value, since static.field is set"})

    def _schema(self, schema: Schema) -> Schema:
        b = struct_builder(schema)
        for f in schema.fields:
            b.field(f.name, f.schema)
        for key, name, make in (
            ("topic.field", self.topic_field, SchemaBuilder.string),
            ("partition.field", self.partition_field, SchemaBuilder.int32),
            ("offset.field", self.offset_field, SchemaBuilder.int64),
            ("timestamp.field", self.timestamp_field, Timestamp.builder),
            ("static.field", self.static_field, SchemaBuilder.string),
        ):
            if name is not None:
                fb = make()
                b.field(name, fb if key in self.required else fb.optional())
        return b.build()

    def _insert_struct(self, record: ConnectRecord, value: Struct) -> Any:
        schema = self.schemas.get(value.schema, self._schema)
        out = Struct(schema)
        for f in value.schema.fields:
            out.put(f.name, value.get(f.name))
        if self.topic_field is not None:
            out.put(self.topic_field, record.topic)
        if self.partition_field is not None and record.partition is not None:
            out.put(self.partition_field, record.partition)
        if self.offset_field is not None:
            out.put(self.offset_field, self._offset(record))
        if self.timestamp_field is not None and record.timestamp is not None:
            out.put(self.timestamp_field, _EPOCH + _dt.timedelta(milliseconds=record.timestamp))
        if self.static_field is not None:
            out.put(self.static_field, self.static_value)
        return self.updated(record, out, schema)

    @staticmethod
    def _offset(record: ConnectRecord) -> int:
        if not isinstance(record, SinkRecord):
            raise DataError(
                f"InsertField offset.field needs a sink record (source records have no offset yet): "
                f"record of {describe(record)}"
            )
        return record.offset

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating(record)
        if value is None:
            return record
        if isinstance(value, Struct):
            return self._insert_struct(record, value)  # type: ignore[no-any-return]
        out = dict(require_dict(f"InsertField${self.part.title()}", self.part, value, record))
        if self.topic_field is not None:
            out[self.topic_field] = record.topic
        if self.partition_field is not None and record.partition is not None:
            out[self.partition_field] = record.partition
        if self.offset_field is not None:
            out[self.offset_field] = self._offset(record)
        if self.timestamp_field is not None and record.timestamp is not None:
            out[self.timestamp_field] = record.timestamp
        if self.static_field is not None:
            out[self.static_field] = self.static_value
        return self.updated(record, out)  # type: ignore[no-any-return]


class InsertFieldValue(InsertField):
    """``InsertField$Value``."""


class InsertFieldKey(OnKey, InsertField):
    """``InsertField$Key``."""
