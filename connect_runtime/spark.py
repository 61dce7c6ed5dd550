"""Read exactly a committed offset range into Spark: ``spark.read.format("pyconnect")``.

A PySpark data source on Spark's Python Data Source API (Spark 4). It reads the committed records
of the offset ranges a source run reported, from either backend, so a Spark job handed the ranges
of a data interval reads the same records every time it runs::

    from connect_runtime.spark import register

    register(spark)
    df = (spark.read.format("pyconnect")
          .option("backend", "sqlite:///var/pyconnect.db")
          .option("ranges", '{"orders": {"0": [0, 500]}}')
          .load())

Options
-------
``backend`` (required)
    The backend URL (``sqlite:///path/file.db``, ``kafka://host:9092``). Every other option that
    starts with ``backend.`` is a backend client setting, prefix removed (Kafka: librdkafka
    properties; SQLite: ``busy.timeout.ms``, ...).
``ranges`` (required)
    JSON, in the shape of a source run's XCom: ``{topic: {"<partition>": [from, to]}}``, a whole
    ``SourceRunResult.to_dict()`` (its ``ranges`` are used), or per partition a list of ranges
    ``[[from, to], ...]``. Each range is ``[from, to)``; overlapping or adjacent ranges of one
    partition are merged, empty ones are left out.
``max.records.per.partition`` (default 100000)
    A range longer than this many offsets is split into several Spark input partitions.
``key.converter`` / ``value.converter`` (default ``json``)
    How key and value bytes become columns: ``json`` (JsonConverter: the JSON text, a string
    column; parse it with :func:`parse_json_value`), ``string`` (StringConverter: UTF-8 text) or
    ``bytes`` (ByteArrayConverter: a binary column). Kafka Connect class names and the runtime's
    converter class paths are accepted too.
``read.timeout.s`` (default 30)
    Bound on each backend wait while reading.

Schema: ``topic string, partition int, offset long, key string|binary, value string|binary,
timestamp timestamp, headers array<struct<key: string, value: string>>`` (header values as UTF-8
text, undecodable bytes replaced; ``null`` for a null header value).

Only committed records appear (the backend reads ``read_committed``), and only those with
``from <= offset < to``. One input partition per topic partition (more when a range is split); the
backend is opened inside each executor-side ``read()``, never pickled.

This is the only module of ``connect_runtime`` that imports pyspark, and nothing imports it at
module level: ``connect_runtime`` itself works without pyspark installed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

try:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
    from pyspark.sql.types import StructType
except ImportError as _exc:  # pragma: no cover - exercised only without pyspark
    raise ImportError(
        "connect_runtime.spark needs PySpark 4.2+ (pip install 'pyspark>=4.2,<5'); "
        "the rest of connect_runtime works without it"
    ) from _exc

from connect_runtime.api.errors import ConfigError
from connect_runtime.api.records import TopicPartition

FORMAT = "pyconnect"
"""The data source's short name: ``spark.read.format("pyconnect")``."""

DEFAULT_MAX_RECORDS_PER_PARTITION = 100_000

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_CONVERTERS = {
    "json": "json",
    "jsonconverter": "json",
    "connect_runtime.converters.jsonconverter": "json",
    "org.apache.kafka.connect.json.jsonconverter": "json",
    "string": "string",
    "stringconverter": "string",
    "connect_runtime.converters.stringconverter": "string",
    "org.apache.kafka.connect.storage.stringconverter": "string",
    "bytes": "bytes",
    "bytearrayconverter": "bytes",
    "connect_runtime.converters.bytearrayconverter": "bytes",
    "org.apache.kafka.connect.converters.bytearrayconverter": "bytes",
}


# ------------------------------------------------------------------------------------------ ranges


def parse_ranges(ranges: str | Mapping[str, Any]) -> dict[TopicPartition, list[tuple[int, int]]]:
    """The ranges of the ``ranges`` option, per topic partition sorted and merged, empty ones dropped.

    Accepts ``{topic: {"<p>": [from, to]}}``, ``{topic: {"<p>": [[from, to], ...]}}`` or a whole
    source run result (``{"ranges": {...}, ...}``), as a mapping or its JSON text.
    :raises ConfigError: naming what is malformed.
    """
    if isinstance(ranges, str):
        try:
            data: Any = json.loads(ranges)
        except ValueError as exc:
            raise ConfigError(errors={"ranges": f"expected JSON, got {ranges[:200]!r} ({exc})"}) from exc
    else:
        data = ranges
    if isinstance(data, Mapping) and "ranges" in data and isinstance(data.get("ranges"), Mapping):
        data = data["ranges"]
    if not isinstance(data, Mapping):
        raise ConfigError(errors={"ranges": f"expected an object {{topic: {{partition: [from, to]}}}}, "
                                            f"got {type(data).__name__}"})
    out: dict[TopicPartition, list[tuple[int, int]]] = {}
    bad: list[str] = []
    for topic, parts in data.items():
        if not isinstance(parts, Mapping):
            bad.append(f"topic {topic!r}: expected {{partition: [from, to]}}, got {parts!r}")
            continue
        for p, spans in parts.items():
            try:
                partition = int(p)
            except (TypeError, ValueError):
                bad.append(f"topic {topic!r}: partition {p!r} is not an integer")
                continue
            if isinstance(spans, Sequence) and len(spans) == 2 and all(isinstance(x, int) for x in spans):
                spans = [spans]
            pairs: list[tuple[int, int]] = []
            for span in spans if isinstance(spans, Sequence) and not isinstance(spans, str) else [spans]:
                if (not isinstance(span, Sequence) or isinstance(span, str) or len(span) != 2
                        or not all(isinstance(x, int) and not isinstance(x, bool) for x in span)
                        or span[0] < 0):
                    bad.append(f"{topic}-{partition}: expected [from, to] with 0 <= from, got {span!r}")
                    continue
                if span[1] > span[0]:
                    pairs.append((int(span[0]), int(span[1])))
            if pairs:
                out.setdefault(TopicPartition(str(topic), partition), []).extend(pairs)
    if bad:
        raise ConfigError(errors={"ranges": "; ".join(bad)})
    return {tp: _merge(spans) for tp, spans in sorted(out.items())}


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


class OffsetRangePartition(InputPartition):  # type: ignore[misc]
    """One Spark input partition: offsets ``[start, end)`` of one topic partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OffsetRangePartition) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash((self.topic, self.partition, self.start, self.end))


def plan_partitions(ranges: Mapping[TopicPartition, Sequence[tuple[int, int]]],
                    max_records: int = DEFAULT_MAX_RECORDS_PER_PARTITION) -> list[OffsetRangePartition]:
    """Input partitions for ranges: one per range, ranges longer than ``max_records`` split evenly."""
    if max_records < 1:
        raise ConfigError(errors={"max.records.per.partition": f"expected at least 1, got {max_records}"})
    out = []
    for tp, spans in sorted(ranges.items()):
        for start, end in spans:
            pieces = -(-(end - start) // max_records)
            size = -(-(end - start) // pieces)
            for lo in range(start, end, size):
                out.append(OffsetRangePartition(tp.topic, tp.partition, lo, min(lo + size, end)))
    return out


# ------------------------------------------------------------------------------------------ source


def _converter(options: Mapping[str, str], name: str) -> str:
    raw = options.get(name, "json")
    kind = _CONVERTERS.get(str(raw).strip().lower())
    if kind is None:
        raise ConfigError(errors={name: f"expected json, string or bytes (or a converter class name), got {raw!r}"})
    return kind


def _schema_ddl(key_kind: str, value_kind: str) -> str:
    def col(kind: str) -> str:
        return "binary" if kind == "bytes" else "string"

    return (f"topic string, partition int, offset long, key {col(key_kind)}, value {col(value_kind)}, "
            "timestamp timestamp, headers array<struct<key: string, value: string>>")


class PyConnectDataSource(DataSource):  # type: ignore[misc]
    """``spark.read.format("pyconnect")``: the committed records of given offset ranges."""

    def __init__(self, options: MutableMapping[str, str]) -> None:
        super().__init__(options)
        opts = {str(k): str(v) for k, v in options.items()}
        errors: dict[str, str] = {}
        self.backend_url = opts.get("backend", "")
        if not self.backend_url:
            errors["backend"] = "required: a backend URL such as sqlite:///path/file.db or kafka://host:9092"
        self.backend_settings = {k[len("backend."):]: v for k, v in opts.items() if k.startswith("backend.")}
        self.ranges: dict[TopicPartition, list[tuple[int, int]]] = {}
        if "ranges" not in opts:
            errors["ranges"] = 'required: JSON such as {"orders": {"0": [0, 500]}} (a source run\'s ranges)'
        else:
            try:
                self.ranges = parse_ranges(opts["ranges"])
            except ConfigError as exc:
                errors.update(exc.errors)
        self.max_records = DEFAULT_MAX_RECORDS_PER_PARTITION
        self.timeout = 30.0
        for key, conv, attr in (("max.records.per.partition", int, "max_records"),
                                ("read.timeout.s", float, "timeout")):
            if key in opts:
                try:
                    value = conv(opts[key])
                    if value <= 0:
                        raise ValueError
                    setattr(self, attr, value)
                except ValueError:
                    errors[key] = f"expected a positive number, got {opts[key]!r}"
        self.kinds = {}
        for name in ("key.converter", "value.converter"):
            try:
                self.kinds[name] = _converter(opts, name)
            except ConfigError as exc:
                errors.update(exc.errors)
        if errors:
            raise ConfigError(errors=errors)

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return _schema_ddl(self.kinds["key.converter"], self.kinds["value.converter"])

    def reader(self, schema: StructType) -> PyConnectReader:
        return PyConnectReader(self.backend_url, self.backend_settings, self.ranges, self.max_records,
                               self.timeout, self.kinds["key.converter"], self.kinds["value.converter"])


def _decoder(kind: str) -> Any:
    if kind == "bytes":
        return lambda b: b
    return lambda b: None if b is None else bytes(b).decode("utf-8")


def _header_text(value: bytes | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return bytes(value).decode("utf-8", errors="replace")


class PyConnectReader(DataSourceReader):  # type: ignore[misc]
    """Plans one input partition per range piece; reads it on the executor through the backend."""

    def __init__(self, backend_url: str, backend_settings: Mapping[str, str],
                 ranges: Mapping[TopicPartition, Sequence[tuple[int, int]]], max_records: int,
                 timeout: float, key_kind: str, value_kind: str) -> None:
        self.backend_url = backend_url
        self.backend_settings = dict(backend_settings)
        self.ranges = {tp: list(spans) for tp, spans in ranges.items()}
        self.max_records = max_records
        self.timeout = timeout
        self.key_kind = key_kind
        self.value_kind = value_kind

    def partitions(self) -> Sequence[InputPartition]:
        # no ranges (a run that committed nothing): Spark replaces [] by one InputPartition(None)
        return plan_partitions(self.ranges, self.max_records)

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        from connect_runtime.backends import open_backend

        if not isinstance(partition, OffsetRangePartition):
            return  # no ranges at all: Spark plans one placeholder partition, which holds nothing
        key_of = _decoder(self.key_kind)
        value_of = _decoder(self.value_kind)
        backend = open_backend(self.backend_url, self.backend_settings)
        try:
            tp = TopicPartition(partition.topic, partition.partition)
            batch = min(10_000, max(1, partition.end - partition.start))
            for rec in backend.read_range(tp, partition.start, partition.end, batch_size=batch,
                                          timeout=self.timeout):
                if not partition.start <= rec.offset < partition.end:
                    continue  # never outside the asked range, whatever the backend returns
                yield (
                    rec.topic,
                    rec.partition,
                    rec.offset,
                    key_of(rec.key),
                    value_of(rec.value),
                    None if rec.timestamp is None else _EPOCH + timedelta(milliseconds=rec.timestamp),
                    None if rec.headers is None else [(k, _header_text(v)) for k, v in rec.headers],
                )
        finally:
            backend.close()


# ------------------------------------------------------------------------------------------ helpers


def register(spark: SparkSession) -> None:
    """Register the ``pyconnect`` data source with a session (idempotent)."""
    spark.dataSource.register(PyConnectDataSource)


def read_ranges(spark: SparkSession, backend: str, ranges: str | Mapping[str, Any],
                **options: Any) -> DataFrame:
    """Register the source and read ``ranges`` (the ``ranges`` option's shapes) from ``backend``.

    Extra ``options`` use the option names with ``_`` for ``.``:
    ``read_ranges(spark, url, r, max_records_per_partition=1000)``.
    """
    register(spark)
    reader = spark.read.format(FORMAT).option("backend", backend).option(
        "ranges", ranges if isinstance(ranges, str) else json.dumps(ranges))
    for key, value in options.items():
        reader = reader.option(key.replace("_", "."), str(value))
    return reader.load()


def parse_json_value(df: DataFrame, schema: StructType | str, column: str = "value") -> DataFrame:
    """``df`` with its JSON text column ``column`` replaced by the parsed value (``from_json``).

    ``schema`` is a :class:`StructType` or a DDL string (``"customer string, amount double"``);
    expand the struct with ``df.select("value.*")``. Text that is not valid JSON becomes null.
    """
    from pyspark.sql import functions as F

    return df.withColumn(column, F.from_json(F.col(column), schema))


__all__ = [
    "DEFAULT_MAX_RECORDS_PER_PARTITION",
    "FORMAT",
    "OffsetRangePartition",
    "PyConnectDataSource",
    "PyConnectReader",
    "parse_json_value",
    "parse_ranges",
    "plan_partitions",
    "read_ranges",
    "register",
]
