"""The source and sink pipelines: transforms + converters + error tolerance + dead letter records."""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from connect_runtime.api.errors import ConfigError, DataError
from connect_runtime.api.records import ConnectRecord, SinkRecord, SourceRecord
from connect_runtime.api.transforms import Predicate, Transformation
from connect_runtime.backends.base import ConsumedRecord, ProducerRecord
from connect_runtime.converters import StringConverter
from connect_runtime.runtime.pipeline import (
    TRANSFORMATION,
    VALUE_CONVERTER,
    RecordError,
    SinkBatch,
    SinkPipeline,
    SourceBatch,
    SourcePipeline,
)

TS = 1_700_000_000_000  # 2023-11-14T22:13:20Z


def src(value: Any, i: int = 0, *, topic: str = "orders", **kw: Any) -> SourceRecord:
    return SourceRecord(source_partition={"file": "a.txt"}, source_offset={"line": i}, topic=topic,
                        value=value, timestamp=TS + i, **kw)


def consumed(value: bytes | None, offset: int = 0, *, topic: str = "orders", key: bytes | None = None,
             headers: list[tuple[str, bytes | None]] | None = None) -> ConsumedRecord:
    return ConsumedRecord(topic, 1, offset, key, value, TS + offset, headers)


def to_consumed(batch: SourceBatch) -> list[ConsumedRecord]:
    """What a sink reads back after the backend stored ``batch.out`` (offsets assigned in order)."""
    return [ConsumedRecord(p.topic, 0, i, p.key, p.value, p.timestamp, p.headers) for i, p in enumerate(batch.out)]


# ---------------------------------------------------------------- plugins defined here, loaded by path


class Boom(Transformation[ConnectRecord]):
    """Raises for records whose value is ``{"boom": ...}``; counts ``close`` calls."""

    closed = 0

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if isinstance(record.value, dict) and "boom" in record.value:
            raise ValueError("boom in the value")
        return record

    def close(self) -> None:
        Boom.closed += 1


class HasBoomWord(Predicate[ConnectRecord]):
    """Truthy (not a bool) when the value mentions ``boom``."""

    def test(self, record: ConnectRecord) -> bool:
        return "boom" in json.dumps(record.value)  # type: ignore[return-value]


class Picky(Predicate[ConnectRecord]):
    """Raises for non-dict values; counts ``close`` calls."""

    closed = 0

    def test(self, record: ConnectRecord) -> bool:
        return bool(record.value.get("x"))

    def close(self) -> None:
        Picky.closed += 1


class NeedsSetting(Transformation[ConnectRecord]):
    def configure(self, configs: Mapping[str, Any]) -> None:
        if "setting" not in configs:
            raise RuntimeError("setting is missing")

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        return record


class RefusedConverter(StringConverter):
    """A converter whose server refuses it for the value ``"refused"`` (as a registry converter raises a ConfigError
    for a certificate or a password the registry refused), a DataError for ``"bad"``."""

    def from_connect(self, topic: str, value: Any, headers: Any = None) -> bytes | None:
        if value in ("refused", "bad"):
            raise (ConfigError if value == "refused" else DataError)(f"{value}: the server said no")
        return super().from_connect(topic, value, headers)

    def to_connect(self, topic: str, data: bytes | None, headers: Any = None) -> Any:
        if data in (b"refused", b"bad"):
            raise (ConfigError if data == b"refused" else DataError)(f"{data!r}: the server said no")
        return super().to_connect(topic, data, headers)


HERE = __name__


# ---------------------------------------------------------------- source: conversion


def test_default_source_conversion_is_compact_json_and_keeps_coordinates() -> None:
    records = [src({"id": i, "name": f"n{i}"}, i, partition=i % 2 or None) for i in range(5)]
    batch = SourcePipeline.from_config({}).process(records)
    assert batch.filtered == [] and batch.skipped == []
    assert batch.sent == records and all(a is b for a, b in zip(batch.sent, records, strict=True))
    assert batch.out == [
        ProducerRecord("orders", r.partition, None, f'{{"id":{i},"name":"n{i}"}}'.encode(), TS + i, None)
        for i, r in enumerate(records)
    ]
    assert all(type(p) is ProducerRecord for p in batch.out)


def test_json_round_trip_source_to_sink_is_equal() -> None:
    values = [{"a": [1, 2.5, None, True], "b": {"c": "é😀"}}, [1, "x"], "text", 42, 1.5, False, None, {}]
    records = [src(v, i, key={"k": i} if i % 2 else None, headers=[("h", f"v{i}"), ("raw", b"\x00"), ("n", None)])
               for i, v in enumerate(values)]
    out = SourcePipeline.from_config({}).process(records)
    assert out.out[6].value is None  # a tombstone stays a tombstone
    assert out.out[0].headers == [("h", b"v0"), ("raw", b"\x00"), ("n", None)]
    assert out.out[1].key == b'{"k":1}' and out.out[0].key is None
    sink = SinkPipeline.from_config({"header.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"})
    back = sink.process(to_consumed(out))
    assert [r.value for r in back.records] == values
    assert [r.key for r in back.records] == [r.key for r in records]
    assert back.records[0].headers == [("h", b"v0"), ("raw", b"\x00"), ("n", None)]


def test_string_and_bytes_converters_by_kafka_names_with_their_config() -> None:
    pipe = SourcePipeline.from_config({
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "key.converter.converter.encoding": "latin-1",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
    })
    batch = pipe.process([src(b"\x00\x01", key="é"), src(None, 1, key="x")])
    assert [(p.key, p.value) for p in batch.out] == [(b"\xe9", b"\x00\x01"), (b"x", None)]
    with pytest.raises(DataError, match=r"expected bytes, got a str"):
        pipe.process([src("not bytes")])


def test_sink_headers_are_decoded_by_the_header_converter() -> None:
    batch = SinkPipeline.from_config({}).process(
        [consumed(b'"v"', headers=[("trace", b"abc"), ("none", None)]), consumed(b"1", 1)])
    assert batch.records[0].headers == [("trace", "abc"), ("none", None)]
    assert batch.records[1].headers is None
    assert batch.records[0] == SinkRecord(topic="orders", partition=1, offset=0, key=None, value="v",
                                          timestamp=TS, headers=[("trace", "abc"), ("none", None)])


# ---------------------------------------------------------------- transforms and predicates


ROUTE_AND_DROP = {
    "transforms": "dropHeartbeats,route,tag",
    "transforms.dropHeartbeats.type": "org.apache.kafka.connect.transforms.Filter",
    "transforms.dropHeartbeats.predicate": "isHeartbeat",
    "transforms.route.type": "org.apache.kafka.connect.transforms.TimestampRouter",
    "transforms.route.topic.format": "${topic}_${timestamp}",
    "transforms.route.timestamp.format": "yyyy-MM",
    "transforms.tag.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.tag.topic.field": "routed_to",
    "transforms.tag.static.field": "env",
    "transforms.tag.static.value": "prod",
    "predicates": "isHeartbeat",
    "predicates.isHeartbeat.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "predicates.isHeartbeat.pattern": "heartbeats.*",
}


def test_transform_chain_with_predicate_on_source() -> None:
    records = [src({"n": 0}, 0), src({"n": 1}, 1, topic="heartbeats-eu"), src({"n": 2}, 2)]
    batch = SourcePipeline.from_config(ROUTE_AND_DROP).process(records)
    assert batch.filtered == [records[1]] and batch.skipped == []
    assert batch.sent == [records[0], records[2]]
    assert batch.sent[0] is records[0]  # the ORIGINAL record, as polled
    assert [p.topic for p in batch.out] == ["orders_2023-11", "orders_2023-11"]
    assert json.loads(batch.out[0].value) == {"n": 0, "routed_to": "orders_2023-11", "env": "prod"}
    assert records[0].value == {"n": 0} and records[0].topic == "orders"  # originals untouched


def test_negate_applies_where_the_predicate_is_false() -> None:
    cfg = {**ROUTE_AND_DROP, "transforms": "dropHeartbeats", "transforms.dropHeartbeats.negate": "true"}
    records = [src({"n": 0}, 0), src({"n": 1}, 1, topic="heartbeats-eu")]
    batch = SourcePipeline.from_config(cfg).process(records)
    assert batch.filtered == [records[0]] and batch.sent == [records[1]]


def test_transform_chain_on_sink_records() -> None:
    cfg = {
        "transforms": "keep,rename,tombstones",
        "transforms.keep.type": "ReplaceField$Value",
        "transforms.keep.include": "a,b",
        "transforms.rename.type": "ReplaceField$Value",
        "transforms.rename.renames": "a:alpha",
        "transforms.rename.predicate": "traced",
        "transforms.tombstones.type": "Filter",
        "transforms.tombstones.predicate": "tomb",
        "predicates": "traced,tomb",
        "predicates.traced.type": "HasHeaderKey",
        "predicates.traced.name": "trace",
        "predicates.tomb.type": "RecordIsTombstone",
    }
    batch = SinkPipeline.from_config(cfg).process([
        consumed(b'{"a":1,"b":2,"c":3}', 0, headers=[("trace", b"t1")]),
        consumed(b'{"a":1,"b":2,"c":3}', 1),
        consumed(None, 2),
    ])
    assert [r.value for r in batch.records] == [{"alpha": 1, "b": 2}, {"a": 1, "b": 2}]
    assert [r.offset for r in batch.records] == [0, 1]
    assert batch.filtered == 1 and batch.dead == []


def test_custom_predicate_result_is_taken_as_truthy_and_plugins_are_closed() -> None:
    Boom.closed = 0
    cfg = {"transforms": "f", "transforms.f.type": "Filter", "transforms.f.predicate": "p",
           "transforms.b.type": f"{HERE}.Boom", "predicates": "p", "predicates.p.type": f"{HERE}.HasBoomWord"}
    pipe = SourcePipeline.from_config({**cfg, "transforms": "b,f", "errors.tolerance": "all"})
    batch = pipe.process([src({"boom": 1}), src({"x": "kaboom"}, 1), src({"x": 1}, 2)])
    assert [r.source_offset for r in batch.skipped] == [{"line": 0}]
    assert [r.source_offset for r in batch.filtered] == [{"line": 1}]
    assert [r.source_offset for r in batch.sent] == [{"line": 2}]
    pipe.close()
    assert Boom.closed == 1


# ---------------------------------------------------------------- config errors


def _config_error(cfg: Mapping[str, Any], cls: type = SourcePipeline) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        cls.from_config(cfg)
    for field, why in info.value.errors.items():
        assert field in str(info.value) and why in str(info.value)
    return info.value.errors


def test_unknown_transform_class_names_its_type_field() -> None:
    errors = _config_error({"transforms": "x", "transforms.x.type": "org.example.NoSuchTransform"})
    assert list(errors) == ["transforms.x.type"]
    assert "org.example.NoSuchTransform" in errors["transforms.x.type"]
    errors = _config_error({"transforms": "x", "transforms.x.type": "NoDots"})
    assert "dotted class path" in errors["transforms.x.type"]


def test_missing_type_and_wrong_base_class() -> None:
    errors = _config_error({"transforms": "x,y", "transforms.y.type": "TopicNameMatches"})
    assert "missing required field" in errors["transforms.x.type"]
    assert "is not a Transformation" in errors["transforms.y.type"]


def test_bad_transform_config_names_the_full_field() -> None:
    errors = _config_error({
        "transforms": "route,ins",
        "transforms.route.type": "TimestampRouter",
        "transforms.route.topic.format": "${topic}-${day}",
        "transforms.route.timestamp.format": "dd.MM.yy",
        "transforms.ins.type": "InsertField$Value",
        "transforms.ins.static.field": "env",
    })
    assert set(errors) == {"transforms.route.topic.format", "transforms.route.timestamp.format",
                           "transforms.ins.static.value"}
    assert errors["transforms.route.topic.format"].startswith("expected a topic name using only")
    assert "yyyy, MM, dd, HH, mm, ss" in errors["transforms.route.timestamp.format"]


def test_predicate_errors() -> None:
    errors = _config_error({
        "transforms": "a,b,c",
        "transforms.a.type": "Filter", "transforms.a.predicate": "undeclared",
        "transforms.b.type": "Filter", "transforms.b.negate": "true",
        "transforms.c.type": "Filter", "transforms.c.predicate": "p", "transforms.c.negate": "maybe",
        "predicates": "p,q",
        "predicates.p.type": "TopicNameMatches", "predicates.p.pattern": "([",
        "predicates.q.type": "org.apache.kafka.connect.transforms.Filter",
    })
    assert set(errors) == {"transforms.a.predicate", "transforms.b.negate", "transforms.c.negate",
                           "predicates.p.pattern", "predicates.q.type"}
    assert "p, q" in errors["transforms.a.predicate"] and "'undeclared'" in errors["transforms.a.predicate"]
    assert "boolean" in errors["transforms.c.negate"]
    assert "is not a Predicate" in errors["predicates.q.type"]


def test_plugin_configure_failure_and_duplicate_alias() -> None:
    errors = _config_error({"transforms": "n,n", "transforms.n.type": f"{HERE}.NeedsSetting"})
    assert "expected each alias once" in errors["transforms"]
    assert "setting is missing" in errors["transforms.n.type"]
    SourcePipeline.from_config({"transforms": "n", "transforms.n.type": f"{HERE}.NeedsSetting",
                                "transforms.n.setting": "x"}).close()


def test_converter_config_errors_name_the_prefixed_field() -> None:
    errors = _config_error({"value.converter.decimal.format": "HEX", "key.converter": "org.example.Nope",
                            "errors.tolerance": "some"}, SinkPipeline)
    assert set(errors) == {"errors.tolerance"}  # the runtime's own fields are checked first
    errors = _config_error({"value.converter.decimal.format": "HEX", "key.converter": "org.example.Nope",
                            "header.converter.converter.encoding": "klingon"}, SinkPipeline)
    assert set(errors) == {"value.converter.decimal.format", "key.converter",
                           "header.converter.converter.encoding"}


# ---------------------------------------------------------------- error tolerance: source


BAD_BATCH = [{"ok": 0}, {"bad": {1, 2}}, {"ok": 2}, float("inf"), {"ok": 4}]


def test_source_tolerance_none_names_the_record_and_chains_the_cause() -> None:
    pipe = SourcePipeline.from_config({})
    with pytest.raises(DataError) as info:
        pipe.process([src(v, i) for i, v in enumerate(BAD_BATCH)])
    err = info.value
    assert isinstance(err, RecordError) and err.stage == VALUE_CONVERTER
    msg = str(err)
    assert "topic 'orders'" in msg and "source partition {'file': 'a.txt'}" in msg
    assert "source offset {'line': 1}" in msg and "set" in msg
    assert isinstance(err.__cause__, DataError) and isinstance(err.__cause__.__cause__, TypeError)
    assert err.__context__ is err.__cause__  # not chained to the failed fast batch
    assert gc.isenabled()


def test_source_tolerance_all_skips_and_reports_bad_records() -> None:
    records = [src(v, i) for i, v in enumerate(BAD_BATCH)]
    batch = SourcePipeline.from_config({"errors.tolerance": "all"}).process(records)
    assert batch.skipped == [records[1], records[3]]
    assert batch.sent == [records[0], records[2], records[4]]
    assert [json.loads(p.value) for p in batch.out] == [{"ok": 0}, {"ok": 2}, {"ok": 4}]
    assert len(batch.out) + len(batch.skipped) + len(batch.filtered) == len(records)


def test_source_transform_failure_none_and_all() -> None:
    cfg = {"transforms": "ins", "transforms.ins.type": "InsertField$Value", "transforms.ins.topic.field": "t"}
    records = [src({"a": 1}), src("text", 1), src({"a": 2}, 2)]
    with pytest.raises(DataError) as info:
        SourcePipeline.from_config(cfg).process(records)
    err = info.value
    assert isinstance(err, RecordError) and err.stage == TRANSFORMATION and err.transform == "ins"
    assert "source offset {'line': 1}" in str(err) and "transformation 'ins'" in str(err)
    assert "needs a dict value" in str(err.__cause__)
    batch = SourcePipeline.from_config({**cfg, "errors.tolerance": "all"}).process(records)
    assert batch.skipped == [records[1]] and batch.sent == [records[0], records[2]]


def test_header_and_key_converter_failures_are_reported() -> None:
    pipe = SourcePipeline.from_config({"errors.tolerance": "all"})
    records = [src({"a": 1}, 0, headers=[("n", 5)]), src({"a": 1}, 1, key={1, 2}), src({"a": 1}, 2)]
    batch = pipe.process(records)
    assert batch.skipped == records[:2] and batch.sent == [records[2]]
    with pytest.raises(RecordError, match="header converter") as info:
        SourcePipeline.from_config({}).process(records[:1])
    assert info.value.stage == "HEADER_CONVERTER"


def test_errors_are_logged_with_messages_only_when_asked(caplog: pytest.LogCaptureFixture) -> None:
    records = [src({"bad": {1}, "secret": "s3cr3t"}, 7)]
    caplog.set_level(logging.ERROR, logger="connect_runtime.runtime.pipeline")
    SourcePipeline.from_config({"errors.tolerance": "all"}).process(records)
    assert caplog.records == []
    SourcePipeline.from_config({"errors.tolerance": "all", "errors.log.enable": "true"}).process(records)
    assert len(caplog.records) == 1
    assert "source offset {'line': 7}" in caplog.text and "s3cr3t" not in caplog.text
    caplog.clear()
    SourcePipeline.from_config({"errors.tolerance": "all", "errors.log.enable": "true",
                                "errors.log.include.messages": "true"}).process(records)
    assert "s3cr3t" in caplog.text


# ---------------------------------------------------------------- error tolerance: sink and DLQ


SINK_BATCH = [consumed(b'{"a":0}', 10), consumed(b"{nope", 11, key=b'"k"', headers=[("h", b"1")]),
              consumed(b'"text"', 12), consumed(b'{"a":3}', 13)]
INSERT = {"transforms": "ins", "transforms.ins.type": "InsertField$Value", "transforms.ins.offset.field": "o"}


def test_a_config_error_for_a_record_is_never_tolerated() -> None:
    """errors.tolerance=all skips a bad record (DataError) but not a ConfigError: the setting is wrong, not the
    record (a registry that refused the converter's certificate or password)."""
    conv = {"value.converter": f"{HERE}.RefusedConverter", "errors.tolerance": "all"}
    batch = SourcePipeline.from_config(conv).process([src("ok"), src("bad", 1)])
    assert len(batch.skipped) == 1 and len(batch.out) == 1
    with pytest.raises(RecordError, match="ConfigError: refused: the server said no") as info:
        SourcePipeline.from_config(conv).process([src("ok"), src("refused", 1), src("bad", 2)])
    assert isinstance(info.value.__cause__, ConfigError) and "source offset {'line': 1}" in str(info.value)
    sink = SinkPipeline.from_config(conv)
    assert len(sink.process([consumed(b"ok"), consumed(b"bad", 1)]).dead) == 1
    with pytest.raises(RecordError, match=r"partition 1 offset 1.*ConfigError"):
        sink.process([consumed(b"ok"), consumed(b"refused", 1)])


def test_sink_tolerance_none_names_topic_partition_offset() -> None:
    with pytest.raises(DataError) as info:
        SinkPipeline.from_config({}).process(SINK_BATCH)
    assert "topic 'orders' partition 1 offset 11" in str(info.value)
    assert "value converter" in str(info.value)
    with pytest.raises(DataError) as info:
        SinkPipeline.from_config(INSERT).process([SINK_BATCH[0], SINK_BATCH[2]])
    assert "topic 'orders' partition 1 offset 12" in str(info.value) and "'ins'" in str(info.value)


def test_sink_tolerance_all_dead_records_in_consumption_order() -> None:
    pipe = SinkPipeline.from_config({**INSERT, "errors.tolerance": "all"})
    batch = pipe.process(SINK_BATCH)
    assert isinstance(batch, SinkBatch)
    assert [r.value for r in batch.records] == [{"a": 0, "o": 10}, {"a": 3, "o": 13}]
    assert [c for c, _ in batch.dead] == [SINK_BATCH[1], SINK_BATCH[2]]
    assert [e.stage for _, e in batch.dead] == [VALUE_CONVERTER, TRANSFORMATION]  # type: ignore[attr-defined]
    assert batch.filtered == 0
    assert pipe.dead_letter_topic is None  # no DLQ: the sink run only counts these


def test_dead_letter_keeps_original_bytes_and_adds_context_headers() -> None:
    pipe = SinkPipeline.from_config({"name": "orders-sink", "errors.tolerance": "all",
                                     "errors.deadletterqueue.topic.name": "orders-dlq",
                                     "errors.deadletterqueue.context.headers.enable": "true"}, task_id=3)
    batch = pipe.process(SINK_BATCH)
    (record, error), = batch.dead
    dlq = pipe.dead_letter(record, error)
    assert (dlq.topic, dlq.partition, dlq.key, dlq.value, dlq.timestamp) == (
        "orders-dlq", None, b'"k"', b"{nope", TS + 11)
    assert dlq.headers is not None and dlq.headers[0] == ("h", b"1")
    headers = dict(dlq.headers[1:])
    assert all(isinstance(v, bytes) for v in headers.values())
    assert headers["__connect.errors.topic"] == b"orders"
    assert headers["__connect.errors.partition"] == b"1"
    assert headers["__connect.errors.offset"] == b"11"
    assert headers["__connect.errors.connector.name"] == b"orders-sink"
    assert headers["__connect.errors.task.id"] == b"3"
    assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert headers["__connect.errors.class.name"] == b"connect_runtime.converters.JsonConverter"
    assert headers["__connect.errors.exception.class.name"] == b"connect_runtime.api.errors.DataError"
    assert b"not valid UTF-8 JSON" in headers["__connect.errors.exception.message"]
    assert b"JSONDecodeError" in headers["__connect.errors.exception.stacktrace"]


def test_dead_letter_of_an_error_raised_elsewhere_and_without_context_headers() -> None:
    with_ctx = SinkPipeline.from_config({"errors.deadletterqueue.topic.name": "dlq",
                                         "errors.deadletterqueue.context.headers.enable": True, "name": "c"})
    rec = consumed(b'{"a":1}', 5)
    headers = dict(with_ctx.dead_letter(rec, KeyError("no such row")).headers or [])
    assert headers["__connect.errors.exception.class.name"] == b"builtins.KeyError"
    assert headers["__connect.errors.exception.message"] == b"'no such row'"
    assert "__connect.errors.stage" not in headers
    plain = SinkPipeline.from_config({"errors.deadletterqueue.topic.name": "dlq"})
    assert plain.dead_letter(rec, KeyError("x")) == ProducerRecord("dlq", None, None, b'{"a":1}', TS + 5, None)
    hdr = consumed(b"1", 6, headers=[("a", b"b")])
    assert plain.dead_letter(hdr, KeyError("x")).headers == [("a", b"b")]


def test_dead_letter_without_a_topic_is_a_config_error() -> None:
    pipe = SinkPipeline.from_config({"errors.tolerance": "all"})
    with pytest.raises(ConfigError) as info:
        pipe.dead_letter(SINK_BATCH[1], ValueError("x"))
    assert "errors.deadletterqueue.topic.name" in info.value.errors


def test_gc_state_is_restored() -> None:
    pipe = SourcePipeline.from_config({})
    with pytest.raises(DataError):
        pipe.process([src({1, 2})])
    assert gc.isenabled()
    gc.disable()
    try:
        pipe.process([src({"a": 1})])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_sink_json_accepts_what_json_loads_accepts() -> None:
    raw = [b"1", b" 1", b"1 \n", b'"x"', b'{"a":[1,2]}', b' {"a" : null} ', "[\"é\"]".encode(), b"-0.5e3"]
    batch = SinkPipeline.from_config({}).process([consumed(v, i) for i, v in enumerate(raw)])
    assert [r.value for r in batch.records] == [json.loads(v) for v in raw]
    with pytest.raises(DataError, match=r"offset 1 .*Extra data"):
        SinkPipeline.from_config({}).process([consumed(b"1", 0), consumed(b'{"a":1}x', 1)])


def test_a_failing_predicate_is_named() -> None:
    cfg = {"transforms": "f", "transforms.f.type": "Filter", "transforms.f.predicate": "picky",
           "predicates": "picky", "predicates.picky.type": f"{HERE}.Picky"}
    with pytest.raises(RecordError) as info:
        SourcePipeline.from_config(cfg).process([src({"x": 1}), src("no dict", 1)])
    err = info.value
    assert f"predicate 'picky' ({HERE}.Picky) of transformation 'f'" in str(err)
    assert err.stage == TRANSFORMATION and err.plugin == f"{HERE}.Picky" and err.transform == "f"
    assert "source offset {'line': 1}" in str(err) and isinstance(err.__cause__, AttributeError)


def test_every_plugin_is_closed_also_unused_predicates_and_after_config_errors() -> None:
    Picky.closed = Boom.closed = 0
    cfg = {"transforms": "b", "transforms.b.type": f"{HERE}.Boom",
           "predicates": "unused", "predicates.unused.type": f"{HERE}.Picky"}
    SinkPipeline.from_config(cfg).close()
    assert (Picky.closed, Boom.closed) == (1, 1)
    with pytest.raises(ConfigError):
        SinkPipeline.from_config({**cfg, "transforms": "b,bad", "transforms.bad.type": "TimestampRouter",
                                  "transforms.bad.timestamp.format": "Q"})
    assert (Picky.closed, Boom.closed) == (2, 2)


def test_every_polled_record_lands_in_exactly_one_list_in_poll_order() -> None:
    cfg = {"transforms": "ins,drop", "transforms.ins.type": "InsertField$Value", "transforms.ins.topic.field": "t",
           "transforms.drop.type": "Filter", "transforms.drop.predicate": "hb",
           "predicates": "hb", "predicates.hb.type": "TopicNameMatches", "predicates.hb.pattern": "hb",
           "errors.tolerance": "all"}
    values = [{"a": 0}, {"bad": {1}}, "not a dict", {"a": 3}, {"bad": {2}}, "again", {"a": 6}]
    records = [src(v, i, topic="hb" if i == 3 else "orders") for i, v in enumerate(values)]
    batch = SourcePipeline.from_config(cfg).process(records)
    assert [r.source_offset["line"] for r in batch.sent] == [0, 6]
    assert [r.source_offset["line"] for r in batch.filtered] == [3]
    assert [r.source_offset["line"] for r in batch.skipped] == [1, 2, 4, 5]


# The sink decodes a batch of JSON values with orjson when it can: every value must be exactly what
# json.loads gives (types included), and a value only json reads, or none reads, must go the json way.
EDGE_VALUES = [
    b'{"a":1,"b":[1.5,-0,0.1,1e-7,2.5E10],"c":null,"d":true,"e":"\\u00e9\\ud83d\\ude00","f":{}}',
    b'123456789012345678',  # 18 digits: an int for both
    b'12345678901234567890123',  # beyond 64 bits: json keeps the int, orjson would give a float
    b'{"id":-9223372036854775809}',
    b'"1234567890123456789 as text"',  # 19 digits in a string: json's way, same answer
    b'  {"padded": 1}  ',
    b'{"dup":1,"dup":2}',
    b'3.141592653589793238462643383279',
    b'1e400',  # json: inf
    b'NaN',  # json only
    b'[Infinity,-Infinity]',
    b'"\\ud800 lone surrogate"',  # json only
    b'{"deep":' * 300 + b'1' + b'}' * 300,
]


@pytest.mark.parametrize("value", EDGE_VALUES, ids=range(len(EDGE_VALUES)))
def test_sink_json_values_decode_exactly_as_json_alone_and_in_a_batch(value: bytes) -> None:
    plain = [b'{"x":1}', b'[1,2,"three"]', b'"s"', b"0.5"]
    for batch in ([value], [*plain, value], [value, None, *plain]):
        got = SinkPipeline.from_config({}).process([consumed(v, i) for i, v in enumerate(batch)])
        want = [None if v is None else json.loads(v) for v in batch]
        values = [r.value for r in got.records]
        assert json.dumps(values) == json.dumps(want)  # NaN-safe equality
        assert [type(v) for v in values] == [type(v) for v in want]


def test_sink_json_batch_with_an_invalid_value_fails_naming_it_like_json() -> None:
    batch = [consumed(b'{"ok":1}', 0), consumed(b'{"broken":', 1), consumed(b"\xff\xfe", 2)]
    with pytest.raises(DataError) as err:
        SinkPipeline.from_config({}).process(batch)
    assert "orders" in str(err.value)
    kept = SinkPipeline.from_config({"errors.tolerance": "all"}).process(batch)
    assert [r.value for r in kept.records] == [{"ok": 1}] and [d[0].offset for d in kept.dead] == [1, 2]
