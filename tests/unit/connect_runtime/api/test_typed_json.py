"""Plain JSON of Connect data (``api.jsoncodec``: JSON_FORMS, plain_json, typed_json_default), the forms the
sinks share, and ``Struct.field_values`` (a struct's values in field order, defaults applied)."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import orjson
import pytest

from connect_runtime.api.data import Decimal, Schema, SchemaBuilder, Struct, Timestamp
from connect_runtime.api.jsoncodec import JSON_FORMS, plain_json, typed_json_default

INNER = SchemaBuilder.struct().field("b", Schema.BYTES_SCHEMA).field("d", Decimal.schema(3)).build()
OUTER = (SchemaBuilder.struct().field("n", SchemaBuilder.int32().default_value(5))
         .field("ts", Timestamp.schema()).field("inner", INNER)
         .field("list", SchemaBuilder.array(Schema.OPTIONAL_BYTES_SCHEMA).optional())
         .field("map", SchemaBuilder.map(Schema.STRING_SCHEMA, INNER).optional()).build())


def _outer() -> Struct:
    inner = Struct(INNER).put("b", b"\xff\x00").put("d", decimal.Decimal("-1.250"))
    return (Struct(OUTER).put("ts", dt.datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC)).put("inner", inner)
            .put("list", [b"\x01", None]).put("map", {"k": inner}))


WANT = {"n": 5, "ts": "2026-01-02T03:04:05.006000+00:00", "inner": {"b": "/wA=", "d": "-1.250"},
        "list": ["AQ==", None], "map": {"k": {"b": "/wA=", "d": "-1.250"}}}


def test_plain_json_of_a_struct() -> None:
    assert plain_json(_outer()) == WANT
    assert json.loads(json.dumps(plain_json(_outer()))) == WANT


@pytest.mark.parametrize("dumps", [lambda v: json.dumps(v, default=typed_json_default),
                                   lambda v: orjson.dumps(v, typed_json_default,
                                                          orjson.OPT_PASSTHROUGH_DATETIME).decode()])
def test_typed_json_default_in_json_and_orjson(dumps: object) -> None:
    assert json.loads(dumps(_outer())) == WANT  # type: ignore[operator]


@pytest.mark.parametrize(("value", "form"), [
    (decimal.Decimal("12.30"), "12.30"), (decimal.Decimal("-0.001"), "-0.001"),
    (dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2))), "2026-01-01T10:00:00+00:00"),
    (dt.date(2026, 2, 28), "2026-02-28"), (dt.time(23, 59, 59, 999000), "23:59:59.999000"), (b"\x00", "AA=="),
])
def test_the_forms(value: object, form: str) -> None:
    assert JSON_FORMS[type(value)](value) == form
    assert typed_json_default(value) == form


def test_field_values_apply_defaults_in_field_order() -> None:
    s = _outer()
    assert s.field_values()[0] == 5 and s.field_values()[1:3] == [s["ts"], s["inner"]]
    assert s.field_values() == [s[f.name] for f in OUTER.fields]
    s.put("n", 7)
    assert s.field_values()[0] == 7
    s.field_values()[0] = 9  # a copy: the struct is not changed through it
    assert s["n"] == 7


def test_an_unknown_type_still_raises() -> None:
    with pytest.raises(TypeError):
        typed_json_default(object())
