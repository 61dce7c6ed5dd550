"""Byte compatibility of our JsonConverter with Kafka Connect's own (``org.apache.kafka:connect-json`` 4.4.0).

Kafka Connect's converter runs in a small Java harness (tests/support/connect_json/Harness.java, the jars from
``bash scripts/fetch_connect_json.sh``). Both directions, with ``schemas.enable`` true and false and
``decimal.format`` BASE64 and NUMERIC, over every Connect type and logical type:

- Kafka reads what ours writes: Kafka's converter reads our bytes, and its description of the value (typed: ints,
  32/64-bit floats, decimals with their scale, dates as milliseconds, structs field by field) is the value we wrote;
  written again by Kafka's converter, the bytes are exactly ours. (Two things Kafka's reader itself loses, so the
  cases avoid or adjust them: the order of a map's entries, read into a ``HashMap``, and the sign of -0.0, read
  through ``BigDecimal``.)
- Ours reads what Kafka writes: the harness builds the same values in Java, Kafka's converter writes them, ours reads
  them back to the same schema and value, and ours writes exactly Kafka's bytes for them.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Iterator
from typing import Any

import pytest

from connect_runtime.api.data import (
    Date,
    Decimal,
    Schema,
    SchemaBuilder,
    SchemaType,
    Struct,
    Time,
    Timestamp,
)
from connect_runtime.api.errors import DataError
from connect_runtime.converters import JsonConverter
from connect_runtime.converters.connect_json import java_double, java_float
from tests.support.connect_json import KafkaJson, harness

D = decimal.Decimal
UTC = dt.UTC


def _cases() -> dict[str, tuple[Schema | None, Any]]:
    """The same values as Harness.buildCases(), built here independently."""
    c: dict[str, tuple[Schema | None, Any]] = {}
    prims = (SchemaBuilder.struct().name("compat.Primitives").version(3).doc("all the primitive types")
             .field("i8", Schema.INT8_SCHEMA).field("i16", Schema.INT16_SCHEMA).field("i32", Schema.INT32_SCHEMA)
             .field("i64", Schema.INT64_SCHEMA).field("f32", Schema.FLOAT32_SCHEMA)
             .field("f64", Schema.FLOAT64_SCHEMA).field("flag", Schema.BOOLEAN_SCHEMA)
             .field("text", Schema.STRING_SCHEMA).field("raw", Schema.BYTES_SCHEMA)
             .field("maybe", Schema.OPTIONAL_STRING_SCHEMA).build())
    c["primitives"] = (prims, Struct(prims, {
        "i8": -128, "i16": 32767, "i32": -(2**31), "i64": 2**63 - 1, "f32": 0.1, "f64": 1.0e-5, "flag": True,
        "text": 'caf\u00e9 \u2603 "q" \\ \n\t\u0001\u001f \U0001F600 </> \u007f\u2028\b\f\r', "raw": b"\x00\x01\x02\xff\xfe",
        "maybe": None}))
    logical = (SchemaBuilder.struct().name("compat.Logical")
               .field("price", Decimal.schema(2)).field("big", Decimal.schema(0)).field("tiny", Decimal.schema(10))
               .field("neg", Decimal.schema(3))
               .field("day", Date.schema()).field("before", Date.schema()).field("at", Time.schema())
               .field("when", Timestamp.schema()).field("old", Timestamp.schema())
               .field("maybeDay", Date.builder().optional().build()).build())
    c["logical"] = (logical, Struct(logical, {
        "price": D("12345.67"), "big": D(2**70), "tiny": D("0.0000000001"), "neg": D("-0.128"),
        "day": dt.date(2024, 1, 2), "before": dt.date(1969, 12, 31), "at": dt.time(1, 2, 3, 4000),
        "when": dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=UTC),
        "old": dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=-1234567890123),
        "maybeDay": None}))
    inner = (SchemaBuilder.struct().name("compat.Line").field("sku", Schema.STRING_SCHEMA)
             .field("qty", Schema.INT32_SCHEMA).build())
    nested = (SchemaBuilder.struct().name("compat.Nested")
              .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).build())
              .field("counts", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT64_SCHEMA).build())
              .field("byId", SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.OPTIONAL_STRING_SCHEMA).build())
              .field("lines", SchemaBuilder.array(inner).build())
              .field("first", inner).field("none", SchemaBuilder.struct().name("compat.Empty").optional().build())
              .field("doubles", SchemaBuilder.array(Schema.FLOAT64_SCHEMA).build())
              .field("floats", SchemaBuilder.array(Schema.FLOAT32_SCHEMA).build()).build())
    c["nested"] = (nested, Struct(nested, {
        "tags": ["x", "y"], "counts": {"a": 1}, "byId": {-1: None, 7: "seven"},  # the order Kafka's reader (a HashMap) gives back
        "lines": [Struct(inner, {"sku": "A", "qty": 2})], "first": Struct(inner, {"sku": "B", "qty": -3}),
        "none": None,
        "doubles": [0.0, -0.0, 1.5, 100.0, 0.001, 1.0e-4, 1234567.0, 1.0e7, 1.2345678e7, 1.0e300, 4.9e-324,
                    0.1 + 0.2, -2.5e-7],
        "floats": [0.0, 1.5, 3.4e38, 1.0e-5, 0.3, 16777216.0]}))
    defaults = (SchemaBuilder.struct().name("compat.Defaults")
                .field("n", SchemaBuilder.int32().optional().default_value(42).build())
                .field("s", SchemaBuilder.string().default_value("dflt").doc("a doc").build())
                .field("d", Decimal.builder(2).optional().default_value(D("1.50")).build())
                .field("p", SchemaBuilder.string().parameter("z", "1").parameter("a", "2").parameter("m", "3")
                       .optional().build()).build())
    c["defaults"] = (defaults, Struct(defaults, {"n": None, "p": "x"}))
    c["string"] = (Schema.STRING_SCHEMA, "plain")
    c["int64"] = (Schema.INT64_SCHEMA, -9007199254740993)
    c["bytes"] = (Schema.BYTES_SCHEMA, b"hello")
    c["decimal"] = (Decimal.schema(4), D("-1.0000"))
    c["intmap"] = (SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.BOOLEAN_SCHEMA).build(), {1: True})
    c["optionalNull"] = (Schema.OPTIONAL_STRING_SCHEMA, None)
    c["schemaless"] = (None, {"a": 1, "b": ["x", 2.5, True]})
    return c


CASES = _cases()
CONFIGS = [
    pytest.param({"schemas.enable": enable, "decimal.format": fmt}, id=f"schemas.enable={enable}-{fmt}")
    for enable in (True, False) for fmt in ("BASE64", "NUMERIC")
]


def describe(schema: Schema | None, v: Any) -> str:
    """The harness's ``describe`` of a value, computed from ours."""
    if v is None:
        return "null"
    name = schema.name if schema is not None else None
    if name == Decimal.LOGICAL_NAME:
        return f"decimal:{v}"
    if name == Date.LOGICAL_NAME:
        return f"date:{(v - dt.date(1970, 1, 1)).days * 86_400_000}"
    if name == Time.LOGICAL_NAME:
        return f"time:{Time.from_logical(schema, v)}"  # type: ignore[arg-type]
    if name == Timestamp.LOGICAL_NAME:
        return f"timestamp:{Timestamp.from_logical(schema, v)}"  # type: ignore[arg-type]
    if isinstance(v, Struct):
        return "struct{" + ",".join(f"{f.name}={describe(f.schema, v[f.name])}" for f in v.schema.fields) + "}"
    if isinstance(v, list):
        return "[" + ",".join(describe(schema.value_schema if schema else None, x) for x in v) + "]"
    if isinstance(v, dict):
        parts = sorted((describe(schema.key_schema if schema else None, k),
                        describe(schema.value_schema if schema else None, x)) for k, x in v.items())
        return "{" + ",".join(f"{k}:{x}" for k, x in parts) + "}"
    if isinstance(v, bytes):
        return f"bytes:{v.hex()}"
    if isinstance(v, bool):
        return f"bool:{str(v).lower()}"
    if isinstance(v, int):
        return f"int:{v}"
    if isinstance(v, float):
        if schema is not None and schema.type is SchemaType.FLOAT32:
            return f"f32:{java_float(v)}"
        return f"f64:{java_double(v)}"
    if isinstance(v, str):
        return f"str:{v.encode().hex()}"
    raise AssertionError(f"no description for {v!r}")


def _converter(config: dict[str, Any], is_key: bool = False) -> JsonConverter:
    conv = JsonConverter()
    conv.configure(config, is_key)
    return conv


@pytest.fixture(scope="module")
def kafka() -> Iterator[KafkaJson]:
    h = harness()
    yield h
    h.close()


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("config", CONFIGS)
def test_kafka_reads_what_ours_writes_and_writes_the_same_bytes(kafka: KafkaJson, config: dict[str, Any],
                                                                 name: str) -> None:
    schema, value = CASES[name]
    ours = _converter(config).from_connect_data("topic", schema, value)
    envelope_config = {**config, "schemas.enable": True}
    envelope = _converter(envelope_config).from_connect_data("topic", schema, value)
    # Kafka reads our envelope (the schema travels with it), then writes what it read with the config under test
    ans = kafka.echo(envelope, read=envelope_config, write=config)
    assert "error" not in ans, ans
    if name == "nested":
        # Kafka reads JSON numbers through BigDecimal (USE_BIG_DECIMAL_FOR_FLOATS), which has no negative zero:
        # our -0.0 (its writer's text too, see the other direction) comes back 0.0 and is written again as 0.0
        assert envelope is not None and ours is not None and schema is not None
        assert b",-0.0," in envelope
        value = Struct(schema, {**value, "doubles": [abs(x) if x == 0 else x for x in value["doubles"]]})
        ours = ours.replace(b",-0.0,", b",0.0,")
    assert ans["value"] == describe(schema, value)
    assert ans["out"] == ours, (ans["out"], ours)
    if schema is not None:
        assert ans["schema"] == _converter({"schemas.enable": True}).connect_json.schema_json(schema)
    if not config["schemas.enable"] and ours is not None and b"1180591620717411303424" not in ours:
        # and Kafka reads our payload alone (no schema: its own inference) as we read it (but for an integer past
        # 64 bits, which Kafka's schemaless reader wraps with longValue(): 2**70 reads as 0)
        plain = kafka.echo(ours, read=config, write=config)
        assert "error" not in plain, plain
        assert plain["value"] == describe(None, _converter(config).to_connect_data("topic", ours).value)


@pytest.mark.parametrize("config", CONFIGS)
def test_ours_reads_what_kafka_writes_and_writes_the_same_bytes(kafka: KafkaJson, config: dict[str, Any]) -> None:
    written = kafka.cases(config)
    assert set(written) == set(CASES)
    conv = _converter(config)
    for name, (schema, value) in CASES.items():
        data = written[name]
        assert conv.from_connect_data("topic", schema, value) == data, name
        got = conv.to_connect_data("topic", data)
        if config["schemas.enable"]:
            assert got.schema == schema, name
            assert describe(got.schema, got.value) == describe(schema, value), name
            # and written again by ours: Kafka's bytes
            assert conv.from_connect_data("topic", got.schema, got.value) == data, name
        else:
            assert got.schema is None
            assert got.value == (None if data is None else json.loads(data)), name


@pytest.mark.parametrize("data", [b'{"id":1}', b"null", b'{"schema":null}', b'{"schema":null,"payload":1,"x":2}'])
def test_kafka_refuses_what_ours_refuses_plain_json_with_schemas_enabled(kafka: KafkaJson, data: bytes) -> None:
    """The error case both sides share: what is not an envelope, read with schemas.enable=true."""
    ans = kafka.echo(data, read={"schemas.enable": True}, write={"schemas.enable": True})
    assert "requires \"schema\" and \"payload\"" in ans.get("error", ""), ans
    with pytest.raises(DataError, match='"schema" and "payload"'):
        _converter({"schemas.enable": True}).to_connect_data("topic", data)


def test_no_bytes_are_null_for_both(kafka: KafkaJson) -> None:
    for enable in (True, False):
        ans = kafka.echo(None, read={"schemas.enable": enable}, write={"schemas.enable": enable})
        assert ans == {"out": None, "schema": None, "value": "null"}
        assert _converter({"schemas.enable": enable}).to_connect_data("topic", None) == (None, None)


def test_replace_null_with_default_false_same_bytes_and_same_refusal(kafka: KafkaJson) -> None:
    config = {"schemas.enable": True, "replace.null.with.default": False}
    for name in ("nested", "logical", "primitives"):
        schema, value = CASES[name]
        ours = _converter(config).from_connect_data("topic", schema, value)
        assert ours is not None
        ans = kafka.echo(ours, read=config, write=config)
        assert "error" not in ans, ans
        assert ans["out"] == ours.replace(b",-0.0,", b",0.0,")  # Kafka's reader loses -0.0's sign (see above)
    # a required field with a default, left null: both refuse it when the default may not stand in
    refused = kafka.request({"op": "cases", "write": {"schemas.enable": "true", "replace.null.with.default": "false"}})
    assert "null value for field that is required" in refused["error:defaults"]
    schema, value = CASES["defaults"]
    with pytest.raises(DataError, match=r"field 's' is null, its schema is required, and "
                                        r"replace.null.with.default=false keeps its default out"):
        _converter(config).from_connect_data("topic", schema, value)
    # the optional one with a default is written as null, and read back as null by both
    optional = SchemaBuilder.struct().field("n", SchemaBuilder.int32().optional().default_value(42).build()).build()
    ours = _converter(config).from_connect_data("topic", optional, Struct(optional))
    assert ours is not None and ours.endswith(b'"payload":{"n":null}}')
    ans = kafka.echo(ours, read=config, write=config)
    assert ans["out"] == ours and ans["value"] == "struct{n=int:42}"  # Struct.get gives the default
    assert _converter(config).to_connect_data("topic", ours).value.get_without_default("n") is None


def test_key_converter_bytes_match_too(kafka: KafkaJson) -> None:
    schema, value = CASES["logical"]
    config = {"schemas.enable": True, "decimal.format": "NUMERIC"}
    ours = _converter(config, is_key=True).from_connect_data("topic", schema, value)
    ans = kafka.echo(ours, read=config, write=config, is_key=True)
    assert ans["out"] == ours


def test_schema_content_both_read_a_payload_alone_as_that_schema(kafka: KafkaJson) -> None:
    """KIP-1054: with ``schema.content`` every message read is the payload of that schema."""
    for name in ("primitives", "logical", "nested"):
        schema, value = CASES[name]
        assert schema is not None
        config = {"schemas.enable": True,
                  "schema.content": _converter({"schemas.enable": True}).connect_json.schema_json(schema)}
        payload = _converter({"schemas.enable": False}).from_connect_data("topic", schema, value)
        ans = kafka.echo(payload, read=config, write={"schemas.enable": True})
        assert "error" not in ans, ans
        if name == "nested":
            value = Struct(schema, {**value, "doubles": [abs(x) if x == 0 else x for x in value["doubles"]]})
        assert ans["value"] == describe(schema, value)
        ours = _converter(config).to_connect_data("topic", payload)
        assert ours.schema == schema
        assert describe(schema, ours.value) == describe(schema, CASES[name][1])
        assert ans["out"] == _converter({"schemas.enable": True}).from_connect_data("topic", schema, value)
