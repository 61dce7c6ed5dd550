"""Schemas end to end, every piece real: a source run writes typed records (``ShipmentSource``, Structs with a
decimal, a date, a timestamp and optional fields) in Avro with the AvroConverter to Apache Kafka 4.4.0, registering
their schema in a real Schema Registry (Apicurio Registry, tests/support/schema_registry.py); a SqlSink run reads
them with the AvroConverter into PostgreSQL, creating the table from the value schema (typed columns, checked in
``information_schema``); Spark reads the same committed range with typed columns from the registry.

Then the schema evolves: a BACKWARD-compatible change (an optional field) registers version 2, flows on, adds a
nullable column, and Spark reads both versions' records with the latest one's columns; an incompatible change (a
required field with no default) is refused by the registry, the source run fails naming the subject, the rule and
the field, and nothing of it is committed.

About 40 s on 2 cores, half of it the SparkSession's start (local[1]; Spark's Kafka source and Avro functions from
``scripts/fetch_spark_kafka.sh``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from connect_runtime import run_sink, run_source
from connect_runtime.api.errors import DataError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import open_backend
from tests.support.sql import query
from tests.support.typed_source import shipment_values

pytestmark = [pytest.mark.kafka, pytest.mark.schema_registry, pytest.mark.spark, pytest.mark.timeout(600)]

AVRO = "io.confluent.connect.avro.AvroConverter"
SOURCE = "tests.support.typed_source.ShipmentSource"
SINK = "connect_runtime.connectors.sql.SqlSink"


def _avro(registry_url: str, prefix: str = "value.converter") -> dict[str, str]:
    return {prefix: AVRO, f"{prefix}.schema.registry.url": registry_url}


def _source(topic: str, name: str, registry_url: str, kafka_url: str, *, schema: str, first: int,
            count: int) -> Any:
    return run_source({"name": name, "connector.class": SOURCE, "topic": topic, "schema": schema,
                       "first.id": first, "count": count, **_avro(registry_url)}, kafka_url)


def _sink(topic: str, registry_url: str, kafka_url: str, pg_url: str, until: Any) -> Any:
    return run_sink({"name": f"{topic}-sql", "connector.class": SINK, "connection.url": pg_url, "topics": topic,
                     "auto.create": True, "auto.evolve": True, "insert.mode": "upsert", "pk.mode": "record_value",
                     "pk.fields": "id", **_avro(registry_url)}, kafka_url, until_offsets=until)


def _raw(kafka_url: str, topic: str) -> list[bytes]:
    with open_backend(kafka_url) as backend:
        consumer = backend.consumer(None)
        try:
            parts = consumer.partitions([topic])
            ends = consumer.end_offsets(parts, 10.0)
        finally:
            consumer.close()
        return [r.value for tp in sorted(parts) for r in backend.read_range(tp, 0, ends[tp])]


def _end(kafka_url: str, topic: str) -> int:
    with open_backend(kafka_url) as backend:
        consumer = backend.consumer(None)
        try:
            return int(consumer.end_offsets([TopicPartition(topic, 0)], 10.0)[TopicPartition(topic, 0)])
        finally:
            consumer.close()


def _columns(pg_url: str, table: str) -> dict[str, tuple[str, str, int | None, int | None]]:
    rows = query(pg_url, "SELECT column_name, data_type, is_nullable, numeric_precision, numeric_scale "
                         f"FROM information_schema.columns WHERE table_name = '{table}'")
    return {r[0]: (r[1], r[2], r[3] if r[1] == "numeric" else None, r[4] if r[1] == "numeric" else None)
            for r in rows}


def _table(pg_url: str, table: str, columns: list[str]) -> list[dict[str, Any]]:
    cols = ", ".join(f'"{c}"' for c in columns)
    return [dict(zip(columns, r, strict=True)) for r in query(pg_url, f'SELECT {cols} FROM "{table}" ORDER BY id')]


V1_COLUMNS = {
    "id": ("bigint", "NO", None, None),
    "customer": ("text", "NO", None, None),
    "qty": ("integer", "NO", None, None),
    "amount": ("numeric", "NO", 10, 2),
    "weight": ("double precision", "YES", None, None),
    "express": ("boolean", "NO", None, None),
    "day": ("date", "NO", None, None),
    "shipped_at": ("timestamp with time zone", "NO", None, None),
    "note": ("text", "YES", None, None),
}


SPARK_V1 = {"id": "bigint", "customer": "string", "qty": "int", "amount": "decimal(10,2)", "weight": "double",
            "express": "boolean", "day": "date", "shipped_at": "timestamp", "note": "string"}
"""The Spark columns. Optional fields are nullable; read_kafka_avro makes every value column nullable (a tombstone
reads as a row of nulls), so a required field's NOT NULL, kept by the SQL table, is not checked here."""


def test_an_avro_topic_flows_into_typed_postgresql_columns_and_a_typed_spark_read(
        kafka_url: str, schema_registry_url: str, pg_database: str, spark: Any) -> None:
    topic = f"shipments_{uuid.uuid4().hex[:10]}"
    subject = f"{topic}-value"
    registry = SchemaRegistryClient({"url": schema_registry_url})

    # 1. the source run writes Avro, registering the value schema under the topic's subject
    first = _source(topic, f"{topic}-src", schema_registry_url, kafka_url, schema="v1", first=0, count=40)
    assert first.records == 40
    assert registry.get_versions(subject) == [1]
    registered = registry.get_latest_version(subject)
    assert registered.schema.schema_type == "AVRO"
    # a plain Confluent consumer reads what it wrote: the wire format, the registered id, the logical types
    raw = _raw(kafka_url, topic)
    assert len(raw) == 40
    assert all(b[0] == 0 and int.from_bytes(b[1:5], "big") == registered.schema_id for b in raw)
    plain = AvroDeserializer(SchemaRegistryClient({"url": schema_registry_url}))
    read = [plain(b, SerializationContext(topic, MessageField.VALUE)) for b in raw]
    expected = shipment_values(0, 40)
    assert [r["id"] for r in read] == list(range(40))
    assert read[1]["amount"] == decimal.Decimal("98765.01")
    assert read[5]["shipped_at"] == dt.datetime(2026, 11, 26, 8, 5, 0, 5000, tzinfo=dt.UTC)
    assert read[3]["note"] is None

    # 2. the SqlSink run creates the table from the value schema: typed columns, optional fields nullable
    sunk = _sink(topic, schema_registry_url, kafka_url, pg_database, first)
    assert sunk.records == 40
    assert _columns(pg_database, topic) == V1_COLUMNS
    assert _table(pg_database, topic, list(V1_COLUMNS)) == expected

    # 3. Spark reads the source run's committed range with the columns typed from the registry, nothing restated
    types, rows = _spark_rows(spark, kafka_url, schema_registry_url, topic, first.to_dict())
    assert types == SPARK_V1
    assert rows == expected

    # 4. a BACKWARD-compatible change: version 2 registered, the new optional field becomes a nullable column
    registry.set_compatibility(subject, "BACKWARD")
    second = _source(topic, f"{topic}-src2", schema_registry_url, kafka_url, schema="v2", first=40, count=20)
    assert second.records == 20
    assert registry.get_versions(subject) == [1, 2]
    assert _sink(topic, schema_registry_url, kafka_url, pg_database, second).records == 20
    assert _columns(pg_database, topic) == {**V1_COLUMNS, "carrier": ("text", "YES", None, None)}
    both = [{**v, "carrier": None} for v in expected] + shipment_values(40, 20, "v2")
    assert _table(pg_database, topic, [*V1_COLUMNS, "carrier"]) == both
    # Spark reads both runs' records with the latest version's columns: v1 records get the new field's default
    types, rows = _spark_rows(spark, kafka_url, schema_registry_url, topic,
                              {topic: {0: _end(kafka_url, topic)}})
    assert types == {**SPARK_V1, "carrier": "string"}
    assert rows == both

    # 5. an incompatible change: refused by the registry, the run fails naming the subject and the field,
    # and nothing of it is committed (the topic's end, the registry's versions and the table stay)
    end = _end(kafka_url, topic)
    with pytest.raises(DataError) as refused:
        _source(topic, f"{topic}-src3", schema_registry_url, kafka_url, schema="v3", first=60, count=10)
    message = str(refused.value)
    assert f"subject {subject!r}" in message and "rule BACKWARD" in message and "'zone'" in message, message
    assert registry.get_versions(subject) == [1, 2]
    assert _end(kafka_url, topic) == end
    assert _sink(topic, schema_registry_url, kafka_url, pg_database, None).records == 0
    assert len(query(pg_database, f'SELECT id FROM "{topic}"')) == 60


@pytest.fixture(scope="module")
def spark(spark_with_kafka: Any) -> Any:
    return spark_with_kafka  # the one session of the process, with the jars (tests/support/spark.py says why)

def _spark_rows(spark: Any, kafka_url: str, registry_url: str, topic: str, ranges: Any) -> tuple[
        dict[str, str], list[dict[str, Any]]]:
    """The Spark read of ``ranges`` through the registry: its column types and rows (timestamps as UTC); the
    optional fields' columns are nullable."""
    from connect_runtime.spark import read_kafka_avro

    df = read_kafka_avro(spark, kafka_url, ranges, registry_url, topic=topic, metadata_columns=())
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert all(df.schema[name].nullable for name in ("weight", "note", "carrier") if name in types)
    rows = [r.asDict() for r in df.orderBy("id").collect()]
    for row in rows:  # pyspark hands timestamps over as naive local times
        row["shipped_at"] = row["shipped_at"].astimezone(dt.UTC)
    return types, rows
