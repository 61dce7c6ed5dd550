"""The field transforms on records with schemas (Struct keys and values), as Kafka Connect's do: the new schema is
built once per input schema, the record's key_schema / value_schema is replaced, the values fill a Struct of it;
and Kafka Connect's Cast, schemaless and with a schema."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest

from connect_runtime.api.data import Date, Decimal, Schema, SchemaBuilder, SchemaType, Struct, Timestamp
from connect_runtime.api.errors import ConfigError, DataError
from connect_runtime.api.records import SinkRecord, SourceRecord
from connect_runtime.api.transforms import Transformation
from connect_runtime.runtime.pipeline import SinkPipeline, SourcePipeline
from connect_runtime.runtime.plugins import load_class
from connect_runtime.transforms import (
    ALIASES,
    CastKey,
    CastValue,
    ExtractFieldValue,
    HoistFieldKey,
    HoistFieldValue,
    InsertFieldValue,
    MaskFieldValue,
    ReplaceFieldKey,
    ReplaceFieldValue,
    ValueToKey,
)

D = decimal.Decimal
TS = 1_700_000_000_123
ORDER = (SchemaBuilder.struct().name("shop.Order").version(3).doc("an order").optional()
         .field("id", Schema.INT64_SCHEMA)
         .field("amount", Decimal.schema(2))
         .field("note", SchemaBuilder.string().optional().default_value("none").build())
         .field("day", Date.schema())
         .field("qty", Schema.INT32_SCHEMA)
         .build())


def order() -> Struct:
    return Struct(ORDER, {"id": 7, "amount": D("9.99"), "day": dt.date(2024, 1, 2), "qty": 3})


def rec(value: Any = None, schema: Schema | None = ORDER, **kw: Any) -> SinkRecord:
    return SinkRecord(topic="orders", partition=2, offset=40, value=order() if value is None else value,
                      timestamp=TS, value_schema=schema, **kw)


def make(cls: type[Transformation[Any]], **cfg: Any) -> Transformation[Any]:
    t = cls()
    t.configure(cfg)
    return t


def test_replace_field_builds_the_new_schema_once_and_keeps_the_schema_basics() -> None:
    t = make(ReplaceFieldValue, exclude="qty", renames="id:order_id,note:remark")
    out = t.apply(rec())
    assert out is not None
    schema = out.value_schema
    assert [(f.name, f.schema) for f in schema.fields] == [
        ("order_id", Schema.INT64_SCHEMA), ("amount", Decimal.schema(2)), ("remark", ORDER.field("note").schema),
        ("day", Date.schema())]
    assert (schema.name, schema.version, schema.doc, schema.optional) == ("shop.Order", 3, "an order", True)
    assert out.value.schema is schema
    assert dict(out.value) == {"order_id": 7, "amount": D("9.99"), "remark": "none", "day": dt.date(2024, 1, 2)}
    again = t.apply(rec())
    assert again is not None and again.value_schema is schema  # cached per input schema
    assert len(t.schemas) == 1  # type: ignore[attr-defined]
    assert rec().value == order()  # the input is untouched
    only = make(ReplaceFieldValue, include="id").apply(rec())
    assert only is not None and [f.name for f in only.value_schema.fields] == ["id"]


def test_replace_field_on_a_struct_key() -> None:
    key_schema = SchemaBuilder.struct().field("a", Schema.INT8_SCHEMA).field("b", Schema.INT8_SCHEMA).build()
    r = rec(key=Struct(key_schema, {"a": 1, "b": 2}), key_schema=key_schema)
    out = make(ReplaceFieldKey, exclude="a").apply(r)
    assert out is not None and dict(out.key) == {"b": 2}
    assert [f.name for f in out.key_schema.fields] == ["b"]
    assert out.value_schema == ORDER  # the value's schema is not touched


def test_insert_field_adds_typed_fields_optional_unless_marked_required() -> None:
    t = make(InsertFieldValue, **{"topic.field": "t!", "partition.field": "p", "offset.field": "o",
                                 "timestamp.field": "ts?", "static.field": "s", "static.value": "v"})
    out = t.apply(rec())
    assert out is not None
    added = {f.name: f.schema for f in out.value_schema.fields[len(ORDER.fields):]}
    assert added == {"t": Schema.STRING_SCHEMA, "p": Schema.OPTIONAL_INT32_SCHEMA,
                     "o": Schema.OPTIONAL_INT64_SCHEMA, "ts": Timestamp.builder().optional().build(),
                     "s": Schema.OPTIONAL_STRING_SCHEMA}
    assert (out.value["t"], out.value["p"], out.value["o"], out.value["s"]) == ("orders", 2, 40, "v")
    assert out.value["ts"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC)
    assert out.value["id"] == 7 and out.value.schema is out.value_schema
    src = SourceRecord(source_partition={}, source_offset={}, topic="x", value=order(), value_schema=ORDER)
    with pytest.raises(DataError, match=r"offset\.field needs a sink record"):
        t.apply(src)


def test_value_to_key_makes_a_struct_key_of_the_listed_fields() -> None:
    t = make(ValueToKey, fields="id,day")
    out = t.apply(rec())
    assert out is not None
    assert [(f.name, f.schema) for f in out.key_schema.fields] == [("id", Schema.INT64_SCHEMA),
                                                                   ("day", Date.schema())]
    assert dict(out.key) == {"id": 7, "day": dt.date(2024, 1, 2)}
    with pytest.raises(DataError, match=r"no field 'nope' \(its fields: id, amount, note, day, qty\)"):
        make(ValueToKey, fields="nope").apply(rec())


def test_extract_field_gives_the_field_and_its_schema() -> None:
    out = make(ExtractFieldValue, field="amount").apply(rec())
    assert out is not None and (out.value, out.value_schema) == (D("9.99"), Decimal.schema(2))
    note = make(ExtractFieldValue, field="note").apply(rec())
    assert note is not None and note.value == "none"  # the field's default, as Struct.get
    with pytest.raises(DataError, match="no field 'x'"):
        make(ExtractFieldValue, field="x").apply(rec())


def test_hoist_field_wraps_any_value_with_a_schema() -> None:
    out = make(HoistFieldValue, field="wrapped").apply(rec())
    assert out is not None
    assert out.value_schema == SchemaBuilder.struct().field("wrapped", ORDER).build()
    assert out.value["wrapped"] == order()
    key = make(HoistFieldKey, field="k").apply(rec(key=5, key_schema=Schema.INT32_SCHEMA))
    assert key is not None and dict(key.key) == {"k": 5}
    assert key.key_schema == SchemaBuilder.struct().field("k", Schema.INT32_SCHEMA).build()
    plain = make(HoistFieldValue, field="w").apply(rec({"a": 1}, schema=None))
    assert plain is not None and plain.value == {"w": {"a": 1}} and plain.value_schema is None


def test_mask_field_keeps_the_schema_and_masks_by_type() -> None:
    out = make(MaskFieldValue, fields="id,amount,day,note").apply(rec())
    assert out is not None and out.value_schema is ORDER
    assert dict(out.value) == {"id": 0, "amount": D("0.00"), "note": "", "day": dt.date(1970, 1, 1), "qty": 3}
    rep = make(MaskFieldValue, fields="amount,qty", replacement="12").apply(rec())
    assert rep is not None and (rep.value["amount"], rep.value["qty"]) == (D("12.00"), 12)


def test_a_dict_with_a_schema_free_record_still_works_and_a_wrong_type_is_named() -> None:
    out = make(ReplaceFieldValue, exclude="b").apply(rec({"a": 1, "b": 2}, schema=None))
    assert out is not None and out.value == {"a": 1} and out.value_schema is None
    with pytest.raises(DataError, match=r"ReplaceField\$Value needs a dict value .*got a int"):
        make(ReplaceFieldValue, exclude="b").apply(rec(5, schema=Schema.INT32_SCHEMA))


# ------------------------------------------------------------------------------------------------ Cast

def test_cast_aliases_are_kafka_connects() -> None:
    assert load_class(ALIASES["org.apache.kafka.connect.transforms.Cast$Value"], "type") is CastValue
    assert load_class(ALIASES["Cast$Key"], "type") is CastKey


@pytest.mark.parametrize(("spec", "why"), [
    ("", "field:type pairs"), ("id:int99", "int99"), ("id:int8,int8", "either one type"), (":int8", "field name"),
    ("a:int8,a:int16", "twice"),
])
def test_cast_spec_errors_name_the_field(spec: str, why: str) -> None:
    with pytest.raises(ConfigError) as info:
        make(CastValue, spec=spec)
    assert "spec" in info.value.errors and why in info.value.errors["spec"]


def test_cast_schemaless_fields_and_whole_values() -> None:
    t = make(CastValue, spec="a:int8,b:string,c:boolean,d:float64,e:int64")
    out = t.apply(rec({"a": "12", "b": 1.5, "c": "TRUE", "d": True, "e": 9.99, "f": "kept"}, schema=None))
    assert out is not None
    assert out.value == {"a": 12, "b": "1.5", "c": True, "d": 1.0, "e": 9, "f": "kept"}
    whole = make(CastKey, spec="string").apply(rec(key=42, schema=None))
    assert whole is not None and whole.key == "42"
    with pytest.raises(DataError, match=r"cannot cast field 'a' \(300\) to int8: out of its range .*offset 40"):
        t.apply(rec({"a": 300}, schema=None))
    with pytest.raises(DataError, match=r"cannot cast field 'a' \('x'\) to int8"):
        t.apply(rec({"a": "x"}, schema=None))
    assert make(CastValue, spec="a:int8").apply(rec({"a": None}, schema=None)).value == {"a": None}  # type: ignore[union-attr]


def test_cast_with_a_schema_changes_the_field_types_keeping_optional_and_defaults() -> None:
    schema = (SchemaBuilder.struct().name("S")
              .field("n", SchemaBuilder.string().optional().default_value("5").build())
              .field("amount", Decimal.schema(2)).field("keep", Schema.BOOLEAN_SCHEMA).build())
    t = make(CastValue, spec="n:int32,amount:float64")
    out = t.apply(rec(Struct(schema, {"amount": D("9.99"), "keep": True}), schema=schema))
    assert out is not None
    new = out.value_schema
    assert new.name == "S"
    assert new.field("n").schema == SchemaBuilder.int32().optional().default_value(5).build()
    assert new.field("amount").schema == Schema.FLOAT64_SCHEMA
    assert new.field("keep").schema == Schema.BOOLEAN_SCHEMA
    assert dict(out.value) == {"n": 5, "amount": 9.99, "keep": True}
    assert t.apply(rec(Struct(schema, {"amount": D("1.00"), "keep": False}), schema=schema)).value_schema is new  # type: ignore[union-attr]
    whole = make(CastValue, spec="int64").apply(rec(D("12.50"), schema=Decimal.schema(2)))
    assert whole is not None and (whole.value, whole.value_schema) == (12, Schema.INT64_SCHEMA)
    with pytest.raises(DataError, match="casts primitive types only; field 'm' is MAP"):
        s2 = SchemaBuilder.struct().field("m", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT8_SCHEMA).build()
                                          ).build()
        make(CastValue, spec="m:string").apply(rec(Struct(s2, {"m": {}}), schema=s2))


def test_transforms_with_schemas_through_the_pipeline_end_to_end() -> None:
    config = {"value.converter.schemas.enable": "true", "transforms": "drop,cast,ins",
              "transforms.drop.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
              "transforms.drop.exclude": "note",
              "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
              "transforms.cast.spec": "qty:int64",
              "transforms.ins.type": "org.apache.kafka.connect.transforms.InsertField$Value",
              "transforms.ins.topic.field": "topic"}
    from connect_runtime.backends.base import ConsumedRecord

    polled = SourceRecord(source_partition={}, source_offset={"o": 1}, topic="orders", value=order(),
                          value_schema=ORDER)
    batch = SourcePipeline.from_config(config).process([polled])
    (p,) = batch.out
    (r,) = SinkPipeline.from_config({"value.converter.schemas.enable": "true"}).process(
        [ConsumedRecord("orders", 0, 0, None, p.value, None, None)]).records
    assert [(f.name, f.schema.type) for f in r.value_schema.fields] == [
        ("id", SchemaType.INT64), ("amount", SchemaType.BYTES), ("day", SchemaType.INT32),
        ("qty", SchemaType.INT64), ("topic", SchemaType.STRING)]
    assert dict(r.value) == {"id": 7, "amount": D("9.99"), "day": dt.date(2024, 1, 2), "qty": 3, "topic": "orders"}
