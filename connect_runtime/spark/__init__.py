"""Committed records into Spark: ``spark.read.format("pyconnect")`` and ``spark.readStream.format("pyconnect")``;
and :func:`read_lake`, the ParquetSink's files holding a committed range read natively (``spark.read.parquet``)::

    from connect_runtime.spark import read_lake

    orders = read_lake(spark, "file:///data/lake", source_result)   # exactly the files of the run's interval

A PySpark data source on Spark's Python Data Source API (Spark 4.2). Records arrive as Arrow record
batches built from the backend in batches, never row by row; with a ``schema`` the JSON value arrives
as typed columns, parsed in batches by pyarrow's JSON reader::

    from connect_runtime.spark import register

    register(spark)
    orders = (spark.read.format("pyconnect")
              .option("backend", "sqlite:///var/pyconnect.db")
              .option("ranges", '{"orders": {"0": [0, 500]}}')      # a source run's committed ranges
              .option("schema", "customer string, amount decimal(12,2), items int")
              .load())                                               # topic, partition, ..., customer, amount, items

    stream = (spark.readStream.format("pyconnect")
              .option("backend", "sqlite:///var/pyconnect.db")
              .option("topics", "orders")
              .option("schema", "customer string, amount decimal(12,2), items int")
              .load())

Two ways in
-----------
**Bounded handoff** (``spark.read``, option ``ranges``): exactly the records a source run committed (its
XCom), whatever was written before or after; a rerun of the same data interval reads the same records.
Use it from an Airflow DAG: one Spark job per data interval, idempotent output per interval.

**Streaming** (``spark.readStream``, option ``topics``): a Structured Streaming source whose offsets are
the store's committed positions per topic partition (``{topic: {"<partition>": next offset}}``). Each
micro-batch reads the committed records between two such positions; Spark journals the positions in
its checkpoint, so a query with a checkpoint and an idempotent or transactional sink (Parquet files,
Delta, ...) sees each record exactly once across restarts, and picks up new records on the next
trigger. ``Trigger.AvailableNow`` reads what is committed when the query starts (in micro-batches
bounded by ``max.records.per.trigger``) and stops. Use it when records should flow continuously, or in
catch-up runs that must not depend on which source run wrote what.

Options
-------
``backend`` (required)
    The backend URL (``sqlite:///path/file.db``, ``kafka://host:9092``). Every other option that
    starts with ``backend.`` is a backend client setting, prefix removed (Kafka: librdkafka
    properties; SQLite: ``busy.timeout.ms``, ...).
``ranges`` (``spark.read``)
    JSON in either form of :mod:`connect_runtime.ranges` (per partition ``[from, to]`` or an exact
    list of ``[[from, to], ...]`` spans), or a whole ``SourceRunResult.to_dict()``. Each span is read,
    never the envelope: records of other writers between spans are not read.
``topics`` / ``topics.regex`` (``spark.readStream``)
    The topics to follow (a comma-separated list, or a regular expression matched against the whole
    name); partitions that appear later are read from their beginning.
``starting.offsets`` (streaming; default ``earliest``)
    ``earliest``, ``latest`` or JSON ``{"topic": {"0": offset}}``. Only for a new query: a query
    restarted from its checkpoint continues where it stopped.
``max.records.per.trigger`` / ``min.records.per.trigger`` (streaming)
    The default read limit (``ReadMaxRows`` / ``ReadMinRows``): at most so many offsets per
    micro-batch, shared over partitions in proportion to their backlog / wait until so many are
    committed. On Kafka, transaction markers count as offsets.
``schema``
    The value's schema as a DDL string (``"customer string, amount double"``) or a ``StructType`` as
    JSON (``df.schema.json()``). The value must be a JSON object; its fields become typed columns after
    the metadata columns (fields not in the schema are ignored, missing ones are null). Without it, the
    value is one column (text or bytes, see ``value.converter``).
``metadata.columns``
    Which of ``topic, partition, offset, key, value, timestamp, headers`` to produce (comma-separated,
    may be empty). Default: all without a schema; all but ``value`` with one. Columns not needed are
    not built at all (``headers`` especially costs time).
``mode`` (with ``schema``; default ``PERMISSIVE``), as Spark's JSON source defines it
    ``PERMISSIVE``: a record that does not match keeps its metadata, its typed columns are null, and
    its text goes to the corrupt record column if the schema declares it (a string field named by
    ``columnNameOfCorruptRecord``, default ``_corrupt_record``). ``DROPMALFORMED``: such records are
    left out. ``FAILFAST``: the read fails, naming the first such record (topic, partition, offset)
    and why. A record does not match when its value is not one JSON object or a field's value does not
    convert to the declared type (e.g. ``"3"`` or ``1.5`` for an ``int``; a number for a ``string``).
    A null value (tombstone) is an empty object: all typed columns null, not malformed. ``decimal``
    values are rounded half up to the declared scale; ``date`` takes ``yyyy-MM-dd``; ``timestamp``
    takes ISO 8601 (no zone means UTC); top-level ``binary`` takes base64. ``map`` types are refused.
``max.records.per.partition`` (default 1000000) and ``min.partitions`` (default: the driver's cores,
at least 2; :func:`read_ranges` uses the session's default parallelism)
    Input partitions are sized evenly: at least ``min.partitions`` of them and none longer than
    ``max.records.per.partition`` offsets, so every core or executor gets a share. Each task costs a
    Python worker round trip, so the default makes one wave of tasks up to a million records per core;
    lower it to bound what a retried task reads again.
``read.batch.size`` (default 32768)
    Records per Arrow batch.
``key.converter`` / ``value.converter`` (default ``json``)
    How key and value bytes become columns: ``json`` or ``string`` (text columns), ``bytes`` (binary).
    Kafka Connect class names and the runtime's converter class paths are accepted too.
``read.timeout.s`` (default 30)
    Bound on each backend wait while reading.

Metadata columns: ``topic string, partition int, offset long, key string|binary, value string|binary,
timestamp timestamp, headers array<struct<key: string, value: string>>`` (header values as UTF-8 text,
undecodable bytes replaced; ``null`` for a null header value).

Only committed records appear (the backend reads ``read_committed``). The backend is opened inside
each executor-side ``read()``, never pickled.

Speed: the batches reach Spark as built (no ``spark.sql.execution.arrow.*`` setting applies). The SQLite
backend hands each window of ``read.batch.size`` records over as buffers SQLite concatenated in one query
(values joined by newlines, parsed as they are; keys and headers with their lengths, headers decoded in
bulk); the Kafka backend builds columns from each ``consume()`` batch. Spark cannot prune the columns of a
Python data source, so every column of the schema is built whatever the query uses: choose
``metadata.columns`` (each costs; ``headers`` most) and put only the fields you need in ``schema``.

Kafka backend, natively: :func:`read_kafka_range` reads a committed range with Spark's own Kafka source
(``read_committed``, ``startingOffsets`` / ``endingOffsets`` from the ranges; no row crosses Python), as
fast as Spark reads the same records from a file; its options are :func:`kafka_read_options`, its jars
:func:`kafka_jars` (``scripts/fetch_spark_kafka.sh``). See :mod:`connect_runtime.spark_kafka`. The Python
data source stays for what only it can do: the SQLite backend, streaming, typed parsing in the source.

Typed columns from the schemas records carry, never restated: :func:`spark_schema` maps a Connect struct schema
to a ``StructType`` (decimal, date, timestamp, ...; optional as nullable: :mod:`connect_runtime.spark._types`);
:func:`read_kafka_avro` reads an Avro topic's committed range natively with ``from_avro`` and the writer schemas
from the Schema Registry (:mod:`connect_runtime.spark._avro`); :func:`read_lake` keeps the Parquet types the
ParquetSink wrote.

This is the only package of ``connect_runtime`` that imports pyspark, and nothing imports it at
module level: ``connect_runtime`` itself works without pyspark installed.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

try:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType
except ImportError as _exc:  # pragma: no cover - exercised only without pyspark
    raise ImportError(
        "connect_runtime.spark needs PySpark 4.2+ (pip install 'pyspark>=4.2,<5') and pyarrow; "
        "the rest of connect_runtime works without it"
    ) from _exc

from connect_runtime.api.data import Schema
from connect_runtime.spark._avro import (
    avro_values,
    read_kafka_avro,
    registry_client,
    spark_reader_schema,
    value_subject,
)
from connect_runtime.spark._classpath import SparkClasspathError, require_kafka_source
from connect_runtime.spark._lake import lake_files, read_lake
from connect_runtime.spark._plan import (
    DEFAULT_MAX_RECORDS_PER_PARTITION,
    OffsetRangePartition,
    parse_ranges,
    plan_partitions,
)
from connect_runtime.spark._source import (
    FORMAT,
    PyConnectDataSource,
    PyConnectReader,
    PyConnectStreamReader,
)
from connect_runtime.spark._types import spark_schema, spark_type
from connect_runtime.spark_kafka import kafka_jars, kafka_read_options

KAFKA_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
                "timestampType int")
"""The columns of Spark's Kafka source (batch read, without ``includeHeaders``)."""


def register(spark: SparkSession) -> None:
    """Register the ``pyconnect`` data source with a session (idempotent)."""
    spark.dataSource.register(PyConnectDataSource)


def _parallelism(spark: SparkSession) -> int | None:
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect has no SparkContext: the source's default applies
        return None


def read_ranges(spark: SparkSession, backend: str, ranges: str | Mapping[str, Any],
                schema: StructType | Schema | str | None = None, **options: Any) -> DataFrame:
    """Register the source and read ``ranges`` (the ``ranges`` option's shapes) from ``backend``.

    ``schema`` (a DDL string, a :class:`StructType`, or a Connect struct :class:`Schema`, see :func:`spark_schema`)
    gives typed columns. Extra ``options`` use the
    option names with ``_`` for ``.``: ``read_ranges(spark, url, r, max_records_per_partition=1000)``;
    ``min.partitions`` defaults to the session's default parallelism.
    """
    register(spark)
    reader = spark.read.format(FORMAT).option("backend", backend).option(
        "ranges", ranges if isinstance(ranges, str) else json.dumps(ranges))
    if isinstance(schema, Schema):
        schema = spark_schema(schema)
    if schema is not None:
        reader = reader.option("schema", schema.json() if isinstance(schema, StructType) else schema)
    if "min_partitions" not in options:
        parallelism = _parallelism(spark)
        if parallelism:
            reader = reader.option("min.partitions", str(parallelism))
    for key, value in options.items():
        name = key if key == "columnNameOfCorruptRecord" else key.replace("_", ".")
        reader = reader.option(name, str(value))
    return reader.load()


def read_kafka_range(spark: SparkSession, backend_url: str, ranges: Any, *, schema: StructType | str | None = None,
                     fail_on_data_loss: bool = True, topics: Collection[str] | None = None,
                     settings: Mapping[str, Any] | None = None, **options: Any) -> DataFrame:
    """Exactly the committed records of ``ranges`` on the Kafka backend ``backend_url``, read natively by
    Spark's own Kafka source (``spark.read.format("kafka")``; columns ``key, value`` (binary), ``topic,
    partition, offset, timestamp, timestampType``). The session needs the source's jars
    (:func:`kafka_jars` as ``spark.jars``); the rules are in :mod:`connect_runtime.spark_kafka`.

    ``topics`` reads only those topics of ``ranges``. With ``schema`` (a DDL string or a :class:`StructType`)
    the JSON values come back parsed, as that schema's columns only: ``spark.read.schema(schema).json(<the
    values as strings>)``, Spark's JSON reader over the records (about 1.4x ``from_json`` of the same values,
    bench/bench_spark_kafka.py); give the columns the job uses. Without it, parse a JSON value with
    ``F.from_json(F.col("value").cast("string"), schema)``; an Avro value with :func:`read_kafka_avro`.

    ``settings`` are the backend's librdkafka client settings (the ``pyconnect`` connection's): their security
    part becomes the source's ``kafka.*`` options (:func:`connect_runtime.spark_kafka.kafka_security_options`:
    SASL_SSL with SCRAM or PLAIN, the CA, a client certificate; anything else fails naming the setting).
    ``options`` are more source options (``kafka.security.protocol``, ...), under their own names, over those;
    ``minPartitions`` defaults to the session's default parallelism (as :func:`read_ranges`), so one
    partition's range is split over the cores instead of read by one task; ``kafka.group.id`` defaults to
    one derived from the connection options (:func:`connect_runtime.spark_kafka.kafka_read_options`), so
    Spark's executors reuse their Kafka consumers from one query to the next.
    """
    if "minPartitions" not in options:
        parallelism = _parallelism(spark)
        if parallelism:
            options["minPartitions"] = parallelism
    reads = kafka_read_options(ranges, backend_url, fail_on_data_loss=fail_on_data_loss, options=options,
                               topics=topics, settings=settings)
    if not reads:  # nothing committed: an empty frame of the source's columns
        df = spark.createDataFrame([], KAFKA_SCHEMA)
    else:
        require_kafka_source(spark)
        frames = [spark.read.format("kafka").options(**read).load() for read in reads]
        df = frames[0]
        for more in frames[1:]:
            df = df.unionByName(more)
    if schema is None:
        return df
    from pyspark.sql import functions as F

    return spark.read.schema(schema).json(df.select(F.col("value").cast("string").alias("value")))


def parse_json_value(df: DataFrame, schema: StructType | str, column: str = "value") -> DataFrame:
    """``df`` with its JSON text column ``column`` replaced by the parsed value (``from_json``).

    Prefer the ``schema`` option (typed columns parsed in batches, several times faster); this stays
    for DataFrames that already hold the text.
    """
    from pyspark.sql import functions as F

    return df.withColumn(column, F.from_json(F.col(column), schema))


__all__ = [
    "DEFAULT_MAX_RECORDS_PER_PARTITION",
    "FORMAT",
    "KAFKA_SCHEMA",
    "OffsetRangePartition",
    "PyConnectDataSource",
    "PyConnectReader",
    "PyConnectStreamReader",
    "SparkClasspathError",
    "avro_values",
    "kafka_jars",
    "kafka_read_options",
    "lake_files",
    "parse_json_value",
    "parse_ranges",
    "plan_partitions",
    "read_kafka_avro",
    "read_kafka_range",
    "read_lake",
    "read_ranges",
    "register",
    "registry_client",
    "spark_reader_schema",
    "spark_schema",
    "spark_type",
    "value_subject",
]
