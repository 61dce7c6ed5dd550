"""Connect schemas and values the registry converter tests share: :data:`ORDER` holds every Connect type and logical
type (nested structs, arrays of structs, maps with string and non-string keys, optional fields, a default and a
parameter), :func:`order` a value of it with edge values (type bounds, pre-epoch date and timestamp, the last
millisecond of a day, a 22-digit decimal); :func:`optional` copies a schema as optional; :func:`mock_scope` names a
fresh ``mock://`` registry scope (``drop_mock_scope`` it after)."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools

from connect_runtime.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp

_scopes = itertools.count()


def mock_scope(prefix: str) -> str:
    """A mock registry scope no other test uses."""
    return f"{prefix}-{next(_scopes)}"


def optional(schema: Schema) -> Schema:
    return Schema(schema.type, True, schema.default, schema.name, schema.version, schema.doc, schema.parameters,
                  schema.fields, schema.key_schema, schema.value_schema)


ITEM = SchemaBuilder.struct().name("shop.Item").field("sku", Schema.STRING_SCHEMA).field(
    "qty", Schema.INT32_SCHEMA).build()
ORDER = (SchemaBuilder.struct().name("shop.Order").version(3).doc("an order")
         .field("id", Schema.INT64_SCHEMA)
         .field("i8", Schema.INT8_SCHEMA).field("i16", Schema.INT16_SCHEMA).field("i32", Schema.INT32_SCHEMA)
         .field("f32", Schema.FLOAT32_SCHEMA).field("f64", Schema.FLOAT64_SCHEMA).field("ok", Schema.BOOLEAN_SCHEMA)
         .field("note", Schema.OPTIONAL_STRING_SCHEMA).field("blob", Schema.BYTES_SCHEMA)
         .field("amount", Decimal.schema(2)).field("day", Date.schema()).field("at", Time.schema())
         .field("ts", Timestamp.schema()).field("maybe_ts", Timestamp.builder().optional().build())
         .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).build())
         .field("items", SchemaBuilder.array(ITEM).build())
         .field("counts", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT64_SCHEMA).build())
         .field("by_id", SchemaBuilder.map(Schema.INT32_SCHEMA, ITEM).optional().build())
         .field("first", optional(ITEM))
         .field("currency", SchemaBuilder.string().default_value("EUR").parameter("iso", "4217").build())
         .build())


def order() -> Struct:
    return (Struct(ORDER).put("id", 1 << 40).put("i8", -128).put("i16", 32767).put("i32", -(1 << 31))
            .put("f32", 1.5).put("f64", -2.25e-300).put("ok", True).put("blob", b"\x00\xff\x10")
            .put("amount", decimal.Decimal("-12345678901234567890.99")).put("day", dt.date(1969, 12, 31))
            .put("at", dt.time(23, 59, 59, 999000))
            .put("ts", dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=dt.UTC))
            .put("tags", ["a", "ü"]).put("items", [Struct(ITEM).put("sku", "x").put("qty", 2)])
            .put("counts", {"a": 1, "b": -1})
            .put("by_id", {7: Struct(ITEM).put("sku", "s").put("qty", 3), -2: Struct(ITEM).put("sku", "t").put("qty", 1)})
            .put("first", Struct(optional(ITEM)).put("sku", "y").put("qty", 0))
            .put("currency", "USD"))
