"""Field-level transformations of keys and values: dicts (schemaless) and Structs with their schemas.

- ``ValueToKey`` (``fields``): the key becomes ``{field: value[field]}`` for the listed fields.
- ``ExtractField$Value`` / ``$Key`` (``field``): the value (key) becomes one of its fields
  (``None`` when the field is missing; a tombstone stays a tombstone).
- ``HoistField$Value`` / ``$Key`` (``field``): the value (key) becomes ``{field: value}``.
- ``MaskField$Value`` / ``$Key`` (``fields``, optional ``replacement``): the listed fields are
  replaced by the empty value of their type (``""``, ``0``, ``0.0``, ``False``, ``{}``, ``[]``), or
  by ``replacement`` converted to the field's type (strings and numbers only).

With a schema (a :class:`~connect_runtime.api.data.Struct` key/value; for ``HoistField`` any key/value whose
record has a schema) they do what Kafka Connect's do: ``ValueToKey`` makes the key a Struct of a schema of the
listed fields (``key_schema`` set), ``ExtractField`` gives the field's value and schema, ``HoistField`` wraps the
value in a one-field struct schema, ``MaskField`` keeps the schema and masks by the field's type (a Decimal masks
to zero at its scale, a Date, Time or Timestamp to the epoch). New schemas are built once per input schema.

Inputs are never modified: the results hold new dicts or Structs.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config import ConfigDef, Type, non_empty_string
from connect_runtime.api.data import Schema, SchemaBuilder, Struct
from connect_runtime.api.errors import DataError
from connect_runtime.api.records import ConnectRecord
from connect_runtime.api.transforms import Transformation
from connect_runtime.transforms._base import (
    KeyOrValue,
    OnKey,
    SchemaCache,
    describe,
    replaced,
    require_dict,
    struct_field,
)


def _non_empty_list(name: str, value: Any) -> None:
    if not value:
        raise ValueError("a comma list of at least one field name")


class ValueToKey(Transformation[ConnectRecord]):
    """The key becomes a dict of the listed fields of the (dict) value."""

    CONFIG = ConfigDef().define("fields", Type.LIST, validator=_non_empty_list,
                                doc="Fields of the value that make up the key.")

    def config_def(self) -> ConfigDef:
        return self.CONFIG

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.fields: list[str] = self.CONFIG.parse(configs)["fields"]
        self.schemas = SchemaCache()

    def _key_schema(self, schema: Schema, record: ConnectRecord) -> Schema:
        b = SchemaBuilder.struct()
        for name in self.fields:
            b.field(name, struct_field("ValueToKey", schema, name, record).schema)
        return b.build()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if isinstance(record.value, Struct):
            struct = record.value
            schema = self.schemas.get(struct.schema, lambda s: self._key_schema(s, record))
            key = Struct(schema)
            for name in self.fields:
                key.put(name, struct.get(name))
            return replaced(record, "key", key, "key_schema", schema)  # type: ignore[no-any-return]
        value = require_dict("ValueToKey", "value", record.value, record)
        return replaced(record, "key", {f: value.get(f) for f in self.fields})  # type: ignore[no-any-return]


_FIELD = ConfigDef().define("field", Type.STRING, validator=non_empty_string, doc="Field name.")


class ExtractField(KeyOrValue, Transformation[ConnectRecord]):
    """The value (key) becomes its field ``field``."""

    def config_def(self) -> ConfigDef:
        return _FIELD

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.field: str = _FIELD.parse(configs)["field"]

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating(record)
        if value is None:
            return record
        if isinstance(value, Struct):
            f = struct_field(f"ExtractField${self.part.title()}", value.schema, self.field, record)
            return self.updated(record, value.get(self.field), f.schema)  # type: ignore[no-any-return]
        d = require_dict(f"ExtractField${self.part.title()}", self.part, value, record)
        return self.updated(record, d.get(self.field))  # type: ignore[no-any-return]


class ExtractFieldValue(ExtractField):
    """``ExtractField$Value``."""


class ExtractFieldKey(OnKey, ExtractField):
    """``ExtractField$Key``."""


class HoistField(KeyOrValue, Transformation[ConnectRecord]):
    """The value (key) becomes ``{field: value}``."""

    def config_def(self) -> ConfigDef:
        return _FIELD

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.field: str = _FIELD.parse(configs)["field"]
        self.schemas = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating(record)
        schema = self.operating_schema(record)
        if schema is None:
            return self.updated(record, {self.field: value})  # type: ignore[no-any-return]
        hoisted = self.schemas.get(schema, lambda s: SchemaBuilder.struct().field(self.field, s).build())
        return self.updated(record, Struct(hoisted).put(self.field, value), hoisted)  # type: ignore[no-any-return]


class HoistFieldValue(HoistField):
    """``HoistField$Value``."""


class HoistFieldKey(OnKey, HoistField):
    """``HoistField$Key``."""


_EMPTY: dict[type, Any] = {str: "", int: 0, float: 0.0, bool: False, dict: {}, list: []}


class MaskField(KeyOrValue, Transformation[ConnectRecord]):
    """Masks the listed fields; see the module docstring."""

    CONFIG = (
        ConfigDef()
        .define("fields", Type.LIST, validator=_non_empty_list, doc="Fields to mask.")
        .define("replacement", Type.STRING, default=None,
                doc="Replacement for string and numeric fields (default: the empty value of the type).")
    )

    def config_def(self) -> ConfigDef:
        return self.CONFIG

    def configure(self, configs: Mapping[str, Any]) -> None:
        values = self.CONFIG.parse(configs)
        self.fields = frozenset(values["fields"])
        self.replacement: str | None = values["replacement"]

    def _mask(self, name: str, old: Any, record: ConnectRecord) -> Any:
        kind = type(old)
        if old is None:
            return None
        if self.replacement is None:
            if kind in _EMPTY:
                return type(_EMPTY[kind])() if kind in (dict, list) else _EMPTY[kind]
        elif kind is str:
            return self.replacement
        elif kind in (int, float):
            try:
                return kind(self.replacement)
            except ValueError:
                raise DataError(f"MaskField cannot mask {kind.__name__} field {name!r} with replacement "
                                f"{self.replacement!r} (not a {kind.__name__}) in the record of "
                                f"{describe(record)}") from None
        raise DataError(f"MaskField cannot mask field {name!r} of type {kind.__name__}"
                        f"{' with a replacement' if self.replacement is not None else ''} in the record of "
                        f"{describe(record)}")

    def _mask_typed(self, name: str, old: Any, record: ConnectRecord) -> Any:
        """Masking a Struct's field: the logical types too (Kafka Connect masks BigDecimal and Date values)."""
        if isinstance(old, _decimal.Decimal):
            exponent = old.as_tuple().exponent
            scale = _decimal.Decimal(1).scaleb(exponent if isinstance(exponent, int) else 0)
            if self.replacement is None:
                return _decimal.Decimal(0).quantize(scale)
            try:
                return _decimal.Decimal(self.replacement).quantize(scale)
            except _decimal.InvalidOperation:
                raise DataError(f"MaskField cannot mask Decimal field {name!r} with replacement "
                                f"{self.replacement!r} (not a decimal) in the record of {describe(record)}") from None
        if self.replacement is None:
            if isinstance(old, _dt.datetime):
                return _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
            if isinstance(old, _dt.date):
                return _dt.date(1970, 1, 1)
            if isinstance(old, _dt.time):
                return _dt.time(0)
        return self._mask(name, old, record)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating(record)
        if value is None:
            return record
        if isinstance(value, Struct):
            masked = Struct(value.schema)
            for f in value.schema.fields:
                old = value.get(f.name)
                masked.put(f.name, self._mask_typed(f.name, old, record) if f.name in self.fields else old)
            return self.updated(record, masked)  # type: ignore[no-any-return]
        d = require_dict(f"MaskField${self.part.title()}", self.part, value, record)
        fields = self.fields
        out = {k: (self._mask(k, v, record) if k in fields else v) for k, v in d.items()}
        return self.updated(record, out)  # type: ignore[no-any-return]


class MaskFieldValue(MaskField):
    """``MaskField$Value``."""


class MaskFieldKey(OnKey, MaskField):
    """``MaskField$Key``."""
