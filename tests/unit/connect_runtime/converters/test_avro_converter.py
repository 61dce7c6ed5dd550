"""AvroConverter: Connect <-> Avro over confluent-kafka's MockSchemaRegistryClient (``mock://<scope>``).

Round trips of every Connect type and logical type; bytes written by confluent-kafka's own AvroSerializer (a plain
Avro schema, as any Confluent producer writes) are read, and ours are read by its AvroDeserializer; Confluent's
AvroData schema mapping; evolution; errors naming topic, key/value and field; secrets hidden.
"""

from __future__ import annotations

import ast
import datetime as dt
import decimal
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema as RegistrySchema
from confluent_kafka.schema_registry._sync.mock_schema_registry_client import MockSchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

import connect_runtime.converters as converters_pkg
from connect_runtime.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp, to_plain
from connect_runtime.api.errors import ConfigError, DataError, RetriableError
from connect_runtime.converters import ALIASES
from connect_runtime.converters._registry import drop_mock_scope
from connect_runtime.converters.avro import AvroConverter, schema_changes
from connect_runtime.runtime.plugins import instantiate

SCOPE = "avro-tests"
URL = f"mock://{SCOPE}"


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    drop_mock_scope(SCOPE)
    yield
    drop_mock_scope(SCOPE)


def converter(is_key: bool = False, **extra: Any) -> AvroConverter:
    conv = AvroConverter()
    conv.configure({"schema.registry.url": URL, **{k.replace("_", "."): v for k, v in extra.items()}}, is_key)
    return conv


def ctx(topic: str = "t", key: bool = False) -> SerializationContext:
    return SerializationContext(topic, MessageField.KEY if key else MessageField.VALUE)


# -- round trips of every Connect type and logical type ---------------------------------------------------------

ADDRESS = SchemaBuilder.struct().name("shop.Address").field("city", Schema.STRING_SCHEMA).build()
OPTIONAL_ADDRESS = SchemaBuilder.struct().name("shop.Address").field("city", Schema.STRING_SCHEMA).optional().build()

CASES: list[tuple[str, Schema, Any]] = [
    ("int8", Schema.INT8_SCHEMA, -128),
    ("int16", Schema.INT16_SCHEMA, 32767),
    ("int32", Schema.INT32_SCHEMA, -(2 ** 31)),
    ("int64", Schema.INT64_SCHEMA, 2 ** 63 - 1),
    ("float32", Schema.FLOAT32_SCHEMA, 1.5),
    ("float64", Schema.FLOAT64_SCHEMA, -2.0e300),
    ("boolean", Schema.BOOLEAN_SCHEMA, False),
    ("string", Schema.STRING_SCHEMA, "zürich ✓"),
    ("bytes", Schema.BYTES_SCHEMA, b"\x00\xff\x10"),
    ("optional-null", Schema.OPTIONAL_INT64_SCHEMA, None),
    ("optional-set", Schema.OPTIONAL_STRING_SCHEMA, "x"),
    ("decimal", Decimal.schema(2), decimal.Decimal("-12345678901234567890.12")),
    ("decimal-precision", Decimal.builder(3).parameter("connect.decimal.precision", "10").build(),
     decimal.Decimal("1234567.891")),
    ("optional-decimal", Decimal.builder(1).optional().build(), decimal.Decimal("0.5")),
    ("date", Date.schema(), dt.date(1969, 7, 20)),
    ("time", Time.schema(), dt.time(23, 59, 59, 999000)),
    ("timestamp", Timestamp.schema(), dt.datetime(2038, 1, 19, 3, 14, 8, 123000, tzinfo=dt.UTC)),
    ("array", SchemaBuilder.array(Schema.OPTIONAL_INT32_SCHEMA).build(), [1, None, 3]),
    ("array-of-structs", SchemaBuilder.array(ADDRESS).build(), [Struct(ADDRESS).put("city", "Oslo")]),
    ("map-string-keys", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.FLOAT64_SCHEMA).build(), {"a": 1.0}),
    ("map-int-keys", SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.STRING_SCHEMA).build(), {1: "one", -2: "x"}),
    ("map-optional-string-keys", SchemaBuilder.map(Schema.OPTIONAL_STRING_SCHEMA, Schema.INT8_SCHEMA).build(),
     {"k": 1}),
    ("map-of-timestamps", SchemaBuilder.map(Schema.STRING_SCHEMA, Timestamp.schema()).build(),
     {"t": dt.datetime(2001, 2, 3, tzinfo=dt.UTC)}),
    ("struct", ADDRESS, Struct(ADDRESS).put("city", "Lyon")),
    ("optional-struct-null", OPTIONAL_ADDRESS, None),
    ("optional-struct", OPTIONAL_ADDRESS, Struct(OPTIONAL_ADDRESS).put("city", "Kyiv")),
    ("default", SchemaBuilder.int32().default_value(42).build(), 7),
    ("optional-with-default", SchemaBuilder.string().optional().default_value("d").build(), None),
]


def wrap(field_schema: Schema, value: Any) -> tuple[Schema, Struct]:
    schema = SchemaBuilder.struct().name("test.Wrapper").field("f", field_schema).build()
    return schema, Struct(schema).put("f", value)


@pytest.mark.parametrize("name, field_schema, value", CASES, ids=[c[0] for c in CASES])
def test_every_type_round_trips_as_a_struct_field(name: str, field_schema: Schema, value: Any) -> None:
    schema, struct = wrap(field_schema, value)
    conv = converter()
    data = conv.from_connect_data("t", schema, struct)
    assert data is not None and data[0] == 0  # Confluent framing: magic byte
    back = converter().to_connect_data("t", data)  # a fresh converter: nothing cached but the registry
    assert back.schema == SchemaBuilder.struct().name("test.Wrapper").version(1).field("f", back.schema.field("f")
                                                                                       .schema).build()
    got_field = back.schema.field("f").schema
    assert (got_field.type, got_field.optional, got_field.name, got_field.default) == \
        (field_schema.type, field_schema.optional, field_schema.name, field_schema.default)
    assert to_plain(back.value["f"]) == to_plain(value if value is not None else field_schema.default)


@pytest.mark.parametrize("name, field_schema, value",
                         [c for c in CASES if "struct" not in c[0] and c[2] is not None],
                         ids=[c[0] for c in CASES if "struct" not in c[0] and c[2] is not None])
def test_every_type_round_trips_at_the_top_level(name: str, field_schema: Schema, value: Any) -> None:
    conv = converter()
    data = conv.from_connect_data("top", field_schema, value)
    back = conv.to_connect_data("top", data)
    assert back.value == value
    assert back.schema is not None and back.schema.type is field_schema.type and back.schema.name == field_schema.name


def test_a_full_struct_comes_back_equal_schema_and_value() -> None:
    inner = SchemaBuilder.struct().name("shop.Line").field("sku", Schema.STRING_SCHEMA) \
        .field("qty", Schema.INT16_SCHEMA).build()
    schema = (SchemaBuilder.struct().name("shop.Order").version(3).doc("an order").parameter("team", "sales")
              .field("id", Schema.INT64_SCHEMA).field("amount", Decimal.schema(2))
              .field("at", Timestamp.schema()).field("day", Date.schema()).field("note", Schema.OPTIONAL_STRING_SCHEMA)
              .field("lines", SchemaBuilder.array(inner).build())
              .field("tags", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.STRING_SCHEMA).optional().build())
              .build())
    value = (Struct(schema).put("id", 1).put("amount", decimal.Decimal("9.99"))
             .put("at", dt.datetime(2026, 11, 26, 9, 0, tzinfo=dt.UTC)).put("day", dt.date(2026, 11, 26))
             .put("lines", [Struct(inner).put("sku", "a").put("qty", 2)]).put("tags", {"k": "v"}))
    conv = converter()
    back = conv.to_connect_data("orders", conv.from_connect_data("orders", schema, value))
    assert back.schema == schema  # connect.version 3 wins over the registry's version
    assert back.value == value


def test_the_avro_schema_is_confluents_mapping() -> None:
    schema = (SchemaBuilder.struct().name("shop.Order").version(2).doc("d")
              .field("small", Schema.INT8_SCHEMA).field("mid", Schema.INT16_SCHEMA)
              .field("amount", Decimal.schema(2)).field("day", Date.schema()).field("t", Time.schema())
              .field("at", Timestamp.schema()).field("note", Schema.OPTIONAL_STRING_SCHEMA)
              .field("n", SchemaBuilder.int32().default_value(5).build())
              .field("m", SchemaBuilder.map(Schema.INT64_SCHEMA, Schema.STRING_SCHEMA).build())
              .build())
    conv = converter()
    conv.from_connect_data("orders", schema, Struct(schema).put("small", 1).put("mid", 2)
                           .put("amount", decimal.Decimal("1.00")).put("day", dt.date(2020, 1, 1))
                           .put("t", dt.time(1)).put("at", dt.datetime(2020, 1, 1, tzinfo=dt.UTC)).put("m", {}))
    registered = json.loads(conv.client.get_latest_version("orders-value").schema.schema_str)  # type: ignore[union-attr]
    assert registered["type"] == "record" and (registered["namespace"], registered["name"]) == ("shop", "Order")
    assert (registered["connect.name"], registered["connect.version"], registered["connect.doc"]) == \
        ("shop.Order", 2, "d")
    fields = {f["name"]: f for f in registered["fields"]}
    assert fields["small"]["type"] == {"type": "int", "connect.type": "int8"}
    assert fields["mid"]["type"] == {"type": "int", "connect.type": "int16"}
    assert fields["amount"]["type"] == {
        "type": "bytes", "logicalType": "decimal", "precision": 64, "scale": 2, "connect.version": 1,
        "connect.parameters": {"scale": "2"}, "connect.name": "org.apache.kafka.connect.data.Decimal"}
    assert fields["day"]["type"]["logicalType"] == "date" and fields["day"]["type"]["type"] == "int"
    assert fields["t"]["type"]["logicalType"] == "time-millis"
    assert fields["at"]["type"]["logicalType"] == "timestamp-millis" and fields["at"]["type"]["type"] == "long"
    assert fields["note"] == {"name": "note", "type": ["null", "string"], "default": None}
    assert fields["n"] == {"name": "n", "type": {"type": "int", "connect.default": 5}, "default": 5}
    entry = fields["m"]["type"]["items"]
    assert (entry["namespace"], entry["name"], [f["name"] for f in entry["fields"]]) == \
        ("io.confluent.connect.avro", "MapEntry", ["key", "value"])


def test_an_unnamed_struct_is_connect_default_and_reads_back_unnamed() -> None:
    inner = SchemaBuilder.struct().field("x", Schema.INT32_SCHEMA).build()
    other = SchemaBuilder.struct().field("y", Schema.STRING_SCHEMA).build()
    schema = SchemaBuilder.struct().field("a", inner).field("b", other).build()
    conv = converter()
    value = Struct(schema).put("a", Struct(inner).put("x", 1)).put("b", Struct(other).put("y", "z"))
    data = conv.from_connect_data("t", schema, value)
    avro = conv._data.from_connect_schema(schema)
    assert avro["namespace"] == "io.confluent.connect.avro" and avro["name"] == "ConnectDefault"
    back = converter().to_connect_data("t", data)
    assert back.schema.name is None and back.schema.field("a").schema.name is None
    assert to_plain(back.value) == {"a": {"x": 1}, "b": {"y": "z"}}


# -- confluent-kafka's own serializer and deserializer ----------------------------------------------------------

PRODUCER_SCHEMA = {
    "type": "record", "name": "Payment", "namespace": "bank", "doc": "a payment",
    "fields": [
        {"name": "id", "type": "string", "doc": "the id"},
        {"name": "cents", "type": "long"},
        {"name": "rate", "type": "float"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["CARD", "CASH"]}},
        {"name": "either", "type": ["int", "string"]},
        {"name": "choice", "type": ["null", "bank.Kind", "boolean"], "default": None},
        {"name": "digest", "type": {"type": "fixed", "name": "Md5", "size": 4}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "attrs", "type": {"type": "map", "values": "int"}},
        {"name": "parts", "type": {"type": "array", "items": {
            "type": "record", "name": "Part", "fields": [{"name": "n", "type": "int"}]}}},
        {"name": "maybe", "type": ["null", "bank.Part"], "default": None},
        {"name": "count", "type": "int", "default": 3},
    ],
}


def producer_value(i: int) -> dict[str, Any]:
    return {
        "id": f"p{i}", "cents": 10 ** 12 + i, "rate": 0.5, "kind": "CASH", "either": "s" if i % 2 else i,
        "choice": "CARD" if i % 2 else True, "digest": b"abcd",
        "amount": decimal.Decimal("1234567.89"), "at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        "at_us": dt.datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=dt.UTC),
        "ref": uuid.UUID("12345678-1234-5678-1234-567812345678"), "attrs": {"a": 1},
        "parts": [{"n": 1}, {"n": 2}], "maybe": {"n": 9} if i % 2 else None, "count": 3,
    }


def test_what_a_confluent_producer_writes_is_read_as_avro_data_maps_it() -> None:
    conv = converter()
    ser = AvroSerializer(conv.client, json.dumps(PRODUCER_SCHEMA))  # type: ignore[arg-type]
    one, two = ser(producer_value(1), ctx("payments")), ser(producer_value(2), ctx("payments"))
    first = conv.to_connect_data("payments", one)
    s = first.schema
    assert s is not None and s.name == "bank.Payment" and s.version == 1  # the registry version
    assert s.parameters == {"io.confluent.connect.avro.record.doc": "a payment",
                            "io.confluent.connect.avro.field.doc.id": "the id"}
    assert s.field("kind").schema.parameters == {
        "io.confluent.connect.avro.Enum": "bank.Kind", "io.confluent.connect.avro.Enum.CARD": "CARD",
        "io.confluent.connect.avro.Enum.CASH": "CASH"}
    union = s.field("either").schema
    assert union.name == "io.confluent.connect.avro.Union" and [f.name for f in union.fields] == ["int", "string"]
    assert s.field("choice").schema.optional and [f.name for f in s.field("choice").schema.fields] == \
        ["Kind", "boolean"]
    assert s.field("digest").schema == Schema.BYTES_SCHEMA
    amount = s.field("amount").schema
    assert amount.name == Decimal.LOGICAL_NAME and amount.parameters == {"scale": "2",
                                                                          "connect.decimal.precision": "9"}
    assert s.field("at").schema.name == Timestamp.LOGICAL_NAME
    assert s.field("at_us").schema == Schema.INT64_SCHEMA and s.field("ref").schema == Schema.STRING_SCHEMA
    assert s.field("maybe").schema.optional and s.field("maybe").schema.name == "bank.Part"
    assert s.field("count").schema.default == 3
    v = first.value
    assert (v["id"], v["cents"], v["kind"], v["digest"], v["amount"]) == \
        ("p1", 10 ** 12 + 1, "CASH", b"abcd", decimal.Decimal("1234567.89"))
    assert to_plain(v["either"]) == {"int": None, "string": "s"}
    assert to_plain(v["choice"]) == {"Kind": "CARD", "boolean": None}
    assert v["at_us"] == 1767225600000001 and v["ref"] == "12345678-1234-5678-1234-567812345678"
    assert to_plain(v["parts"]) == [{"n": 1}, {"n": 2}] and to_plain(v["maybe"]) == {"n": 9}
    second = conv.to_connect_data("payments", two).value
    assert to_plain(second["either"]) == {"int": 2, "string": None}
    assert to_plain(second["choice"]) == {"Kind": None, "boolean": True} and second["maybe"] is None


def test_what_we_write_confluents_deserializer_reads() -> None:
    schema = (SchemaBuilder.struct().name("shop.Order").field("id", Schema.INT64_SCHEMA)
              .field("amount", Decimal.schema(2)).field("at", Timestamp.schema())
              .field("m", SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.STRING_SCHEMA).build())
              .field("note", Schema.OPTIONAL_STRING_SCHEMA).build())
    conv = converter()
    rows = [Struct(schema).put("id", i).put("amount", decimal.Decimal(f"{i}.50"))
            .put("at", dt.datetime(2026, 1, 1, 0, 0, i, tzinfo=dt.UTC)).put("m", {i: "v"}) for i in range(3)]
    data = [conv.from_connect_data("orders", schema, r) for r in rows]
    theirs = AvroDeserializer(conv.client)  # type: ignore[arg-type]
    got = [theirs(d, ctx("orders")) for d in data]
    assert got[2] == {"id": 2, "amount": decimal.Decimal("2.50"), "at": dt.datetime(2026, 1, 1, 0, 0, 2,
                                                                                      tzinfo=dt.UTC),
                      "m": [{"key": 2, "value": "v"}], "note": None}
    assert len({d[:5] for d in data}) == 1  # one schema id for the lot


def test_our_bytes_equal_confluents_serializer_bytes_for_the_same_schema() -> None:
    schema = SchemaBuilder.struct().name("shop.Order").field("id", Schema.INT64_SCHEMA) \
        .field("note", Schema.OPTIONAL_STRING_SCHEMA).build()
    conv = converter()
    ours = [conv.from_connect_data("o", schema, Struct(schema).put("id", i).put("note", "n" if i else None))
            for i in range(3)]
    ser = AvroSerializer(conv.client, json.dumps(conv._data.from_connect_schema(schema)))  # type: ignore[arg-type]
    theirs = [ser({"id": i, "note": "n" if i else None}, ctx("o")) for i in range(3)]
    assert ours == theirs


# -- caching, batches, keys, subject strategies -----------------------------------------------------------------

def test_the_schema_is_registered_once_and_batches_give_what_single_calls_give() -> None:
    schema = SchemaBuilder.struct().name("k.Key").field("id", Schema.INT32_SCHEMA).build()
    conv = converter(is_key=True)
    values = [Struct(schema).put("id", i) for i in range(5)] + [None]
    batch = conv.from_connect_data_many(["k"] * 6, [schema] * 6, values)
    single = [conv.from_connect_data("k", schema, v) for v in values]
    assert batch == single and batch[-1] is None
    assert conv.client.get_subjects() == ["k-key"] and conv.client.get_versions("k-key") == [1]  # type: ignore
    back = conv.to_connect_data_many(["k"] * 6, batch)
    assert [to_plain(b.value) for b in back] == [to_plain(v) for v in values]
    assert back[0].schema == SchemaBuilder.struct().name("k.Key").version(1).field("id", Schema.INT32_SCHEMA).build()


@pytest.mark.parametrize("strategy, subject", [
    ("io.confluent.kafka.serializers.subject.RecordNameStrategy", "shop.Order"),
    ("TopicRecordNameStrategy", "orders-shop.Order"),
])
def test_subject_name_strategies(strategy: str, subject: str) -> None:
    schema = SchemaBuilder.struct().name("shop.Order").field("id", Schema.INT32_SCHEMA).build()
    conv = converter(value_subject_name_strategy=strategy)
    data = conv.from_connect_data("orders", schema, Struct(schema).put("id", 1))
    assert conv.client.get_subjects() == [subject]  # type: ignore[union-attr]
    assert conv.to_connect_data("orders", data).schema.version == 1


def test_a_struct_without_an_explicit_schema_is_written_with_its_own() -> None:
    schema = SchemaBuilder.struct().name("a.B").field("x", Schema.INT32_SCHEMA).build()
    conv = converter()
    assert conv.from_connect("t", Struct(schema).put("x", 1)) == conv.from_connect_data("t", schema,
                                                                                          Struct(schema).put("x", 1))
    assert conv.to_connect("t", conv.from_connect("t", Struct(schema).put("x", 1)))["x"] == 1


def test_none_is_a_tombstone_both_ways() -> None:
    conv = converter()
    assert conv.from_connect_data("t", Schema.STRING_SCHEMA, None) is None
    assert conv.to_connect_data("t", None) == (None, None)


# -- evolution ---------------------------------------------------------------------------------------------------

V1 = SchemaBuilder.struct().name("shop.Order").field("id", Schema.INT64_SCHEMA).build()
V2 = SchemaBuilder.struct().name("shop.Order").field("id", Schema.INT64_SCHEMA) \
    .field("note", Schema.OPTIONAL_STRING_SCHEMA).build()


def test_a_compatible_change_registers_a_new_version_and_flows_on() -> None:
    conv = converter()
    old = conv.from_connect_data("orders", V1, Struct(V1).put("id", 1))
    new = conv.from_connect_data("orders", V2, Struct(V2).put("id", 2).put("note", "n"))
    assert old[:5] != new[:5]
    assert sorted(conv.client.get_versions("orders-value")) == [1, 2]  # type: ignore[union-attr]
    reader = converter()
    first, second = reader.to_connect_data("orders", old), reader.to_connect_data("orders", new)
    assert (first.schema.version, second.schema.version) == (1, 2)
    assert to_plain(first.value) == {"id": 1} and to_plain(second.value) == {"id": 2, "note": "n"}


def test_use_latest_version_writes_and_reads_in_the_latest_schema() -> None:
    writer = converter()
    old = writer.from_connect_data("orders", V1, Struct(V1).put("id", 1))
    writer.from_connect_data("orders", V2, Struct(V2).put("id", 2))
    latest = converter(use_latest_version="true", auto_register_schemas="false")
    back = latest.to_connect_data("orders", old)
    assert back.schema.field("note") is not None and to_plain(back.value) == {"id": 1, "note": None}
    data = latest.from_connect_data("orders", V1, Struct(V1).put("id", 5))
    assert data[:5] == writer.from_connect_data("orders", V2, Struct(V2).put("id", 5))[:5]  # the latest's id


class _CompatCheckingRegistry(MockSchemaRegistryClient):
    """The mock registry (which checks no compatibility) answering as a Confluent registry does under BACKWARD when
    a new version adds a field without a default: HTTP 409."""

    def register_schema_full_response(self, subject_name: str, schema: RegistrySchema,
                                      normalize_schemas: bool = False) -> Any:
        versions = self.get_versions(subject_name)
        if versions:
            old = json.loads(self.get_latest_version(subject_name).schema.schema_str)
            new = json.loads(schema.schema_str)
            if any("default" not in f for f in new["fields"] if f["name"] not in {x["name"] for x in old["fields"]}):
                raise SchemaRegistryError(409, 409, f'Schema being registered is incompatible with an earlier '
                                                    f'schema for subject "{subject_name}"')
        return super().register_schema_full_response(subject_name, schema, normalize_schemas)

    def get_compatibility(self, subject_name: str | None = None) -> str:
        if subject_name is not None:
            raise SchemaRegistryError(404, 40408, "Subject does not have subject-level compatibility configured")
        return "BACKWARD"


def test_an_incompatible_change_is_a_data_error_naming_subject_field_and_rule() -> None:
    conv = converter()
    conv.client = _CompatCheckingRegistry({"url": "mock://incompatible"})
    conv.from_connect_data("orders", V1, Struct(V1).put("id", 1))
    v3 = SchemaBuilder.struct().name("shop.Order").field("id", Schema.INT64_SCHEMA) \
        .field("qty", Schema.INT32_SCHEMA).build()
    with pytest.raises(DataError) as err:
        conv.from_connect_data("orders", v3, Struct(v3).put("id", 2).put("qty", 1))
    text = str(err.value)
    assert "subject 'orders-value'" in text and "field 'qty' was added without a default" in text
    assert "compatibility rule BACKWARD" in text and "topic 'orders'" in text and "value" in text
    assert conv.client.get_versions("orders-value") == [1]  # type: ignore[union-attr]


def test_schema_changes_names_each_field() -> None:
    old = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "b", "type": "string"}, {"name": "c", "type": "long", "default": 0},
        {"name": "n", "type": {"type": "record", "name": "N", "fields": [{"name": "x", "type": "int"}]}}]}
    new = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "string"}, {"name": "d", "type": "int"}, {"name": "e", "type": "int", "default": 1},
        {"name": "n", "type": {"type": "record", "name": "N", "fields": [{"name": "x", "type": "long"}]}}]}
    assert schema_changes(old, new) == [
        "field 'd' was added without a default", "field 'b' was removed and had no default",
        "field 'c' was removed", "field 'a' changed type from int to string", "field 'n.x' changed type from int to long"]


# -- errors --------------------------------------------------------------------------------------------------------

def test_bytes_that_are_not_confluent_avro_name_topic_and_key() -> None:
    conv = converter(is_key=True)
    with pytest.raises(DataError, match=r"AvroConverter cannot read the key of a record from topic 'in': "
                                        r"not in the Schema Registry wire format"):
        conv.to_connect_data("in", b"{json}")
    with pytest.raises(DataError, match=r"the key .* topic 'in': the Schema Registry at mock://\S+ answered Schema Not Found "
                                        r"\(HTTP 404"):
        conv.to_connect_data("in", b"\x00\x00\x00\x10\x92\x02")
    data = conv.from_connect_data("in", V2, Struct(V2).put("id", 1).put("note", "long enough"))
    with pytest.raises(DataError, match=r"the key of a record from topic 'in': the bytes after schema id \d+ are "
                                        r"not Avro"):
        conv.to_connect_data("in", data[:-4])


def test_a_value_that_does_not_fit_its_schema_names_the_field() -> None:
    conv = converter()
    with pytest.raises(DataError, match=r"topic 't'.*expected a Struct of schema shop.Order, got a dict"):
        conv.from_connect_data("t", V1, {"id": 1})
    with pytest.raises(DataError, match=r"topic 't'.*has no schema \(a int\)"):
        conv.from_connect("t", 5)
    broken = Struct(V1)  # a required field left unset
    with pytest.raises(DataError, match=r"topic 't'.*field 'id' is null but its schema is not optional"):
        conv.from_connect_data("t", V1, broken)
    with pytest.raises(DataError, match=r"topic 't'.*field 'id' is null"):
        conv.from_connect_data_many(["t"], [V1], [broken])


def test_config_errors_and_the_alias() -> None:
    assert ALIASES["io.confluent.connect.avro.AvroConverter"] == "connect_runtime.converters.avro.AvroConverter"
    package_imports = {n.module for n in ast.walk(ast.parse(Path(converters_pkg.__file__).read_text()))
                       if isinstance(n, ast.ImportFrom)}
    assert not {m for m in package_imports if m and ("avro" in m or "_registry" in m)}  # loaded only when named
    conv = instantiate("io.confluent.connect.avro.AvroConverter", "value.converter", AvroConverter)
    assert isinstance(conv, AvroConverter) and conv.SCHEMA_AWARE
    with pytest.raises(ConfigError) as err:
        AvroConverter().configure({"schemas.cache.config": "0"}, False)
    assert set(err.value.errors) == {"schema.registry.url", "schemas.cache.config"}
    assert "basic.auth.user.info" in AvroConverter().config_def().password_fields()


def test_an_unreachable_registry_is_retriable_and_hides_the_password() -> None:
    conv = AvroConverter()
    conv.configure({"schema.registry.url": "http://127.0.0.1:9", "basic.auth.credentials.source": "USER_INFO",
                    "basic.auth.user.info": "svc:t0p-s3cret", "http.read.timeout.ms": "300"}, False)
    rest = conv.client._rest_client  # type: ignore[union-attr]
    rest.max_retries = 0
    with pytest.raises(RetriableError) as err:
        conv.from_connect_data("t", V1, Struct(V1).put("id", 1))
    assert "could not be reached" in str(err.value) and "t0p-s3cret" not in str(err.value)
    assert (err.value.__cause__ is None and err.value.__context__ is None) or "t0p-s3cret" not in repr(
        err.value.__context__)
    with pytest.raises(RetriableError) as err:
        conv.to_connect_data("t", b"\x00\x00\x00\x00\x01\x02")
    assert "t0p-s3cret" not in str(err.value)


def test_converters_import_only_the_registry_and_serialization_parts_of_confluent_kafka() -> None:
    allowed = ("confluent_kafka.schema_registry", "confluent_kafka.serialization")
    for path in Path(converters_pkg.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                if name.startswith("confluent_kafka"):
                    assert name.startswith(allowed), f"{path.name} imports {name}"


def test_top_level_bytes_are_written_raw_as_confluents_serializer_does() -> None:
    conv = converter()
    ours = conv.from_connect_data("b", Schema.BYTES_SCHEMA, b"\x01\x02")
    theirs = AvroSerializer(conv.client, '"bytes"')(b"\x01\x02", ctx("b"))  # type: ignore[arg-type]
    assert ours == theirs and ours.endswith(b"\x01\x02") and len(ours) == 7
    assert AvroDeserializer(conv.client)(ours, ctx("b")) == b"\x01\x02"  # type: ignore[arg-type]
    assert conv.from_connect_data_many(["b"], [Schema.BYTES_SCHEMA], [b"\x01\x02"]) == [ours]


def test_the_runtime_masks_the_converters_secrets_in_a_connector_config() -> None:
    from connect_runtime.secrets import mask_config

    props = {"connector.class": "x.Y", "value.converter": "io.confluent.connect.avro.AvroConverter",
             "value.converter.basic.auth.credentials.source": "USER_INFO",
             "value.converter.basic.auth.user.info": "svc:pw-one", "key.converter": "AvroConverter",
             "key.converter.schema.registry.url": "http://svc:pw-two@sr:8081"}
    masked = mask_config(props)
    assert "pw-one" not in str(masked) and "pw-two" not in str(masked)
    assert masked["key.converter.schema.registry.url"] == "http://svc:[hidden]@sr:8081"


def test_a_record_the_latest_version_cannot_read_names_subject_field_and_rule() -> None:
    writer = converter()
    old = writer.from_connect_data("orders", V1, Struct(V1).put("id", 1))
    v3 = SchemaBuilder.struct().name("shop.Order").field("id", Schema.INT64_SCHEMA) \
        .field("qty", Schema.INT32_SCHEMA).build()
    writer.from_connect_data("orders", v3, Struct(v3).put("id", 2).put("qty", 1))  # the mock checks nothing
    latest = converter(use_latest_version="true", auto_register_schemas="false")
    with pytest.raises(DataError) as err:
        latest.to_connect_data("orders", old)
    text = str(err.value)
    assert "topic 'orders'" in text and "latest version of subject 'orders-value'" in text
    assert "field 'qty' was added without a default" in text and "BACKWARD" in text


def test_record_name_strategy_needs_a_named_schema() -> None:
    conv = converter(value_subject_name_strategy="RecordNameStrategy")
    with pytest.raises(DataError, match=r"topic 't'.*RecordNameStrategy needs a named schema"):
        conv.from_connect_data("t", Schema.INT32_SCHEMA, 1)


def test_what_we_read_from_a_producer_we_write_back_and_read_equal() -> None:
    conv = converter()
    ser = AvroSerializer(conv.client, json.dumps(PRODUCER_SCHEMA))  # type: ignore[arg-type]
    for i in (1, 2):
        read = conv.to_connect_data("payments", ser(producer_value(i), ctx("payments")))
        again = conv.from_connect_data("copies", read.schema, read.value)
        back = converter().to_connect_data("copies", again)
        plain, expected = to_plain(back.value), to_plain(read.value)
        # an enum is written back as a string (Confluent's mapping without enhanced.avro.schema.support), so the
        # union branch that held it is a string branch when read again
        expected["choice"] = {"string": expected["choice"]["Kind"], "boolean": expected["choice"]["boolean"]}
        assert plain == expected
        assert back.schema.field("either").schema == read.schema.field("either").schema  # type: ignore[union-attr]
    written = json.loads(conv.client.get_latest_version("copies-value").schema.schema_str)  # type: ignore
    assert written["doc"] == "a payment" and written["fields"][0]["doc"] == "the id"
    assert written["fields"][4]["type"] == ["int", "string"]  # the union, as a union again
    assert written["fields"][3]["type"]["type"] == "string"  # an enum comes back a string, as Confluent's
    assert written["fields"][3]["type"]["connect.parameters"]["io.confluent.connect.avro.Enum"] == "bank.Kind"


def test_a_struct_used_twice_is_defined_once_and_unnamed_ones_get_distinct_names() -> None:
    unnamed_a = SchemaBuilder.struct().field("x", Schema.INT32_SCHEMA).build()
    unnamed_b = SchemaBuilder.struct().field("y", Schema.INT32_SCHEMA).build()
    schema = (SchemaBuilder.struct().name("shop.Move").field("src", ADDRESS).field("dst", ADDRESS)
              .field("a", unnamed_a).field("b", unnamed_b).build())
    conv = converter()
    avro = conv._data.from_connect_schema(schema)
    types = [f["type"] for f in avro["fields"]]
    assert types[0]["name"] == "Address" and types[1] == "shop.Address"
    assert (types[2]["name"], types[3]["name"]) == ("ConnectDefault", "ConnectDefault2")
    value = (Struct(schema).put("src", Struct(ADDRESS).put("city", "A")).put("dst", Struct(ADDRESS).put("city", "B"))
             .put("a", Struct(unnamed_a).put("x", 1)).put("b", Struct(unnamed_b).put("y", 2)))
    back = conv.to_connect_data("m", conv.from_connect_data("m", schema, value))
    assert to_plain(back.value) == {"src": {"city": "A"}, "dst": {"city": "B"}, "a": {"x": 1}, "b": {"y": 2}}
