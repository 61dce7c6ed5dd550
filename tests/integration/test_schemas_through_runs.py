"""Records with Connect schemas through real bounded runs on the embedded backend: a source task hands over
Structs with key and value schemas, JsonConverter with schemas.enable=true writes Kafka Connect's envelope to the
topic, and a sink run gives its task SinkRecords carrying the schemas and the same Structs; a record that is not
an envelope goes to the dead letter topic with the stage in its headers; a record the task reports is written to
the dead letters with its schemas (the errant record reporter)."""

from __future__ import annotations

import json
from typing import Any

from connect_runtime.api.data import Schema
from connect_runtime.backends import open_backend
from connect_runtime.backends.base import ProducerRecord
from connect_runtime.runtime.sink.run import run_sink
from connect_runtime.runtime.source.run import run_source
from tests.support.schema_connectors import ORDER, RECEIVED, order

SCHEMAS = {"key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "true",
           "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "true"}


def raw_topic(url: str, topic: str) -> list[tuple[bytes | None, bytes | None, Any]]:
    be = open_backend(url)
    try:
        consumer = be.consumer(None)
        try:
            parts = consumer.partitions([topic])
            ends = consumer.end_offsets(parts, 10.0)
        finally:
            consumer.close()
        return [(r.key, r.value, r.headers) for tp in sorted(parts) for r in be.read_range(tp, 0, ends[tp])]
    finally:
        be.close()


def test_structs_with_schemas_go_through_a_source_run_and_a_sink_run(sqlite_url: str) -> None:
    src = run_source({"name": "orders-src", "connector.class": "tests.support.schema_connectors.StructSource",
                      "topic": "orders", "count": "10", **SCHEMAS}, sqlite_url, max_records=10)
    written = raw_topic(sqlite_url, "orders")
    assert len(written) == 10
    key, value, _ = written[3]
    assert json.loads(key or b"") == {"schema": {"type": "string", "optional": False}, "payload": "o3"}
    envelope = json.loads(value or b"")
    assert envelope["schema"]["name"] == "shop.Order"
    assert envelope["payload"] == {"id": 3, "amount": "0Q==", "day": 19726, "at": 1704067200003, "note": None}

    run_sink({"name": "orders-sink", "connector.class": "tests.support.schema_connectors.CollectingSink",
              "topics": "orders", "probe": "e2e", **SCHEMAS}, sqlite_url, until_offsets=src)
    got = RECEIVED.pop("e2e")
    assert [(r.key_schema, r.key, r.value_schema, r.value) for r in got] == [
        (Schema.STRING_SCHEMA, f"o{n}", ORDER, order(n)) for n in range(10)]


def test_bad_records_and_reported_records_are_dead_lettered(sqlite_url: str) -> None:
    run_source({"name": "orders-src", "connector.class": "tests.support.schema_connectors.StructSource",
                "topic": "orders", "count": "3", **SCHEMAS}, sqlite_url, max_records=3)
    with open_backend(sqlite_url) as backend:  # and plain JSON, which is not an envelope
        producer = backend.producer()
        try:
            producer.send([ProducerRecord("orders", 0, None, b'{"id":99}')])
            producer.flush(30)
        finally:
            producer.close()
    result = run_sink({"name": "orders-sink", "connector.class": "tests.support.schema_connectors.CollectingSink",
                       "topics": "orders", "probe": "dlq", "report.ids": "1", **SCHEMAS,
                       "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "orders-dlq",
                       "errors.deadletterqueue.context.headers.enable": "true"}, sqlite_url)
    got = RECEIVED.pop("dlq")
    assert [r.value["id"] for r in got] == [0, 2]
    assert result.dead_lettered == 2
    dead = raw_topic(sqlite_url, "orders-dlq")
    by_stage = {dict(h or []).get("__connect.errors.stage"): (k, v) for k, v, h in dead}
    assert by_stage[b"VALUE_CONVERTER"][1] == b'{"id":99}'
    reported = [(k, v) for k, v, h in dead if b"cannot store order 1" in dict(h or []).get(
        "__connect.errors.exception.message", b"")]
    assert len(reported) == 1
    key, value = reported[0]
    assert json.loads(value or b"")["payload"]["id"] == 1  # written back with its schema, as it was read
    assert json.loads(value or b"")["schema"]["name"] == "shop.Order"
    assert json.loads(key or b"")["payload"] == "o1"
