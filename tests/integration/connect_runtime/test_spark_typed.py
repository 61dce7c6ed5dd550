"""Typed columns in Spark without restating them: connect_runtime.spark.spark_schema (a Connect schema's Spark
columns), read_kafka_avro (an Avro topic written by confluent-kafka's own AvroSerializer on Apache Kafka, read
natively with Spark's Kafka source and from_avro, writer schemas by id from the registry, two schema versions in one
range) and read_lake (the Parquet types of the lake's files kept).

Real Apache Kafka 4.4.0 (the session broker), a real local SparkSession with the jars scripts/fetch_spark_kafka.sh
fetched (spark-avro among them). The registry is confluent-kafka's mock (``mock://``): the writer schemas reach
Spark as JSON fetched by the driver, so the JVM never talks to the registry.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from connect_runtime.api.data import Date, Decimal, Schema, SchemaBuilder, Time, Timestamp
from connect_runtime.api.errors import DataError
from connect_runtime.backends import ProducerRecord, open_backend

pytestmark = [pytest.mark.spark]
UTC = dt.UTC


@pytest.fixture(scope="module")
def spark(spark_with_kafka: Any) -> Any:
    return spark_with_kafka  # the one session of the process, with the jars (tests/support/spark.py says why)

# ------------------------------------------------------------------------------------------- spark_schema


def test_every_connect_type_maps_to_its_spark_type_and_optional_to_nullable() -> None:
    from pyspark.sql import types as T

    from connect_runtime.spark import spark_schema, spark_type

    point = SchemaBuilder.struct().field("x", Schema.FLOAT64_SCHEMA).field("label", Schema.OPTIONAL_STRING_SCHEMA)
    schema = (SchemaBuilder.struct().name("shop.Everything")
              .field("i8", Schema.INT8_SCHEMA).field("i16", Schema.INT16_SCHEMA).field("i32", Schema.INT32_SCHEMA)
              .field("i64", Schema.OPTIONAL_INT64_SCHEMA).field("f32", Schema.FLOAT32_SCHEMA)
              .field("f64", Schema.FLOAT64_SCHEMA).field("ok", Schema.BOOLEAN_SCHEMA)
              .field("s", Schema.OPTIONAL_STRING_SCHEMA).field("b", Schema.BYTES_SCHEMA)
              .field("amount", Decimal.builder(2).parameter("connect.decimal.precision", "12"))
              .field("loose", Decimal.builder(4).optional())
              .field("wide", Decimal.builder(2).parameter("connect.decimal.precision", "64"))
              .field("day", Date.schema()).field("at", Timestamp.builder().optional()).field("tm", Time.schema())
              .field("tags", SchemaBuilder.array(Schema.OPTIONAL_STRING_SCHEMA))
              .field("counts", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT32_SCHEMA).optional())
              .field("where", point.optional())
              .build())
    want = T.StructType([
        T.StructField("i8", T.ByteType(), False), T.StructField("i16", T.ShortType(), False),
        T.StructField("i32", T.IntegerType(), False), T.StructField("i64", T.LongType(), True),
        T.StructField("f32", T.FloatType(), False), T.StructField("f64", T.DoubleType(), False),
        T.StructField("ok", T.BooleanType(), False), T.StructField("s", T.StringType(), True),
        T.StructField("b", T.BinaryType(), False),
        T.StructField("amount", T.DecimalType(12, 2), False), T.StructField("loose", T.DecimalType(38, 4), True),
        T.StructField("wide", T.DecimalType(38, 2), False),
        T.StructField("day", T.DateType(), False), T.StructField("at", T.TimestampType(), True),
        T.StructField("tm", T.IntegerType(), False),
        T.StructField("tags", T.ArrayType(T.StringType(), True), False),
        T.StructField("counts", T.MapType(T.StringType(), T.IntegerType(), False), True),
        T.StructField("where", T.StructType([T.StructField("x", T.DoubleType(), False),
                                             T.StructField("label", T.StringType(), True)]), True),
    ])
    assert spark_schema(schema) == want
    assert spark_type(Time.schema(), time="time") == T.TimeType()
    with pytest.raises(DataError, match="only a STRUCT schema's fields become columns"):
        spark_schema(Schema.STRING_SCHEMA)
    too_fine = SchemaBuilder.struct().field("d", Decimal.builder(40)).build()
    with pytest.raises(DataError, match=r"the value\.d: a decimal of precision 38 and scale 40 has no Spark type"):
        spark_schema(too_fine)


def test_the_reader_schema_caps_every_decimal_precision_at_38_and_keeps_the_rest() -> None:
    from connect_runtime.spark import spark_reader_schema

    def dec(p: int) -> dict[str, Any]:
        return {"type": "bytes", "logicalType": "decimal", "precision": p, "scale": 2}

    schema = {"type": "record", "name": "R", "connect.name": "R", "fields": [
        {"name": "a", "type": dec(64), "doc": "precision 64"},
        {"name": "b", "type": ["null", dec(50)], "default": None},
        {"name": "c", "type": {"type": "array", "items": dec(39)}},
        {"name": "d", "type": {"type": "map", "values": {"type": "record", "name": "In", "fields": [
            {"name": "e", "type": dec(12)}]}}}]}
    capped = json.loads(spark_reader_schema(json.dumps(schema)))
    fields = {f["name"]: f for f in capped["fields"]}
    assert fields["a"] == {"name": "a", "type": dec(38), "doc": "precision 64"}
    assert fields["b"]["type"] == ["null", dec(38)] and fields["c"]["type"]["items"] == dec(38)
    assert fields["d"]["type"]["values"]["fields"][0]["type"] == dec(12)
    assert capped["connect.name"] == "R" and spark_reader_schema(schema) == spark_reader_schema(json.dumps(schema))


# ----------------------------------------------------------------------------------------- read_kafka_avro

V1: dict[str, Any] = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "note", "type": ["null", "string"], "default": None},
]}
V2: dict[str, Any] = {**V1, "fields": [*V1["fields"], {"name": "items", "type": ["null", "long"], "default": None}]}
CONNECT_V2 = (SchemaBuilder.struct().name("shop.Order")
              .field("id", Schema.INT64_SCHEMA).field("customer", Schema.STRING_SCHEMA)
              .field("amount", Decimal.builder(2).parameter("connect.decimal.precision", "12"))
              .field("day", Date.schema()).field("at", Timestamp.schema())
              .field("note", Schema.OPTIONAL_STRING_SCHEMA).field("items", Schema.OPTIONAL_INT64_SCHEMA)
              .build())


def _order(i: int, *, v2: bool) -> dict[str, Any]:
    order: dict[str, Any] = {
        "id": 10_000_000_000 + i, "customer": f"c{i}",
        "amount": decimal.Decimal(["9999999999.99", "-0.01", "12.30", "0.00"][i % 4]),
        "day": dt.date(2026, 11, 20) + dt.timedelta(days=i),
        "at": dt.datetime(2026, 11, 26, 9, 30, i, 1000 * (i * 37 % 1000), tzinfo=UTC),
        "note": None if i % 2 else f"note {i}",
    }
    if v2:
        order["items"] = None if i % 3 == 0 else i * 2
    return order


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _produce(kafka_url: str, topic: str, values: dict[int, list[bytes | None]]) -> dict[str, dict[str, list[int]]]:
    with open_backend(kafka_url) as backend:
        backend.create_topics({topic: len(values)})
        producer = backend.producer()
        try:
            producer.send([ProducerRecord(topic, p, None, v) for p, vs in values.items() for v in vs])
            producer.flush(30)
        finally:
            producer.close()
    return {topic: {str(p): [0, len(vs)] for p, vs in values.items()}}


@pytest.fixture(scope="module")
def registry() -> Any:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient.new_client({"url": f"mock://{uuid.uuid4().hex}"})


def _serializer(registry: Any, schema: dict[str, Any]) -> Any:
    from confluent_kafka.schema_registry.avro import AvroSerializer

    return AvroSerializer(registry, json.dumps(schema), conf={"auto.register.schemas": True})


def _ctx(topic: str) -> Any:
    from confluent_kafka.serialization import MessageField, SerializationContext

    return SerializationContext(topic, MessageField.VALUE)


def _plain(row: Any, fields: list[str]) -> dict[str, Any]:
    out = {f: row[f] for f in fields}
    if isinstance(out.get("at"), dt.datetime):
        out["at"] = out["at"].replace(tzinfo=UTC)  # the session's zone is UTC: Spark hands back naive datetimes
    return out


@pytest.mark.kafka
@pytest.mark.faithful_kafka
def test_an_avro_topic_over_two_schema_versions_reads_as_typed_columns_with_exact_values(
        spark: Any, kafka_url: str, registry: Any) -> None:
    from pyspark.sql import types as T

    from connect_runtime.spark import read_kafka_avro, spark_schema

    topic = _topic("avro-orders")
    ser1, ser2, ctx = _serializer(registry, V1), _serializer(registry, V2), _ctx(topic)
    # partition 0: version 1 then version 2; partition 1: version 2, a tombstone, version 1 again
    p0 = [(i, False) for i in range(4)] + [(i, True) for i in range(4, 7)]
    p1 = [(i, True) for i in range(7, 9)] + [None] + [(9, False)]
    encoded: dict[int, list[bytes | None]] = {0: [], 1: []}
    expected: list[tuple[int, int, dict[str, Any] | None]] = []
    for p, plan in ((0, p0), (1, p1)):
        for offset, item in enumerate(plan):
            if item is None:
                encoded[p].append(None)
                expected.append((p, offset, None))
                continue
            i, v2 = item
            order = _order(i, v2=v2)
            encoded[p].append((ser2 if v2 else ser1)(order, ctx))
            expected.append((p, offset, {**order, "items": order.get("items")}))
    ids = {bytes(v[1:5]) for vs in encoded.values() for v in vs if v is not None}
    assert len(ids) == 2 and all(v is None or v[0] == 0 for vs in encoded.values() for v in vs)
    ranges = _produce(kafka_url, topic, encoded)

    df = read_kafka_avro(spark, kafka_url, ranges, registry)
    fields = [f["name"] for f in V2["fields"]]
    assert df.columns == ["topic", "partition", "offset", "timestamp", *fields]
    types = {f.name: f.dataType for f in df.schema.fields}
    assert [types[f] for f in fields] == [T.LongType(), T.StringType(), T.DecimalType(12, 2), T.DateType(),
                                          T.TimestampType(), T.StringType(), T.LongType()]
    assert df.schema["note"].nullable and df.schema["items"].nullable
    assert df.schema["id"].nullable  # a tombstone's row is all nulls: Spark marks every value column nullable
    # the same columns a Connect schema of the records gives (what AvroData makes of V2)
    assert [(f.name, f.dataType) for f in spark_schema(CONNECT_V2).fields] == [(f, types[f]) for f in fields]

    rows = sorted(df.collect(), key=lambda r: (r["partition"], r["offset"]))
    assert [(r["topic"], r["partition"], r["offset"]) for r in rows] == [(topic, p, o) for p, o, _ in expected]
    for row, (_, _, want) in zip(rows, expected, strict=True):
        got = _plain(row, fields)
        assert got == (want if want is not None else dict.fromkeys(fields))
    # the typed columns compute: exact decimal sums, date and timestamp comparisons
    total = df.agg({"amount": "sum"}).collect()[0][0]
    assert total == sum((w["amount"] for _, _, w in expected if w), decimal.Decimal("0.00"))
    assert df.where("day >= date'2026-11-25' and at < timestamp'2026-11-26 09:30:08'").count() == 3

    # the ids of the subject's versions instead of a scan of the range: the same rows
    by_subject = read_kafka_avro(spark, kafka_url, ranges, registry, schema_ids="subject")
    assert by_subject.schema == df.schema
    assert sorted(by_subject.collect(), key=lambda r: (r["partition"], r["offset"])) == rows

    # a reader schema given: version 1's columns (items dropped), version 2's records resolved to it
    only_v1 = read_kafka_avro(spark, kafka_url, ranges, registry, reader_schema=json.dumps(V1),
                              metadata_columns=["offset"])
    assert only_v1.columns == ["offset", *[f["name"] for f in V1["fields"]]]
    assert only_v1.count() == len(expected)


@pytest.mark.kafka
def test_values_not_in_the_wire_format_and_unknown_ids_are_named(spark: Any, kafka_url: str, registry: Any) -> None:
    from connect_runtime.spark import read_kafka_avro

    topic = _topic("avro-bad")
    good = _serializer(registry, V1)(_order(1, v2=False), _ctx(topic))
    ranges = _produce(kafka_url, topic, {0: [good, b'{"id": 2}', good]})
    with pytest.raises(DataError, match=rf"topic '{topic}', partition 0, offset 1: the value is not in Confluent's "
                                        "wire format"):
        read_kafka_avro(spark, kafka_url, ranges, registry)

    with pytest.raises(Exception, match=rf"topic {topic}, partition 0, offset 1: the value is not in Confluent's "
                                        "wire format"):  # found by the query itself (no scan)
        read_kafka_avro(spark, kafka_url, ranges, registry, schema_ids="subject").collect()

    unknown = b"\x00\x00\x00\x7f\xff" + good[5:]
    topic2 = _topic("avro-unknown-id")
    ranges2 = _produce(kafka_url, topic2, {0: [unknown]})
    with pytest.raises(DataError, match=f"topic '{topic2}': no reader schema: the latest version of subject "
                                        f"'{topic2}-value'"):
        read_kafka_avro(spark, kafka_url, ranges2, registry)
    with pytest.raises(DataError, match=rf"schema id 32767 \(topic '{topic2}', first at partition 0, offset 0\): "
                                        "not found in"):
        read_kafka_avro(spark, kafka_url, ranges2, registry, reader_schema=V1)
    topic3 = _topic("avro-other-subject")
    elsewhere = _serializer(registry, V2)(_order(4, v2=True), _ctx(_topic("elsewhere")))  # V2 is not under topic3
    ranges3 = _produce(kafka_url, topic3, {0: [_serializer(registry, V1)(_order(3, v2=False), _ctx(topic3)),
                                               elsewhere]})
    with pytest.raises(Exception, match=rf"topic {topic3}, partition 0, offset 1: schema id \d+ is not a version of "
                                        f"subject '{topic3}-value'"):
        read_kafka_avro(spark, kafka_url, ranges3, registry, schema_ids="subject").collect()
    with pytest.raises(DataError, match=r"value fields \['offset'\] clash with metadata columns"):
        read_kafka_avro(spark, kafka_url, ranges, registry, reader_schema={**V1, "fields": [
            {"name": "offset", "type": "long"}, *V1["fields"]]})


@pytest.mark.kafka
def test_confluent_default_decimal_precision_64_reads_as_38_and_a_wider_value_fails(
        spark: Any, kafka_url: str, registry: Any) -> None:
    """Confluent's AvroData writes precision 64 for a Connect Decimal that states none: Spark's decimals stop at 38
    digits, so the column is decimal(38, 2); a value needing more digits fails the read instead of coming out
    rounded or null."""
    from connect_runtime.spark import read_kafka_avro

    wide = {"type": "record", "name": "Wide", "fields": [
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 64, "scale": 2}}]}
    topic = _topic("avro-wide")
    ser = _serializer(registry, wide)
    small, huge = decimal.Decimal("123456789012345678901234567890123456.78"), decimal.Decimal("1" * 40 + ".25")
    ranges = _produce(kafka_url, topic, {0: [ser({"amount": small}, _ctx(topic)), ser({"amount": huge}, _ctx(topic))]})
    ok = read_kafka_avro(spark, kafka_url, {topic: {"0": [0, 1]}}, registry)
    assert ok.schema["amount"].dataType.simpleString() == "decimal(38,2)"
    assert [r["amount"] for r in ok.collect()] == [small]
    with pytest.raises(Exception, match=r"NUMERIC_VALUE_OUT_OF_RANGE.*cannot be represented as Decimal\(38, 2\)"):
        read_kafka_avro(spark, kafka_url, ranges, registry).collect()


# ------------------------------------------------------------------------------------------------ read_lake


def test_read_lake_keeps_the_parquet_types_of_the_files(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import types as T

    from connect_runtime.api import TopicPartition
    from connect_runtime.connectors.lake.store import encode_file, file_name
    from connect_runtime.spark import read_lake, spark_schema

    rows = [{"id": i, "amount": decimal.Decimal(f"{i}.5{i}"), "day": dt.date(2026, 11, i + 1),
             "at": dt.datetime(2026, 11, 26, 9, 0, i, 123000, tzinfo=UTC), "small": i, "mid": i * 300,
             "note": None if i % 2 else f"n{i}"} for i in range(6)]
    arrow = pa.schema([pa.field("id", pa.int64(), False), pa.field("amount", pa.decimal128(12, 2), False),
                       pa.field("day", pa.date32(), False), pa.field("at", pa.timestamp("ms", tz="UTC"), False),
                       pa.field("small", pa.int8(), False), pa.field("mid", pa.int16(), False),
                       pa.field("note", pa.string(), True)])
    directory = tmp_path / "lake" / "topics" / "typed" / "partition=0"
    directory.mkdir(parents=True)
    for start, end in ((0, 3), (3, 6)):
        data = encode_file(pa.Table.from_pylist(rows[start:end], schema=arrow), start=start, end=end, generation=1,
                           connector="lake", group_size=1, codec="snappy")
        (directory / file_name(TopicPartition("typed", 0), start)).write_bytes(data)
    root = f"file://{tmp_path / 'lake'}"

    df = read_lake(spark, root, {"typed": {"0": [0, 6]}})
    assert [(f.name, f.dataType) for f in df.schema.fields] == [
        ("id", T.LongType()), ("amount", T.DecimalType(12, 2)), ("day", T.DateType()), ("at", T.TimestampType()),
        ("small", T.ByteType()), ("mid", T.ShortType()), ("note", T.StringType())]
    got = sorted((_plain(r, list(rows[0])) for r in df.collect()), key=lambda r: r["id"])
    assert got == rows

    connect = (SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA)
               .field("amount", Decimal.builder(2).parameter("connect.decimal.precision", "12"))
               .field("day", Date.schema()).field("at", Timestamp.schema()).field("small", Schema.INT8_SCHEMA)
               .field("mid", Schema.INT16_SCHEMA).field("note", Schema.OPTIONAL_STRING_SCHEMA).build())
    assert [(f.name, f.dataType) for f in spark_schema(connect).fields] == [
        (f.name, f.dataType) for f in df.schema.fields]
    typed = read_lake(spark, root, {"typed": {"0": [3, 6]}}, schema=connect)  # a Connect schema as the schema
    assert typed.where("amount > 4").count() == 2
    empty = read_lake(spark, root, {"typed": {"0": [6, 6]}}, schema=connect)
    assert empty.count() == 0 and empty.schema == spark_schema(connect)


# ----------------------------------------------------------------------- a real registry, a spark-submit job

_JOB = '''
import json, sys
from pyspark.sql import SparkSession
from connect_runtime.spark import read_kafka_avro

args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
spark = (SparkSession.builder.appName("avro_job").config("spark.sql.session.timeZone", "UTC").getOrCreate())
df = read_kafka_avro(spark, args["--backend"], json.loads(args["--ranges"]), args["--registry"])
rows = [[r["partition"], r["offset"], r["id"], str(r["amount"]), r["day"].isoformat(), r["at"].isoformat(), r["note"],
         r["items"]] for r in df.orderBy("partition", "offset").collect()]
with open(args["--out"], "w") as f:
    json.dump({"schema": df.schema.simpleString(), "rows": rows}, f)
spark.stop()
'''


@pytest.mark.kafka
@pytest.mark.timeout(300)
@pytest.mark.usefixtures("spark_kafka_jars")  # skip (fail in CI) when they were not fetched
def test_a_spark_submit_job_reads_typed_columns_with_the_schemas_of_a_real_registry(
        kafka_url: str, schema_registry_url: str, tmp_path: Path) -> None:
    """Apicurio Registry (Confluent-compatible API): confluent-kafka's AvroSerializer registers two versions and
    writes them; a spark-submit job given only the backend, the ranges and the registry URL (the jars from
    spark_submit_kwargs(avro=True)) gets the typed columns and exact values."""
    import subprocess

    from confluent_kafka.schema_registry import SchemaRegistryClient

    from airflow_pyconnect.spark import spark_env, spark_submit_kwargs
    from tests.support import REPO

    jars = spark_submit_kwargs("handoff", avro=True)["jars"]
    client = SchemaRegistryClient({"url": schema_registry_url})
    topic = _topic("avro-job")
    ser1, ser2, ctx = _serializer(client, V1), _serializer(client, V2), _ctx(topic)
    orders = [(_order(i, v2=i >= 2), i >= 2) for i in range(4)]
    ranges = _produce(kafka_url, topic, {0: [(ser2 if v2 else ser1)(o, ctx) for o, v2 in orders]})
    app, out = tmp_path / "job.py", tmp_path / "out.json"
    app.write_text(_JOB)
    env = {**os.environ, **spark_env(), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(["spark-submit", "--master", "local[1]", "--conf", "spark.ui.enabled=false", "--jars", jars,
                           str(app), "--backend", kafka_url, "--ranges", json.dumps(ranges),
                           "--registry", schema_registry_url, "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["schema"] == ("struct<topic:string,partition:int,offset:bigint,timestamp:timestamp,id:bigint,"
                             "customer:string,amount:decimal(12,2),day:date,at:timestamp,note:string,items:bigint>")
    assert got["rows"] == [[0, i, o["id"], str(o["amount"]), o["day"].isoformat(),
                            o["at"].replace(tzinfo=None).isoformat(), o["note"], o.get("items")]
                           for i, (o, _) in enumerate(orders)]


def test_registry_credentials_never_reach_an_error(spark: Any) -> None:
    """A registry that does not answer: the error names the subject and the registry without its password or
    user-info (as a URL's password or as basic.auth.user.info)."""
    from connect_runtime.spark import read_kafka_avro

    ranges = {"secret-orders": {"0": [0, 1]}}
    for registry in ("http://alice:pa55word@127.0.0.1:9", {"url": "http://127.0.0.1:9",
                                                           "basic.auth.user.info": "alice:pa55word"}):
        with pytest.raises(DataError, match="subject 'secret-orders-value' in http://") as caught:
            read_kafka_avro(spark, "kafka://127.0.0.1:9", ranges, registry)
        assert "pa55word" not in str(caught.value)
    with pytest.raises(DataError, match="Invalid url") as caught:  # confluent-kafka's message quotes the URL
        read_kafka_avro(spark, "kafka://127.0.0.1:9", ranges, "ftp://alice:pa55word@127.0.0.1:9")
    assert "pa55word" not in str(caught.value)


def test_the_sqlite_backend_reads_avro_values_as_typed_columns_through_the_python_data_source(
        spark: Any, sqlite_url: str, registry: Any) -> None:
    """The pyconnect data source hands the values over as bytes (value.converter=bytes); avro_values decodes them
    in the JVM with from_avro, as on Kafka: two schema versions, exact values."""
    from connect_runtime.spark import avro_values, read_ranges

    topic = _topic("avro-sqlite")
    ser1, ser2, ctx = _serializer(registry, V1), _serializer(registry, V2), _ctx(topic)
    orders = [(_order(i, v2=i % 2 == 1), i % 2 == 1) for i in range(6)]
    with open_backend(sqlite_url) as backend:
        backend.create_topics({topic: 1})
        producer = backend.producer()
        producer.send([ProducerRecord(topic, 0, None, (ser2 if v2 else ser1)(o, ctx)) for o, v2 in orders])
        producer.flush(30)
        producer.close()
    raw = read_ranges(spark, sqlite_url, {topic: {"0": [0, 6]}}, value_converter="bytes",
                      metadata_columns="topic,partition,offset,value,timestamp")
    df = avro_values(raw, registry, topic=topic, metadata_columns=["offset"])
    fields = [f["name"] for f in V2["fields"]]
    assert df.columns == ["offset", *fields]
    assert df.schema["amount"].dataType.simpleString() == "decimal(12,2)"
    assert df.schema["day"].dataType.simpleString() == "date"
    rows = sorted(df.collect(), key=lambda r: r["offset"])
    assert [_plain(r, fields) for r in rows] == [{**o, "items": o.get("items")} for o, _ in orders]
    with pytest.raises(DataError, match=r"the frame has no column\(s\) \['partition'\]"):
        avro_values(raw.drop("partition"), registry, topic=topic)
