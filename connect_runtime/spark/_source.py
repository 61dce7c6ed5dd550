"""The ``pyconnect`` data source: a bounded reader of committed ranges and a streaming reader of topics."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from connect_runtime.api.errors import ConfigError
from connect_runtime.api.records import TopicPartition
from connect_runtime.spark._arrow import (
    DEFAULT_CORRUPT_COLUMN,
    DEFAULT_TYPED_METADATA,
    METADATA_COLUMNS,
    MODES,
    BatchBuilder,
    check_typed_schema,
    typed_fields,
)
from connect_runtime.spark._plan import (
    DEFAULT_MAX_RECORDS_PER_PARTITION,
    OffsetRangePartition,
    Spans,
    parse_ranges,
    plan_partitions,
)

FORMAT = "pyconnect"
"""The data source's short name: ``spark.read.format("pyconnect")``, ``spark.readStream.format("pyconnect")``."""

DEFAULT_BATCH_SIZE = 32_768

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


def _metadata_struct(columns: Sequence[str], key_kind: str, value_kind: str) -> StructType:
    types = {
        "topic": StringType(), "partition": IntegerType(), "offset": LongType(),
        "key": BinaryType() if key_kind == "bytes" else StringType(),
        "value": BinaryType() if value_kind == "bytes" else StringType(),
        "timestamp": TimestampType(),
        "headers": ArrayType(StructType([StructField("key", StringType()), StructField("value", StringType())])),
    }
    return StructType([StructField(c, types[c], True) for c in METADATA_COLUMNS if c in columns])


class ReadConf:
    """What an executor needs to read a partition (picklable: no open backend)."""

    def __init__(self, backend_url: str, backend_settings: Mapping[str, str], timeout: float, batch_size: int,
                 key_kind: str, value_kind: str, metadata: Sequence[str], typed: bool, mode: str,
                 corrupt: str) -> None:
        self.backend_url = backend_url
        self.backend_settings = dict(backend_settings)
        self.timeout = timeout
        self.batch_size = batch_size
        self.key_kind = key_kind
        self.value_kind = value_kind
        self.metadata = list(metadata)
        self.typed = typed
        self.mode = mode
        self.corrupt = corrupt


def read_partition(conf: ReadConf, schema: StructType, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The Arrow batches of one input partition: every span it holds, committed records only."""
    from connect_runtime.backends import open_backend

    if not isinstance(partition, OffsetRangePartition):
        return  # no ranges at all: Spark plans one placeholder partition, which holds nothing
    builder = BatchBuilder(schema, conf.metadata, conf.key_kind, conf.value_kind, conf.typed, conf.mode,
                           conf.corrupt)
    tp = TopicPartition(partition.topic, partition.partition)
    backend = open_backend(conf.backend_url, conf.backend_settings)
    try:
        for start, end in partition.spans:
            for batch_cols in backend.read_range_batches(tp, start, end, batch_size=conf.batch_size,
                                                         timeout=conf.timeout, keys=builder.keys,
                                                         timestamps=builder.timestamps, headers=builder.headers):
                cols: tuple[Any, ...] = batch_cols
                offsets = cols[0]
                if offsets and not (start <= offsets[0] and offsets[-1] < end):
                    # never outside the asked span, whatever the backend returns
                    keep = [i for i, o in enumerate(offsets) if start <= o < end]
                    cols = tuple(None if c is None else [c[i] for i in keep] for c in cols)
                batch = builder.build(tp.topic, tp.partition, cols)
                if batch is not None:
                    yield batch
    finally:
        backend.close()


class PyConnectDataSource(DataSource):
    """``spark.read.format("pyconnect")`` (committed ranges) and ``spark.readStream.format("pyconnect")``
    (topics, offsets = the store's committed positions). Options: see :mod:`connect_runtime.spark`."""

    def __init__(self, options: MutableMapping[str, str]) -> None:
        super().__init__(options)
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        errors: dict[str, str] = {}
        self.backend_url = opts.get("backend", "")
        if not self.backend_url:
            errors["backend"] = "required: a backend URL such as sqlite:///path/file.db or kafka://host:9092"
        self.backend_settings = {k[len("backend."):]: v for k, v in opts.items() if k.startswith("backend.")}
        self.ranges: dict[TopicPartition, Spans] | None = None
        if "ranges" in opts:
            try:
                self.ranges = parse_ranges(opts["ranges"])
            except ConfigError as exc:
                errors.update(exc.errors)
        self.topics = [t.strip() for t in opts.get("topics", "").split(",") if t.strip()]
        self.pattern = opts.get("topics.regex") or None
        if "ranges" not in opts and not self.topics and not self.pattern:
            errors["ranges"] = ('required for spark.read: JSON such as {"orders": {"0": [0, 500]}} (a source run\'s '
                                'ranges); for spark.readStream give topics (or topics.regex) instead')
        self.max_records = DEFAULT_MAX_RECORDS_PER_PARTITION
        self.min_partitions = max(2, os.cpu_count() or 1)
        self.batch_size = DEFAULT_BATCH_SIZE
        self.timeout = 30.0
        self.max_per_trigger: int | None = None
        self.min_per_trigger: int | None = None
        for key, conv, attr in (("max.records.per.partition", int, "max_records"),
                                ("min.partitions", int, "min_partitions"),
                                ("read.batch.size", int, "batch_size"),
                                ("read.timeout.s", float, "timeout"),
                                ("max.records.per.trigger", int, "max_per_trigger"),
                                ("min.records.per.trigger", int, "min_per_trigger")):
            if key in opts:
                try:
                    value = conv(opts[key])
                    if value <= 0:
                        raise ValueError
                    setattr(self, attr, value)
                except ValueError:
                    errors[key] = f"expected a positive number, got {opts[key]!r}"
        self.kinds: dict[str, str] = {}
        for name in ("key.converter", "value.converter"):
            raw = opts.get(name, "json")
            kind = _CONVERTERS.get(raw.strip().lower())
            if kind is None:
                errors[name] = f"expected json, string or bytes (or a converter class name), got {raw!r}"
            else:
                self.kinds[name] = kind
        self.user_schema: str | StructType | None = None
        raw_schema = opts.get("schema", "").strip()
        if raw_schema.startswith("{"):
            try:
                self.user_schema = StructType.fromJson(json.loads(raw_schema))
            except (ValueError, KeyError, TypeError) as exc:
                errors["schema"] = f"expected a DDL string or a StructType as JSON, got {raw_schema[:200]!r} ({exc!r})"
        elif raw_schema:
            self.user_schema = raw_schema
        self.mode = opts.get("mode", "PERMISSIVE").strip().upper()
        if self.mode not in MODES:
            errors["mode"] = f"expected one of {', '.join(MODES)}, got {opts['mode']!r}"
        self.corrupt = opts.get("columnnameofcorruptrecord", DEFAULT_CORRUPT_COLUMN)
        default_meta = DEFAULT_TYPED_METADATA if self.user_schema is not None else METADATA_COLUMNS
        if "metadata.columns" in opts:
            self.metadata = [c.strip() for c in opts["metadata.columns"].split(",") if c.strip()]
            unknown = [c for c in self.metadata if c not in METADATA_COLUMNS]
            if unknown:
                errors["metadata.columns"] = f"unknown column(s) {unknown}: expected some of {', '.join(METADATA_COLUMNS)}"
        else:
            self.metadata = list(default_meta)
        if self.user_schema is None and "schema" in opts:
            errors["schema"] = "is empty: give a DDL string (\"customer string, amount double\") or a StructType JSON"
        if self.user_schema is None and not self.metadata:
            errors["metadata.columns"] = "selects no column and there is no schema: nothing would be read"
        starting = opts.get("starting.offsets", "earliest").strip()
        self.starting: str | dict[TopicPartition, int] = starting.lower()
        if self.starting not in ("earliest", "latest"):
            try:
                self.starting = {TopicPartition(str(t), int(p)): int(o)
                                 for t, parts in json.loads(starting).items() for p, o in parts.items()}
                if any(o < 0 for o in self.starting.values()):
                    raise ValueError("offsets are >= 0")
            except (ValueError, AttributeError, TypeError) as exc:
                errors["starting.offsets"] = (f'expected earliest, latest or JSON {{"topic": {{"0": offset}}}}, got '
                                              f"{starting[:200]!r} ({exc})")
        if errors:
            raise ConfigError(errors=errors)

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str | StructType:
        meta = _metadata_struct(self.metadata, self.kinds["key.converter"], self.kinds["value.converter"])
        if isinstance(self.user_schema, StructType):
            return StructType(meta.fields + self.user_schema.fields)
        ddl = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in meta.fields)
        if self.user_schema:
            ddl = f"{ddl}, {self.user_schema}" if ddl else self.user_schema
        return ddl

    def _conf(self, schema: StructType) -> ReadConf:
        names = schema.fieldNames()
        if names[:len(self.metadata)] != self.metadata:
            raise ConfigError(errors={"schema": f"the output schema {names} does not start with the metadata columns "
                                                f"{self.metadata}: give the value's schema with the schema option, "
                                                "not DataFrameReader.schema()"})
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(errors={"schema": f"column(s) {dupes} are also metadata columns: rename them in the "
                                                "schema or leave them out of metadata.columns"})
        typed = self.user_schema is not None
        if typed:
            check_typed_schema(typed_fields(schema, self.metadata), self.corrupt)
        return ReadConf(self.backend_url, self.backend_settings, self.timeout, self.batch_size,
                        self.kinds["key.converter"], self.kinds["value.converter"], self.metadata, typed,
                        self.mode, self.corrupt)

    def reader(self, schema: StructType) -> PyConnectReader:
        if self.ranges is None:
            raise ConfigError(errors={"ranges": "required for spark.read: JSON such as {\"orders\": {\"0\": [0, 500]}}"})
        return PyConnectReader(self._conf(schema), schema, self.ranges, self.max_records, self.min_partitions)

    def streamReader(self, schema: StructType) -> PyConnectStreamReader:
        if not self.topics and not self.pattern:
            raise ConfigError(errors={"topics": "required for spark.readStream: a comma-separated list of topics "
                                                "(or topics.regex)"})
        return PyConnectStreamReader(self._conf(schema), schema, self.topics, self.pattern, self.starting,
                                     self.max_records, self.min_partitions, self.max_per_trigger,
                                     self.min_per_trigger)


class PyConnectReader(DataSourceReader):
    """Plans input partitions over the ranges; each is read on an executor as Arrow record batches."""

    def __init__(self, conf: ReadConf, schema: StructType, ranges: Mapping[TopicPartition, Spans],
                 max_records: int, min_partitions: int) -> None:
        self.conf = conf
        self.out_schema = schema
        self.ranges = {tp: list(spans) for tp, spans in ranges.items()}
        self.max_records = max_records
        self.min_partitions = min_partitions

    def partitions(self) -> Sequence[InputPartition]:
        # no ranges (a run that committed nothing): Spark replaces [] by one InputPartition(None)
        return plan_partitions(self.ranges, self.max_records, self.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.conf, self.out_schema, partition)


# ------------------------------------------------------------------------------------------ streaming


def _load(offset: Mapping[str, Any]) -> dict[TopicPartition, int]:
    return {TopicPartition(str(t), int(p)): int(o) for t, parts in offset.items() for p, o in parts.items()}


def _dump(positions: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Offsets as Spark journals them: sorted, so equal positions are equal JSON."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(positions):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(positions[tp])
    return out


def _share(available: Mapping[TopicPartition, int], budget: int) -> dict[TopicPartition, int]:
    """Split ``budget`` offsets over partitions in proportion to what each has available."""
    total = sum(available.values())
    if total <= budget:
        return dict(available)
    take = {tp: n * budget // total for tp, n in available.items()}
    left = budget - sum(take.values())
    for tp in sorted(available, key=lambda t: available[t] - take[t], reverse=True):
        if left <= 0:
            break
        if take[tp] < available[tp]:
            take[tp] += 1
            left -= 1
    return take


class PyConnectStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over topics of the store. An offset is ``{topic: {"<partition>": next offset}}``; the
    latest offset is each partition's committed end (read_committed), so only committed records are read
    and a micro-batch's records are fixed by its offsets: Spark's checkpoint makes the query exactly once."""

    def __init__(self, conf: ReadConf, schema: StructType, topics: Sequence[str], pattern: str | None,
                 starting: str | Mapping[TopicPartition, int], max_records: int, min_partitions: int,
                 max_per_trigger: int | None, min_per_trigger: int | None) -> None:
        self.conf = conf
        self.out_schema = schema
        self.topics = list(topics)
        self.pattern = pattern
        self.starting = starting if isinstance(starting, str) else dict(starting)
        self.max_records = max_records
        self.min_partitions = min_partitions
        self.max_per_trigger = max_per_trigger
        self.min_per_trigger = min_per_trigger
        self._target: dict[TopicPartition, int] | None = None
        self._backend: Any = None
        self._consumer: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_backend"] = state["_consumer"] = None
        return state

    def _ends(self) -> dict[TopicPartition, int]:
        """Each matching partition's committed end, now."""
        if self._consumer is None:
            from connect_runtime.backends import open_backend

            self._backend = open_backend(self.conf.backend_url, self.conf.backend_settings)
            self._consumer = self._backend.consumer(None)
        tps = self._consumer.partitions(self.topics, self.pattern)
        return dict(self._consumer.end_offsets(tps, self.conf.timeout)) if tps else {}

    def initialOffset(self) -> dict[str, Any]:
        if self.starting == "latest":
            return _dump(self._ends())
        given = self.starting if isinstance(self.starting, dict) else {}
        return _dump({tp: given.get(tp, 0) for tp in self._ends()} | given)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = _load(start)
        ends = self._target if self._target is not None else self._ends()
        available = {tp: max(0, end - begin.get(tp, 0)) for tp, end in ends.items()}
        if isinstance(limit, ReadMaxRows):
            available = _share(available, max(1, limit.max_rows))
        elif (isinstance(limit, ReadMinRows) and self._target is None
              and sum(available.values()) < limit.min_rows):
            return start
        latest = dict(begin)
        for tp, n in available.items():
            latest[tp] = begin.get(tp, 0) + n
        return _dump(latest)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_per_trigger is not None:
            return ReadMaxRows(self.max_per_trigger)
        if self.min_per_trigger is not None:
            return ReadMinRows(self.min_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return _dump(self._ends())

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._ends()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = _load(start), _load(end)
        spans = {tp: [(begin.get(tp, 0), e)] for tp, e in stop.items() if e > begin.get(tp, 0)}
        return plan_partitions(spans, self.max_records, self.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.conf, self.out_schema, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the store keeps its records; progress lives in Spark's checkpoint."""

    def stop(self) -> None:
        consumer, backend, self._consumer, self._backend = self._consumer, self._backend, None, None
        if consumer is not None:
            consumer.close()
        if backend is not None:
            backend.close()


__all__ = ["DEFAULT_BATCH_SIZE", "FORMAT", "PyConnectDataSource", "PyConnectReader", "PyConnectStreamReader",
           "ReadConf", "read_partition"]
