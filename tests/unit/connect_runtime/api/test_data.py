"""Kafka Connect's data model (connect_runtime.api.data): the builder, validation naming the field, the logical
types' round trips (negative and large decimals, dates before the epoch), equality, hashing and pickling."""

from __future__ import annotations

import datetime as dt
import decimal
import pickle
from typing import Any

import pytest

from connect_runtime.api.data import (
    LOGICAL_TYPES,
    Date,
    Decimal,
    Field,
    Schema,
    SchemaAndValue,
    SchemaBuilder,
    SchemaType,
    Struct,
    Time,
    Timestamp,
    to_plain,
    validate_value,
)
from connect_runtime.api.errors import DataError

D = decimal.Decimal
UTC = dt.UTC


def order_schema() -> Schema:
    return (SchemaBuilder.struct().name("shop.Order").version(1).doc("d").parameter("p", "1")
            .field("id", Schema.INT64_SCHEMA)
            .field("amount", Decimal.schema(2))
            .field("note", Schema.OPTIONAL_STRING_SCHEMA)
            .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).build())
            .field("attrs", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.OPTIONAL_INT32_SCHEMA).build())
            .field("qty", SchemaBuilder.int16().default_value(1).build())
            .build())


def test_the_builder_sets_everything_once_and_builds_an_immutable_schema() -> None:
    s = order_schema()
    assert (s.type, s.name, s.version, s.doc, s.parameters, s.optional) == (
        SchemaType.STRUCT, "shop.Order", 1, "d", {"p": "1"}, False)
    assert [f.name for f in s.fields] == ["id", "amount", "note", "tags", "attrs", "qty"]
    assert s.field("amount") == Field("amount", 1, Decimal.schema(2))
    assert s.field("nope") is None
    with pytest.raises(AttributeError, match="immutable"):
        s.name = "x"  # type: ignore[misc]
    with pytest.raises(DataError, match="name is already set to 'a'; cannot set it to 'b'"):
        SchemaBuilder.int8().name("a").name("b")
    with pytest.raises(DataError, match="optionality is already set"):
        SchemaBuilder.int8().optional().required()
    with pytest.raises(DataError, match="cannot add field 'x': the schema is INT8, not STRUCT"):
        SchemaBuilder.int8().field("x", Schema.INT8_SCHEMA)
    with pytest.raises(DataError, match="cannot add field 'id': the struct has a field of that name already"):
        SchemaBuilder.struct().field("id", Schema.INT8_SCHEMA).field("id", Schema.INT8_SCHEMA)
    with pytest.raises(DataError, match="non-empty name"):
        SchemaBuilder.struct().field("", Schema.INT8_SCHEMA)
    with pytest.raises(DataError, match="cannot look up field 'x': the schema is INT8"):
        Schema.INT8_SCHEMA.field("x")
    with pytest.raises(DataError, match="the default value is 300, out of the range of INT8"):
        SchemaBuilder.int8().default_value(300).build()
    with pytest.raises(DataError, match="ARRAY schema needs"):
        Schema(SchemaType.ARRAY)
    # a struct default is a Struct of the schema without its default (it cannot hold itself)
    inner = SchemaBuilder.struct().field("x", Schema.INT8_SCHEMA).build()
    with_default = SchemaBuilder.type_of(inner).default_value(Struct(inner, {"x": 1})).build()
    assert with_default.default == Struct(inner, {"x": 1})
    other = SchemaBuilder.struct().field("y", Schema.INT8_SCHEMA).build()
    with pytest.raises(DataError, match="the default value is a Struct of another schema"):
        SchemaBuilder.type_of(inner).default_value(Struct(other, {"y": 1})).build()


def test_type_of_copies_a_schema_and_remove_field_renumbers() -> None:
    s = order_schema()
    assert SchemaBuilder.type_of(s).build() == s
    smaller = SchemaBuilder.type_of(s).remove_field("amount").build()
    assert [(f.name, f.index) for f in smaller.fields] == [("id", 0), ("note", 1), ("tags", 2), ("attrs", 3),
                                                           ("qty", 4)]
    assert smaller.name == "shop.Order" and smaller != s


def test_schemas_are_equal_by_value_hash_alike_and_pickle() -> None:
    a, b = order_schema(), order_schema()
    assert a == b and hash(a) == hash(b) and a is not b
    assert {a: 1}[b] == 1
    assert pickle.loads(pickle.dumps(a)) == a
    assert a != SchemaBuilder.type_of(a).parameter("p", "2").build()
    assert Schema.INT32_SCHEMA != Schema.OPTIONAL_INT32_SCHEMA
    assert Decimal.schema(2) != Decimal.schema(3)
    with_default = SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT8_SCHEMA).default_value({"a": 1}).build()
    assert hash(with_default) == hash(SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT8_SCHEMA)
                                      .default_value({"a": 1}).build())


@pytest.mark.parametrize(("schema", "value", "message"), [
    (Schema.INT8_SCHEMA, 128, r"the value is 128, out of the range of INT8 \(-128 to 127\)"),
    (Schema.INT64_SCHEMA, True, r"the value is a bool; expected INT64"),
    (Schema.STRING_SCHEMA, None, r"the value is null but its schema is not optional \(expected STRING\)"),
    (Schema.FLOAT32_SCHEMA, "1", r"the value is a str; expected FLOAT32"),
    (SchemaBuilder.array(Schema.INT8_SCHEMA).build(), [1, "x"], r"the value\[1\] is a str; expected INT8"),
    (SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT8_SCHEMA).build(), {1: 1},
     r"a key of the value is a int; expected STRING"),
    (Decimal.schema(2), D("1.5"), r"the decimal 1.5 has scale 1; the Decimal schema's scale is 2"),
    (Decimal.schema(2), 1.5, r"is a float; expected Decimal \(Decimal\)"),
    (Date.schema(), dt.datetime(2024, 1, 1), r"is a datetime; expected date \(Date\)"),
    (Timestamp.schema(), dt.date(2024, 1, 1), r"is a date; expected datetime \(Timestamp\)"),
])
def test_validation_names_where_and_what_was_expected(schema: Schema, value: Any, message: str) -> None:
    with pytest.raises(DataError, match=message):
        validate_value(schema, value)


def test_struct_put_get_validate_and_mapping() -> None:
    s = order_schema()
    st = Struct(s).put("id", 1).put("amount", D("2.50"))
    assert st.get("qty") == 1 and st.get_without_default("qty") is None  # the schema's default
    assert st.get("nope", "x") == "x"
    with pytest.raises(DataError, match=r"field 'amount' is a float"):
        st.put("amount", 2.5)
    with pytest.raises(DataError, match=r"'nope' is not a field of the struct shop.Order \(its fields: id, amount"):
        st.put("nope", 1)
    with pytest.raises(DataError, match=r"field 'tags' is null but its schema is not optional"):
        st.validate()
    st.put("tags", ["a"]).put("attrs", {"k": None})
    st.validate()
    assert list(st) == ["id", "amount", "note", "tags", "attrs", "qty"] and len(st) == 6
    assert dict(st)["qty"] == 1
    with pytest.raises(KeyError):
        st["nope"]
    inner = SchemaBuilder.struct().field("x", Schema.INT8_SCHEMA).build()
    outer = SchemaBuilder.struct().field("in", inner).build()
    with pytest.raises(DataError, match="a Struct of another schema"):
        Struct(outer).put("in", Struct(SchemaBuilder.struct().field("y", Schema.INT8_SCHEMA).build(), {"y": 1}))
    with pytest.raises(DataError, match="needs a STRUCT schema"):
        Struct(Schema.INT8_SCHEMA)


def test_structs_are_equal_by_value_unhashable_and_pickle() -> None:
    s = order_schema()
    a = Struct(s, {"id": 1, "amount": D("1.00"), "tags": [], "attrs": {}})
    b = Struct(order_schema(), {"id": 1, "amount": D("1.00"), "tags": [], "attrs": {}})
    assert a == b and a != Struct(s, {"id": 2})
    with pytest.raises(TypeError):
        hash(a)
    again = pickle.loads(pickle.dumps(a))
    assert again == a and again.schema == s
    assert to_plain(Struct(SchemaBuilder.struct().field("in", s).build(), {"in": a})) == {
        "in": {"id": 1, "amount": D("1.00"), "note": None, "tags": [], "attrs": {}, "qty": 1}}
    assert SchemaAndValue(s, a) == (s, a)


@pytest.mark.parametrize(("value", "scale", "raw"), [
    (D("0.00"), 2, b"\x00"),
    (D("1.27"), 2, b"\x7f"),
    (D("1.28"), 2, b"\x00\x80"),
    (D("-1.28"), 2, b"\x80"),
    (D("-1.29"), 2, b"\xff\x7f"),
    (D("-0.01"), 2, b"\xff"),
    (D(2**70), 0, b"\x40" + b"\x00" * 8),
    (D(-(2**70)), 0, b"\xc0" + b"\x00" * 8),
    (D("-12345678901234567890.123456789"), 9, (-12345678901234567890123456789).to_bytes(12, "big", signed=True)),
])
def test_decimal_bytes_are_big_integer_to_byte_array(value: D, scale: int, raw: bytes) -> None:
    schema = Decimal.schema(scale)
    assert Decimal.from_logical(schema, value) == raw
    back = Decimal.to_logical(schema, raw)
    assert back == value and back.as_tuple().exponent == -scale
    assert schema.parameters == {"scale": str(scale)} and schema.name == Decimal.LOGICAL_NAME


def test_decimal_errors() -> None:
    with pytest.raises(DataError, match="not a finite number"):
        Decimal.from_logical(Decimal.schema(0), D("NaN"))
    with pytest.raises(DataError, match="parameter 'scale' is missing"):
        Decimal.scale(SchemaBuilder.bytes().name(Decimal.LOGICAL_NAME).build())


@pytest.mark.parametrize(("cls", "value", "wire"), [
    (Date, dt.date(1970, 1, 1), 0),
    (Date, dt.date(1969, 12, 31), -1),
    (Date, dt.date(2024, 2, 29), 19782),
    (Time, dt.time(0), 0),
    (Time, dt.time(23, 59, 59, 999000), 86_399_999),
    (Timestamp, dt.datetime(1970, 1, 1, tzinfo=UTC), 0),
    (Timestamp, dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC), -1),
    (Timestamp, dt.datetime(2262, 4, 11, tzinfo=UTC), 9_223_286_400_000),
])
def test_time_logical_types_round_trip(cls: Any, value: Any, wire: int) -> None:
    schema = cls.schema()
    assert cls.from_logical(schema, value) == wire
    assert cls.to_logical(schema, wire) == value
    assert LOGICAL_TYPES[cls.LOGICAL_NAME] is cls
    assert schema.version == 1


def test_time_edges() -> None:
    naive = dt.datetime(2024, 1, 1, 12)
    assert Timestamp.from_logical(Timestamp.schema(), naive) == \
        Timestamp.from_logical(Timestamp.schema(), naive.replace(tzinfo=UTC))
    other_zone = dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert Timestamp.to_logical(Timestamp.schema(), Timestamp.from_logical(Timestamp.schema(), other_zone)) == \
        dt.datetime(2024, 1, 1, 10, tzinfo=UTC)
    with pytest.raises(DataError, match="milliseconds within a day"):
        Time.to_logical(Time.schema(), 86_400_000)
    with pytest.raises(DataError, match="holds a date, not a datetime"):
        Date.from_logical(Date.schema(), dt.datetime(2024, 1, 1))


def test_struct_from_values_keeps_them_unchecked_and_validate_still_checks() -> None:
    schema = SchemaBuilder.struct().field("a", Schema.INT32_SCHEMA).field("b", Schema.OPTIONAL_STRING_SCHEMA).build()
    s = Struct.from_values(schema, [1, None])
    assert s == Struct(schema).put("a", 1) and s["a"] == 1 and s.get("b") is None
    bad = Struct.from_values(schema, ["x", None])  # not checked here: the caller vouches for the types
    with pytest.raises(DataError, match="'a'"):
        bad.validate()
    with pytest.raises(DataError, match="2 fields"):
        Struct.from_values(schema, [1])
    with pytest.raises(DataError, match="STRUCT"):
        Struct.from_values(Schema.INT32_SCHEMA, [1])
