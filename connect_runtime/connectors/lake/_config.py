"""ParquetSink's configuration: the keys (the issue's contract, Kafka Connect S3 sink names where it has them),
``storage.options`` as a secret, and the parsed form every module of the package reads (:class:`LakeConfig`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connect_runtime.api.config import (
    ConfigDef,
    Importance,
    Password,
    Range,
    Type,
    ValidString,
    non_empty_string,
)
from connect_runtime.api.errors import ConfigError

VERSION = "1.0.0"

_PARTITIONERS = {
    "default": "default", "defaultpartitioner": "default",
    "field": "field", "fieldpartitioner": "field",
    "time": "time", "timebasedpartitioner": "time",
}
"""``partitioner.class``: a short name, or Kafka Connect's class (``io.confluent.connect.storage.partitioner.
FieldPartitioner``): its last dotted part decides."""

CODECS = {"snappy": "snappy", "zstd": "zstd", "gzip": "gzip", "none": "none"}
COLUMN_TYPES = ("string", "int64", "int32", "double", "float", "boolean", "binary", "timestamp_ms", "date32", "json")


def partitioner_kind(value: str) -> str:
    kind = _PARTITIONERS.get(value.rsplit(".", 1)[-1].strip().lower())
    if kind is None:
        raise ValueError(f"default, field or time (or Kafka Connect's DefaultPartitioner, FieldPartitioner, "
                         f"TimeBasedPartitioner), got {value!r}")
    return kind


def _partitioner(name: str, value: Any) -> None:
    partitioner_kind(str(value))


def _json_object(name: str, value: Any) -> None:
    raw = value.value if isinstance(value, Password) else value
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        raise ValueError("a JSON object (the text is not JSON; not shown: it may hold credentials)") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"a JSON object, got a {type(parsed).__name__}")


def _schema(name: str, value: Any) -> None:
    if not value:
        return
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise ValueError(f'a JSON object {{"column": "type"}} ({exc})') from None
    if not isinstance(parsed, dict):
        raise ValueError(f'a JSON object {{"column": "type"}}, got {type(parsed).__name__}')
    bad = {k: v for k, v in parsed.items() if v not in COLUMN_TYPES}
    if bad:
        raise ValueError(f"column types among {', '.join(COLUMN_TYPES)}, got {bad}")


CONFIG = (
    ConfigDef()
    .define("path", Type.STRING, validator=non_empty_string, importance=Importance.HIGH,
            doc="fsspec URL of the lake's root: file:///..., s3://bucket/prefix, memory://...")
    .define("storage.options", Type.PASSWORD, default="{}", validator=_json_object, importance=Importance.HIGH,
            doc="JSON object passed to the fsspec filesystem (credentials, endpoint_url, ...). Secret as a "
                "whole: never logged, shown or returned.")
    .define("topics.dir", Type.STRING, default="topics", validator=non_empty_string,
            doc="Top-level directory under path (Kafka Connect S3's topics.dir).")
    .define("flush.size", Type.INT, default=10000, validator=Range.at_least(1), importance=Importance.HIGH,
            doc="Records of one topic partition per file: a file is published once it holds this many.")
    .define("rotate.interval.ms", Type.LONG, default=-1, validator=Range.at_least(-1),
            doc="Publish a topic partition's open file once the timestamp (timestamp.extractor) of a record is "
                "this far past the file's first record (-1: off). With timestamp.extractor=Wallclock a commit "
                "point also publishes a file open that long.")
    .define("parquet.codec", Type.STRING, default="snappy", validator=ValidString.in_(*CODECS),
            doc="Parquet compression: snappy, zstd, gzip or none.")
    .define("partitioner.class", Type.STRING, default="default", validator=_partitioner,
            doc="default (partition=<p>), field (partition.field.name) or time (path.format, "
                "partition.duration.ms, timestamp.extractor); Kafka Connect's class names are accepted.")
    .define("partition.field.name", Type.LIST, default=[],
            doc="field partitioner: the value's fields whose values name the directory (<field>=<value>/...).")
    .define("path.format", Type.STRING, default="",
            doc="time partitioner: Joda-style pattern of the directory, e.g. 'year'=YYYY/'month'=MM/'day'=dd.")
    .define("partition.duration.ms", Type.LONG, default=-1, validator=Range.at_least(-1),
            doc="time partitioner: width of one time partition (the timestamp is floored to it).")
    .define("timestamp.extractor", Type.STRING, default="Record",
            validator=ValidString.in_("Record", "RecordField", "Wallclock"),
            doc="Where a record's time comes from: Record (its timestamp), RecordField (timestamp.field of the "
                "value: epoch ms, or an ISO-8601 string) or Wallclock (now; not reproducible on a rerun).")
    .define("timestamp.field", Type.STRING, default="",
            doc="timestamp.extractor=RecordField: the value's field holding the time.")
    .define("timezone", Type.STRING, default="UTC", doc="time partitioner: the zone path.format is rendered in.")
    .define("parquet.schema", Type.STRING, default="", validator=_schema,
            doc='Typed columns, {"column": "type"} (types: ' + ", ".join(COLUMN_TYPES) + "); other fields are "
                "inferred from the first records and kept.")
)


@dataclass(frozen=True)
class LakeConfig:
    """The parsed config every module of the package reads. ``storage_options`` holds secrets: it is never
    part of a message (``repr`` leaves it out)."""

    path: str
    topics_dir: str = "topics"
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False)
    flush_size: int = 10000
    rotate_interval_ms: int = -1
    codec: str = "snappy"
    partitioner: str = "default"
    field_names: tuple[str, ...] = ()
    path_format: str = ""
    partition_duration_ms: int = -1
    timestamp_extractor: str = "Record"
    timestamp_field: str = ""
    timezone: str = "UTC"
    schema: dict[str, str] = field(default_factory=dict)
    name: str = "parquet-sink"
    topics: tuple[str, ...] = ()
    topics_regex: str | None = None

    @classmethod
    def parse(cls, props: Mapping[str, Any]) -> LakeConfig:
        """Parse and check a connector or task config: one :class:`ConfigError` naming every bad field."""
        raw = CONFIG.parse({k: v for k, v in props.items() if k in CONFIG.keys})
        errors: dict[str, str] = {}
        kind = partitioner_kind(raw["partitioner.class"])
        if kind == "field" and not raw["partition.field.name"]:
            errors["partition.field.name"] = "the field partitioner needs at least one field name"
        if kind == "time":
            if not raw["path.format"]:
                errors["path.format"] = "the time partitioner needs a path.format, e.g. 'year'=YYYY/'month'=MM"
            if raw["partition.duration.ms"] <= 0:
                errors["partition.duration.ms"] = "the time partitioner needs a positive partition.duration.ms"
        if raw["timestamp.extractor"] == "RecordField" and not raw["timestamp.field"]:
            errors["timestamp.field"] = "timestamp.extractor=RecordField needs the value's field name"
        if errors:
            raise ConfigError(errors=errors)
        opts = raw["storage.options"]
        opts = opts.value if isinstance(opts, Password) else opts
        return cls(
            path=raw["path"].rstrip("/"), topics_dir=raw["topics.dir"].strip("/"),
            storage_options=json.loads(opts) if isinstance(opts, str) else dict(opts),
            flush_size=raw["flush.size"], rotate_interval_ms=raw["rotate.interval.ms"], codec=raw["parquet.codec"],
            partitioner=kind, field_names=tuple(raw["partition.field.name"]), path_format=raw["path.format"],
            partition_duration_ms=raw["partition.duration.ms"], timestamp_extractor=raw["timestamp.extractor"],
            timestamp_field=raw["timestamp.field"], timezone=raw["timezone"],
            schema=json.loads(raw["parquet.schema"]) if raw["parquet.schema"] else {},
            name=str(props.get("name") or "parquet-sink"), topics=tuple(_list_of(props.get("topics"))),
            topics_regex=str(props["topics.regex"]) if props.get("topics.regex") else None,
        )


def _list_of(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    return [str(t) for t in value]


__all__ = ["CODECS", "COLUMN_TYPES", "CONFIG", "VERSION", "LakeConfig", "partitioner_kind"]
