"""The pipeline with schemas: schema-aware converters get each record's key_schema / value_schema on the source
path and give SinkRecords theirs on the sink path; failures are still reported per record (stage, plugin, record;
dead letters); the schemaless batch path is untouched when no converter is schema-aware; the errant record writer
writes with the record's schemas."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

import pytest

from connect_runtime.api.data import Date, Decimal, Schema, SchemaBuilder, Struct
from connect_runtime.api.errors import DataError
from connect_runtime.api.records import SinkRecord, SourceRecord
from connect_runtime.backends.base import ConsumedRecord
from connect_runtime.converters import JsonConverter
from connect_runtime.runtime.errors import consumed_from
from connect_runtime.runtime.pipeline import KEY_CONVERTER, VALUE_CONVERTER, SinkPipeline, SourcePipeline

TS = 1_700_000_000_000
ORDER = (SchemaBuilder.struct().name("shop.Order").field("id", Schema.INT64_SCHEMA)
         .field("amount", Decimal.schema(2)).field("day", Date.schema()).build())
KEY = Schema.STRING_SCHEMA
SCHEMAS = {"key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "true",
           "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "true"}


def order(i: int) -> Struct:
    return Struct(ORDER, {"id": i, "amount": decimal.Decimal(f"{i}.50"), "day": dt.date(2024, 1, 1 + i)})


def src(value: Any, i: int = 0, **kw: Any) -> SourceRecord:
    return SourceRecord(source_partition={"p": 0}, source_offset={"o": i}, topic="orders", value=value,
                        timestamp=TS + i, **kw)


def consumed(key: bytes | None, value: bytes | None, offset: int) -> ConsumedRecord:
    return ConsumedRecord("orders", 0, offset, key, value, TS + offset, None)


def json_conv(**cfg: Any) -> JsonConverter:
    c = JsonConverter()
    c.configure(cfg, False)
    return c


def test_source_writes_each_records_schema_in_the_envelope_and_the_sink_reads_it_back() -> None:
    records = [src(order(i), i, key=f"k{i}", key_schema=KEY, value_schema=ORDER) for i in range(3)]
    out = SourcePipeline.from_config(SCHEMAS).process(records)
    assert out.skipped == [] and len(out.out) == 3
    assert json.loads(out.out[0].key) == {"schema": {"type": "string", "optional": False}, "payload": "k0"}
    env = json.loads(out.out[1].value)
    assert env["schema"]["name"] == "shop.Order" and env["payload"] == {"id": 1, "amount": "AJY=", "day": 19724}
    back = SinkPipeline.from_config(SCHEMAS).process(
        [consumed(p.key, p.value, i) for i, p in enumerate(out.out)])
    assert [(r.key_schema, r.key, r.value_schema, r.value) for r in back.records] == [
        (KEY, f"k{i}", ORDER, order(i)) for i in range(3)]
    assert all(type(r) is SinkRecord for r in back.records)


def test_a_null_key_with_a_schema_aware_key_converter_is_still_no_key_and_a_tombstone_stays_one() -> None:
    out = SourcePipeline.from_config(SCHEMAS).process([src(None), src(order(1), 1, value_schema=ORDER)])
    assert out.out[0].key is None and out.out[0].value is None
    assert out.out[1].key is None
    back = SinkPipeline.from_config(SCHEMAS).process([consumed(None, None, 0)])
    (r,) = back.records
    assert (r.key, r.key_schema, r.value, r.value_schema) == (None, None, None, None)


def test_only_the_value_converter_schema_aware_leaves_keys_schemaless() -> None:
    config = {"value.converter.schemas.enable": "true"}
    out = SourcePipeline.from_config(config).process([src(order(1), key={"k": 1}, value_schema=ORDER)])
    assert out.out[0].key == b'{"k":1}'
    (r,) = SinkPipeline.from_config(config).process([consumed(out.out[0].key, out.out[0].value, 0)]).records
    assert (r.key, r.key_schema, r.value_schema, r.value) == ({"k": 1}, None, ORDER, order(1))


def test_a_bad_source_record_is_named_with_stage_and_plugin_or_skipped() -> None:
    good = src(order(1), 1, value_schema=ORDER)
    bad = src({"id": 2}, 2, value_schema=ORDER)  # a dict where the schema wants a Struct
    with pytest.raises(DataError) as info:
        SourcePipeline.from_config(SCHEMAS).process([good, bad])
    err = info.value
    assert err.stage == VALUE_CONVERTER  # type: ignore[attr-defined]
    assert err.plugin == "connect_runtime.converters.JsonConverter"  # type: ignore[attr-defined]
    assert "source offset {'o': 2}" in str(err) and "expected a Struct of schema shop.Order" in str(err)
    out = SourcePipeline.from_config({**SCHEMAS, "errors.tolerance": "all"}).process(
        [good, bad, src("x", 3, key=5, key_schema=KEY)])
    assert out.sent == [good] and out.skipped == [bad, out.skipped[1]]
    assert out.skipped[1].source_offset == {"o": 3}


def test_a_bad_sink_record_goes_to_the_dead_letters_with_the_stage() -> None:
    config = {**SCHEMAS, "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq",
              "errors.deadletterqueue.context.headers.enable": "true"}
    pipe = SinkPipeline.from_config(config)
    good = SourcePipeline.from_config(SCHEMAS).process([src(order(1), key="k", key_schema=KEY,
                                                            value_schema=ORDER)]).out[0]
    batch = pipe.process([consumed(good.key, good.value, 0), consumed(b'"plain"', good.value, 1),
                          consumed(good.key, b'{"id":1}', 2)])
    assert [r.offset for r in batch.records] == [0]
    assert [(c.offset, e.stage) for c, e in batch.dead] == [(1, KEY_CONVERTER), (2, VALUE_CONVERTER)]  # type: ignore[attr-defined]
    dlq = pipe.dead_letter(*batch.dead[1])
    assert dlq.value == b'{"id":1}'
    headers = dict(dlq.headers or [])
    assert b'"schema" and "payload"' in headers["__connect.errors.exception.message"]
    with pytest.raises(DataError, match=r"topic 'orders' partition 0 offset 1 failed in the key converter"):
        SinkPipeline.from_config(SCHEMAS).process([consumed(b'"plain"', good.value, 1)])


def test_schemaless_converters_keep_the_batch_path_and_a_struct_is_written_with_its_schema() -> None:
    pipe = SourcePipeline.from_config({})
    assert not pipe.schema_aware and pipe._encode_many is not None
    assert SinkPipeline.from_config({})._json_value
    aware = SourcePipeline.from_config(SCHEMAS)
    assert aware.schema_aware and aware._encode_many is None
    assert not SinkPipeline.from_config(SCHEMAS)._json_value
    # schemas.enable=false: a Struct with a schema is written as Kafka Connect writes it, the payload alone
    out = pipe.process([src({"plain": 1}), src(order(2), 1, value_schema=ORDER)])
    assert [p.value for p in out.out] == [b'{"plain":1}', b'{"id":2,"amount":"APo=","day":19725}']
    assert out.out[1].value == json_conv().from_connect_data("orders", ORDER, order(2))


def test_the_errant_record_writer_writes_with_the_records_schemas() -> None:
    pipe = SinkPipeline.from_config(SCHEMAS)
    rec = SinkRecord(topic="orders", partition=0, offset=4, key="k", value=order(1), timestamp=5,
                     key_schema=KEY, value_schema=ORDER)
    c = consumed_from(rec, pipe)
    assert c.value == json_conv(**{"schemas.enable": "true"}).from_connect_data("orders", ORDER, order(1))
    assert json.loads(c.key or b"") == {"schema": {"type": "string", "optional": False}, "payload": "k"}
    # schemaless run, struct value with its schema: the payload alone, not a repr
    plain = consumed_from(rec, SinkPipeline.from_config({}))
    assert json.loads(plain.value or b"") == {"id": 1, "amount": "AJY=", "day": 19724}
    assert plain.key == b'"k"'


@pytest.mark.parametrize(("schema", "value", "wire"), [
    (Date.schema(), dt.date(2024, 1, 2), b"19724"),
    (Schema.BYTES_SCHEMA, b"ab", b'"YWI="'),
    (Decimal.schema(1), decimal.Decimal("-1.5"), b'"8Q=="'),
    # the limit the pipeline's docstring states: a value the batch can write is written schemaless (Kafka
    # Connect with schemas.enable=false writes this map as [[1,"a"]]; a schema-aware converter does too)
    (SchemaBuilder.map(Schema.INT8_SCHEMA, Schema.STRING_SCHEMA).build(), {1: "a"}, b'{"1":"a"}'),
])
def test_schemaless_json_writes_values_it_cannot_batch_with_their_schema(schema: Schema, value: Any,
                                                                         wire: bytes) -> None:
    out = SourcePipeline.from_config({}).process([src(value, value_schema=schema), src({"a": 1}, 1)])
    assert [p.value for p in out.out] == [wire, b'{"a":1}']
