"""SqlSink with typed records (a Connect ``value_schema``, Struct values): the column type, nullability and
default of each field for ``auto.create`` / ``auto.evolve`` (Kafka Connect JDBC's ``getSqlType`` of its PostgreSQL
dialect and ``writeColumnSpec``; the package docstring has the table), and Struct values into rows.

A row of a Struct holds the field values as the driver binds them (``decimal.Decimal``, ``datetime.date``,
``datetime.time``, aware ``datetime.datetime``, ``bytes``); ``ARRAY``, ``MAP`` and ``STRUCT`` fields go into JSON
columns, their values in plain JSON forms (:func:`connect_runtime.api.jsoncodec.plain_json`).
"""

from __future__ import annotations

import json
from operator import attrgetter, itemgetter
from typing import Any

from connect_runtime.api.data import Date, Decimal, Schema, SchemaType, Struct, Time, Timestamp
from connect_runtime.api.jsoncodec import JSON_FORMS, plain_json
from connect_runtime.api.records import SinkRecord

DEFAULT_DECIMAL_PRECISION = 38
"""A Decimal's precision when its schema does not say: the largest Spark's DecimalType and Arrow's decimal128
take, so the column reads the same in PostgreSQL, Parquet and Spark (the JDBC sink leaves it unconstrained)."""

_COMPOUND = frozenset({SchemaType.ARRAY, SchemaType.MAP, SchemaType.STRUCT})


def decimal_precision(schema: Schema) -> int:
    """The precision of a Decimal schema: ``connect.decimal.precision`` or :data:`DEFAULT_DECIMAL_PRECISION`,
    at least its scale."""
    return max(Decimal.precision(schema) or DEFAULT_DECIMAL_PRECISION, Decimal.scale(schema))


def column_type(schema: Schema, dialect: str, key: bool) -> Any:
    """The column type of a field of ``schema`` (see the package docstring's table)."""
    import sqlalchemy as sa

    name = schema.name
    if name == Decimal.LOGICAL_NAME:
        scale = Decimal.scale(schema)
        if dialect == "sqlite":
            return sa.Text()  # SQLite has no exact decimal: the exact text
        if scale < 0:
            return sa.Numeric()  # a negative scale: unconstrained (PostgreSQL before 15 refuses one)
        return sa.Numeric(precision=decimal_precision(schema), scale=scale)
    if name == Date.LOGICAL_NAME:
        return sa.Date()
    if name == Time.LOGICAL_NAME:
        return sa.Time()
    if name == Timestamp.LOGICAL_NAME:
        return sa.Text() if dialect == "sqlite" else sa.DateTime(timezone=True)
    t = schema.type
    if t in (SchemaType.INT8, SchemaType.INT16):
        return sa.SmallInteger()
    if t is SchemaType.INT32:
        return sa.Integer()
    if t is SchemaType.INT64:
        return sa.BigInteger()
    if t is SchemaType.FLOAT32:
        return sa.REAL()
    if t is SchemaType.FLOAT64:
        return sa.Double()
    if t is SchemaType.BOOLEAN:
        return sa.Boolean()
    if t is SchemaType.STRING:
        return sa.String(255) if key and dialect not in ("postgresql", "sqlite") else sa.Text()
    if t is SchemaType.BYTES:
        return sa.LargeBinary()
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import JSONB

        return JSONB()
    return sa.JSON()


def nullable(schema: Schema) -> bool:
    """As Kafka Connect JDBC: an optional field, or one with a default, is a nullable column."""
    return schema.optional or schema.default is not None


def default_text(schema: Schema) -> str | None:
    """A field's default as the text of a SQL literal (``DEFAULT '<text>'``, cast by the database to the column
    type), or None without one."""
    v = schema.default
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(v).hex()  # PostgreSQL's bytea hex form
    if schema.type in _COMPOUND:
        return json.dumps(plain_json(v), separators=(",", ":"))
    conv = JSON_FORMS.get(type(v))
    return str(v) if conv is None else str(conv(v))


def sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_VALUE_SCHEMA = attrgetter("value_schema")
_KEY_SCHEMA = attrgetter("key_schema")


def _distinct(schemas: list[Schema | None]) -> list[Schema]:
    seen: dict[int, Schema] = {}
    for s in schemas:
        if s is not None and id(s) not in seen:
            seen[id(s)] = s
    return list(seen.values())


def field_schemas(records: list[SinkRecord], pk_mode: str, pk_fields: list[str]) -> dict[str, Schema]:
    """The schema of each column a batch of records writes: the fields of its value schemas (the first schema
    naming a field wins) and, with ``pk.mode=record_key``, of its key schemas (a struct key's fields, or a
    primitive key as ``pk.fields[0]``). Empty for schemaless records."""
    out: dict[str, Schema] = {}
    for s in _distinct(list(map(_VALUE_SCHEMA, records))):
        if s.type is SchemaType.STRUCT:
            for f in s.fields:
                out.setdefault(f.name, f.schema)
    if pk_mode == "record_key":
        for s in _distinct(list(map(_KEY_SCHEMA, records))):
            if s.type is SchemaType.STRUCT:
                out.update({f.name: f.schema for f in s.fields if not pk_fields or f.name in pk_fields})
            elif len(pk_fields) == 1:
                out[pk_fields[0]] = s
    return out


class StructRows:
    """Struct values into row dicts, a schema's field names and compound fields worked out once per schema."""

    def __init__(self) -> None:
        self._shapes: dict[Schema, tuple[tuple[str, ...], Any, tuple[str, ...]]] = {}

    def _shape(self, schema: Schema) -> tuple[tuple[str, ...], Any, tuple[str, ...]]:
        shape = self._shapes.get(schema)
        if shape is None:
            names = tuple(f.name for f in schema.fields)
            getter = itemgetter(*names) if len(names) > 1 else (lambda s: (s[names[0]],) if names else ())
            compound = tuple(f.name for f in schema.fields if f.schema.type in _COMPOUND)
            shape = self._shapes[schema] = (names, getter, compound)
        return shape

    def row(self, value: Struct) -> dict[str, Any]:
        """One Struct as a row: every field of its schema (defaults applied), compound ones as plain JSON."""
        names, getter, compound = self._shape(value.schema)
        row = dict(zip(names, getter(value), strict=True))
        for name in compound:
            v = row[name]
            if v is not None:
                row[name] = plain_json(v)
        return row

    def rows(self, values: list[Struct]) -> list[dict[str, Any]]:
        return list(map(self.row, values))

    def plain(self, value: Any) -> Any:
        """A Struct as a row, anything else as it is (a schemaless key or value)."""
        return self.row(value) if isinstance(value, Struct) else value


__all__ = ["DEFAULT_DECIMAL_PRECISION", "StructRows", "column_type", "decimal_precision",
           "default_text", "field_schemas", "nullable", "sql_literal"]
