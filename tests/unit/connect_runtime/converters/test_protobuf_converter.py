"""ProtobufConverter (connect_runtime.converters.protobuf): Confluent's ProtobufData mapping over confluent-kafka's
ProtobufSerializer / ProtobufDeserializer, messages built at run time, on confluent-kafka's mock registry."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry.common.protobuf import _init_pool, _str_to_proto
from confluent_kafka.schema_registry.confluent import meta_pb2
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from connect_runtime.api.data import (
    Date,
    Decimal,
    Schema,
    SchemaBuilder,
    SchemaType,
    Struct,
    Time,
    Timestamp,
    to_plain,
)
from connect_runtime.api.errors import DataError
from connect_runtime.converters import ALIASES
from connect_runtime.converters._registry import drop_mock_scope
from connect_runtime.converters.protobuf import ProtobufConverter
from connect_runtime.runtime.plugins import load_class
from tests.support.connect_samples import ORDER, mock_scope, order

F = descriptor_pb2.FieldDescriptorProto
TAG = "io.confluent.connect.protobuf.Tag"


@pytest.fixture
def scope() -> Iterator[str]:
    name = mock_scope("protobuf")
    yield name
    drop_mock_scope(name)


def converter(scope: str, is_key: bool = False, **props: Any) -> ProtobufConverter:
    c = ProtobufConverter()
    c.configure({"schema.registry.url": f"mock://{scope}", **props}, is_key)
    return c


def ctx(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def test_a_struct_of_every_type_and_logical_type_round_trips(scope: str) -> None:
    data = converter(scope).from_connect_data("orders", ORDER, order())
    assert data is not None and data[0] == 0
    back = converter(scope).to_connect_data("orders", data)
    expected = to_plain(order())
    expected["note"] = ""  # proto3 implicit presence: a null string is read back as "" (Confluent's default)
    expected["maybe_ts"] = None  # a message field keeps its absence
    assert to_plain(back.value) == expected
    schema = back.schema
    assert schema is not None and schema.name == "Order" and schema.version == 1
    kinds = {f.name: (f.schema.type, f.schema.name) for f in schema.fields}
    assert kinds["i8"] == (SchemaType.INT8, None) and kinds["i16"] == (SchemaType.INT16, None)
    assert kinds["amount"] == (SchemaType.BYTES, Decimal.LOGICAL_NAME) and Decimal.scale(schema.field("amount").schema) == 2  # type: ignore[union-attr]
    assert kinds["day"][1] == Date.LOGICAL_NAME and kinds["at"][1] == Time.LOGICAL_NAME
    assert kinds["ts"][1] == Timestamp.LOGICAL_NAME and kinds["counts"][0] is SchemaType.MAP
    # as Confluent reads any message: every field optional, its tag in a parameter
    assert all(f.schema.optional for f in schema.fields)
    assert [(f.schema.parameters or {})[TAG] for f in schema.fields] == [str(i) for i in range(1, len(ORDER.fields) + 1)]


def test_optional_for_nullables_keeps_nulls_and_required_fields(scope: str) -> None:
    c = converter(scope, **{"optional.for.nullables": "true"})
    data = c.from_connect_data("orders", ORDER, order())
    back = c.to_connect_data("orders", data)
    assert to_plain(back.value) == to_plain(order())
    schema = back.schema
    assert schema is not None
    assert not schema.field("id").schema.optional and schema.field("note").schema.optional  # type: ignore[union-attr]
    # messages, maps and repeated fields are always optional when read, as in Confluent's ProtobufData
    assert schema.field("day").schema.optional and schema.field("tags").schema.optional  # type: ignore[union-attr]


@pytest.mark.parametrize(("schema", "value", "read_type"), [
    (Schema.INT32_SCHEMA, -5, SchemaType.INT32), (Schema.INT8_SCHEMA, 5, SchemaType.INT32),
    (Schema.INT64_SCHEMA, 1 << 60, SchemaType.INT64), (Schema.FLOAT64_SCHEMA, 0.1, SchemaType.FLOAT64),
    (Schema.BOOLEAN_SCHEMA, True, SchemaType.BOOLEAN), (Schema.STRING_SCHEMA, "é", SchemaType.STRING),
    (Schema.BYTES_SCHEMA, b"\x01", SchemaType.BYTES),
])
def test_a_root_primitive_is_its_wrapper_message(scope: str, schema: Schema, value: Any, read_type: SchemaType) -> None:
    c = converter(scope)
    back = c.to_connect_data("p", c.from_connect_data("p", schema, value))
    assert back.schema == Schema(read_type, version=1) and back.value == value


def test_the_registered_file_is_confluents(scope: str) -> None:
    c = converter(scope)
    c.from_connect_data("orders", ORDER, order())
    registered = c.client.get_latest_version("orders-value")
    fdp = _str_to_proto("x", registered.schema.schema_str)
    assert fdp.package == "shop" and fdp.syntax == "proto3" and fdp.message_type[0].name == "Order"
    assert set(fdp.dependency) == {"confluent/meta.proto", "confluent/type/decimal.proto", "google/type/date.proto",
                                   "google/type/timeofday.proto", "google/protobuf/timestamp.proto"}
    fields = {f.name: f for f in fdp.message_type[0].field}
    assert fields["i8"].type == F.TYPE_INT32
    assert dict(fields["i8"].options.Extensions[meta_pb2.field_meta].params) == {"connect.type": "int8"}
    assert fields["amount"].type_name == ".confluent.type.Decimal"
    assert dict(fields["amount"].options.Extensions[meta_pb2.field_meta].params) == {"scale": "2"}
    assert (fields["day"].type_name, fields["at"].type_name, fields["ts"].type_name) == (
        ".google.type.Date", ".google.type.TimeOfDay", ".google.protobuf.Timestamp")
    assert fields["tags"].label == F.LABEL_REPEATED and fields["counts"].type_name == ".shop.Order.ConnectDefault1Entry"
    assert fields["items"].type_name == fields["first"].type_name == ".shop.Order.Item"


def _their_class() -> type[Message]:
    """A message class made at test time, as a producer's generated code would hold it."""
    fdp = descriptor_pb2.FileDescriptorProto(name="acme/person.proto", package="acme", syntax="proto3")
    fdp.dependency.extend(["google/protobuf/timestamp.proto", "google/type/date.proto"])
    person = fdp.message_type.add(name="Person")
    role = person.enum_type.add(name="Role")
    role.value.add(name="UNKNOWN", number=0)
    role.value.add(name="ADMIN", number=3)
    address = person.nested_type.add(name="Address")
    address.field.add(name="city", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry = person.nested_type.add(name="AttrsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    person.oneof_decl.add(name="contact")
    person.oneof_decl.add(name="_nick")
    add = person.field.add
    add(name="name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    add(name="visits", number=2, type=F.TYPE_UINT32, label=F.LABEL_OPTIONAL)
    add(name="delta", number=3, type=F.TYPE_SINT64, label=F.LABEL_OPTIONAL)
    add(name="role", number=4, type=F.TYPE_ENUM, type_name=".acme.Person.Role", label=F.LABEL_OPTIONAL)
    add(name="address", number=5, type=F.TYPE_MESSAGE, type_name=".acme.Person.Address", label=F.LABEL_OPTIONAL)
    add(name="attrs", number=6, type=F.TYPE_MESSAGE, type_name=".acme.Person.AttrsEntry", label=F.LABEL_REPEATED)
    add(name="email", number=7, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    add(name="phone", number=8, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL, oneof_index=0)
    add(name="nick", number=9, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=1, proto3_optional=True)
    add(name="created", number=10, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp", label=F.LABEL_OPTIONAL)
    add(name="born", number=11, type=F.TYPE_MESSAGE, type_name=".google.type.Date", label=F.LABEL_OPTIONAL)
    add(name="scores", number=12, type=F.TYPE_DOUBLE, label=F.LABEL_REPEATED)
    pool = DescriptorPool()
    _init_pool(pool)
    pool.Add(fdp)
    return GetMessageClass(pool.FindMessageTypeByName("acme.Person"))  # type: ignore[no-any-return]


def test_messages_from_confluent_kafkas_serializer_are_read(scope: str) -> None:
    cls = _their_class()
    msg = cls(name="Ada", visits=4_000_000_000, delta=-5, role=3, attrs={"x": 1}, phone=42, scores=[1.5, 2.0])
    msg.address.city = "London"
    msg.created.seconds, msg.created.nanos = 1_700_000_000, 250_000_000
    msg.born.year, msg.born.month, msg.born.day = 1815, 12, 10
    data = ProtobufSerializer(cls, converter(scope).client)(msg, ctx("people"))
    back = converter(scope).to_connect_data("people", data)
    schema, value = back.schema, back.value
    assert schema is not None and schema.name == "Person" and schema.version == 1
    assert [f.name for f in schema.fields] == ["contact_0", "name", "visits", "delta", "role", "address", "attrs",
                                               "nick", "created", "born", "scores"]
    visits = schema.field("visits").schema  # type: ignore[union-attr]
    assert visits.type is SchemaType.INT64 and visits.parameters == {  # type: ignore[union-attr]
        "io.confluent.connect.protobuf.Type": "uint32", TAG: "2"}
    role = schema.field("role").schema  # type: ignore[union-attr]
    assert role.type is SchemaType.STRING and role.name == "Role"
    assert role.parameters["io.confluent.connect.protobuf.Enum.ADMIN"] == "3"  # type: ignore[index]
    assert schema.field("contact_0").schema.name == "io.confluent.connect.protobuf.Union.contact"  # type: ignore[union-attr]
    assert to_plain(value) == {
        "contact_0": {"email": None, "phone": 42}, "name": "Ada", "visits": 4_000_000_000, "delta": -5,
        "role": "ADMIN", "address": {"city": "London"}, "attrs": {"x": 1}, "nick": None,
        "created": dt.datetime(2023, 11, 14, 22, 13, 20, 250000, tzinfo=dt.UTC), "born": dt.date(1815, 12, 10),
        "scores": [1.5, 2.0]}
    # and what we read writes back (enum, oneof, map and all) to the same value; optional.for.nullables keeps the
    # null nick null (without it the field has no presence and reads back as "", Confluent's default)
    keep_nulls = converter(scope, **{"optional.for.nullables": True})
    again = keep_nulls.from_connect_data("people-copy", schema, value)
    assert to_plain(keep_nulls.to_connect_data("people-copy", again).value) == to_plain(value)
    assert to_plain(converter(scope).to_connect_data("people-copy", converter(scope).from_connect_data(
        "people-copy2", schema, value)).value)["nick"] == ""


def test_confluent_kafkas_deserializer_reads_ours(scope: str) -> None:
    c = converter(scope)
    data = c.from_connect_data("orders", ORDER, order())
    registered = c.client.get_latest_version("orders-value").schema
    pool = DescriptorPool()
    _init_pool(pool)
    pool.Add(_str_to_proto("orders.proto", registered.schema_str))
    cls = GetMessageClass(pool.FindMessageTypeByName("shop.Order"))  # their own class, from the registered file
    msg = ProtobufDeserializer(cls, {}, c.client)(data, ctx("orders"))
    assert (msg.id, msg.i8, msg.i16, msg.ok, msg.blob) == (1 << 40, -128, 32767, True, b"\x00\xff\x10")
    assert int.from_bytes(msg.amount.value, "big", signed=True) == -1234567890123456789099
    assert (msg.amount.scale, msg.amount.precision) == (2, 22)
    assert (msg.day.year, msg.day.month, msg.day.day) == (1969, 12, 31)
    assert (msg.at.hours, msg.at.minutes, msg.at.seconds, msg.at.nanos) == (23, 59, 59, 999_000_000)
    assert (msg.ts.seconds, msg.ts.nanos) == (-1, 999_000_000)
    assert not msg.HasField("maybe_ts") and list(msg.tags) == ["a", "ü"]
    assert [(e.key, e.value) for e in msg.counts] == [("a", 1), ("b", -1)]
    assert [(e.key, e.value.sku) for e in msg.by_id] == [(7, "s"), (-2, "t")] and msg.currency == "USD"


def test_a_value_of_the_wrong_type_names_topic_value_field_and_expected(scope: str) -> None:
    bad = order()
    bad._values[ORDER.field("i32").index] = "seven"  # type: ignore[union-attr]  # bypass put()'s own check
    with pytest.raises(DataError) as err:
        converter(scope).from_connect_data("orders", ORDER, bad)
    message = str(err.value)
    assert "ProtobufConverter" in message and "'orders'" in message and "value" in message
    assert "field 'i32'" in message and "INT32" in message


def test_an_array_of_arrays_has_no_protobuf_form(scope: str) -> None:
    schema = SchemaBuilder.struct().name("M").field(
        "grid", SchemaBuilder.array(SchemaBuilder.array(Schema.INT32_SCHEMA).build()).build()).build()
    with pytest.raises(DataError, match=r"topic 'm'.*field 'grid'.*array of ARRAYs"):
        converter(scope).from_connect_data("m", schema, Struct(schema).put("grid", [[1]]))


def test_an_unknown_enum_symbol_names_the_field(scope: str) -> None:
    cls = _their_class()
    data = ProtobufSerializer(cls, converter(scope).client)(cls(role=3), ctx("people"))
    back = converter(scope).to_connect_data("people", data)
    value = back.value
    value._values[back.schema.field("role").index] = "ROOT"  # type: ignore[union-attr]
    with pytest.raises(DataError, match=r"field 'role' is 'ROOT', not a symbol of the enum Role"):
        converter(scope).from_connect_data("people", back.schema, value)


def test_bytes_not_in_the_wire_format_or_naming_no_message_are_data_errors(scope: str) -> None:
    c = converter(scope)
    good = c.from_connect_data("orders", ORDER, order())
    assert good is not None
    with pytest.raises(DataError, match=r"read the value of a record from topic 'orders'.*wire format"):
        c.to_connect_data("orders", b"\x07garbage")
    # message indexes [5] (count 1, index 5, zigzag varints) point past the file's one message
    with pytest.raises(DataError, match=r"message indexes \[5\]"):
        c.to_connect_data("orders", good[:5] + b"\x02\x0a" + good[6:])


def test_a_decimal_that_does_not_fit_its_scale_names_the_field(scope: str) -> None:
    schema = SchemaBuilder.struct().name("P").field("price", Decimal.schema(2)).build()
    c = converter(scope)
    data = c.from_connect_data("p", schema, Struct(schema).put("price", decimal.Decimal("1.25")))
    registered = c.client.get_latest_version("p-value").schema
    pool = DescriptorPool()
    _init_pool(pool)
    pool.Add(_str_to_proto("p.proto", registered.schema_str))
    cls = GetMessageClass(pool.FindMessageTypeByName("P"))
    msg = ProtobufDeserializer(cls, {}, c.client)(data, ctx("p"))
    msg.price.scale = 3  # a producer writing 0.125 where the field's declared scale is 2
    theirs = ProtobufSerializer(cls, c.client, {"auto.register.schemas": False, "use.latest.version": True})
    with pytest.raises(DataError, match=r"topic 'p'.*field 'price' is 0.125, which does not fit the Decimal's scale"):
        c.to_connect_data("p", theirs(msg, ctx("p")))


def test_aliases_resolve() -> None:
    assert ALIASES["io.confluent.connect.protobuf.ProtobufConverter"] == \
        "connect_runtime.converters.protobuf.ProtobufConverter"
    assert load_class("ProtobufConverter", "value.converter") is ProtobufConverter


def test_a_value_its_protobuf_type_cannot_hold_names_the_field(scope: str) -> None:
    unsigned = SchemaBuilder.int64().parameter("io.confluent.connect.protobuf.Type", "uint32").build()
    schema = SchemaBuilder.struct().name("U").field("n", unsigned).build()
    c = converter(scope)
    assert c.to_connect_data("u", c.from_connect_data("u", schema, Struct(schema).put("n", 4_000_000_000))).value[
        "n"] == 4_000_000_000
    with pytest.raises(DataError, match=r"topic 'u'.*field 'n' is -1, which the Protobuf field's type \(uint32\)"):
        c.from_connect_data("u", schema, Struct(schema).put("n", -1))


def test_a_recursive_message_type_is_named(scope: str) -> None:
    fdp = descriptor_pb2.FileDescriptorProto(name="node.proto", syntax="proto3")
    node = fdp.message_type.add(name="Node")
    node.field.add(name="next", number=1, type=F.TYPE_MESSAGE, type_name=".Node", label=F.LABEL_OPTIONAL)
    pool = DescriptorPool()
    pool.Add(fdp)
    cls = GetMessageClass(pool.FindMessageTypeByName("Node"))
    data = ProtobufSerializer(cls, converter(scope).client)(cls(), ctx("nodes"))
    with pytest.raises(DataError, match=r"topic 'nodes'.*Node is recursive"):
        converter(scope).to_connect_data("nodes", data)


def test_a_nested_error_names_the_path_through_arrays_and_maps(scope: str) -> None:
    bad = order()
    bad["by_id"][-2]._values[1] = "three"  # qty of the map value under key -2, bypassing put()'s own check
    with pytest.raises(DataError, match=r"field 'by_id\[-2\]\.qty' is a str; expected INT32"):
        converter(scope).from_connect_data("orders", ORDER, bad)


def test_an_int8_field_holding_more_than_a_byte_names_the_field(scope: str) -> None:
    schema = SchemaBuilder.struct().name("B").field("small", Schema.INT8_SCHEMA).build()
    c = converter(scope)
    c.from_connect_data("b", schema, Struct(schema).put("small", 1))
    registered = c.client.get_latest_version("b-value").schema
    pool = DescriptorPool()
    _init_pool(pool)
    pool.Add(_str_to_proto("b.proto", registered.schema_str))
    cls = GetMessageClass(pool.FindMessageTypeByName("B"))  # int32 with connect.type int8: protobuf takes 500
    theirs = ProtobufSerializer(cls, c.client, {"auto.register.schemas": False, "use.latest.version": True})
    with pytest.raises(DataError, match=r"topic 'b'.*field 'small' is 500, out of the range of INT8"):
        c.to_connect_data("b", theirs(cls(small=500), ctx("b")))


def test_a_schema_id_in_a_header_is_read(scope: str) -> None:
    from confluent_kafka.schema_registry import header_schema_id_serializer

    cls = _their_class()
    headers: list[tuple[str, Any]] = []
    theirs = ProtobufSerializer(cls, converter(scope).client, {"schema.id.serializer": header_schema_id_serializer})
    data = theirs(cls(name="Ada"), SerializationContext("people", MessageField.VALUE, headers))
    assert [k for k, _ in headers] == ["__value_schema_id"]
    assert converter(scope).to_connect_data("people", data, headers).value["name"] == "Ada"
