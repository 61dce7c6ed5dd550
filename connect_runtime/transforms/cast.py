"""``Cast$Value`` / ``Cast$Key`` (Kafka Connect's ``org.apache.kafka.connect.transforms.Cast``): cast fields, or the
whole key/value, to another primitive type.

``spec``: a comma list of ``field:type`` pairs, or a single ``type`` for the whole key/value; types are ``int8``,
``int16``, ``int32``, ``int64``, ``float32``, ``float64``, ``boolean``, ``string``.

- Schemaless (a dict, or a primitive for a whole-value cast): the values are cast; other fields are kept.
- With a schema (a :class:`~connect_runtime.api.data.Struct`, or a primitive whose record has a schema): the new
  schema has the cast fields' types (optionality kept, defaults cast; built once per input schema), the record's
  schema becomes it, and the values are cast, as in Kafka Connect.

Casting: numbers to integers truncate toward zero, booleans become 1/0 (1.0/0.0), strings are parsed; to boolean, a
number is ``!= 0`` and a string is true only for ``true`` (any case); to string, booleans are ``true`` / ``false``,
bytes are base64, dates and times ISO 8601, numbers Python's text (``1e-05``: Kafka Connect writes Java's,
``1.0E-5``). A Decimal casts to the numeric types and to string. A value out of the target integer type's range,
or a string that does not parse, is a DataError naming the field (Kafka Connect wraps integers silently). A
tombstone passes through.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal as _decimal
import math
from collections.abc import Callable, Mapping
from typing import Any

from connect_runtime.api.config import ConfigDef, Type
from connect_runtime.api.data import Schema, SchemaBuilder, SchemaType, Struct, Timestamp
from connect_runtime.api.errors import DataError
from connect_runtime.api.records import ConnectRecord
from connect_runtime.api.transforms import Transformation
from connect_runtime.transforms._base import KeyOrValue, OnKey, SchemaCache, describe, struct_builder

_TYPES = {
    "int8": SchemaType.INT8, "int16": SchemaType.INT16, "int32": SchemaType.INT32, "int64": SchemaType.INT64,
    "float32": SchemaType.FLOAT32, "float64": SchemaType.FLOAT64, "boolean": SchemaType.BOOLEAN,
    "string": SchemaType.STRING,
}
_RANGES = {
    SchemaType.INT8: 1 << 7, SchemaType.INT16: 1 << 15, SchemaType.INT32: 1 << 31, SchemaType.INT64: 1 << 63,
}
_WHOLE = ""


def _parse_spec(raw: list[str]) -> dict[str, SchemaType]:
    if not raw:
        raise ValueError("a comma list of field:type pairs, or one type for the whole value")
    out: dict[str, SchemaType] = {}
    for item in raw:
        name, sep, type_name = item.rpartition(":")
        name, type_name = name.strip(), type_name.strip().lower()
        if type_name not in _TYPES:
            raise ValueError(f"a type among {', '.join(_TYPES)} in {item!r}, got {type_name!r}")
        if not sep:
            if len(raw) > 1:
                raise ValueError(f"either one type for the whole value or field:type pairs, got {item!r} among "
                                 "pairs")
            return {_WHOLE: _TYPES[type_name]}
        if not name:
            raise ValueError(f"a field name before ':' in {item!r}")
        if name in out:
            raise ValueError(f"each field cast once, got {name!r} twice")
        out[name] = _TYPES[type_name]
    return out


def _valid_spec(name: str, value: Any) -> None:
    _parse_spec(value or [])


def _as_int(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, _decimal.Decimal)):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} has no integer value")
        return int(value)
    if isinstance(value, str):
        return int(value.strip())
    if isinstance(value, _dt.datetime):
        return Timestamp.from_logical(Timestamp.schema(), value)  # milliseconds, as Java's Date.getTime()
    raise TypeError(f"a {type(value).__name__}")


def _as_float(value: Any) -> float:
    if isinstance(value, (bool, int, float, _decimal.Decimal)):
        return float(value)
    if isinstance(value, str):
        return float(value.strip())
    raise TypeError(f"a {type(value).__name__}")


def _as_bool(value: Any) -> bool:
    if isinstance(value, (bool, int, float, _decimal.Decimal)):
        return bool(value != 0)
    if isinstance(value, str):
        return value.strip().lower() == "true"
    raise TypeError(f"a {type(value).__name__}")


def _as_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (_dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, (str, int, float, _decimal.Decimal)):
        return str(value)
    raise TypeError(f"a {type(value).__name__}")


_CASTS: dict[SchemaType, Callable[[Any], Any]] = {
    SchemaType.INT8: _as_int, SchemaType.INT16: _as_int, SchemaType.INT32: _as_int, SchemaType.INT64: _as_int,
    SchemaType.FLOAT32: _as_float, SchemaType.FLOAT64: _as_float, SchemaType.BOOLEAN: _as_bool,
    SchemaType.STRING: _as_str,
}


class Cast(KeyOrValue, Transformation[ConnectRecord]):
    """Casts fields or the whole key/value; see the module docstring."""

    CONFIG = ConfigDef().define("spec", Type.LIST, validator=_valid_spec,
                                doc="field:type pairs, or one type for the whole value (int8, int16, int32, "
                                    "int64, float32, float64, boolean, string).")

    def config_def(self) -> ConfigDef:
        return self.CONFIG

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.casts = _parse_spec(self.CONFIG.parse(configs)["spec"])
        self.whole = self.casts.get(_WHOLE)
        self.schemas = SchemaCache()

    def _cast(self, value: Any, to: SchemaType, what: str, record: ConnectRecord) -> Any:
        if value is None:
            return None
        try:
            out = _CASTS[to](value)
        except (TypeError, ValueError, ArithmeticError) as exc:
            raise DataError(f"Cast${self.part.title()} cannot cast {what} ({value!r}) to {to.name.lower()}: "
                            f"{exc} in the record of {describe(record)}") from None
        if to in _RANGES and not -_RANGES[to] <= out < _RANGES[to]:
            raise DataError(f"Cast${self.part.title()} cannot cast {what} ({value!r}) to {to.name.lower()}: out "
                            f"of its range in the record of {describe(record)}")
        return out

    def _cast_schema(self, schema: Schema, to: SchemaType, what: str, record: ConnectRecord) -> Schema:
        if not schema.type.is_primitive:
            raise DataError(f"Cast${self.part.title()} casts primitive types only; {what} is "
                            f"{schema.type.name} in the record of {describe(record)}")
        b = SchemaBuilder(to)
        if schema.optional:
            b.optional()
        if schema.default is not None:
            b.default_value(self._cast(schema.default, to, f"the default of {what}", record))
        return b.build()

    def _schema(self, schema: Schema, record: ConnectRecord) -> Schema:
        if self.whole is not None:
            return self._cast_schema(schema, self.whole, f"the {self.part}", record)
        if schema.type is not SchemaType.STRUCT:
            raise DataError(f"Cast${self.part.title()} with field:type pairs needs a STRUCT schema, got "
                            f"{schema.type.name} in the record of {describe(record)}")
        b = struct_builder(schema)
        for f in schema.fields:
            to = self.casts.get(f.name)
            b.field(f.name, f.schema if to is None else self._cast_schema(f.schema, to, f"field {f.name!r}", record))
        return b.build()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating(record)
        schema = value.schema if isinstance(value, Struct) else self.operating_schema(record)
        if schema is not None:
            new_schema = self.schemas.get(schema, lambda s: self._schema(s, record))
            if value is None:
                return self.updated(record, None, new_schema)  # type: ignore[no-any-return]
            if self.whole is not None:
                return self.updated(record, self._cast(value, self.whole, f"the {self.part}", record),  # type: ignore[no-any-return]
                                    new_schema)
            if not isinstance(value, Struct):
                raise DataError(f"Cast${self.part.title()} with field:type pairs needs a Struct {self.part} "
                                f"(its record has a schema), got a {type(value).__name__} in the record of "
                                f"{describe(record)}")
            out = Struct(new_schema)
            for f in new_schema.fields:
                old = value.get(f.name)
                to = self.casts.get(f.name)
                out.put(f.name, old if to is None else self._cast(old, to, f"field {f.name!r}", record))
            return self.updated(record, out, new_schema)  # type: ignore[no-any-return]
        if value is None:
            return record
        if self.whole is not None:
            return self.updated(record, self._cast(value, self.whole, f"the {self.part}", record))  # type: ignore[no-any-return]
        if not isinstance(value, dict):
            raise DataError(f"Cast${self.part.title()} with field:type pairs needs a dict {self.part} "
                            f"(schemaless record), got a {type(value).__name__} in the record of "
                            f"{describe(record)}")
        casts = self.casts
        out_dict = {k: (self._cast(v, casts[k], f"field {k!r}", record) if k in casts else v)
                    for k, v in value.items()}
        return self.updated(record, out_dict)  # type: ignore[no-any-return]


class CastValue(Cast):
    """``Cast$Value``."""


class CastKey(OnKey, Cast):
    """``Cast$Key``."""
