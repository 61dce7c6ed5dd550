"""Kafka Connect's data model (``org.apache.kafka.connect.data``): schemas, structs and the logical types.

A :class:`Schema` is immutable and compared by value, as Kafka Connect's ``ConnectSchema``: its
:class:`SchemaType` (the twelve Connect types), whether it is optional, its default, name, version, doc and
parameters, and for compound types its fields (``STRUCT``), element (``ARRAY``) or key and value schemas
(``MAP``). :class:`SchemaBuilder` builds one fluently, as Kafka Connect's does::

    schema = (SchemaBuilder.struct().name("shop.Order").version(1)
              .field("id", Schema.INT64_SCHEMA)
              .field("amount", Decimal.schema(2))
              .field("note", Schema.OPTIONAL_STRING_SCHEMA)
              .build())
    order = Struct(schema).put("id", 7).put("amount", decimal.Decimal("9.99"))

Python values per type: ``INT8``..``INT64`` int; ``FLOAT32`` / ``FLOAT64`` float (an int is accepted);
``BOOLEAN`` bool; ``STRING`` str; ``BYTES`` bytes; ``ARRAY`` list; ``MAP`` dict; ``STRUCT`` :class:`Struct`.
The logical types keep Kafka Connect's names and wire types and use Python's own value types (Kafka Connect uses
``java.util.Date`` for all three time types; Python has one per meaning):

- :class:`Decimal` (``BYTES``, parameter ``scale``): ``decimal.Decimal`` with exactly that scale; the bytes are
  the unscaled value in big-endian two's complement, as ``BigInteger.toByteArray``.
- :class:`Date` (``INT32`` days since the epoch): ``datetime.date``.
- :class:`Time` (``INT32`` milliseconds since midnight): ``datetime.time``.
- :class:`Timestamp` (``INT64`` milliseconds since the epoch): ``datetime.datetime``, timezone-aware in UTC (a
  naive one is taken as UTC).

:func:`validate_value` checks a value against a schema and raises :class:`DataError` naming the field path and
what was expected. A :class:`Struct` is a read-only ``Mapping`` of its field names (so code written for
schemaless dict values reads it unchanged) with Kafka Connect's ``put`` / ``get`` / ``validate``;
:func:`to_plain` turns any value into plain Python (structs into dicts).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import decimal as _decimal
import enum
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple, cast

from connect_runtime.api.errors import DataError


class SchemaType(enum.Enum):
    """The Connect types (``Schema.Type``); the value is the name Kafka Connect's JSON schemas use."""

    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float"
    FLOAT64 = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"

    @property
    def is_primitive(self) -> bool:
        return self not in _COMPOUND


_COMPOUND = frozenset({SchemaType.ARRAY, SchemaType.MAP, SchemaType.STRUCT})
_INT_RANGES = {
    SchemaType.INT8: (-(1 << 7), (1 << 7) - 1),
    SchemaType.INT16: (-(1 << 15), (1 << 15) - 1),
    SchemaType.INT32: (-(1 << 31), (1 << 31) - 1),
    SchemaType.INT64: (-(1 << 63), (1 << 63) - 1),
}


@dataclasses.dataclass(frozen=True, slots=True)
class Field:
    """A field of a struct schema: its name, position and schema."""

    name: str
    index: int
    schema: Schema


_NO_DEFAULT: Any = object()


class Schema:
    """An immutable Connect schema (Kafka Connect's ``ConnectSchema``); build one with :class:`SchemaBuilder`.

    Equal schemas (same type, optionality, default, name, version, doc, parameters and nested schemas) compare
    equal and hash alike. The predefined primitive schemas are class attributes, as in Kafka Connect:
    ``Schema.INT32_SCHEMA``, ``Schema.OPTIONAL_STRING_SCHEMA``, ...
    """

    __slots__ = ("_field_map", "_hash", "default", "doc", "fields", "key_schema", "name", "optional", "parameters",
                 "type", "value_schema", "version")

    Type = SchemaType

    INT8_SCHEMA: Schema
    INT16_SCHEMA: Schema
    INT32_SCHEMA: Schema
    INT64_SCHEMA: Schema
    FLOAT32_SCHEMA: Schema
    FLOAT64_SCHEMA: Schema
    BOOLEAN_SCHEMA: Schema
    STRING_SCHEMA: Schema
    BYTES_SCHEMA: Schema
    OPTIONAL_INT8_SCHEMA: Schema
    OPTIONAL_INT16_SCHEMA: Schema
    OPTIONAL_INT32_SCHEMA: Schema
    OPTIONAL_INT64_SCHEMA: Schema
    OPTIONAL_FLOAT32_SCHEMA: Schema
    OPTIONAL_FLOAT64_SCHEMA: Schema
    OPTIONAL_BOOLEAN_SCHEMA: Schema
    OPTIONAL_STRING_SCHEMA: Schema
    OPTIONAL_BYTES_SCHEMA: Schema

    type: SchemaType
    optional: bool
    default: Any
    name: str | None
    version: int | None
    doc: str | None
    parameters: Mapping[str, str] | None
    fields: tuple[Field, ...]
    key_schema: Schema | None
    value_schema: Schema | None
    _field_map: dict[str, Field]
    _hash: int | None

    def __init__(self, type: SchemaType, optional: bool = False, default: Any = None, name: str | None = None,
                 version: int | None = None, doc: str | None = None, parameters: Mapping[str, str] | None = None,
                 fields: tuple[Field, ...] | list[Field] = (), key_schema: Schema | None = None,
                 value_schema: Schema | None = None) -> None:
        set_ = object.__setattr__
        set_(self, "type", type)
        set_(self, "optional", optional)
        set_(self, "name", name)
        set_(self, "version", version)
        set_(self, "doc", doc)
        set_(self, "parameters", dict(parameters) if parameters else None)
        set_(self, "fields", tuple(fields))
        set_(self, "key_schema", key_schema)
        set_(self, "value_schema", value_schema)
        set_(self, "_field_map", {f.name: f for f in self.fields})
        set_(self, "_hash", None)
        if type is SchemaType.ARRAY and value_schema is None:
            raise DataError("an ARRAY schema needs the schema of its elements (value_schema)")
        if type is SchemaType.MAP and (key_schema is None or value_schema is None):
            raise DataError("a MAP schema needs key_schema and value_schema")
        set_(self, "default", None)  # a STRUCT default is checked against this schema without its default
        if default is not None:
            validate_value(self, default, "the default value")
        set_(self, "default", default)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Schema is immutable (use SchemaBuilder to change {name!r})")

    def field(self, name: str) -> Field | None:
        """The struct field called ``name`` (``None`` if there is none). Raises for a non-struct schema."""
        if self.type is not SchemaType.STRUCT:
            raise DataError(f"cannot look up field {name!r}: the schema is {self.type.name}, not STRUCT")
        return self._field_map.get(name)

    def _key(self) -> tuple[Any, ...]:
        return (self.type, self.optional, _hashable(self.default), self.name, self.version, self.doc,
                tuple(sorted(self.parameters.items())) if self.parameters else None, self.fields, self.key_schema,
                self.value_schema)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Schema):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash(self._key())
            object.__setattr__(self, "_hash", h)
        return h

    def __repr__(self) -> str:
        parts = [self.type.name]
        if self.name:
            parts.append(f"name={self.name!r}")
        if self.optional:
            parts.append("optional")
        if self.type is SchemaType.STRUCT:
            parts.append("fields=[" + ", ".join(f"{f.name}: {f.schema!r}" for f in self.fields) + "]")
        elif self.type is SchemaType.ARRAY:
            parts.append(f"items={self.value_schema!r}")
        elif self.type is SchemaType.MAP:
            parts.append(f"keys={self.key_schema!r}, values={self.value_schema!r}")
        return f"Schema({', '.join(parts)})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Schema, (self.type, self.optional, self.default, self.name, self.version, self.doc,
                         self.parameters, self.fields, self.key_schema, self.value_schema))


def _hashable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((repr(k), _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


for _t in SchemaType:
    if _t.is_primitive:
        setattr(Schema, f"{_t.name}_SCHEMA", Schema(_t))
        setattr(Schema, f"OPTIONAL_{_t.name}_SCHEMA", Schema(_t, optional=True))


class SchemaBuilder:
    """Builds a :class:`Schema` fluently (Kafka Connect's ``SchemaBuilder``): every setter returns the builder,
    and each property may be set once. ``build()`` gives the immutable schema."""

    def __init__(self, type: SchemaType) -> None:
        self.type = type
        self._optional: bool | None = None
        self._default: Any = _NO_DEFAULT
        self._name: str | None = None
        self._version: int | None = None
        self._doc: str | None = None
        self._parameters: dict[str, str] = {}
        self._fields: dict[str, Field] = {}
        self._key_schema: Schema | None = None
        self._value_schema: Schema | None = None

    # -- the types ---------------------------------------------------------------------------------------
    @classmethod
    def int8(cls) -> SchemaBuilder:
        return cls(SchemaType.INT8)

    @classmethod
    def int16(cls) -> SchemaBuilder:
        return cls(SchemaType.INT16)

    @classmethod
    def int32(cls) -> SchemaBuilder:
        return cls(SchemaType.INT32)

    @classmethod
    def int64(cls) -> SchemaBuilder:
        return cls(SchemaType.INT64)

    @classmethod
    def float32(cls) -> SchemaBuilder:
        return cls(SchemaType.FLOAT32)

    @classmethod
    def float64(cls) -> SchemaBuilder:
        return cls(SchemaType.FLOAT64)

    @classmethod
    def bool(cls) -> SchemaBuilder:
        return cls(SchemaType.BOOLEAN)

    @classmethod
    def string(cls) -> SchemaBuilder:
        return cls(SchemaType.STRING)

    @classmethod
    def bytes(cls) -> SchemaBuilder:
        return cls(SchemaType.BYTES)

    @classmethod
    def struct(cls) -> SchemaBuilder:
        return cls(SchemaType.STRUCT)

    @classmethod
    def array(cls, value_schema: Schema) -> SchemaBuilder:
        b = cls(SchemaType.ARRAY)
        b._value_schema = value_schema
        return b

    @classmethod
    def map(cls, key_schema: Schema, value_schema: Schema) -> SchemaBuilder:
        b = cls(SchemaType.MAP)
        b._key_schema, b._value_schema = key_schema, value_schema
        return b

    @classmethod
    def type_of(cls, schema: Schema) -> SchemaBuilder:
        """A builder holding everything ``schema`` has (Kafka Connect's ``SchemaUtil.copySchemaBasics`` plus
        fields, element, key and value schemas): what transforms start from to change a schema."""
        b = cls(schema.type)
        b._optional = schema.optional
        if schema.default is not None:
            b._default = schema.default
        b._name, b._version, b._doc = schema.name, schema.version, schema.doc
        b._parameters = dict(schema.parameters or {})
        b._fields = {f.name: f for f in schema.fields}
        b._key_schema, b._value_schema = schema.key_schema, schema.value_schema
        return b

    # -- the properties ----------------------------------------------------------------------------------
    def _once(self, what: str, current: Any, unset: Any, value: Any) -> None:
        if current is not unset and current != value:
            raise DataError(f"the schema's {what} is already set to {current!r}; cannot set it to {value!r}")

    def optional(self) -> SchemaBuilder:
        self._once("optionality", self._optional, None, True)
        self._optional = True
        return self

    def required(self) -> SchemaBuilder:
        self._once("optionality", self._optional, None, False)
        self._optional = False
        return self

    def default_value(self, value: Any) -> SchemaBuilder:
        self._once("default value", self._default, _NO_DEFAULT, value)
        self._default = value
        return self

    def name(self, name: str) -> SchemaBuilder:
        self._once("name", self._name, None, name)
        self._name = name
        return self

    def version(self, version: int) -> SchemaBuilder:
        self._once("version", self._version, None, version)
        self._version = version
        return self

    def doc(self, doc: str) -> SchemaBuilder:
        self._once("doc", self._doc, None, doc)
        self._doc = doc
        return self

    def parameter(self, key: str, value: str) -> SchemaBuilder:
        self._parameters[key] = value
        return self

    def parameters(self, parameters: Mapping[str, str]) -> SchemaBuilder:
        self._parameters.update(parameters)
        return self

    def field(self, name: str, schema: Schema | SchemaBuilder) -> SchemaBuilder:
        """Add a struct field (in order). Raises for a non-struct builder or a name used already."""
        if self.type is not SchemaType.STRUCT:
            raise DataError(f"cannot add field {name!r}: the schema is {self.type.name}, not STRUCT")
        if not name:
            raise DataError("a struct field needs a non-empty name")
        if name in self._fields:
            raise DataError(f"cannot add field {name!r}: the struct has a field of that name already")
        if isinstance(schema, SchemaBuilder):
            schema = schema.build()
        self._fields[name] = Field(name, len(self._fields), schema)
        return self

    def remove_field(self, name: str) -> SchemaBuilder:
        """Drop a field (renumbering the ones after it); what field-dropping transforms use."""
        self._fields.pop(name, None)
        self._fields = {f.name: Field(f.name, i, f.schema) for i, f in enumerate(self._fields.values())}
        return self

    def build(self) -> Schema:
        return Schema(self.type, bool(self._optional), None if self._default is _NO_DEFAULT else self._default,
                      self._name, self._version, self._doc, self._parameters or None, tuple(self._fields.values()),
                      self._key_schema, self._value_schema)

    schema = build


class SchemaAndValue(NamedTuple):
    """A schema and a value of it (``schema`` is ``None`` for schemaless data), as converters return them."""

    schema: Schema | None
    value: Any


# -- logical types --------------------------------------------------------------------------------------------

_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_MS = _dt.timedelta(milliseconds=1)


class Decimal:
    """``org.apache.kafka.connect.data.Decimal``: an arbitrary-precision decimal of a fixed scale, as ``BYTES``
    (the unscaled value, big-endian two's complement) with the ``scale`` parameter."""

    LOGICAL_NAME = "org.apache.kafka.connect.data.Decimal"
    SCALE_FIELD = "scale"

    @staticmethod
    def builder(scale: int) -> SchemaBuilder:
        return SchemaBuilder.bytes().name(Decimal.LOGICAL_NAME).parameter(Decimal.SCALE_FIELD, str(scale)).version(1)

    @staticmethod
    def schema(scale: int) -> Schema:
        return Decimal.builder(scale).build()

    @staticmethod
    def scale(schema: Schema) -> int:
        raw = (schema.parameters or {}).get(Decimal.SCALE_FIELD)
        if raw is None:
            raise DataError(f"invalid Decimal schema: the parameter {Decimal.SCALE_FIELD!r} is missing")
        return int(raw)

    PRECISION_PARAMETER = "connect.decimal.precision"
    """The parameter Confluent's converters give a Decimal's precision in (from an Avro ``decimal``)."""

    @staticmethod
    def precision(schema: Schema) -> int | None:
        """The precision ``connect.decimal.precision`` gives, if any (Kafka Connect's own Decimal has none)."""
        raw = (schema.parameters or {}).get(Decimal.PRECISION_PARAMETER)
        return int(raw) if raw and raw.isdigit() and int(raw) > 0 else None

    @staticmethod
    def from_logical(schema: Schema, value: _decimal.Decimal) -> bytes:
        scale = Decimal.scale(schema)
        sign, digits, exponent = value.as_tuple()
        if not isinstance(exponent, int):
            raise DataError(f"a Decimal field cannot hold {value} (not a finite number)")
        if -exponent != scale:
            raise DataError(f"the decimal {value} has scale {-exponent}; the Decimal schema's scale is {scale}")
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        return unscaled.to_bytes(max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1), "big", signed=True)

    @staticmethod
    def to_logical(schema: Schema, value: bytes) -> _decimal.Decimal:
        unscaled = int.from_bytes(value, "big", signed=True)
        return _decimal.Decimal((int(unscaled < 0), tuple(map(int, str(abs(unscaled)))), -Decimal.scale(schema)))


class Date:
    """``org.apache.kafka.connect.data.Date``: a calendar date, as ``INT32`` days since 1970-01-01."""

    LOGICAL_NAME = "org.apache.kafka.connect.data.Date"

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int32().name(Date.LOGICAL_NAME).version(1)

    @staticmethod
    def schema() -> Schema:
        return Date.builder().build()

    @staticmethod
    def from_logical(schema: Schema, value: _dt.date) -> int:
        if isinstance(value, _dt.datetime):
            raise DataError(f"a Date field holds a date, not a datetime ({value.isoformat()})")
        return (value - _EPOCH_DATE).days

    @staticmethod
    def to_logical(schema: Schema, value: int) -> _dt.date:
        return _EPOCH_DATE + _dt.timedelta(days=value)


class Time:
    """``org.apache.kafka.connect.data.Time``: a time of day, as ``INT32`` milliseconds since midnight."""

    LOGICAL_NAME = "org.apache.kafka.connect.data.Time"

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int32().name(Time.LOGICAL_NAME).version(1)

    @staticmethod
    def schema() -> Schema:
        return Time.builder().build()

    @staticmethod
    def from_logical(schema: Schema, value: _dt.time) -> int:
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000

    @staticmethod
    def to_logical(schema: Schema, value: int) -> _dt.time:
        if not 0 <= value < 86_400_000:
            raise DataError(f"a Time value is milliseconds within a day (0 to 86399999), got {value}")
        seconds, ms = divmod(value, 1000)
        return _dt.time(seconds // 3600, seconds // 60 % 60, seconds % 60, ms * 1000)


class Timestamp:
    """``org.apache.kafka.connect.data.Timestamp``: an instant, as ``INT64`` milliseconds since the epoch."""

    LOGICAL_NAME = "org.apache.kafka.connect.data.Timestamp"

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int64().name(Timestamp.LOGICAL_NAME).version(1)

    @staticmethod
    def schema() -> Schema:
        return Timestamp.builder().build()

    @staticmethod
    def from_logical(schema: Schema, value: _dt.datetime) -> int:
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.UTC)
        return (value - _EPOCH) // _MS

    @staticmethod
    def to_logical(schema: Schema, value: int) -> _dt.datetime:
        return _EPOCH + _dt.timedelta(milliseconds=value)


LOGICAL_TYPES: dict[str, Any] = {c.LOGICAL_NAME: c for c in (Decimal, Date, Time, Timestamp)}
"""Logical type name -> its class (``from_logical`` / ``to_logical``)."""

_LOGICAL_PYTHON: dict[str, tuple[type, ...]] = {
    Decimal.LOGICAL_NAME: (_decimal.Decimal,),
    Date.LOGICAL_NAME: (_dt.date,),
    Time.LOGICAL_NAME: (_dt.time,),
    Timestamp.LOGICAL_NAME: (_dt.datetime,),
}


# -- validation and structs -------------------------------------------------------------------------------------

_PYTHON_TYPES: dict[SchemaType, tuple[type, ...]] = {
    SchemaType.INT8: (int,), SchemaType.INT16: (int,), SchemaType.INT32: (int,), SchemaType.INT64: (int,),
    SchemaType.FLOAT32: (float, int), SchemaType.FLOAT64: (float, int), SchemaType.BOOLEAN: (bool,),
    SchemaType.STRING: (str,), SchemaType.BYTES: (bytes, bytearray, memoryview), SchemaType.ARRAY: (list, tuple),
    SchemaType.MAP: (Mapping,),
}


def _expected(schema: Schema) -> str:
    if schema.name in _LOGICAL_PYTHON:
        return f"{_LOGICAL_PYTHON[schema.name][0].__qualname__} ({schema.name.rsplit('.', 1)[-1]})"
    return schema.type.name


def validate_value(schema: Schema, value: Any, where: str = "the value") -> None:
    """Raise :class:`DataError` unless ``value`` is valid for ``schema`` (Kafka Connect's
    ``ConnectSchema.validateValue``), naming ``where`` (e.g. ``field 'amount'``) and what was expected."""
    if value is None:
        if schema.optional or schema.default is not None:
            return
        raise DataError(f"{where} is null but its schema is not optional (expected {_expected(schema)})")
    logical = _LOGICAL_PYTHON.get(schema.name) if schema.name else None
    if logical is not None:
        ok = isinstance(value, logical) and not (schema.name == Date.LOGICAL_NAME and isinstance(value, _dt.datetime))
        if not ok:
            raise DataError(f"{where} is a {type(value).__name__}; expected {_expected(schema)}")
        if schema.name == Decimal.LOGICAL_NAME:
            Decimal.from_logical(schema, value)
        return
    t = schema.type
    if t is SchemaType.STRUCT:
        if not isinstance(value, Struct):
            raise DataError(f"{where} is a {type(value).__name__}; expected a Struct of schema {schema.name or ''}"
                            .rstrip())
        if value.schema != schema:
            raise DataError(f"{where} is a Struct of another schema than its field's ({value.schema!r}; expected "
                            f"{schema!r})")
        return
    allowed = _PYTHON_TYPES[t]
    if not isinstance(value, allowed) or (t is not SchemaType.BOOLEAN and isinstance(value, bool)):
        raise DataError(f"{where} is a {type(value).__name__}; expected {t.name}")
    v = cast(Any, value)
    if t in _INT_RANGES:
        low, high = _INT_RANGES[t]
        if not low <= v <= high:
            raise DataError(f"{where} is {v}, out of the range of {t.name} ({low} to {high})")
    elif t is SchemaType.ARRAY:
        assert schema.value_schema is not None
        for i, item in enumerate(v):
            validate_value(schema.value_schema, item, f"{where}[{i}]")
    elif t is SchemaType.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        for k, item in v.items():
            validate_value(schema.key_schema, k, f"a key of {where}")
            validate_value(schema.value_schema, item, f"{where}[{k!r}]")


_DEFAULTS: dict[Schema, tuple[tuple[int, Any], ...]] = {}
"""Per struct schema: the positions and defaults of its fields that have one (for ``Struct.field_values``)."""


class Struct(Mapping[str, Any]):
    """A value of a ``STRUCT`` schema (Kafka Connect's ``Struct``). ``put`` validates each field's value;
    ``get`` gives a field's value or, when unset, its schema's default; ``validate`` checks that every required
    field is set. As a ``Mapping`` it has every field of its schema (unset ones read as ``get`` does), in order.
    """

    __slots__ = ("_values", "schema")

    def __init__(self, schema: Schema, values: Mapping[str, Any] | None = None) -> None:
        if schema.type is not SchemaType.STRUCT:
            raise DataError(f"a Struct needs a STRUCT schema, not {schema.type.name}")
        self.schema = schema
        self._values: list[Any] = [None] * len(schema.fields)
        if values:
            for name, value in values.items():
                self.put(name, value)

    @classmethod
    def from_values(cls, schema: Schema, values: list[Any]) -> Struct:
        """A struct holding ``values``, one per field in field order (the list is kept, not copied), **not
        validated**: for code whose values have their fields' types by construction (a connector's own type
        converters), where ``put``'s checks would repeat work on every record. ``validate()`` still checks it."""
        if schema.type is not SchemaType.STRUCT:
            raise DataError(f"a Struct needs a STRUCT schema, not {schema.type.name}")
        if len(values) != len(schema.fields):
            raise DataError(f"{len(values)} values for the struct {schema.name or ''} of {len(schema.fields)} fields "
                            f"({', '.join(f.name for f in schema.fields)})".replace("struct  of", "struct of"))
        s = cls.__new__(cls)
        s.schema = schema
        s._values = values
        return s

    def _field(self, name: str) -> Field:
        f = self.schema.field(name)
        if f is None:
            known = ", ".join(x.name for x in self.schema.fields)
            raise DataError(f"{name!r} is not a field of the struct {self.schema.name or ''} (its fields: {known})"
                            .replace("struct  (", "struct ("))
        return f

    def put(self, name: str, value: Any) -> Struct:
        """Set a field (validated against its schema); returns the struct, for chaining."""
        f = self._field(name)
        validate_value(f.schema, value, f"field {name!r}")
        self._values[f.index] = value
        return self

    def get(self, name: str, default: Any = None) -> Any:
        """The field's value, or its schema's default when unset. Raises for a name the schema lacks (a
        ``Mapping``'s ``default`` applies only to such names)."""
        f = self.schema.field(name)
        if f is None:
            return default
        value = self._values[f.index]
        return f.schema.default if value is None else value

    def field_values(self) -> list[Any]:
        """Every field's value in the schema's field order, as indexing reads them (defaults applied): what a
        sink turns a batch of structs into columns with, one call per struct instead of one per field."""
        values = list(self._values)
        if None in values:
            defaults = _DEFAULTS.get(self.schema)
            if defaults is None:
                defaults = _DEFAULTS[self.schema] = tuple((f.index, f.schema.default) for f in self.schema.fields
                                                          if f.schema.default is not None)
            for i, default in defaults:
                if values[i] is None:
                    values[i] = default
        return values

    def get_without_default(self, name: str) -> Any:
        return self._values[self._field(name).index]

    def validate(self) -> None:
        """Raise :class:`DataError` naming the first required field that is not set."""
        for f, value in zip(self.schema.fields, self._values, strict=True):
            validate_value(f.schema, value, f"field {f.name!r}")

    def __getitem__(self, name: str) -> Any:
        f = self.schema.field(name)
        if f is None:
            raise KeyError(name)
        value = self._values[f.index]
        return f.schema.default if value is None else value

    def __iter__(self) -> Iterator[str]:
        return (f.name for f in self.schema.fields)

    def __len__(self) -> int:
        return len(self.schema.fields)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Struct):
            return self.schema == other.schema and self._values == other._values
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        fields = ", ".join(f"{f.name}={v!r}" for f, v in zip(self.schema.fields, self._values, strict=True))
        return f"Struct{{{fields}}}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_struct_from, (self.schema, list(self._values)))


def _struct_from(schema: Schema, values: list[Any]) -> Struct:
    s = Struct(schema)
    s._values = values
    return s


def to_plain(value: Any) -> Any:
    """``value`` as plain Python: structs (nested too) become dicts of their fields (defaults applied), lists and
    dicts are copied through; everything else is returned as it is."""
    if isinstance(value, Struct):
        return {name: to_plain(value[name]) for name in value}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    return value


__all__ = ["LOGICAL_TYPES", "Date", "Decimal", "Field", "Schema", "SchemaAndValue", "SchemaBuilder", "SchemaType",
           "Struct", "Time", "Timestamp", "to_plain", "validate_value"]
