"""JsonSchemaConverter and ProtobufConverter in runs on the SQLite backend (mock registry): a source run writes typed
Structs through the value converter, a sink run reads them back as Structs; with ``errors.tolerance=all`` records
the converter cannot read go to the dead letter queue with Kafka Connect's context headers and the committed offsets
cover every record (nothing committed is lost, nothing read twice)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from connect_runtime.api import TopicPartition
from connect_runtime.api.data import to_plain
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.converters._registry import drop_mock_scope
from connect_runtime.runtime.sink import run_sink
from connect_runtime.runtime.source import run_source
from tests.support.collecting_sink import COLLECTED
from tests.support.typed_source import shipment_values

SCOPE = "registry-pipeline"
CONVERTERS = {"json": "io.confluent.connect.json.JsonSchemaConverter",
              "protobuf": "io.confluent.connect.protobuf.ProtobufConverter"}


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    drop_mock_scope(SCOPE)
    COLLECTED.clear()
    yield
    drop_mock_scope(SCOPE)


@pytest.mark.parametrize("fmt", sorted(CONVERTERS))
def test_typed_records_flow_through_a_source_and_a_sink_run(sqlite_url: str, fmt: str) -> None:
    converter = {"value.converter": CONVERTERS[fmt], "value.converter.schema.registry.url": f"mock://{SCOPE}",
                 "value.converter.optional.for.nullables": "true"}
    if fmt == "json":
        del converter["value.converter.optional.for.nullables"]
    source = run_source({"name": "shipments", "connector.class": "tests.support.typed_source.ShipmentSource",
                         "topic": "shipments", "schema": "v1", "first.id": "1", "count": "5", **converter},
                        sqlite_url)
    assert source.records == 5
    with open_backend(sqlite_url) as backend:  # two records the converter cannot read, and a tombstone
        producer = backend.producer()
        try:
            producer.send([ProducerRecord("shipments", 0, None, v) for v in (b"plain text", b"\x00\x00\x00\x30\x39\x00",
                                                                             None)])
            producer.flush(30)
        finally:
            producer.close()
    sink = {"name": f"sink-{fmt}", "connector.class": "tests.support.collecting_sink.CollectingSink",
            "topics": "shipments", "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq",
            "errors.deadletterqueue.context.headers.enable": "true", **converter}
    result = run_sink(sink, sqlite_url)
    assert result.dead_lettered == 2 and result.committed == {"shipments": {"0": 8}}
    got = COLLECTED[f"sink-{fmt}"]
    expected_name = "shop.Shipment" if fmt == "json" else "Shipment"  # Protobuf: the message's short name
    assert [(o, name) for _, _, o, name, _ in got] == [(i, expected_name) for i in range(5)] + [(7, None)]
    assert [v for *_, v in got[:5]] == [to_plain(v) for v in shipment_values(1, 5)]
    with open_backend(sqlite_url) as backend:
        dead = list(backend.read_range(TopicPartition("dlq", 0), 0, 100))
    assert [d.value for d in dead] == [b"plain text", b"\x00\x00\x00\x30\x39\x00"]
    headers = [dict(d.headers or []) for d in dead]
    assert [h["__connect.errors.offset"] for h in headers] == [b"5", b"6"]
    assert all(h["__connect.errors.stage"] == b"VALUE_CONVERTER" for h in headers)
    assert b"wire format" in headers[0]["__connect.errors.exception.message"]
    assert b"Schema Not Found" in headers[1]["__connect.errors.exception.message"]
    again = run_sink(sink, sqlite_url)
    assert again.records == 0 and len(COLLECTED[f"sink-{fmt}"]) == 6  # committed: nothing read twice
