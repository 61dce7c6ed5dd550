"""Built-in converters: round trips, tombstones, errors naming topic and type, config, aliases."""

from __future__ import annotations

import datetime
import enum
import json
import math
import random
import struct
import uuid

import pytest

from connect_runtime.api.errors import ConfigError, DataError
from connect_runtime.api.transforms import Converter
from connect_runtime.converters import ByteArrayConverter, JsonConverter, StringConverter
from connect_runtime.runtime.plugins import instantiate, load_class


def _json(is_key: bool = False, **cfg: object) -> JsonConverter:
    c = JsonConverter()
    c.configure(cfg, is_key)
    return c


JSON_VALUES = [
    {"id": 1, "name": "ä ✓ 😀", "nested": {"l": [1, 2.5, None, True, False, "x"]}},
    [1, "two", {"three": 3}],
    "plain string",
    "",
    0,
    -17,
    2**70,
    3.25,
    True,
    False,
    {},
    [],
]


@pytest.mark.parametrize("value", JSON_VALUES, ids=repr)
def test_json_round_trip_is_equal(value: object) -> None:
    c = _json()
    data = c.from_connect("orders", value)
    assert isinstance(data, bytes)
    assert c.to_connect("orders", data) == value
    assert type(c.to_connect("orders", data)) is type(value)


def test_json_is_compact_utf8_and_readable_by_json_loads() -> None:
    data = _json().from_connect("t", {"a": [1, 2], "b": "é"})
    assert data == '{"a":[1,2],"b":"é"}'.encode()
    assert json.loads(data) == {"a": [1, 2], "b": "é"}


def test_json_none_is_a_tombstone_both_ways() -> None:
    c = _json()
    assert c.from_connect("t", None) is None
    assert c.to_connect("t", None) is None


@pytest.mark.parametrize(
    ("value", "named"),
    [({1, 2}, "set"), ({"when": object()}, "object"), (b"raw", "bytes"), (float("nan"), "float")],
)
def test_json_rejects_unserialisable_values_naming_topic_and_type(value: object, named: str) -> None:
    with pytest.raises(DataError) as info:
        _json().from_connect("payments", value)
    msg = str(info.value)
    assert "'payments'" in msg and named in msg and "value" in msg
    assert info.value.__cause__ is not None


def test_json_rejects_circular_values() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(DataError, match=r"'t'.*list"):
        _json().from_connect("t", loop)


def test_json_key_errors_say_key() -> None:
    with pytest.raises(DataError, match="cannot write the key"):
        _json(is_key=True).from_connect("t", {1, 2})


@pytest.mark.parametrize("data", [b"{not json", b"\xff\xfe", b"", b'{"a":1} trailing'])
def test_json_to_connect_rejects_bad_bytes_naming_topic(data: bytes) -> None:
    with pytest.raises(DataError) as info:
        _json().to_connect("events", data)
    assert "'events'" in str(info.value) and "not valid" in str(info.value)
    assert info.value.__cause__ is not None


def _stdlib(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def _tricky_floats() -> list[float]:
    rng = random.Random(7)
    out = [1e16, 1e15, 9999999999999998.0, 1e-4, 1e-5, 1.5e-6, 1e-7, 1e21, 1e22, -0.0, 0.0, 5e-324,
           1.7976931348623157e308, 2.0**53, 0.1, 100.0, 10.00001, 123456789.125]
    while len(out) < 3000:
        f = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isfinite(f):
            out.append(f)
        out.append(rng.uniform(-1, 1) * 10.0 ** rng.randint(-30, 30))
    return out


def test_json_bytes_are_exactly_what_json_dumps_writes() -> None:
    c = _json()
    floats = _tricky_floats()
    values: list[object] = [*JSON_VALUES, *floats, {"f": floats[:50]}, "e1 e2 e3 e- null 0.0000 ✓",
                            {"n": None}, [None], "\x00\x1f\u2028\x7f\"\\", 2**64, -(2**63) - 1,
                            {7: "int key", 2.5: "float key", True: "bool key", None: "none key"}]
    for value in values:
        assert c.from_connect("t", value) == _stdlib(value), value
    assert c.encode_many(values) == [_stdlib(v) for v in values]


def test_json_encode_many_keeps_tombstones_and_order() -> None:
    c = _json()
    values = [{"a": 1}, None, {"b": None}, None, "x"]
    assert c.encode_many(values) == [b'{"a":1}', None, b'{"b":null}', None, b'"x"']
    assert c.encode_many([]) == []


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {"x": [float("-inf")]}, {1, 2}, b"raw",
                                 datetime.datetime(2024, 1, 1), {"when": object()}])
def test_json_encode_many_raises_where_json_does(bad: object) -> None:
    c = _json()
    with pytest.raises((TypeError, ValueError)):
        c.encode_many([{"ok": 1}, bad, {"ok": 2}])
    with pytest.raises(DataError):
        c.from_connect("t", bad)


class Colour(enum.Enum):
    RED = "red"


def test_json_writes_enums_and_uuids_the_same_in_both_paths() -> None:
    c = _json()
    ident = uuid.UUID(int=42)
    values = [{"c": Colour.RED, "id": ident}, {"c": Colour.RED, "none": None}]
    expected = [b'{"c":"red","id":"00000000-0000-0000-0000-00000000002a"}', b'{"c":"red","none":null}']
    assert c.encode_many(values) == expected
    assert [c.from_connect("t", v) for v in values] == expected


def test_json_settings_are_validated_and_schemas_enable_makes_it_schema_aware() -> None:
    with pytest.raises(ConfigError) as info:
        _json(**{"decimal.format": "HEX", "schemas.cache.size": "0"})
    assert set(info.value.errors) == {"decimal.format", "schemas.cache.size"}
    assert "BASE64" in info.value.errors["decimal.format"]
    assert _json(**{"schemas.enable": "true"}).SCHEMA_AWARE is True
    assert _json(**{"schemas.enable": "false"}).SCHEMA_AWARE is False
    assert _json().SCHEMA_AWARE is False  # our default; Kafka Connect's is true
    assert JsonConverter.SCHEMA_AWARE is False  # per instance, not the class


def test_string_round_trip_and_tombstone() -> None:
    c = StringConverter()
    c.configure({}, False)
    assert c.from_connect("t", "héllo") == "héllo".encode()
    assert c.to_connect("t", "héllo".encode()) == "héllo"
    assert c.from_connect("t", None) is None and c.to_connect("t", None) is None


def test_string_errors_name_topic_and_type() -> None:
    c = StringConverter()
    c.configure({}, True)
    with pytest.raises(DataError, match=r"key .*'t'.*expected a str, got a int"):
        c.from_connect("t", 5)
    with pytest.raises(DataError, match=r"'t'.*utf-8"):
        c.to_connect("t", b"\xff")


def test_string_encoding_is_configurable_and_validated() -> None:
    c = StringConverter()
    c.configure({"converter.encoding": "latin-1"}, False)
    assert c.from_connect("t", "é") == b"\xe9"
    assert c.to_connect("t", b"\xe9") == "é"
    with pytest.raises(ConfigError) as info:
        StringConverter().configure({"converter.encoding": "no-such-codec"}, False)
    assert "converter.encoding" in info.value.errors


def test_bytes_pass_through() -> None:
    c = ByteArrayConverter()
    c.configure({}, False)
    assert c.from_connect("t", b"\x00\xff") == b"\x00\xff"
    assert c.from_connect("t", bytearray(b"ab")) == b"ab"
    assert c.to_connect("t", b"\x00\xff") == b"\x00\xff"
    assert c.from_connect("t", None) is None and c.to_connect("t", None) is None


def test_bytes_rejects_other_types() -> None:
    c = ByteArrayConverter()
    c.configure({}, False)
    with pytest.raises(DataError, match=r"ByteArrayConverter.*'t'.*expected bytes, got a str"):
        c.from_connect("t", "text")


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("org.apache.kafka.connect.json.JsonConverter", JsonConverter),
        ("org.apache.kafka.connect.storage.StringConverter", StringConverter),
        ("org.apache.kafka.connect.converters.ByteArrayConverter", ByteArrayConverter),
        ("connect_runtime.converters.JsonConverter", JsonConverter),
    ],
)
def test_kafka_connect_class_names_load(name: str, cls: type) -> None:
    assert load_class(name, "value.converter", Converter) is cls
    assert isinstance(instantiate(name, "value.converter", Converter), cls)


def test_json_loads_exact_gives_what_json_gives() -> None:
    """orjson where it agrees with json, json where it would not (long integers, NaN, lone surrogates, bad
    UTF-8): the same values, and json's errors."""
    import json
    import math

    from connect_runtime.converters import json_loads_exact

    for text in [b'{"a":1,"b":[1.5,-0.0,"\xc3\xa9"]}', b"12345678901234567890123", b'{"n": 1e400}', b'"\\ud800"',
                 b' {"a" : [ ] } ', b'{"a":1,"a":2}', b"9223372036854775807", b"-9223372036854775809", b"0.1"]:
        assert json_loads_exact(text) == json.loads(text.decode()), text
    assert math.isnan(json_loads_exact(b"NaN"))
    for bad in [b'{"a":', b"\xff", b'{"a":1} x', b""]:
        with pytest.raises(ValueError):
            json_loads_exact(bad)
