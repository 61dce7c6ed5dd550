"""JsonSchemaConverter and ProtobufConverter against a real Schema Registry (Apicurio Registry's Confluent-compatible
API, started by tests/support/schema_registry.py): what they register is accepted, read back by fresh converters
(everything from the server) with the registry's versions, and a changed schema registers a new version; under
BACKWARD an incompatible JSON Schema is refused naming the subject (Apicurio cannot check Protobuf compatibility of
the base64 descriptors confluent-kafka registers: see the last test)."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from typing import Any

import pytest
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from connect_runtime.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Timestamp, to_plain
from connect_runtime.api.errors import DataError, RetriableError
from connect_runtime.converters.jsonschema import JsonSchemaConverter
from connect_runtime.converters.protobuf import ProtobufConverter

pytestmark = pytest.mark.schema_registry

ITEM = SchemaBuilder.struct().name("shop.Item").field("sku", Schema.STRING_SCHEMA).field(
    "qty", Schema.INT16_SCHEMA).build()
V1 = (SchemaBuilder.struct().name("shop.Order").field("id", Schema.INT64_SCHEMA).field("amount", Decimal.schema(2))
      .field("day", Date.schema()).field("at", Timestamp.schema())
      .field("items", SchemaBuilder.array(ITEM).build())
      .field("attrs", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT32_SCHEMA).build()).build())
V2 = SchemaBuilder.type_of(V1).field("note", Schema.OPTIONAL_STRING_SCHEMA).build()
RETYPED = SchemaBuilder.struct().name("shop.Order").field("id", Schema.STRING_SCHEMA).build()


def order(schema: Schema, n: int) -> Struct:
    s = (Struct(schema).put("id", n).put("amount", decimal.Decimal("12.34")).put("day", dt.date(2026, 11, 26))
         .put("at", dt.datetime(2026, 11, 26, 9, 30, tzinfo=dt.UTC))
         .put("items", [Struct(ITEM).put("sku", "a").put("qty", 2)]).put("attrs", {"k": 1}))
    return s.put("note", "second") if schema.field("note") else s


@pytest.mark.parametrize("cls", [JsonSchemaConverter, ProtobufConverter])
def test_written_read_back_and_evolved_on_a_real_registry(schema_registry_url: str, cls: Any) -> None:
    topic = f"orders-{cls.__name__.lower()}-{uuid.uuid4().hex[:8]}"
    writer = cls()
    writer.configure({"schema.registry.url": schema_registry_url}, False)
    one = writer.from_connect_data(topic, V1, order(V1, 1))
    two = writer.from_connect_data(topic, V2, order(V2, 2))
    assert sorted(writer.client.get_versions(f"{topic}-value")) == [1, 2]
    reader = cls()  # a fresh client: every schema from the server
    reader.configure({"schema.registry.url": schema_registry_url}, False)
    first, second = reader.to_connect_data(topic, one), reader.to_connect_data(topic, two)
    assert (first.schema.version, second.schema.version) == (1, 2)
    assert to_plain(first.value) == to_plain(order(V1, 1))
    assert to_plain(second.value) == to_plain(order(V2, 2))


def test_confluent_kafkas_json_deserializer_reads_ours_from_the_server(schema_registry_url: str) -> None:
    topic = f"orders-json-{uuid.uuid4().hex[:8]}"
    writer = JsonSchemaConverter()
    writer.configure({"schema.registry.url": schema_registry_url}, False)
    data = writer.from_connect_data(topic, V1, order(V1, 7))
    plain = JSONDeserializer(None, schema_registry_client=writer.client)(
        data, SerializationContext(topic, MessageField.VALUE))
    assert plain["id"] == 7 and plain["items"] == [{"sku": "a", "qty": 2}] and plain["day"] == 20783


def test_an_incompatible_change_is_refused_naming_the_subject(schema_registry_url: str) -> None:
    topic = f"orders-json-{uuid.uuid4().hex[:8]}"
    subject = f"{topic}-value"
    writer = JsonSchemaConverter()
    writer.configure({"schema.registry.url": schema_registry_url}, False)
    writer.from_connect_data(topic, V1, order(V1, 1))
    writer.client.set_compatibility(subject, "BACKWARD")
    with pytest.raises(DataError) as err:
        writer.from_connect_data(topic, RETYPED, Struct(RETYPED).put("id", "one"))
    text = str(err.value)
    assert f"under subject {subject!r}" in text and "HTTP 409" in text
    assert sorted(writer.client.get_versions(subject)) == [1]


def test_apicurio_cannot_check_protobuf_compatibility_of_confluent_kafkas_schemas(schema_registry_url: str) -> None:
    """confluent-kafka registers a Protobuf schema as its base64 ``FileDescriptorProto`` (Confluent's registry takes
    that form); Apicurio stores it, but a compatibility check parses the stored schema as ``.proto`` text and fails
    with HTTP 500. The converter reports it as a registry failure (retriable), naming the subject."""
    topic = f"orders-protobuf-{uuid.uuid4().hex[:8]}"
    subject = f"{topic}-value"
    writer = ProtobufConverter()
    writer.configure({"schema.registry.url": schema_registry_url}, False)
    writer.from_connect_data(topic, V1, order(V1, 1))
    writer.client.set_compatibility(subject, "BACKWARD")
    with pytest.raises(RetriableError) as err:
        writer.from_connect_data(topic, RETYPED, Struct(RETYPED).put("id", "one"))
    assert f"under subject {subject!r}" in str(err.value) and "HTTP 500" in str(err.value)
    assert sorted(writer.client.get_versions(subject)) == [1]
