"""AvroConverter against a real Schema Registry (Apicurio Registry's Confluent-compatible API, started by
tests/support/schema_registry.py): registration, reading back with registry versions, evolution under BACKWARD
(a compatible change registers a new version and flows on; an incompatible one is refused with a DataError naming
the subject, the field and the rule), and basic-auth secrets kept out of errors."""

from __future__ import annotations

import decimal
import uuid

import pytest

from connect_runtime.api.data import Decimal, Schema, SchemaBuilder, Struct, to_plain
from connect_runtime.api.errors import DataError
from connect_runtime.converters.avro import AvroConverter

pytestmark = pytest.mark.schema_registry

V1 = SchemaBuilder.struct().name("shop.Order").field("id", Schema.INT64_SCHEMA) \
    .field("amount", Decimal.schema(2)).build()
V2 = SchemaBuilder.struct().name("shop.Order").field("id", Schema.INT64_SCHEMA) \
    .field("amount", Decimal.schema(2)).field("note", Schema.OPTIONAL_STRING_SCHEMA).build()
V3 = SchemaBuilder.struct().name("shop.Order").field("id", Schema.INT64_SCHEMA) \
    .field("amount", Decimal.schema(2)).field("note", Schema.OPTIONAL_STRING_SCHEMA) \
    .field("qty", Schema.INT32_SCHEMA).build()


def converter(url: str, **extra: str) -> AvroConverter:
    conv = AvroConverter()
    conv.configure({"schema.registry.url": url, **extra}, False)
    return conv


def test_evolution_on_a_real_registry(schema_registry_url: str) -> None:
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    subject = f"{topic}-value"
    writer = converter(schema_registry_url)
    one = writer.from_connect_data(topic, V1, Struct(V1).put("id", 1).put("amount", decimal.Decimal("1.50")))
    writer.client.set_compatibility(subject, "BACKWARD")  # type: ignore[union-attr]
    two = writer.from_connect_data(topic, V2, Struct(V2).put("id", 2).put("amount", decimal.Decimal("2.00"))
                                   .put("note", "n"))
    assert sorted(writer.client.get_versions(subject)) == [1, 2]  # type: ignore[union-attr]
    with pytest.raises(DataError) as err:
        writer.from_connect_data(topic, V3, Struct(V3).put("id", 3).put("amount", decimal.Decimal("3.00"))
                                 .put("qty", 1))
    text = str(err.value)
    assert f"subject {subject!r}" in text and "field 'qty' was added without a default" in text
    assert "compatibility rule BACKWARD" in text
    assert sorted(writer.client.get_versions(subject)) == [1, 2]  # type: ignore[union-attr]
    reader = converter(schema_registry_url)  # a fresh client: everything from the server
    first, second = reader.to_connect_data(topic, one), reader.to_connect_data(topic, two)
    assert (first.schema.version, second.schema.version) == (1, 2)  # type: ignore[union-attr]
    assert to_plain(first.value) == {"id": 1, "amount": decimal.Decimal("1.50")}
    assert to_plain(second.value) == {"id": 2, "amount": decimal.Decimal("2.00"), "note": "n"}
    latest = converter(schema_registry_url, **{"use.latest.version": "true", "auto.register.schemas": "false"})
    assert to_plain(latest.to_connect_data(topic, one).value) == {"id": 1, "amount": decimal.Decimal("1.50"),
                                                                  "note": None}


def test_registry_errors_keep_the_password_out(schema_registry_url: str) -> None:
    url = schema_registry_url.replace("http://", "http://svc:pa55-w0rd@")
    conv = converter(url)
    with pytest.raises(DataError) as err:
        conv.to_connect_data("t", b"\x00\x7f\xff\xff\xf0\x02")  # an id the registry does not have
    assert "pa55-w0rd" not in str(err.value) and "HTTP 404" in str(err.value)
