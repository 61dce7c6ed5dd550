"""ParquetSink with typed records (a Connect ``value_schema``, Struct values): the Arrow schema derived from the
Connect schema, and a batch of Structs into an Arrow table a column at a time.

=======================  ==========================================================================
Connect                  Arrow (Parquet)
=======================  ==========================================================================
INT8 / 16 / 32 / 64      int8 / int16 / int32 / int64
FLOAT32 / FLOAT64        float32 / float64
BOOLEAN / STRING / BYTES bool / string / binary
Decimal                  decimal128(precision, scale): ``connect.decimal.precision``, else 38
                         (decimal256 beyond 38 digits)
Date / Time / Timestamp  date32 / time64[us] / timestamp[ms, tz=UTC]
ARRAY / MAP / STRUCT     list / map / struct of the element, key and value, field types
optional                 nullable (a required field is a non-nullable column; a null in it is an error)
=======================  ==========================================================================

``parquet.schema`` still wins for the fields it declares (``json``: the field's plain JSON text; ``string``: its
plain JSON form).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import Any

import pyarrow as pa

from connect_runtime.api.data import Date, Decimal, Schema, SchemaType, Struct, Time, Timestamp
from connect_runtime.api.errors import DataError
from connect_runtime.api.jsoncodec import plain_json
from connect_runtime.api.records import SinkRecord

DEFAULT_DECIMAL_PRECISION = 38
"""A Decimal's precision when its schema has no ``connect.decimal.precision``: the most decimal128 (and Spark's
DecimalType) hold."""

_PRIMITIVE: dict[SchemaType, pa.DataType] = {
    SchemaType.INT8: pa.int8(), SchemaType.INT16: pa.int16(), SchemaType.INT32: pa.int32(),
    SchemaType.INT64: pa.int64(), SchemaType.FLOAT32: pa.float32(), SchemaType.FLOAT64: pa.float64(),
    SchemaType.BOOLEAN: pa.bool_(), SchemaType.STRING: pa.string(), SchemaType.BYTES: pa.binary(),
}
_COMPOUND = frozenset({SchemaType.ARRAY, SchemaType.MAP, SchemaType.STRUCT})


def arrow_type(schema: Schema) -> pa.DataType:
    """The Arrow type of a Connect schema (the module docstring's table)."""
    name = schema.name
    if name == Decimal.LOGICAL_NAME:
        scale = Decimal.scale(schema)
        precision = max(Decimal.precision(schema) or DEFAULT_DECIMAL_PRECISION, scale)
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    if name == Date.LOGICAL_NAME:
        return pa.date32()
    if name == Time.LOGICAL_NAME:
        return pa.time64("us")  # Spark 4.2 reads Parquet TIME only as MICROS (TIME(MILLIS) is "Illegal")
    if name == Timestamp.LOGICAL_NAME:
        return pa.timestamp("ms", tz="UTC")
    t = schema.type
    if t in _PRIMITIVE:
        return _PRIMITIVE[t]
    if t is SchemaType.ARRAY:
        assert schema.value_schema is not None
        return pa.list_(arrow_field("element", schema.value_schema))
    if t is SchemaType.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        return pa.map_(arrow_field("key", schema.key_schema).with_nullable(False),
                       arrow_field("value", schema.value_schema))
    return pa.struct([arrow_field(f.name, f.schema) for f in schema.fields])


def arrow_field(name: str, schema: Schema) -> pa.Field:
    return pa.field(name, arrow_type(schema), nullable=schema.optional)


_Prepare = Callable[[list[Any]], list[Any]]
_Plan = tuple[pa.Schema, Callable[[Any], Any], list[_Prepare | None]]
"""A Connect schema's Arrow schema, the getter of its field values from a Struct, each column's preparation."""


class TypedTables:
    """Struct values of one Connect schema at a time into Arrow tables; the Arrow schema of each Connect schema
    is worked out once. ``declared``: ``parquet.schema``'s column types, ``json_fields`` its ``json`` ones."""

    def __init__(self, declared: Mapping[str, pa.DataType], json_fields: set[str]) -> None:
        self.declared = declared
        self.json_fields = json_fields
        self._plans: dict[Schema, _Plan] = {}

    def arrow_schema(self, schema: Schema) -> pa.Schema:
        return self._plan(schema)[0]

    def _plan(self, schema: Schema) -> _Plan:
        plan = self._plans.get(schema)
        if plan is None:
            if schema.type is not SchemaType.STRUCT or not schema.fields:
                raise DataError(f"ParquetSink writes a record value as a row of its fields: the value schema is "
                                f"{schema.type.name}{'' if schema.fields else ' without fields'}, not a STRUCT")
            fields: list[pa.Field] = []
            prepare: list[_Prepare | None] = []
            for f in schema.fields:
                if f.name in self.json_fields:
                    fields.append(pa.field(f.name, pa.string()))
                    prepare.append(_json_text)
                elif f.name in self.declared:
                    typ = self.declared[f.name]
                    fields.append(pa.field(f.name, typ))
                    prepare.append(_plain_form if pa.types.is_string(typ) and f.schema.type is not SchemaType.STRING
                                   else None)
                else:
                    fields.append(arrow_field(f.name, f.schema))
                    prepare.append(_plain_nested if _holds_structs(f.schema) else None)
            plan = self._plans[schema] = (pa.schema(fields), Struct.field_values, prepare)
        return plan

    def table(self, records: list[SinkRecord], schema: Schema) -> pa.Table:
        """The rows of ``records`` (every value a Struct of ``schema``). Raises DataError naming the first record
        and field that does not fit (the caller then finds each bad record)."""
        arrow, getter, prepare = self._plan(schema)
        values = [r.value for r in records]
        for r, v in zip(records, values, strict=True):
            if not isinstance(v, Struct) or (v.schema is not schema and v.schema != schema):
                raise DataError(f"ParquetSink cannot write record {where(r)}: its value is a {type(v).__name__}, "
                                f"not a Struct of its value schema {schema.name or ''}".rstrip())
        rows = list(map(getter, values))
        arrays = []
        for i, (field, prep) in enumerate(zip(arrow, prepare, strict=True)):
            col = list(map(itemgetter(i), rows))  # a column per pass (zip(*rows) costs several times more)
            data = col if prep is None else prep(col)
            try:
                arr = pa.array(data, type=field.type)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                bad = _first_bad(data, field.type)
                raise DataError(f"ParquetSink cannot write record {where(records[bad])}: field {field.name!r} "
                                f"({type(data[bad]).__name__}) does not fit its column {field.type}: {exc}") from None
            if not field.nullable and arr.null_count:
                bad = next(i for i, x in enumerate(data) if x is None)
                raise DataError(f"ParquetSink cannot write record {where(records[bad])}: field {field.name!r} is "
                                "null but its schema is not optional")
            arrays.append(arr)
        return pa.Table.from_arrays(arrays, schema=arrow)


def _holds_structs(schema: Schema) -> bool:
    """Whether values of ``schema`` may hold Structs (which pyarrow builds struct columns from as dicts)."""
    if schema.type is SchemaType.STRUCT:
        return True
    return any(s is not None and _holds_structs(s) for s in (schema.key_schema, schema.value_schema))


def _first_bad(data: list[Any], typ: pa.DataType) -> int:
    for i, x in enumerate(data):
        try:
            pa.array([x], type=typ)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return i
    return 0


def where(r: SinkRecord) -> str:
    """A record's place, as messages name it: ``topic-partition@offset``."""
    return f"{r.topic}-{r.partition}@{r.offset}"


@functools.lru_cache(maxsize=256)
def _names(schema: Schema) -> tuple[str, ...]:
    return tuple(f.name for f in schema.fields)


def _as_dicts(v: Any) -> Any:
    """Structs (nested too) as dicts, what pyarrow builds struct columns from; typed values stay as they are."""
    if isinstance(v, Struct):
        return dict(zip(_names(v.schema), map(_as_dicts, v.field_values()), strict=True))
    if type(v) is list:
        return [_as_dicts(x) for x in v]
    if type(v) is dict:
        return {k: _as_dicts(x) for k, x in v.items()}
    return v


def _plain_nested(col: list[Any]) -> list[Any]:
    return [None if v is None else _as_dicts(v) for v in col]


def _plain_form(col: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in col:
        p = plain_json(v)
        out.append(json.dumps(p, separators=(",", ":"), ensure_ascii=False) if isinstance(p, (dict, list))
                   else p if p is None or isinstance(p, str) else str(p))
    return out


def _json_text(col: list[Any]) -> list[Any]:
    return [None if v is None else json.dumps(plain_json(v), separators=(",", ":"), ensure_ascii=False)
            for v in col]


__all__ = ["DEFAULT_DECIMAL_PRECISION", "TypedTables", "arrow_field", "arrow_type", "where"]
