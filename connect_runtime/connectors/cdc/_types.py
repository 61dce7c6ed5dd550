"""PostgreSQL column types as Connect schemas and values, the way Debezium's PostgreSQL connector maps them with its
defaults (``decimal.handling.mode=precise``, ``time.precision.mode=adaptive``, ``binary.handling.mode=bytes``).

Values arrive as PostgreSQL's text output (``pgoutput``'s text tuple data, and the snapshot's rows fetched in text
format, never cast to text, which differs for ``boolean`` and ``char(n)``: the same output functions, so a row read in
the snapshot and the same row in the stream give equal values). The reading
session runs with ``TimeZone=UTC``, ``DateStyle=ISO`` and ``bytea_output=hex`` (:data:`SESSION_OPTIONS`).

=================================  ==============================================================================
PostgreSQL                          Connect schema (Debezium's name)
=================================  ==============================================================================
smallint, integer, bigint           INT16, INT32, INT64
real, double precision              FLOAT32, FLOAT64
boolean                             BOOLEAN
numeric(p, s)                       BYTES ``org.apache.kafka.connect.data.Decimal`` (scale s, precision p)
numeric                             STRUCT ``io.debezium.data.VariableScaleDecimal`` {scale INT32, value BYTES}
text, varchar, char, name           STRING
date                                INT32 ``io.debezium.time.Date`` (days since 1970-01-01)
time(0..3) / time(4..6)             INT32 ``io.debezium.time.Time`` (ms) / INT64 ``io.debezium.time.MicroTime`` (us)
timestamp(0..3) / (4..6)            INT64 ``io.debezium.time.Timestamp`` (ms) / ``io.debezium.time.MicroTimestamp`` (us)
timestamptz                         STRING ``io.debezium.time.ZonedTimestamp`` (ISO 8601 in UTC, ``...Z``)
timetz                              STRING ``io.debezium.time.ZonedTime``
json, jsonb                         STRING ``io.debezium.data.Json``
uuid                                STRING ``io.debezium.data.Uuid``
bytea                               BYTES
one-dimensional arrays of these     ARRAY of the element's schema (elements optional)
any other type (enum, interval...)  STRING: PostgreSQL's text of the value (Debezium skips unknown types)
=================================  ==============================================================================

A ``numeric`` NaN is null, as in Debezium. An infinite date or timestamp, or an array of more than one dimension, is a
:class:`DataError` naming the column.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from connect_runtime.api.data import Decimal, Schema, SchemaBuilder, Struct
from connect_runtime.api.errors import DataError

SESSION_OPTIONS = "-c TimeZone=UTC -c DateStyle=ISO -c bytea_output=hex -c extra_float_digits=3"
"""libpq ``options`` of every reading session: the text forms the converters below read."""

VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"

Convert = Callable[[str], Any]


def _placeholder(text: str) -> Any:  # stands for the VariableScaleDecimal converter until its schema is built
    raise AssertionError(text)


@dataclass(frozen=True)
class ColumnType:
    """A column's Connect schema (optional or not) and the function from its text to the schema's value."""

    schema: Schema
    convert: Convert


_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)


def _vsd_builder() -> SchemaBuilder:
    return (SchemaBuilder.struct().name(VARIABLE_SCALE_DECIMAL).version(1).doc("Variable scaled decimal")
            .field("scale", Schema.INT32_SCHEMA).field("value", Schema.BYTES_SCHEMA))


def _finite(text: str) -> str:
    if text in ("infinity", "-infinity") or text.endswith(" BC"):
        raise DataError(f"the value {text!r} has no Debezium form here (infinite or BC dates are not mapped)")
    return text


def _date(text: str) -> int:
    return (dt.date.fromisoformat(_finite(text)) - _EPOCH_DATE).days


def _time_us(text: str) -> int:
    t = dt.time.fromisoformat(text if text != "24:00:00" else "00:00:00")
    us = ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond
    return 86_400_000_000 if text.startswith("24:") else us


def _timestamp_us(text: str) -> int:
    d = dt.datetime.fromisoformat(_finite(text))
    delta = d - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _zoned(digits: int) -> Convert:
    """ISO 8601 in UTC with the column's fraction digits (its precision, 6 when unset), as Debezium writes it."""
    def convert(text: str) -> Any:
        if text.endswith("+00") and len(text) >= 22 and text[10] == " " and text[4] == "-":
            # the server's TimeZone is UTC (the usual case): its text is already the instant, only reshaped
            frac = text[20:-3]
            return f"{text[:10]}T{text[11:19]}" + (f".{frac:0<6}"[:digits + 1] if digits else "") + "Z"
        d = dt.datetime.fromisoformat(_finite(text)).astimezone(dt.UTC)
        base = d.strftime("%Y-%m-%dT%H:%M:%S")
        return f"{base}.{d.microsecond:06d}"[:len(base) + 1 + digits] + "Z" if digits else f"{base}Z"

    return convert


def _bytea(text: str) -> bytes:
    if not text.startswith("\\x"):
        raise DataError(f"a bytea in hex form (bytea_output=hex), got {text[:20]!r}")
    return bytes.fromhex(text[2:])


def _bool(text: str) -> bool:
    return text == "t"


def _decimal(scale: int) -> Convert:
    def convert(text: str) -> Any:
        if text == "NaN":
            return None
        return decimal.Decimal(text).quantize(decimal.Decimal(1).scaleb(-scale))
    return convert


def _variable_decimal(schema: Schema) -> Convert:
    def convert(text: str) -> Any:
        if text == "NaN":
            return None
        sign, digits, exponent = decimal.Decimal(text).as_tuple()
        assert isinstance(exponent, int)
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        raw = unscaled.to_bytes(max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1), "big", signed=True)
        return Struct(schema).put("scale", -exponent).put("value", raw)
    return convert


def _named(builder: SchemaBuilder, name: str) -> SchemaBuilder:
    return builder.name(name).version(1)


def _scalar(oid: int, typmod: int) -> tuple[SchemaBuilder, Convert] | None:
    """The schema builder and converter of a scalar type, or None for a type this table does not know."""
    if oid in (21, 23, 20):
        return {21: SchemaBuilder.int16, 23: SchemaBuilder.int32, 20: SchemaBuilder.int64}[oid](), int
    if oid in (700, 701):
        return (SchemaBuilder.float32() if oid == 700 else SchemaBuilder.float64()), float
    if oid == 16:
        return SchemaBuilder.bool(), _bool
    if oid == 1700:
        if typmod < 4:  # numeric without precision: any scale
            return _vsd_builder(), _placeholder
        precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
        return (Decimal.builder(scale).parameter(Decimal.PRECISION_PARAMETER, str(precision)), _decimal(scale))
    if oid in (25, 1043, 1042, 19, 18):
        return SchemaBuilder.string(), str
    if oid == 1082:
        return _named(SchemaBuilder.int32(), "io.debezium.time.Date"), _date
    if oid == 1083:
        if 0 <= typmod <= 3:
            return _named(SchemaBuilder.int32(), "io.debezium.time.Time"), lambda t: _time_us(t) // 1000
        return _named(SchemaBuilder.int64(), "io.debezium.time.MicroTime"), _time_us
    if oid == 1114:
        if 0 <= typmod <= 3:
            return _named(SchemaBuilder.int64(), "io.debezium.time.Timestamp"), lambda t: _timestamp_us(t) // 1000
        return _named(SchemaBuilder.int64(), "io.debezium.time.MicroTimestamp"), _timestamp_us
    if oid == 1184:
        return _named(SchemaBuilder.string(), "io.debezium.time.ZonedTimestamp"), _zoned(typmod if 0 <= typmod <= 6 else 6)
    if oid == 1266:
        return _named(SchemaBuilder.string(), "io.debezium.time.ZonedTime"), str
    if oid in (114, 3802):
        return _named(SchemaBuilder.string(), "io.debezium.data.Json"), str
    if oid == 2950:
        return _named(SchemaBuilder.string(), "io.debezium.data.Uuid"), str
    if oid == 17:
        return SchemaBuilder.bytes(), _bytea
    return None


ARRAY_ELEMENTS = {1005: 21, 1007: 23, 1016: 20, 1021: 700, 1022: 701, 1000: 16, 1231: 1700, 1009: 25, 1015: 1043,
                  1014: 1042, 1003: 19, 1182: 1082, 1183: 1083, 1115: 1114, 1185: 1184, 199: 114, 3807: 3802,
                  2951: 2950, 1001: 17}
"""Array type OID -> element type OID, for the element types above."""


def parse_array(text: str) -> list[str | None]:
    """A one-dimensional PostgreSQL array literal (``{1,NULL,"a b","c\\"d"}``) as its elements' texts (``None`` for
    an unquoted NULL). A nested array is a :class:`DataError`."""
    if text.startswith("["):  # explicit bounds: [0:2]={...}
        text = text[text.index("=") + 1:]
    if not (text.startswith("{") and text.endswith("}")):
        raise DataError(f"expected an array literal like {{1,2}}, got {text[:40]!r}")
    body, i, n = text[1:-1], 0, len(text) - 2
    out: list[str | None] = []
    if not body:
        return []
    while i <= n:
        if i < n and body[i] == "{":
            raise DataError("arrays of more than one dimension are not mapped")
        if i < n and body[i] == '"':
            j, buf = i + 1, []
            while body[j] != '"':
                if body[j] == "\\":
                    j += 1
                buf.append(body[j])
                j += 1
            out.append("".join(buf))
            i = j + 2  # past the closing quote and the comma
        else:
            j = body.find(",", i)
            j = n if j < 0 else j
            item = body[i:j]
            out.append(None if item == "NULL" else item)
            i = j + 1
    return out


def column_type(oid: int, typmod: int, optional: bool, column: str) -> ColumnType:
    """The Connect schema of a column (optional when it may be null) and the converter of its text."""
    scalar = _scalar(oid, typmod)
    if scalar is None and oid in ARRAY_ELEMENTS:
        element = _scalar(ARRAY_ELEMENTS[oid], typmod)
        assert element is not None
        eb, econv = element
        ebuilt = eb.optional().build()
        if econv is _placeholder:
            econv = _variable_decimal(ebuilt)

        def convert_array(text: str) -> list[Any]:
            return [None if e is None else econv(e) for e in parse_array(text)]

        builder, convert = SchemaBuilder.array(ebuilt), cast("Convert", convert_array)
    elif scalar is None:
        builder, convert = SchemaBuilder.string(), str
    else:
        builder, convert = scalar
    if optional:
        builder = builder.optional()
    schema = builder.build()
    if convert is _placeholder:
        convert = _variable_decimal(schema)

    def checked(text: str) -> Any:
        try:
            return convert(text)
        except DataError as exc:
            raise DataError(f"column {column!r}: {exc}") from None
        except (ValueError, ArithmeticError) as exc:
            raise DataError(f"column {column!r}: cannot read {text[:60]!r} as {schema.name or schema.type.name}: "
                            f"{exc}") from None

    return ColumnType(schema, checked)


def zero(schema: Schema) -> Any:
    """A required field's stand-in where the server sent no value (a non-key column of a key-only old row)."""
    from connect_runtime.api.data import SchemaType

    t = schema.type
    if t in (SchemaType.INT8, SchemaType.INT16, SchemaType.INT32, SchemaType.INT64):
        return 0
    if t in (SchemaType.FLOAT32, SchemaType.FLOAT64):
        return 0.0
    if t == SchemaType.BOOLEAN:
        return False
    if t == SchemaType.STRING:
        return ""
    if t == SchemaType.BYTES:
        return decimal.Decimal(0).scaleb(-Decimal.scale(schema)) if schema.name == Decimal.LOGICAL_NAME else b""
    if t == SchemaType.ARRAY:
        return []
    return Struct(schema).put("scale", 0).put("value", b"\x00")


__all__ = ["ARRAY_ELEMENTS", "SESSION_OPTIONS", "ColumnType", "column_type", "parse_array", "zero"]
