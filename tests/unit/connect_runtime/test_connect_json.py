"""JsonConverter with ``schemas.enable=true``: Kafka Connect's envelope, every type and logical type, round trips,
Java's number text, the settings (decimal.format, schemas.cache.size, replace.null.with.default) and the errors.
The bytes are checked against Kafka Connect's own converter in tests/integration/test_connect_json_compat.py;
here the exact texts pin what those tests found."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import struct
from typing import Any

import pytest

from connect_runtime.api.data import (
    Date,
    Decimal,
    Schema,
    SchemaAndValue,
    SchemaBuilder,
    Struct,
    Time,
    Timestamp,
)
from connect_runtime.api.errors import ConfigError, DataError
from connect_runtime.converters import JsonConverter
from connect_runtime.converters.connect_json import java_double, java_float, json_string

D = decimal.Decimal
UTC = dt.UTC


def conv(is_key: bool = False, **cfg: Any) -> JsonConverter:
    c = JsonConverter()
    c.configure({"schemas.enable": "true", **cfg}, is_key)
    return c


def envelope(data: bytes | None) -> Any:
    assert data is not None
    return json.loads(data)


ORDER = (SchemaBuilder.struct().name("shop.Order").version(2).doc("an order")
         .field("id", Schema.INT64_SCHEMA)
         .field("amount", Decimal.schema(2))
         .field("note", Schema.OPTIONAL_STRING_SCHEMA)
         .field("day", Date.schema()).field("at", Time.schema()).field("ts", Timestamp.schema())
         .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).build())
         .field("qty", SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.FLOAT32_SCHEMA).build())
         .field("attrs", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.OPTIONAL_INT16_SCHEMA).build())
         .build())


def order(**changes: Any) -> Struct:
    values = {"id": 7, "amount": D("-9.99"), "day": dt.date(2024, 1, 2), "at": dt.time(1, 2, 3, 4000),
              "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=UTC), "tags": ["a"], "qty": {1: 0.5},
              "attrs": {"x": None, "y": -3}}
    values.update(changes)
    return Struct(ORDER, values)


def test_the_envelope_holds_the_schema_in_kafka_connects_key_order_and_the_payload() -> None:
    data = conv().from_connect_data("orders", ORDER, order())
    assert data is not None
    text = data.decode()
    assert text.startswith('{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"},'
                           '{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal",'
                           '"version":1,"parameters":{"scale":"2"},"field":"amount"},')
    assert text.endswith('"optional":false,"name":"shop.Order","version":2,"doc":"an order"},'
                         '"payload":{"id":7,"amount":"/Bk=","note":null,"day":19724,"at":3723004,'
                         '"ts":1704164645006,"tags":["a"],"qty":[[1,0.5]],"attrs":{"x":null,"y":-3}}}')
    assert '"type":"map","keys":{"type":"int32","optional":false},"values":{"type":"float","optional":false}' in text


def test_round_trip_gives_the_schema_and_a_struct_of_python_logical_values() -> None:
    c = conv()
    value = order(note="hé \U0001F600")
    got = c.to_connect_data("orders", c.from_connect_data("orders", ORDER, value))
    assert got == SchemaAndValue(ORDER, value)
    assert isinstance(got.value, Struct)
    assert got.value["amount"] == D("-9.99") and got.value["ts"].tzinfo is not None


@pytest.mark.parametrize(("schema", "value", "payload"), [
    (Schema.INT8_SCHEMA, -128, "-128"),
    (Schema.INT16_SCHEMA, 32767, "32767"),
    (Schema.INT32_SCHEMA, -(2**31), "-2147483648"),
    (Schema.INT64_SCHEMA, 2**63 - 1, "9223372036854775807"),
    (Schema.FLOAT32_SCHEMA, 0.1, "0.1"),
    (Schema.FLOAT32_SCHEMA, 16777216.0, "1.6777216E7"),
    (Schema.FLOAT64_SCHEMA, 1e-5, "1.0E-5"),
    (Schema.FLOAT64_SCHEMA, 1234567.0, "1234567.0"),
    (Schema.FLOAT64_SCHEMA, -0.0, "-0.0"),
    (Schema.BOOLEAN_SCHEMA, False, "false"),
    (Schema.STRING_SCHEMA, "a\x01\"\n", '"a\\u0001\\"\\n"'),
    (Schema.BYTES_SCHEMA, b"\x00\xff", '"AP8="'),
    (Schema.OPTIONAL_STRING_SCHEMA, None, "null"),
    (Decimal.schema(0), D(2**70), '"QAAAAAAAAAAA"'),
    (Decimal.schema(3), D("-0.128"), '"gA=="'),
    (Date.schema(), dt.date(1969, 12, 31), "-1"),
    (Time.schema(), dt.time(23, 59, 59, 999000), "86399999"),
    (Timestamp.schema(), dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC), "-1"),
    (SchemaBuilder.array(Schema.OPTIONAL_INT32_SCHEMA).build(), [1, None], "[1,null]"),
    (SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT8_SCHEMA).build(), {"a": 1}, '{"a":1}'),
    (SchemaBuilder.map(Decimal.schema(1), Schema.STRING_SCHEMA).build(), {D("1.5"): "x"}, '[["Dw==","x"]]'),
])
def test_every_type_and_logical_type_round_trips(schema: Schema, value: Any, payload: str) -> None:
    c = conv()
    data = c.from_connect_data("t", schema, value)
    assert data is not None
    assert data.decode().endswith(f',"payload":{payload}}}')
    got = c.to_connect_data("t", data)
    assert got.schema == schema
    assert got.value == value
    if isinstance(value, float):
        assert struct.pack("<d", got.value) == struct.pack("<d", value) or schema.type.name == "FLOAT32"


def test_decimal_format_numeric_writes_bigdecimal_text_and_either_format_is_read() -> None:
    schema = (SchemaBuilder.struct().field("a", Decimal.schema(2)).field("tiny", Decimal.schema(10))
              .field("big", Decimal.schema(0)).build())
    value = Struct(schema, {"a": D("-1.50"), "tiny": D("1E-10"), "big": D(2**70)})
    numeric = conv(**{"decimal.format": "NUMERIC"})
    data = numeric.from_connect_data("t", schema, value)
    assert envelope(data)["payload"] == {"a": -1.5, "tiny": 1e-10, "big": 2**70}
    assert data is not None and data.endswith(b'"payload":{"a":-1.50,"tiny":1E-10,"big":1180591620717411303424}}')
    for reader in (numeric, conv()):  # BASE64 readers read numbers too, and NUMERIC readers base64
        assert reader.to_connect_data("t", data).value == value
        assert reader.to_connect_data("t", conv().from_connect_data("t", schema, value)).value == value
    # a number with fewer places is brought to the schema's scale; more places would lose digits
    two = Decimal.schema(2)
    head = '{"schema":{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,' \
           '"parameters":{"scale":"2"}},"payload":'
    assert numeric.to_connect_data("t", (head + "3}").encode()) == SchemaAndValue(two, D("3.00"))
    with pytest.raises(DataError, match=r"more decimal places than the Decimal schema's scale 2"):
        numeric.to_connect_data("t", (head + "3.145}").encode())


def test_decimals_of_the_wrong_scale_or_type_name_the_field() -> None:
    with pytest.raises(DataError, match=r"value .*'t'.*field 'amount'.*scale 3.*scale is 2"):
        conv().from_connect_data("t", ORDER, _with(order(), amount=D("1.000")))


def _with(s: Struct, **changes: Any) -> Struct:
    """A struct with fields changed without validation (what a buggy task could hand over)."""
    out = Struct(s.schema, {k: s.get_without_default(k) for k in s})
    for k, v in changes.items():
        out._values[s.schema.field(k).index] = v  # type: ignore[union-attr]
    return out


@pytest.mark.parametrize(("changes", "match"), [
    ({"id": "7"}, r"field 'id' is a str; expected an int \(INT64\)"),
    ({"id": 2**63}, r"field 'id' is 9223372036854775808, out of the range of INT64"),
    ({"day": dt.datetime(2024, 1, 1)}, r"field 'day' is a datetime; expected a datetime.date \(Date\)"),
    ({"tags": ["a", 1]}, r"field 'tags\[1\]' is a int; expected a str"),
    ({"qty": {1: float("nan")}}, r"field 'qty\[1\]' is nan: JSON has no NaN"),
    ({"qty": {1: 1e39}}, r"field 'qty\[1\]' is 1e\+39, out of the range of FLOAT32"),
    ({"attrs": {"x": 1.5}}, r"field 'attrs.x' is a float; expected an int \(INT16\)"),
    ({"tags": None}, r"field 'tags' is null but its schema is required"),
])
def test_bad_values_are_a_data_error_naming_topic_kind_and_field(changes: dict[str, Any], match: str) -> None:
    with pytest.raises(DataError, match=r"cannot write the key of a record for topic 'orders': " + match):
        conv(is_key=True).from_connect_data("orders", ORDER, _with(order(), **changes))


def test_nested_struct_paths_are_named() -> None:
    inner = SchemaBuilder.struct().name("Line").field("qty", Schema.INT32_SCHEMA).build()
    outer = SchemaBuilder.struct().field("lines", SchemaBuilder.array(inner).build()).build()
    bad = _with(Struct(inner, {"qty": 1}), qty="x")
    value = _with(Struct(outer, {"lines": []}), lines=[Struct(inner, {"qty": 1}), bad])
    with pytest.raises(DataError, match=r"field 'lines\[1\].qty' is a str; expected an int \(INT32\)"):
        conv().from_connect_data("t", outer, value)


@pytest.mark.parametrize(("data", "match"), [
    (b'{"id":1}', r'value of a record from topic \'orders\': with schemas.enable=true the JSON must be an object '
                  r'with exactly the fields "schema" and "payload".*set schemas.enable=false'),
    (b'{"schema":null}', r'exactly the fields "schema" and "payload"'),
    (b'{"schema":null,"payload":1,"extra":2}', r'exactly the fields "schema" and "payload"'),
    (b"[1,2]", r'exactly the fields "schema" and "payload"'),
    (b"not json", r"not valid UTF-8 JSON"),
    (b'{"schema":{"type":"int99"},"payload":1}', r"not a Kafka Connect schema: unknown schema type 'int99'"),
    (b'{"schema":{"optional":true},"payload":1}', r'must contain a "type" string'),
    (b'{"schema":{"type":"array"},"payload":[]}', r'element type in "items"'),
    (b'{"schema":{"type":"map","keys":{"type":"string"}},"payload":{}}', r'"keys" and "values"'),
    (b'{"schema":{"type":"struct","fields":[{"type":"int8"}]},"payload":{}}', r'name itself in "field"'),
    (b'{"schema":{"type":"int8","parameters":{"a":1}},"payload":1}', r"string values"),
    (b'{"schema":{"type":"int8"},"payload":300}', r"payload is 300, out of the range of INT8"),
    (b'{"schema":{"type":"int32"},"payload":1.5}', r"payload is a number; expected an integer \(INT32\)"),
    (b'{"schema":{"type":"struct","fields":[{"type":"string","field":"s"}]},"payload":{"s":1}}',
     r"payload's field 's' is an integer; expected a string"),
    (b'{"schema":{"type":"struct","fields":[{"type":"string","field":"s"}]},"payload":{}}',
     r"payload's field 's' is null but its schema is required"),
    (b'{"schema":{"type":"bytes"},"payload":"***"}', r"not base64"),
    (b'{"schema":{"type":"map","keys":{"type":"int8"},"values":{"type":"int8"}},"payload":{"1":1}}',
     r"expected an array of \[key, value\] pairs"),
    (b'{"schema":{"type":"map","keys":{"type":"int8"},"values":{"type":"int8"}},"payload":[[1]]}',
     r"entry 0 is not a \[key, value\] pair"),
    (b'{"schema":{"type":"int32","name":"org.apache.kafka.connect.data.Time"},"payload":86400000}',
     r"milliseconds within a day"),
    (b'{"schema":{"type":"int32","name":"org.apache.kafka.connect.data.Date"},"payload":"2024-01-01"}',
     r"expected an integer \(Date: days since 1970-01-01\)"),
])
def test_what_cannot_be_read_is_a_data_error_naming_topic_and_what_was_expected(data: bytes, match: str) -> None:
    with pytest.raises(DataError, match=match) as info:
        conv().to_connect_data("orders", data)
    assert "topic 'orders'" in str(info.value)


def test_nulls_defaults_and_replace_null_with_default() -> None:
    with_default = SchemaBuilder.int32().optional().default_value(42).build()
    schema = SchemaBuilder.struct().field("n", with_default).build()
    value = Struct(schema)  # n unset
    assert envelope(conv().from_connect_data("t", schema, value))["payload"] == {"n": 42}
    keep = conv(**{"replace.null.with.default": "false"})
    data = keep.from_connect_data("t", schema, value)
    assert envelope(data)["payload"] == {"n": None}
    assert keep.to_connect_data("t", data).value.get_without_default("n") is None
    assert conv().to_connect_data("t", data).value.get_without_default("n") == 42
    assert envelope(data)["schema"]["fields"][0]["default"] == 42
    # tombstones: no schema and no value is no bytes; a null read is no schema and no value
    assert conv().from_connect_data("t", None, None) is None
    assert conv().to_connect_data("t", None) == SchemaAndValue(None, None)
    # a null value of an optional schema is an envelope with a null payload (as Kafka Connect writes it)
    assert conv().from_connect_data("t", Schema.OPTIONAL_INT8_SCHEMA, None) == \
        b'{"schema":{"type":"int8","optional":true},"payload":null}'


def test_schemaless_values_in_the_envelope_have_a_null_schema_and_infer_as_kafka_connect() -> None:
    c = conv()
    data = c.from_connect_data("t", None, {"a": 1.0e-5, "b": [b"\x01", True], "c": {1: "x"}})
    assert data == b'{"schema":null,"payload":{"a":1.0E-5,"b":["AQ==",true],"c":[[1,"x"]]}}'
    assert c.to_connect_data("t", data) == SchemaAndValue(None, {"a": 1e-5, "b": ["AQ==", True], "c": [[1, "x"]]})
    assert c.from_connect("t", {"a": 1}) == b'{"schema":null,"payload":{"a":1}}'  # the schemaless API too
    assert c.to_connect("t", data) == {"a": 1e-5, "b": ["AQ==", True], "c": [[1, "x"]]}
    with pytest.raises(DataError, match=r"field 'x' is a Decimal, which has no Connect type without a schema"):
        c.from_connect_data("t", None, {"x": D("1.5")})
    # a Struct names its own schema (Kafka Connect refuses it without one)
    assert c.from_connect_data("t", None, order()) == c.from_connect_data("t", ORDER, order())


def test_schemas_enable_false_with_a_schema_writes_the_payload_alone() -> None:
    plain = JsonConverter()
    plain.configure({}, False)
    data = plain.from_connect_data("t", ORDER, order())
    assert data is not None and not data.startswith(b'{"schema"')
    assert json.loads(data)["amount"] == base64.b64encode(b"\xfc\x19").decode()
    assert plain.to_connect_data("t", data) == SchemaAndValue(None, json.loads(data))
    assert plain.from_connect_data("t", Schema.OPTIONAL_STRING_SCHEMA, None) == b"null"  # as Kafka Connect
    assert plain.from_connect_data("t", None, {"a": 1}) == b'{"a":1}'
    assert plain.from_connect_data("t", None, None) is None


def test_schema_caches_are_bounded_by_schemas_cache_size() -> None:
    c = conv(**{"schemas.cache.size": "2"})
    schemas = [SchemaBuilder.int32().name(f"n{i}").build() for i in range(5)]
    for s in schemas:
        assert c.to_connect_data("t", c.from_connect_data("t", s, 1)).schema == s
    assert len(c.connect_json._to_json_cache) == 2
    assert len(c.connect_json._to_connect_cache) == 2
    again = c.to_connect_data("t", c.from_connect_data("t", schemas[0], 1))
    assert again.schema == schemas[0]


def test_schema_with_every_attribute_round_trips() -> None:
    inner = SchemaBuilder.struct().name("In").optional().field("x", Schema.FLOAT64_SCHEMA).build()
    schema = (SchemaBuilder.struct().name("Out").version(9).doc("d").parameter("b", "2").parameter("a", "1")
              .field("s", SchemaBuilder.string().default_value("dflt").doc("a doc").build())
              .field("in", inner)
              .field("m", SchemaBuilder.map(Schema.STRING_SCHEMA, SchemaBuilder.array(inner).build()).optional()
                     .build())
              .field("d", Decimal.builder(2).optional().default_value(D("1.50")).build())
              .field("when", Timestamp.builder().optional().default_value(
                  dt.datetime(2020, 1, 1, tzinfo=UTC)).build())
              .build())
    value = Struct(schema, {"in": Struct(inner, {"x": 2.5}), "m": {"k": [None, Struct(inner, {"x": 0.1})]}})
    for fmt in ("BASE64", "NUMERIC"):
        c = conv(**{"decimal.format": fmt})
        data = c.from_connect_data("t", schema, value)
        got = c.to_connect_data("t", data)
        assert got.schema == schema
        assert list(got.schema.parameters or {}) == ["b", "a"]  # parameters keep their order
        assert got.value["s"] == "dflt" and got.value["d"] == D("1.50")
        assert c.from_connect_data("t", got.schema, got.value) == data


@pytest.mark.parametrize(("x", "double", "float32"), [
    (0.0, "0.0", "0.0"), (1.5, "1.5", "1.5"), (100.0, "100.0", "100.0"), (0.001, "0.001", "0.001"),
    (0.0001, "1.0E-4", "1.0E-4"), (9999999.0, "9999999.0", "9999999.0"), (1.0e7, "1.0E7", "1.0E7"),
    (1 / 3, "0.3333333333333333", "0.33333334"), (5e-324, "4.9E-324", "0.0"), (1e300, "1.0E300", None),
    (-2.5e-7, "-2.5E-7", "-2.5E-7"), (1.401298464324817e-45, "1.401298464324817E-45", "1.4E-45"),
])
def test_numbers_are_written_as_java_prints_them(x: float, double: str, float32: str | None) -> None:
    assert java_double(x) == double
    if float32 is None:
        with pytest.raises(OverflowError):
            java_float(x)
    else:
        assert java_float(x) == float32


def test_strings_are_escaped_as_jackson_escapes_them() -> None:
    assert json_string('é\u2028"\\\b\f\n\r\t\x00\x1f\x7f\U0001F600/') == \
        '"é\u2028\\"\\\\\\b\\f\\n\\r\\t\\u0000\\u001F\x7f\\uD83D\\uDE00/"'
    assert json_string("\\u001f") == '"\\\\u001f"'  # a backslash then u001f, as text: left alone


def test_schema_content_reads_every_message_as_a_payload_of_that_schema() -> None:
    schema_json = conv().connect_json.schema_json(ORDER)
    c = conv(**{"schema.content": schema_json})
    assert c.connect_json.fixed_schema == ORDER
    payload = JsonConverter()
    payload.configure({}, False)
    data = payload.from_connect_data("t", ORDER, order())
    assert c.to_connect_data("t", data) == SchemaAndValue(ORDER, order())
    assert c.from_connect_data("t", ORDER, order()) == conv().from_connect_data("t", ORDER, order())  # unchanged
    with pytest.raises(DataError, match=r"topic 't': its payload's field 'id' is null"):
        c.to_connect_data("t", b"{}")
    with pytest.raises(ConfigError) as info:
        conv(**{"schema.content": '{"type":"struct","fields":[{"type":"int8"}]}'})
    assert 'name itself in "field"' in info.value.errors["schema.content"]


def test_records_of_one_schema_in_a_row_are_written_alike_and_a_bad_one_still_names_its_field() -> None:
    """The writer keeps the previous record's schema (by identity) and writes a struct's fields in one pass; a
    record that does not fit is written again the general way, so its error names the field all the same."""
    c = conv()
    first = c.from_connect_data("t", ORDER, order())
    assert [c.from_connect_data("t", ORDER, order()) for _ in range(3)] == [first] * 3
    with pytest.raises(DataError, match=r"value of a record for topic 't': field 'id' is a str"):
        c.from_connect_data("t", ORDER, _with(order(), id="7"))
    with pytest.raises(DataError, match=r"field 'tags' is null but its schema is required"):
        c.from_connect_data("t", ORDER, _with(order(), tags=None))
    assert c.from_connect_data("t", ORDER, order()) == first


@pytest.mark.parametrize("scale", [-3, 0, 2, 18])
def test_decimals_of_any_scale_are_their_unscaled_twos_complement_bytes(scale: int) -> None:
    schema = Decimal.schema(scale)
    for unscaled in (0, 1, -1, 127, 128, -128, -129, 255, 10**30 + 7, -(10**30) - 7):
        value = D((int(unscaled < 0), tuple(map(int, str(abs(unscaled)))), -scale))
        raw = unscaled.to_bytes(max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1), "big", signed=True)
        assert envelope(conv().from_connect_data("t", schema, value))["payload"] == base64.b64encode(raw).decode()
        assert conv().to_connect_data("t", conv().from_connect_data("t", schema, value)).value == value
