"""JsonSchemaConverter (connect_runtime.converters.jsonschema): Confluent's JsonSchemaData mapping over
confluent-kafka's JSONSerializer / JSONDeserializer, on confluent-kafka's mock registry (mock://)."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from connect_runtime.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp
from connect_runtime.api.errors import ConfigError, DataError
from connect_runtime.converters import ALIASES
from connect_runtime.converters._registry import drop_mock_scope
from connect_runtime.converters.jsonschema import JsonSchemaConverter
from connect_runtime.runtime.plugins import load_class
from tests.support.connect_samples import ITEM, ORDER, mock_scope, order


@pytest.fixture
def scope() -> Iterator[str]:
    name = mock_scope("jsonschema")
    yield name
    drop_mock_scope(name)


def converter(scope: str, is_key: bool = False, **props: Any) -> JsonSchemaConverter:
    c = JsonSchemaConverter()
    c.configure({"schema.registry.url": f"mock://{scope}", **props}, is_key)
    return c


def registry(scope: str) -> Any:
    return converter(scope).client


def ctx(topic: str, is_key: bool = False) -> SerializationContext:
    return SerializationContext(topic, MessageField.KEY if is_key else MessageField.VALUE)


def test_a_struct_of_every_type_and_logical_type_round_trips(scope: str) -> None:
    writer, reader = converter(scope), converter(scope)
    data = writer.from_connect_data("orders", ORDER, order())
    assert data is not None and data[0] == 0  # the wire format: magic byte, then the schema id
    back = reader.to_connect_data("orders", data)
    assert back.schema == ORDER
    assert back.value == order()


PRIMITIVES = [
    (Schema.INT8_SCHEMA, -7), (Schema.INT16_SCHEMA, 300), (Schema.INT32_SCHEMA, 1 << 30),
    (Schema.INT64_SCHEMA, -(1 << 62)), (Schema.FLOAT32_SCHEMA, 0.5), (Schema.FLOAT64_SCHEMA, 1e300),
    (Schema.BOOLEAN_SCHEMA, False), (Schema.STRING_SCHEMA, "tab\t\"quote\""), (Schema.BYTES_SCHEMA, b""),
    (Schema.OPTIONAL_INT32_SCHEMA, 5), (Decimal.schema(0), decimal.Decimal("-1")), (Date.schema(), dt.date(2038, 1, 20)),
    (Time.schema(), dt.time(0, 0)), (Timestamp.schema(), dt.datetime(1900, 1, 1, tzinfo=dt.UTC)),
    (SchemaBuilder.array(Schema.OPTIONAL_FLOAT64_SCHEMA).build(), [1.0, None]),
    (SchemaBuilder.map(Schema.STRING_SCHEMA, Decimal.schema(3)).build(), {"pi": decimal.Decimal("3.142")}),
]


@pytest.mark.parametrize(("schema", "value"), PRIMITIVES, ids=lambda p: repr(p)[:40])
def test_every_root_type_round_trips_with_the_registry_version(scope: str, schema: Schema, value: Any) -> None:
    c = converter(scope)
    back = c.to_connect_data("t", c.from_connect_data("t", schema, value))
    # Confluent's converter gives the root the registry's version when the schema carries none
    assert back.schema == SchemaBuilder.type_of(schema).version(1).build()
    assert back.value == value


def test_the_registered_schema_is_confluents_json_schema(scope: str) -> None:
    schema = (SchemaBuilder.struct().name("shop.Line").field("qty", Schema.INT16_SCHEMA)
              .field("note", Schema.OPTIONAL_STRING_SCHEMA).field("price", Decimal.schema(2)).build())
    c = converter(scope)
    c.from_connect_data("lines", schema, Struct(schema).put("qty", 1).put("price", decimal.Decimal("1.00")))
    registered = c.client.get_latest_version("lines-value")
    assert registered.schema.schema_type == "JSON"
    assert json.loads(registered.schema.schema_str) == {
        "type": "object", "title": "shop.Line",
        "properties": {
            "qty": {"type": "integer", "connect.type": "int16", "connect.index": 0},
            "note": {"oneOf": [{"type": "null"}, {"type": "string"}], "connect.index": 1},
            "price": {"type": "string", "connect.type": "bytes", "title": "org.apache.kafka.connect.data.Decimal",
                      "connect.version": 1, "connect.parameters": {"scale": "2"}, "connect.index": 2},
        },
    }


def test_numeric_decimals_are_json_numbers_read_back_exactly(scope: str) -> None:
    schema = SchemaBuilder.struct().name("P").field("price", Decimal.schema(9)).build()
    value = Struct(schema).put("price", decimal.Decimal("12345678901234567890.123456789"))
    c = converter(scope, **{"decimal.format": "NUMERIC"})
    data = c.from_connect_data("p", schema, value)
    assert data is not None and data.endswith(b'{"price":12345678901234567890.123456789}')
    integral = data.replace(b"12345678901234567890.123456789", b"12345678901234567890.000000000")
    assert converter(scope).to_connect_data("p", integral).value["price"] == decimal.Decimal("12345678901234567890.000000000")
    assert converter(scope).to_connect_data("p", data).value["price"] == value["price"]


def test_bytes_from_confluent_kafkas_serializer_are_read(scope: str) -> None:
    document = {
        "title": "Person", "type": "object", "required": ["name"],
        "properties": {
            "name": {"type": "string"}, "age": {"type": "integer"}, "score": {"type": "number"},
            "nick": {"type": ["string", "null"]}, "role": {"enum": ["admin", "user"]},
            "address": {"$ref": "#/definitions/Address"},
            "phones": {"type": "array", "items": {"type": "string"}},
            "attrs": {"type": "object", "additionalProperties": {"type": "integer"}, "connect.type": "map"},
        },
        "definitions": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}}},
    }
    theirs = JSONSerializer(json.dumps(document), registry(scope))
    data = theirs({"name": "Ada", "age": 36, "score": 9.5, "nick": None, "role": "admin", "address": {"city": "London"},
                   "phones": ["1"], "attrs": {"x": 1}}, ctx("people"))
    back = converter(scope).to_connect_data("people", data)
    schema = back.schema
    assert schema is not None and schema.name == "Person" and schema.version == 1
    assert [f.name for f in schema.fields] == ["name", "age", "score", "nick", "role", "address", "phones", "attrs"]
    assert schema.field("age").schema.type is Schema.INT64_SCHEMA.type  # type: ignore[union-attr]
    assert schema.field("score").schema == Schema.FLOAT64_SCHEMA  # type: ignore[union-attr]
    assert schema.field("nick").schema == Schema.OPTIONAL_STRING_SCHEMA  # type: ignore[union-attr]
    assert schema.field("role").schema.parameters == {  # type: ignore[union-attr]
        "io.confluent.connect.json.Enum": "", "io.confluent.connect.json.Enum.admin": "admin",
        "io.confluent.connect.json.Enum.user": "user"}
    assert back.value["address"]["city"] == "London"
    assert (back.value["name"], back.value["age"], back.value["nick"], back.value["attrs"]) == ("Ada", 36, None,
                                                                                                  {"x": 1})


def test_confluent_kafkas_deserializer_reads_ours(scope: str) -> None:
    data = converter(scope).from_connect_data("orders", ORDER, order())
    plain = JSONDeserializer(None, schema_registry_client=registry(scope))(data, ctx("orders"))
    # a Decimal is the base64 text of its unscaled value, big-endian two's complement (BigInteger.toByteArray)
    assert base64.b64decode(plain["amount"]) == (-1234567890123456789099).to_bytes(9, "big", signed=True)
    assert plain["day"] == -1 and plain["at"] == 86399999 and plain["ts"] == -1
    assert plain["by_id"] == [{"key": 7, "value": {"sku": "s", "qty": 3}}, {"key": -2, "value": {"sku": "t", "qty": 1}}]
    assert plain["note"] is None and plain["blob"] == "AP8Q" and plain["counts"] == {"a": 1, "b": -1}


def test_a_oneof_union_round_trips_as_confluents_oneof_struct(scope: str) -> None:
    document = {"title": "U", "type": "object", "properties": {
        "v": {"oneOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}}}
    data = JSONSerializer(json.dumps(document), registry(scope))({"v": "text"}, ctx("u"))
    back = converter(scope).to_connect_data("u", data)
    union = back.schema.field("v").schema  # type: ignore[union-attr]
    assert union.name == "io.confluent.connect.json.OneOf" and union.optional
    assert back.value["v"]["io.confluent.connect.json.OneOf.field.1"] == "text"
    again = converter(scope).from_connect_data("u2", back.schema, back.value)
    assert converter(scope).to_connect_data("u2", again).value == back.value


def test_record_name_strategy_registers_under_the_title(scope: str) -> None:
    c = converter(scope, **{"value.subject.name.strategy": "RecordNameStrategy"})
    c.from_connect_data("orders", ORDER, order())
    assert c.client.get_subjects() == ["shop.Order"]


def test_a_tombstone_is_none_both_ways(scope: str) -> None:
    c = converter(scope)
    assert c.from_connect_data("t", ORDER, None) is None
    assert c.to_connect_data("t", None) == (None, None)


def test_a_value_of_the_wrong_type_names_topic_value_field_and_expected(scope: str) -> None:
    bad = order().put("items", [Struct(ITEM).put("sku", "x").put("qty", 1)])
    bad._values[ORDER.field("i8").index] = "seven"  # type: ignore[union-attr]  # bypass put()'s own check
    with pytest.raises(DataError) as err:
        converter(scope).from_connect_data("orders", ORDER, bad)
    message = str(err.value)
    assert "JsonSchemaConverter" in message and "'orders'" in message and "value" in message
    assert "field 'i8'" in message and "INT8" in message


def test_a_key_error_says_key_and_a_schemaless_value_is_refused(scope: str) -> None:
    with pytest.raises(DataError, match=r"cannot write the key .* topic 'k'.* no schema"):
        converter(scope, is_key=True).from_connect_data("k", None, {"a": 1})


def test_bytes_not_in_the_wire_format_are_a_data_error(scope: str) -> None:
    c = converter(scope)
    with pytest.raises(DataError, match=r"read the value of a record from topic 'raw'.*wire format"):
        c.to_connect_data("raw", b'{"plain": "json"}')
    with pytest.raises(DataError, match=r"topic 'raw'.*Schema Not Found"):
        c.to_connect_data("raw", b"\x00\x00\x00\x00\x63{}")


def test_json_that_breaks_its_schema_names_the_field(scope: str) -> None:
    c = converter(scope)
    good = c.from_connect_data("orders", ORDER, order())
    assert good is not None
    body = json.loads(good[5:])
    for field, value, expected in (("i8", 500, "out of the range of INT8"), ("amount", "%%%", "base64"),
                                   ("id", None, "expected INT64"), ("i32", 1.5, "is not of type 'integer'"),
                                   ("tags", ["a", 7], "7 is not of type 'string'")):
        broken = dict(body, **{field: value}) if value is not None else {k: v for k, v in body.items() if k != field}
        with pytest.raises(DataError) as err:
            c.to_connect_data("orders", good[:5] + json.dumps(broken).encode())
        assert f"field '{field}" in str(err.value) and expected in str(err.value)


def test_decimal_format_is_validated_and_aliases_resolve(scope: str) -> None:
    with pytest.raises(ConfigError) as err:
        converter(scope, **{"decimal.format": "TEXT"})
    assert "decimal.format" in err.value.errors
    assert ALIASES["io.confluent.connect.json.JsonSchemaConverter"] == \
        "connect_runtime.converters.jsonschema.JsonSchemaConverter"
    assert load_class("io.confluent.connect.json.JsonSchemaConverter", "value.converter") is JsonSchemaConverter


def test_an_enum_value_outside_its_symbols_names_the_field(scope: str) -> None:
    role = (SchemaBuilder.string().parameter("io.confluent.connect.json.Enum", "")
            .parameter("io.confluent.connect.json.Enum.admin", "admin").build())
    schema = SchemaBuilder.struct().name("U").field("role", role).build()
    c = converter(scope)
    assert c.to_connect_data("u", c.from_connect_data("u", schema, Struct(schema).put("role", "admin"))).value[
        "role"] == "admin"
    with pytest.raises(DataError, match=r"field 'role' is 'root', not one of the enum's symbols \(admin\)"):
        c.from_connect_data("u", schema, Struct(schema).put("role", "root"))


@pytest.mark.parametrize(("document", "expected"), [
    ({"title": "A", "allOf": [{"type": "string"}]}, "allOf"),
    ({"title": "N", "type": "object", "properties": {"next": {"$ref": "#"}}}, "recursive"),
    ({"title": "R", "type": "object", "properties": {"x": {"$ref": "other.json"}}}, "only references inside"),
    ({"title": "V", "type": "object", "properties": {"x": {}}}, "without a type"),
])
def test_json_schemas_with_no_connect_schema_are_named(scope: str, document: dict[str, Any], expected: str) -> None:
    from confluent_kafka.schema_registry import Schema as RegistrySchema
    client = registry(scope)
    schema_id = client.register_schema("odd-value", RegistrySchema(json.dumps(document), "JSON"))
    with pytest.raises(DataError, match=rf"topic 'odd'.*{expected}"):
        converter(scope).to_connect_data("odd", b"\x00" + schema_id.to_bytes(4, "big") + b"{}")


def test_a_registry_that_cannot_be_reached_is_retriable_and_hides_the_password(scope: str) -> None:
    from confluent_kafka.schema_registry.common._httpx_compat import httpx  # the client's own httpx

    from connect_runtime.api.errors import RetriableError

    class Unreachable:
        def get_schema(self, *args: Any) -> Any:
            raise httpx.ConnectError("refused by https://ops:hunter2@sr.internal")

    c = converter(scope)
    # the settings as a URL with a password gives them; the client refusing as a transport would
    from connect_runtime.converters._registry import REGISTRY_CONFIG, registry_settings
    c.settings = registry_settings(REGISTRY_CONFIG.parse({"schema.registry.url": "https://ops:hunter2@sr.internal"}))
    c.client = Unreachable()
    with pytest.raises(RetriableError) as err:
        c.to_connect_data("t", b"\x00\x00\x00\x00\x01{}")
    assert "hunter2" not in str(err.value) and "could not be reached" in str(err.value)
    assert err.value.__cause__ is None


def test_an_integral_json_number_written_with_a_fraction_is_an_integer(scope: str) -> None:
    c = converter(scope)
    good = c.from_connect_data("orders", ORDER, order())
    assert good is not None
    body = dict(json.loads(good[5:]), i32=7.0, ts=1e3)
    back = c.to_connect_data("orders", good[:5] + json.dumps(body).encode()).value
    assert back["i32"] == 7 and type(back["i32"]) is int
    assert back["ts"] == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)


def test_a_nested_error_names_the_path_through_arrays(scope: str) -> None:
    c = converter(scope)
    good = c.from_connect_data("orders", ORDER, order())
    assert good is not None
    body = dict(json.loads(good[5:]), items=[{"sku": "x", "qty": 2}, {"sku": "y", "qty": "two"}])
    with pytest.raises(DataError, match=r"field 'items\[1\]\.qty' breaks the writer's JSON Schema: 'two' is not of"):
        c.to_connect_data("orders", good[:5] + json.dumps(body).encode())
    bad = order()
    bad["items"][0]._values[1] = 2**40  # qty, an INT32, bypassing put()'s own check
    with pytest.raises(DataError, match=r"field 'items\[0\]\.qty' is 1099511627776, out of the range of INT32"):
        c.from_connect_data("orders", ORDER, bad)


def test_a_schema_id_in_a_header_is_read(scope: str) -> None:
    from confluent_kafka.schema_registry import header_schema_id_serializer

    schema = {"title": "H", "type": "object", "properties": {"n": {"type": "integer"}}}
    headers: list[tuple[str, Any]] = []
    theirs = JSONSerializer(json.dumps(schema), registry(scope),
                            conf={"schema.id.serializer": header_schema_id_serializer})
    data = theirs({"n": 5}, SerializationContext("h", MessageField.VALUE, headers))
    assert data == b'{"n":5}' and [k for k, _ in headers] == ["__value_schema_id"]
    assert converter(scope).to_connect_data("h", data, headers).value["n"] == 5


def test_a_key_converter_registers_under_the_key_subject(scope: str) -> None:
    key = SchemaBuilder.struct().name("shop.OrderKey").field("id", Schema.INT64_SCHEMA).build()
    c = converter(scope, is_key=True)
    data = c.from_connect_data("orders", key, Struct(key).put("id", 9))
    assert c.client.get_subjects() == ["orders-key"]
    assert converter(scope, is_key=True).to_connect_data("orders", data).value["id"] == 9
