"""AvroConverter in a sink run on the SQLite backend: with ``errors.tolerance=all`` a record the converter cannot
read goes to the dead letter queue with Kafka Connect's context headers, the others reach ``put`` as Structs, and the
committed offsets cover every record (nothing committed is lost, nothing is read twice)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from connect_runtime.api import ConnectError, TopicPartition
from connect_runtime.api.data import Schema, SchemaBuilder, Struct
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.converters._registry import drop_mock_scope
from connect_runtime.converters.avro import AvroConverter
from connect_runtime.runtime.sink import run_sink
from tests.support.collecting_sink import COLLECTED

SCOPE = "avro-dlq"
V1 = SchemaBuilder.struct().name("shop.Order").field("id", Schema.INT64_SCHEMA).build()
V2 = SchemaBuilder.struct().name("shop.Order").field("id", Schema.INT64_SCHEMA) \
    .field("note", Schema.OPTIONAL_STRING_SCHEMA).build()


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    drop_mock_scope(SCOPE)
    COLLECTED.clear()
    yield
    drop_mock_scope(SCOPE)


def fill(url: str) -> None:
    """Offsets 0..5: v1, garbage, v2 (a new schema version), an unknown schema id, a tombstone, v1."""
    conv = AvroConverter()
    conv.configure({"schema.registry.url": f"mock://{SCOPE}"}, False)
    values = [
        conv.from_connect_data("orders", V1, Struct(V1).put("id", 1)),
        b"not avro at all",
        conv.from_connect_data("orders", V2, Struct(V2).put("id", 3).put("note", "v2")),
        b"\x00\x00\x00\x03\xe7\x02",
        None,
        conv.from_connect_data("orders", V1, Struct(V1).put("id", 6)),
    ]
    with open_backend(url) as backend:
        backend.create_topics({"orders": 1})
        producer = backend.producer()
        try:
            producer.send([ProducerRecord("orders", 0, None, v) for v in values])
            producer.flush(30)
        finally:
            producer.close()


def config(**extra: str) -> dict[str, str]:
    return {"name": "avro-sink", "connector.class": "tests.support.collecting_sink.CollectingSink",
            "topics": "orders", "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": f"mock://{SCOPE}", **extra}


def test_unreadable_records_go_to_the_dead_letter_queue_and_nothing_committed_is_lost(sqlite_url: str) -> None:
    fill(sqlite_url)
    result = run_sink(config(**{"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "orders-dlq",
                                "errors.deadletterqueue.context.headers.enable": "true"}), sqlite_url)
    assert result.dead_lettered == 2 and result.committed == {"orders": {"0": 6}}
    got = COLLECTED["avro-sink"]
    assert [(o, name, v) for _, _, o, name, v in got] == [
        (0, "shop.Order", {"id": 1}), (2, "shop.Order", {"id": 3, "note": "v2"}), (4, None, None),
        (5, "shop.Order", {"id": 6})]
    with open_backend(sqlite_url) as backend:
        dead = list(backend.read_range(TopicPartition("orders-dlq", 0), 0, 100))
    assert [d.value for d in dead] == [b"not avro at all", b"\x00\x00\x00\x03\xe7\x02"]
    first = dict(dead[0].headers or [])
    assert (first["__connect.errors.topic"], first["__connect.errors.partition"], first["__connect.errors.offset"]) \
        == (b"orders", b"0", b"1")
    assert first["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert b"AvroConverter" in first["__connect.errors.class.name"]
    assert b"not in the Schema Registry wire format" in first["__connect.errors.exception.message"]
    second = dict(dead[1].headers or [])
    assert second["__connect.errors.offset"] == b"3"
    assert b"Schema Not Found (HTTP 404" in second["__connect.errors.exception.message"]
    again = run_sink(config(**{"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "orders-dlq"}),
                     sqlite_url)
    assert again.records == 0 and len(COLLECTED["avro-sink"]) == 4  # committed: nothing read twice


def test_without_tolerance_an_unreadable_record_fails_the_run_and_commits_nothing_past_it(sqlite_url: str) -> None:
    fill(sqlite_url)
    with pytest.raises(ConnectError, match="not in the Schema Registry wire format"):
        run_sink(config(**{"consumer.max.poll.records": "1", "offset.flush.interval.ms": "0"}), sqlite_url)
    with open_backend(sqlite_url) as backend:
        consumer = backend.consumer("connect-avro-sink")
        try:
            committed = consumer.committed([TopicPartition("orders", 0)], 10)
        finally:
            consumer.close()
    assert list(committed.values()) in ([None], [1])  # never past the unreadable record at offset 1


def test_a_record_the_latest_schema_cannot_read_is_dead_lettered_naming_subject_field_and_rule(
        sqlite_url: str) -> None:
    # use.latest.version on the sink: v1 records must be readable into the latest version; a latest that added a
    # field without a default (the mock registry checks no compatibility) cannot read them
    conv = AvroConverter()
    conv.configure({"schema.registry.url": f"mock://{SCOPE}"}, False)
    v3 = SchemaBuilder.struct().name("shop.Order").field("id", Schema.INT64_SCHEMA) \
        .field("qty", Schema.INT32_SCHEMA).build()
    values = [conv.from_connect_data("orders", V1, Struct(V1).put("id", 1)),
              conv.from_connect_data("orders", v3, Struct(v3).put("id", 2).put("qty", 5))]
    with open_backend(sqlite_url) as backend:
        backend.create_topics({"orders": 1})
        producer = backend.producer()
        try:
            producer.send([ProducerRecord("orders", 0, None, v) for v in values])
            producer.flush(30)
        finally:
            producer.close()
    result = run_sink(config(**{"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "orders-dlq",
                                "errors.deadletterqueue.context.headers.enable": "true",
                                "value.converter.use.latest.version": "true",
                                "value.converter.auto.register.schemas": "false"}), sqlite_url)
    assert result.dead_lettered == 1 and result.committed == {"orders": {"0": 2}}
    assert [(o, v) for _, _, o, _, v in COLLECTED["avro-sink"]] == [(1, {"id": 2, "qty": 5})]
    with open_backend(sqlite_url) as backend:
        dead = list(backend.read_range(TopicPartition("orders-dlq", 0), 0, 100))
    message = dict(dead[0].headers or [])["__connect.errors.exception.message"].decode()
    assert "subject 'orders-value'" in message and "field 'qty' was added without a default" in message
    assert "BACKWARD" in message and dead[0].value == values[0]
