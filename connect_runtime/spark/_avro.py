"""An Avro topic's committed range as typed columns, natively: Spark's Kafka source plus ``from_avro`` (Spark's Avro
functions, ``spark-avro``), with the schemas from the Schema Registry, so a Spark job never restates a column.

Values are in Confluent's wire format (magic byte ``0``, the writer schema's id as 4 big-endian bytes, the Avro
body), as confluent-kafka's ``AvroSerializer``, Confluent's ``KafkaAvroSerializer`` and the ``AvroConverter`` write
them. :func:`read_kafka_avro`:

1. reads the range with :func:`connect_runtime.spark.read_kafka_range` (``read_committed``, exact spans);
2. scans the 5-byte headers once (one Spark job over the range: the distinct schema ids, the first record of each):
   a value not in the wire format is one :class:`DataError` naming its topic, partition and offset; a null value (a
   tombstone) gives a row whose value columns are all null. ``schema_ids="subject"`` takes the ids of every version
   of the value subject instead: no pass over the data before the query (measured: the scan costs up to half the
   read, ``bench/bench_spark_avro.py``), for topics whose records are all registered under that subject; a record
   under another id fails the query itself, naming it;
3. fetches each writer schema by id from the registry (on the driver, in Python: the registry client never reaches
   the JVM, so ``mock://`` registries work too) and the reader schema: the latest version of the subject
   (``TopicNameStrategy``: ``<topic>-value``) unless given;
4. decodes each record's body with its own writer schema resolved to the reader schema (Avro schema resolution:
   ``from_avro(body, writer, {"avroSchema": reader})``, one ``CASE`` branch per schema id), so records written under
   several schema versions in one range come out with one set of columns, the reader's.

:func:`avro_values` does steps 2 to 4 on any frame with ``topic, partition, offset, value`` columns: the SQLite
backend's records through the ``pyconnect`` data source with ``value.converter=bytes`` decode the same way.

The columns are the reader schema's fields (``from_avro``'s types: decimal, date, timestamp, long, string, ...;
an optional field, a union with null, is nullable; Spark reports the others nullable too, since a tombstone's row
is all nulls) after the chosen metadata columns of the Kafka source. Spark
reads an Avro decimal of precision above 38 (Confluent's AvroData writes 64 when a Connect Decimal states none) as
``decimal(38, scale)``: the reader schema's precision is capped at 38, and a value needing more digits fails the
read. Avro ``time-millis`` / ``time-micros`` come out as ``int`` / ``long`` (Spark's ``from_avro`` maps no time
type), ``int8`` / ``int16`` (``connect.type``) as ``int``.

Not supported: schemas with references (named types registered under other subjects) and schemas that are not
Avro, each a :class:`DataError` naming the schema id; the schema id in a record header (confluent-kafka 2.16's
``header_schema_id_serializer``) instead of the value's prefix: such a value is not in the wire format above, and
the error names the record. Keys stay the Kafka source's ``binary`` column.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from connect_runtime.api.errors import DataError
from connect_runtime.secrets import looks_secret, mask_urls, scrub
from connect_runtime.spark._types import MAX_PRECISION
from connect_runtime.spark_kafka import range_topics

DEFAULT_METADATA = ("topic", "partition", "offset", "timestamp")
"""The Kafka source's columns kept before the value's fields unless ``metadata_columns`` says otherwise."""
KAFKA_COLUMNS = ("key", "topic", "partition", "offset", "timestamp", "timestampType")
_ID = "__pyconnect_schema_id"
SchemaIds = Literal["scan", "subject"]
_NOT_FRAMED = -1
_NOT_FRAMED_TEXT = ("the value is not in Confluent's wire format (magic byte 0, a 4-byte schema id, the Avro body); "
                    "was it written by an Avro serializer with a Schema Registry?")


class RegistryClient(Protocol):
    """What :func:`read_kafka_avro` asks of a registry client (confluent-kafka's ``SchemaRegistryClient``)."""

    def get_schema(self, schema_id: int) -> Any: ...

    def get_latest_version(self, subject_name: str) -> Any: ...

    def get_versions(self, subject_name: str) -> list[int]: ...

    def get_version(self, subject_name: str, version: int) -> Any: ...


def value_subject(topic: str) -> str:
    """The value subject of ``topic`` under ``TopicNameStrategy`` (the default of Confluent's serializers)."""
    return f"{topic}-value"


def registry_client(registry: str | Mapping[str, Any] | RegistryClient) -> RegistryClient:
    """A registry client: ``registry`` itself when it is one, else confluent-kafka's client for a URL or its config
    (``{"url": ..., "basic.auth.user.info": ...}``; Kafka Connect's ``schema.registry.url`` is taken for ``url``).
    A ``mock://`` URL gives a new, empty mock registry: to read what a producer registered in a mock, pass the
    producer's client object."""
    if not isinstance(registry, str | Mapping):
        return registry
    from confluent_kafka.schema_registry import SchemaRegistryClient

    conf = {"url": registry} if isinstance(registry, str) else dict(registry)
    if "schema.registry.url" in conf:
        conf.setdefault("url", conf.pop("schema.registry.url"))
    try:
        return SchemaRegistryClient.new_client(conf)
    except (ValueError, TypeError) as exc:  # its messages quote the URL: masked
        raise DataError(f"the Schema Registry client for {_registry_text(registry)}: "
                        f"{_registry_error(exc, registry)}") from None


def spark_reader_schema(avro_schema: str | Mapping[str, Any]) -> str:
    """``avro_schema`` (JSON text or parsed) as JSON with every decimal's precision capped at Spark's 38, so
    ``from_avro`` can type it; the rest is unchanged."""
    parsed = json.loads(avro_schema) if isinstance(avro_schema, str) else avro_schema

    def cap(node: Any) -> Any:
        if isinstance(node, list):
            return [cap(n) for n in node]
        if not isinstance(node, dict):
            return node
        out = {k: cap(v) if k in ("type", "items", "values", "fields") else v for k, v in node.items()}
        precision = out.get("precision")
        if out.get("logicalType") == "decimal" and isinstance(precision, int) and precision > MAX_PRECISION:
            out["precision"] = MAX_PRECISION
        return out

    return json.dumps(cap(parsed), separators=(",", ":"))


def _registry_text(registry: Any) -> str:
    """The registry as errors may show it: its URL with any password masked, never its config's secrets."""
    if isinstance(registry, str):
        return mask_urls(registry)
    if isinstance(registry, Mapping):
        return mask_urls(str(registry.get("url") or registry.get("schema.registry.url") or "the registry"))
    return type(registry).__name__


def _registry_error(exc: Exception, registry: Any) -> str:
    secrets = []
    if isinstance(registry, Mapping):
        secrets = [str(v) for k, v in registry.items() if "user.info" in k or looks_secret(k)]
    return scrub(mask_urls(str(exc)), secrets)


def _avro_text(schema: Any, what: str) -> str:
    """The Avro schema text of a registry ``Schema``; references and other formats are refused."""
    kind = (getattr(schema, "schema_type", None) or "AVRO").upper()
    if kind != "AVRO":
        raise DataError(f"{what} is a {kind} schema, not Avro")
    if getattr(schema, "references", None):
        names = ", ".join(str(getattr(r, "name", r)) for r in schema.references)
        raise DataError(f"{what} has schema references ({names}), which read_kafka_avro does not resolve: register "
                        "the schema with its named types inline")
    text = schema.schema_str
    assert isinstance(text, str)
    return text


def _framed_id() -> Column:
    """A value's schema id (Confluent's wire format), null for a null value, ``_NOT_FRAMED`` for anything else."""
    value = F.col("value")
    return (F.when(value.isNull(), F.lit(None).cast("long"))
            .when((F.length(value) >= 5) & (F.hex(F.substring(value, 1, 1)) == "00"),
                  F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long"))
            .otherwise(F.lit(_NOT_FRAMED).cast("long")))


def _scanned_ids(raw: DataFrame, topic: str) -> dict[int, str]:
    """The schema ids of the values in ``raw``, each with where it first appears, in one Spark job; a value not in
    the wire format raises, naming the first such record."""
    rows = (raw.select(_framed_id().alias(_ID), F.struct("partition", "offset").alias("at"))
            .where(F.col(_ID).isNotNull()).groupBy(_ID).agg(F.min("at").alias("first")).collect())
    ids = {int(r[_ID]): (int(r["first"]["partition"]), int(r["first"]["offset"])) for r in rows}
    if _NOT_FRAMED in ids:
        partition, offset = ids[_NOT_FRAMED]
        raise DataError(f"topic {topic!r}, partition {partition}, offset {offset}: {_NOT_FRAMED_TEXT}")
    return {i: f"topic {topic!r}, first at partition {p}, offset {o}" for i, (p, o) in ids.items()}


def _subject_ids(client: RegistryClient, registry: Any, topic: str) -> dict[int, str]:
    """The schema ids of every version of the topic's value subject (no Spark job)."""
    subject = value_subject(topic)
    try:
        versions = client.get_versions(subject)
        found = {int(client.get_version(subject, v).schema_id): v for v in versions}
    except Exception as exc:
        raise DataError(f"topic {topic!r}: the versions of subject {subject!r} in {_registry_text(registry)}: "
                        f"{_registry_error(exc, registry)}") from None
    return {i: f"subject {subject!r} version {v}" for i, v in found.items()}


def _reader_schema(client: RegistryClient, registry: Any, topic: str,
                   reader_schema: str | Mapping[str, Any] | None) -> tuple[str, list[str]]:
    """The reader schema for Spark (:func:`spark_reader_schema`) and its field names: ``reader_schema``, or the
    latest version of the topic's value subject."""
    subject = value_subject(topic)
    if reader_schema is None:
        try:
            text = _avro_text(client.get_latest_version(subject).schema, f"the latest schema of subject {subject!r}")
        except DataError:
            raise
        except Exception as exc:
            raise DataError(f"topic {topic!r}: no reader schema: the latest version of subject {subject!r} in "
                            f"{_registry_text(registry)}: {_registry_error(exc, registry)} (pass reader_schema=...)"
                            ) from None
    else:
        text = reader_schema if isinstance(reader_schema, str) else json.dumps(reader_schema)
    reader = spark_reader_schema(text)
    parsed = json.loads(reader)
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise DataError(f"topic {topic!r}: the reader schema is not an Avro record, so its values have no columns: "
                        f"{reader[:200]}")
    return reader, [str(f.get("name")) for f in parsed.get("fields", [])]


def avro_values(df: DataFrame, registry: str | Mapping[str, Any] | RegistryClient, *, topic: str,
                reader_schema: str | Mapping[str, Any] | None = None,
                metadata_columns: Sequence[str] = DEFAULT_METADATA,
                avro_options: Mapping[str, str] | None = None, schema_ids: SchemaIds = "scan") -> DataFrame:
    """``df``'s ``value`` column (binary, Confluent's wire format) as the typed columns of the reader schema, after
    ``metadata_columns`` of ``df``: steps 2 to 4 of the module docstring. ``df`` needs the columns ``topic``,
    ``partition``, ``offset`` (errors name the record) and ``value``: Spark's Kafka source
    (:func:`read_kafka_avro`), or the ``pyconnect`` data source with ``value.converter=bytes`` and those four among
    its ``metadata.columns`` (the SQLite backend)::

        raw = read_ranges(spark, "sqlite:///var/pyconnect.db", ranges, value_converter="bytes",
                          metadata_columns="topic,partition,offset,value,timestamp")
        orders = avro_values(raw, "http://registry:8081", topic="orders")
 Runs one Spark job over ``df`` (the schema ids); the frame returned is lazy.

    :raises DataError: as :func:`read_kafka_avro`.
    """
    from pyspark.sql.avro.functions import from_avro

    missing = [c for c in dict.fromkeys(("topic", "partition", "offset", "value", *metadata_columns))
               if c not in df.columns]
    if missing:
        raise DataError(f"topic {topic!r}: the frame has no column(s) {missing} (it has {df.columns}): Avro values "
                        "are read with their topic, partition and offset")
    client = registry_client(registry)
    reader, fields = _reader_schema(client, registry, topic, reader_schema)
    clash = sorted(set(fields) & set(metadata_columns))
    if clash:
        raise DataError(f"topic {topic!r}: value fields {clash} clash with metadata columns of the same name: "
                        "leave them out of metadata_columns")
    if schema_ids not in ("scan", "subject"):
        raise DataError(f"schema_ids must be 'scan' or 'subject', got {schema_ids!r}")
    ids = _scanned_ids(df, topic) if schema_ids == "scan" else _subject_ids(client, registry, topic)
    decode = {"mode": "FAILFAST", **(avro_options or {}), "avroSchema": reader}
    body = F.expr("substr(value, 6)")
    where = F.format_string("topic %s, partition %d, offset %d: ", F.col("topic"), F.col("partition"), F.col("offset"))
    decoded: Column = (F.when(F.col(_ID).isNull(), F.lit(None))  # a tombstone: every value column null
                       .when(F.col(_ID) == _NOT_FRAMED, F.raise_error(F.concat(where, F.lit(_NOT_FRAMED_TEXT)))))
    for schema_id in sorted(ids):
        what = f"schema id {schema_id} ({ids[schema_id]})"
        try:
            writer = _avro_text(client.get_schema(schema_id), what)
        except DataError:
            raise
        except Exception as exc:
            raise DataError(f"{what}: not found in {_registry_text(registry)}: {_registry_error(exc, registry)}"
                            ) from None
        decoded = decoded.when(F.col(_ID) == F.lit(schema_id), from_avro(body, writer, decode))
    if not ids:  # nothing but tombstones, or nothing at all: the reader's columns, all null
        decoded = decoded.otherwise(from_avro(F.lit(None).cast("binary"), reader, decode))
    else:  # scanned: the range changed under the read; subject: written under another subject (or deleted)
        unknown = ("was not in the range when it was scanned" if schema_ids == "scan" else
                   f"is not a version of subject {value_subject(topic)!r}")
        decoded = decoded.otherwise(F.raise_error(F.concat(
            where, F.format_string(f"schema id %d {unknown.replace('%', '%%')}", F.col(_ID)))))
    kept = [c for c in metadata_columns if c not in ("topic", "partition", "offset")]
    return (df.select("topic", "partition", "offset", *kept, "value", _framed_id().alias(_ID))
            .select(*metadata_columns, decoded.alias("__pyconnect_value"))
            .select(*metadata_columns, "__pyconnect_value.*"))


def read_kafka_avro(spark: SparkSession, backend_url: str, ranges: Any,
                    registry: str | Mapping[str, Any] | RegistryClient, *, topic: str | None = None,
                    reader_schema: str | Mapping[str, Any] | None = None,
                    metadata_columns: Sequence[str] = DEFAULT_METADATA,
                    avro_options: Mapping[str, str] | None = None, schema_ids: SchemaIds = "scan",
                    fail_on_data_loss: bool = True, **options: Any) -> DataFrame:
    """Exactly the committed records of ``topic`` in ``ranges`` on the Kafka backend ``backend_url``, their Avro
    values as typed columns (the module docstring says how; :func:`avro_values` on Spark's Kafka source).

    :param ranges: committed ranges in any shape :func:`connect_runtime.spark.read_kafka_range` takes.
    :param registry: the Schema Registry: a URL, confluent-kafka's client config, or a client.
    :param topic: the topic to read; may be left out when ``ranges`` hold one topic only.
    :param reader_schema: the Avro schema the values are read as (JSON); default: the latest version of the
        topic's value subject (``<topic>-value``).
    :param metadata_columns: Kafka source columns before the value's fields (of ``key, topic, partition, offset,
        timestamp, timestampType``); a value field of the same name is refused.
    :param avro_options: more ``from_avro`` options (``mode``: ``FAILFAST``, the default, or ``PERMISSIVE``: a
        value that does not decode gives a row of nulls).
    :param schema_ids: where the writer schemas' ids come from: ``"scan"`` (default), the values themselves (one
        more pass over the range, exact), or ``"subject"``, every version of the value subject (no extra pass:
        faster, for topics written under ``TopicNameStrategy`` only); see :func:`avro_values`.
    :param options: more Kafka source options, as :func:`connect_runtime.spark.read_kafka_range` takes.
    :raises DataError: a value not in the wire format, a schema id or subject the registry does not know, a
        reader schema clashing with a metadata column; each names the topic and the record or schema.
    """
    from connect_runtime.spark import read_kafka_range

    topics = range_topics(ranges)
    if topic is None:
        if len(topics) != 1:
            raise DataError(f"the ranges hold the topics {topics}: name the one to read (topic=...)")
        topic = topics[0]
    unknown = [c for c in metadata_columns if c not in KAFKA_COLUMNS]
    if unknown:
        raise DataError(f"metadata_columns {unknown} are not columns of Spark's Kafka source {list(KAFKA_COLUMNS)}")
    reader, _fields = _reader_schema(registry_client(registry), registry, topic, reader_schema)  # fail before reading
    raw = read_kafka_range(spark, backend_url, ranges, fail_on_data_loss=fail_on_data_loss, topics=[topic],
                           **options)
    return avro_values(raw, registry, topic=topic, reader_schema=reader, metadata_columns=metadata_columns,
                       avro_options=avro_options, schema_ids=schema_ids)


__all__ = ["DEFAULT_METADATA", "RegistryClient", "avro_values", "read_kafka_avro", "registry_client", "spark_reader_schema",
           "value_subject"]
