"""Built-in transformations and predicates, configured alone (the pipeline tests cover the chain)."""

from __future__ import annotations

from typing import Any

import pytest

from connect_runtime.api.errors import ConfigError, DataError
from connect_runtime.api.records import SinkRecord, SourceRecord
from connect_runtime.api.transforms import Predicate, Transformation
from connect_runtime.runtime.plugins import load_class
from connect_runtime.transforms import (
    DropHeaders,
    ExtractFieldKey,
    ExtractFieldValue,
    Filter,
    HasHeaderKey,
    HoistFieldKey,
    HoistFieldValue,
    InsertFieldKey,
    InsertFieldValue,
    InsertHeader,
    MaskFieldKey,
    MaskFieldValue,
    RecordIsTombstone,
    RegexRouter,
    ReplaceFieldKey,
    ReplaceFieldValue,
    TimestampRouter,
    TopicNameMatches,
    ValueToKey,
    java_date_pattern_to_strftime,
)

TS = 1_700_000_000_123  # 2023-11-14T22:13:20.123Z


def src(value: Any = None, *, topic: str = "orders", key: Any = None, headers: Any = None,
        timestamp: int | None = TS, partition: int | None = None) -> SourceRecord:
    return SourceRecord(source_partition={"file": "a"}, source_offset={"line": 7}, topic=topic,
                        value=value, key=key, headers=headers, timestamp=timestamp, partition=partition)


def sink(value: Any = None, **kw: Any) -> SinkRecord:
    return SinkRecord(**{"topic": "orders", "partition": 2, "offset": 41, "value": value,
                         "timestamp": TS, **kw})


def configured(cls: type, **cfg: Any) -> Any:
    t = cls()
    t.configure(cfg)
    return t


def test_filter_drops_everything_it_sees() -> None:
    f = configured(Filter)
    assert f.apply(src({"a": 1})) is None
    assert f.apply(sink(None)) is None


def test_insert_field_static_topic_partition_timestamp() -> None:
    t = configured(InsertFieldValue, **{"static.field": "env", "static.value": "prod", "topic.field": "t",
                                       "partition.field": "p", "timestamp.field": "ts"})
    original = {"id": 1}
    rec = src(original, partition=3)
    out = t.apply(rec)
    assert out.value == {"id": 1, "env": "prod", "t": "orders", "p": 3, "ts": TS}
    assert original == {"id": 1} and rec.value is original  # the input record is untouched
    assert out.source_offset == {"line": 7}
    # no partition / timestamp yet: those fields are left out
    assert t.apply(src({"id": 1}, timestamp=None)).value == {"id": 1, "env": "prod", "t": "orders"}


def test_insert_field_offset_on_sink_records_only() -> None:
    t = configured(InsertFieldValue, **{"offset.field": "off!", "topic.field": "topic?"})
    assert t.apply(sink({"x": 1})).value == {"x": 1, "off": 41, "topic": "orders"}
    with pytest.raises(DataError, match="sink record"):
        t.apply(src({"x": 1}))


def test_insert_field_tombstone_passes_and_non_dict_fails() -> None:
    t = configured(InsertFieldValue, **{"topic.field": "t"})
    tomb = src(None)
    assert t.apply(tomb) is tomb
    with pytest.raises(DataError, match=r"InsertField\$Value needs a dict value.*got a str.*'orders'"):
        t.apply(src("text"))


def test_insert_field_key() -> None:
    t = configured(InsertFieldKey, **{"topic.field": "t"})
    out = t.apply(src({"v": 1}, key={"k": 1}))
    assert out.key == {"k": 1, "t": "orders"} and out.value == {"v": 1}


@pytest.mark.parametrize(
    ("cfg", "field"),
    [({}, "static.field"), ({"static.field": "env"}, "static.value"), ({"topic.field": " "}, "topic.field")],
)
def test_insert_field_bad_config(cfg: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        configured(InsertFieldValue, **cfg)
    assert field in info.value.errors


def test_replace_field_include_exclude_renames() -> None:
    value = {"a": 1, "b": 2, "c": 3, "secret": "x"}
    t = configured(ReplaceFieldValue, exclude="secret", renames="a:alpha,c:gamma")
    out = t.apply(src(value))
    assert out.value == {"alpha": 1, "b": 2, "gamma": 3}
    assert value == {"a": 1, "b": 2, "c": 3, "secret": "x"}
    t = configured(ReplaceFieldValue, include=["a", "b"], exclude="b")
    assert t.apply(src(value)).value == {"a": 1}
    k = configured(ReplaceFieldKey, renames="id:key_id")
    assert k.apply(src({"v": 1}, key={"id": 9})).key == {"key_id": 9}
    assert t.apply(src(None)).value is None
    with pytest.raises(DataError, match="needs a dict value"):
        t.apply(src([1, 2]))


@pytest.mark.parametrize("renames", ["a", "a:", ":b", "a:b:c", "a:b,a:c"])
def test_replace_field_bad_renames(renames: str) -> None:
    with pytest.raises(ConfigError) as info:
        configured(ReplaceFieldValue, renames=renames)
    why = info.value.errors["renames"]
    assert why.startswith("expected ") and ("old:new" in why or "once" in why)


def test_timestamp_router_defaults() -> None:
    t = configured(TimestampRouter)
    out = t.apply(src({"a": 1}))
    assert out.topic == "orders-20231114"
    assert out.value == {"a": 1} and out.source_partition == {"file": "a"}


def test_timestamp_router_formats_and_sink_records() -> None:
    t = configured(TimestampRouter, **{"topic.format": "archive.${timestamp}.${topic}",
                                      "timestamp.format": "yyyy-MM-dd'T'HH:mm:ss"})
    assert t.apply(src({})).topic == "archive.2023-11-14T22:13:20.orders"
    out = t.apply(sink({}))
    assert out.topic == "archive.2023-11-14T22:13:20.orders" and out.offset == 41


def test_timestamp_router_needs_a_timestamp() -> None:
    with pytest.raises(DataError, match="timestamp"):
        configured(TimestampRouter).apply(src({}, timestamp=None))


@pytest.mark.parametrize(
    ("java", "strftime"),
    [("yyyyMMdd", "%Y%m%d"), ("yyyy-MM-dd HH:mm:ss", "%Y-%m-%d %H:%M:%S"), ("HH'h'mm", "%Hh%M"),
     ("yyyy''MM", "%Y'%m"), ("'it''s' yyyy", "it's %Y"), ("dd%", "%d%%")],
)
def test_java_date_pattern_translation(java: str, strftime: str) -> None:
    assert java_date_pattern_to_strftime(java) == strftime


@pytest.mark.parametrize(
    ("cfg", "field"),
    [({"timestamp.format": "yyyy-MMM"}, "timestamp.format"), ({"timestamp.format": "EEE"}, "timestamp.format"),
     ({"timestamp.format": "yyyy'x"}, "timestamp.format"), ({"topic.format": "${topic}-${date}"}, "topic.format"),
     ({"topic.format": ""}, "topic.format")],
)
def test_timestamp_router_bad_config_names_the_field(cfg: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        configured(TimestampRouter, **cfg)
    assert list(info.value.errors) == [field]
    assert info.value.errors[field].startswith("expected ")


def test_topic_name_matches_whole_name() -> None:
    p = configured(TopicNameMatches, pattern="ord.*")
    assert p.test(src(topic="orders")) is True
    assert p.test(src(topic="my-orders")) is False
    assert configured(TopicNameMatches, pattern="ord").test(src(topic="orders")) is False
    with pytest.raises(ConfigError) as info:
        configured(TopicNameMatches, pattern="(")
    assert "pattern" in info.value.errors
    with pytest.raises(ConfigError) as info:
        configured(TopicNameMatches)
    assert "pattern" in info.value.errors


def test_has_header_key() -> None:
    p = configured(HasHeaderKey, name="trace")
    assert p.test(src(headers=[("a", b"1"), ("trace", None)])) is True
    assert p.test(src(headers=[("a", b"1")])) is False
    assert p.test(src(headers=None)) is False
    with pytest.raises(ConfigError) as info:
        configured(HasHeaderKey)
    assert "name" in info.value.errors


def test_record_is_tombstone() -> None:
    p = configured(RecordIsTombstone)
    assert p.test(src(None)) is True
    assert p.test(src({"a": 1})) is False
    assert p.test(sink(None)) is True


@pytest.mark.parametrize(
    ("name", "cls", "base"),
    [
        ("org.apache.kafka.connect.transforms.Filter", Filter, Transformation),
        ("org.apache.kafka.connect.transforms.InsertField$Value", InsertFieldValue, Transformation),
        ("org.apache.kafka.connect.transforms.InsertField$Key", InsertFieldKey, Transformation),
        ("org.apache.kafka.connect.transforms.ReplaceField$Value", ReplaceFieldValue, Transformation),
        ("org.apache.kafka.connect.transforms.ReplaceField$Key", ReplaceFieldKey, Transformation),
        ("org.apache.kafka.connect.transforms.TimestampRouter", TimestampRouter, Transformation),
        ("org.apache.kafka.connect.transforms.predicates.TopicNameMatches", TopicNameMatches, Predicate),
        ("org.apache.kafka.connect.transforms.predicates.HasHeaderKey", HasHeaderKey, Predicate),
        ("org.apache.kafka.connect.transforms.predicates.RecordIsTombstone", RecordIsTombstone, Predicate),
        ("InsertField$Value", InsertFieldValue, Transformation),
        ("TopicNameMatches", TopicNameMatches, Predicate),
    ],
)
def test_kafka_connect_names_are_aliases(name: str, cls: type, base: type) -> None:
    assert load_class(name, "transforms.x.type", base) is cls


def test_fast_record_copies_equal_new_record() -> None:
    from connect_runtime.transforms import _base

    assert _base._FAST_SOURCE and _base._FAST_SINK  # the record classes still have the fields named there
    s = src({"a": 1}, key="k", headers=[("h", b"1")], partition=4)
    k = sink({"a": 1}, key="k", headers=[("h", "1")])
    for rec in (s, k):
        for field, new in (("value", {"b": 2}), ("key", None), ("topic", "other")):
            out = _base.replaced(rec, field, new)
            assert type(out) is type(rec) and out == rec.new_record(**{field: new}) and out is not rec


def test_public_surface_is_pinned() -> None:
    import connect_runtime.transforms as t

    assert set(t.__all__) == {
        "ALIASES", "CastKey", "CastValue", "DropHeaders", "ExtractFieldKey", "ExtractFieldValue", "ExtractNewRecordState", "Filter", "HasHeaderKey", "HoistFieldKey",
        "HoistFieldValue", "InsertField", "InsertFieldKey", "InsertFieldValue", "InsertHeader", "MaskFieldKey",
        "MaskFieldValue", "RecordIsTombstone", "RegexRouter", "ReplaceField", "ReplaceFieldKey",
        "ReplaceFieldValue", "TimestampRouter", "TopicNameMatches", "ValueToKey",
        "java_date_pattern_to_strftime", "java_replacement_to_python",
    }
    for name in t.__all__:
        assert getattr(t, name) is not None


@pytest.mark.parametrize(
    ("regex", "replacement", "topic", "expected"),
    [
        (r"(\w+)-(\d+)", "$2_$1", "orders-7", "7_orders"),
        (r"(?P<env>prod|dev)\.(.*)", "${env}-archive.$2", "prod.orders", "prod-archive.orders"),
        ("orders", "cost\\$s\\\\x", "orders", "cost$s\\x"),
        ("ord", "x", "orders", "orders"),  # the whole name must match
    ],
)
def test_regex_router(regex: str, replacement: str, topic: str, expected: str) -> None:
    t = configured(RegexRouter, regex=regex, replacement=replacement)
    out = t.apply(src({"a": 1}, topic=topic))
    assert out.topic == expected and out.value == {"a": 1}


@pytest.mark.parametrize(
    ("cfg", "field"),
    [({"regex": "(", "replacement": "x"}, "regex"), ({"regex": "(a)", "replacement": "$2"}, "replacement"),
     ({"regex": "a", "replacement": "${nope}"}, "replacement"), ({"regex": "a", "replacement": "a$"}, "replacement"),
     ({"regex": "a", "replacement": "a\\"}, "replacement"), ({"regex": "a"}, "replacement")],
)
def test_regex_router_bad_config(cfg: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        configured(RegexRouter, **cfg)
    assert list(info.value.errors) == [field]


def test_value_to_key() -> None:
    t = configured(ValueToKey, fields="id,region")
    out = t.apply(src({"id": 3, "region": "eu", "x": 1}, key="old"))
    assert out.key == {"id": 3, "region": "eu"} and out.value == {"id": 3, "region": "eu", "x": 1}
    assert t.apply(src({"id": 3})).key == {"id": 3, "region": None}
    with pytest.raises(DataError, match="needs a dict value"):
        t.apply(src(None))
    with pytest.raises(ConfigError) as info:
        configured(ValueToKey, fields="")
    assert "fields" in info.value.errors


def test_extract_and_hoist_field() -> None:
    ex = configured(ExtractFieldValue, field="after")
    assert ex.apply(src({"after": {"id": 1}, "before": None})).value == {"id": 1}
    assert ex.apply(src({"other": 1})).value is None
    assert ex.apply(src(None)).value is None
    with pytest.raises(DataError, match=r"ExtractField\$Value needs a dict value"):
        ex.apply(src([1]))
    assert configured(ExtractFieldKey, field="id").apply(src(1, key={"id": 9})).key == 9
    ho = configured(HoistFieldValue, field="payload")
    assert ho.apply(src("text")).value == {"payload": "text"}
    assert configured(HoistFieldKey, field="k").apply(sink(1, key=5)).key == {"k": 5}
    with pytest.raises(ConfigError) as info:
        configured(HoistFieldValue)
    assert "field" in info.value.errors


def test_mask_field() -> None:
    value = {"s": "secret", "i": 42, "f": 1.5, "b": True, "d": {"x": 1}, "l": [1], "n": None, "keep": "k"}
    out = configured(MaskFieldValue, fields="s,i,f,b,d,l,n").apply(src(value)).value
    assert out == {"s": "", "i": 0, "f": 0.0, "b": False, "d": {}, "l": [], "n": None, "keep": "k"}
    assert value["s"] == "secret" and value["d"] == {"x": 1}
    out = configured(MaskFieldValue, fields="s,i,f", replacement="7").apply(src(value)).value
    assert (out["s"], out["i"], out["f"]) == ("7", 7, 7.0)
    with pytest.raises(DataError, match=r"'i'.*'xx'"):
        configured(MaskFieldValue, fields="i", replacement="xx").apply(src(value))
    with pytest.raises(DataError, match="'b' of type bool with a replacement"):
        configured(MaskFieldValue, fields="b", replacement="x").apply(src(value))
    assert configured(MaskFieldKey, fields="pw").apply(src(1, key={"pw": "p"})).key == {"pw": ""}


def test_insert_and_drop_headers() -> None:
    ins = configured(InsertHeader, header="source", **{"value.literal": "pyconnect"})
    rec = src({"a": 1}, headers=[("a", b"1")])
    out = ins.apply(rec)
    assert out.headers == [("a", b"1"), ("source", "pyconnect")] and rec.headers == [("a", b"1")]
    assert ins.apply(src({})).headers == [("source", "pyconnect")]
    drop = configured(DropHeaders, headers="a,b")
    assert drop.apply(src({}, headers=[("a", b"1"), ("c", None), ("b", b"2"), ("a", b"3")])).headers == [("c", None)]
    same = src({}, headers=[("c", None)])
    assert drop.apply(same) is same
    with pytest.raises(ConfigError) as info:
        configured(DropHeaders)
    assert "headers" in info.value.errors
    with pytest.raises(ConfigError) as info:
        configured(InsertHeader, header="x")
    assert "value.literal" in info.value.errors


@pytest.mark.parametrize(
    ("name", "cls"),
    [("RegexRouter", RegexRouter), ("ValueToKey", ValueToKey), ("ExtractField$Value", ExtractFieldValue),
     ("ExtractField$Key", ExtractFieldKey), ("HoistField$Value", HoistFieldValue), ("HoistField$Key", HoistFieldKey),
     ("MaskField$Value", MaskFieldValue), ("MaskField$Key", MaskFieldKey), ("InsertHeader", InsertHeader),
     ("DropHeaders", DropHeaders)],
)
def test_more_kafka_connect_names(name: str, cls: type) -> None:
    assert load_class("org.apache.kafka.connect.transforms." + name, "transforms.x.type", Transformation) is cls
