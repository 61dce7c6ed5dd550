"""Typed records for the sink tests: Connect schemas covering every type and logical type, their values, and
``ToStruct``, a test transform that turns a schemaless JSON object into a :class:`Struct` of a named schema (so a
real ``run_sink`` delivers typed records whatever converter the pipeline has).

``ToStruct`` config: ``schema`` = a name of :data:`SCHEMAS`, or ``auto``: ORDER_V2 for an object with a
``coupon`` field, else ORDER (a topic whose schema changes between records). Field values in the JSON object take the plain JSON
forms (a decimal as its string, ISO 8601 dates/times/instants, base64 bytes), as :func:`struct_of` reads them.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from collections.abc import Mapping
from typing import Any

from connect_runtime.api import SinkRecord
from connect_runtime.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp
from connect_runtime.api.transforms import Transformation

ADDRESS = (SchemaBuilder.struct().name("shop.Address").optional()
           .field("city", Schema.STRING_SCHEMA).field("zip", Schema.OPTIONAL_STRING_SCHEMA).build())

ORDER = (SchemaBuilder.struct().name("shop.Order").version(1)
         .field("id", Schema.INT64_SCHEMA)
         .field("qty", Schema.INT32_SCHEMA)
         .field("small", Schema.OPTIONAL_INT16_SCHEMA)
         .field("tiny", Schema.OPTIONAL_INT8_SCHEMA)
         .field("price", Schema.OPTIONAL_FLOAT32_SCHEMA)
         .field("ratio", Schema.OPTIONAL_FLOAT64_SCHEMA)
         .field("ok", Schema.BOOLEAN_SCHEMA)
         .field("name", Schema.STRING_SCHEMA)
         .field("raw", Schema.OPTIONAL_BYTES_SCHEMA)
         .field("amount", Decimal.builder(2).parameter("connect.decimal.precision", "10"))
         .field("total", Decimal.builder(3).optional())
         .field("day", Date.schema())
         .field("at", Time.builder().optional())
         .field("ts", Timestamp.schema())
         .field("status", SchemaBuilder.string().default_value("new"))
         .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).optional())
         .field("attrs", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT64_SCHEMA).optional())
         .field("addr", ADDRESS)
         .build())

def _v2() -> Schema:
    b = SchemaBuilder.struct().name("shop.Order").version(2)
    for f in ORDER.fields:
        b.field(f.name, f.schema)
    return b.field("coupon", Schema.OPTIONAL_STRING_SCHEMA).build()


ORDER_V2 = _v2()
"""ORDER plus an optional field (a compatible evolution)."""

ORDER_V3 = (SchemaBuilder.struct().name("shop.Order").version(3).field("id", Schema.INT64_SCHEMA)
            .field("qty", Schema.INT32_SCHEMA).field("ok", Schema.BOOLEAN_SCHEMA)
            .field("name", Schema.STRING_SCHEMA).field("amount", Decimal.builder(2))
            .field("day", Date.schema()).field("ts", Timestamp.schema())
            .field("status", SchemaBuilder.string().default_value("new"))
            .field("must", Schema.INT32_SCHEMA).build())
"""A new required field without a default (auto.evolve refuses it)."""

SCHEMAS = {"order": ORDER, "order_v2": ORDER_V2, "order_v3": ORDER_V3}


def order_json(i: int) -> dict[str, Any]:
    """The plain JSON object of order ``i`` (ToStruct's input); every third leaves the optional fields null."""
    full = i % 3 != 2
    return {
        "id": i, "qty": i * 2 - 5, "small": -300 + i if full else None, "tiny": -7 if full else None,
        "price": 1.5 if full else None, "ratio": i / 7 if full else None, "ok": i % 2 == 0, "name": f"n{i}é",
        "raw": base64.b64encode(bytes([0, 255, i % 256])).decode() if full else None,
        "amount": f"{i * 1234567 % 100000000}.{i % 100:02d}", "total": f"-{i}.125" if full else None,
        "day": (dt.date(2026, 1, 1) + dt.timedelta(days=i)).isoformat(),
        "at": f"{i % 24:02d}:04:05.123" if full else None,
        "ts": (dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i * 61, milliseconds=i)).isoformat(),
        "status": None if i % 2 else "paid", "tags": ["a", f"t{i}"] if full else None,
        "attrs": {"k": i} if full else None, "addr": {"city": "Oslo", "zip": None} if full else None,
    }


def _field_value(schema: Schema, v: Any) -> Any:
    if v is None:
        return None
    name = schema.name
    if name == Decimal.LOGICAL_NAME:
        return decimal.Decimal(v)
    if name == Date.LOGICAL_NAME:
        return dt.date.fromisoformat(v)
    if name == Time.LOGICAL_NAME:
        return dt.time.fromisoformat(v)
    if name == Timestamp.LOGICAL_NAME:
        return dt.datetime.fromisoformat(v)
    if schema.type is Schema.Type.BYTES:
        return base64.b64decode(v)
    if schema.type is Schema.Type.STRUCT:
        return struct_of(schema, v)
    return v


def struct_of(schema: Schema, obj: Mapping[str, Any]) -> Struct:
    """``obj`` (plain JSON forms) as a Struct of ``schema`` (validated)."""
    s = Struct(schema)
    for f in schema.fields:
        s.put(f.name, _field_value(f.schema, obj.get(f.name)))
    s.validate()
    return s


def order(i: int, schema: Schema = ORDER) -> Struct:
    obj = order_json(i)
    if schema is ORDER_V2:
        obj["coupon"] = f"c{i}"
    if schema is ORDER_V3:
        obj["must"] = i
    return struct_of(schema, obj)


class ToStruct(Transformation[SinkRecord]):
    """A JSON object value into a Struct of ``SCHEMAS[schema]`` (value_schema set); other values pass."""

    def configure(self, configs: Mapping[str, Any]) -> None:
        name = str(configs["schema"])
        self.schema = None if name == "auto" else SCHEMAS[name]

    def apply(self, record: SinkRecord) -> SinkRecord:
        if not isinstance(record.value, dict):
            return record
        schema = self.schema or (ORDER_V2 if "coupon" in record.value else ORDER)
        return record.new_record(value=struct_of(schema, record.value), value_schema=schema)


def typed_records(topic: str, n: int, schema: Schema = ORDER, partition: int = 0, start: int = 0) -> list[SinkRecord]:
    return [SinkRecord(topic=topic, partition=partition, offset=start + i, value=order(start + i, schema),
                       value_schema=schema, key={"id": start + i}, timestamp=1_700_000_000_000 + i)
            for i in range(n)]
