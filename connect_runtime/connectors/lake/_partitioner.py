"""Partitioners (Kafka Connect S3's ``partitioner.class``): the directory a record's row goes to under its topic,
and the timestamp extractors the time partitioner and ``rotate.interval.ms`` read.

- ``default``: ``partition=<kafka partition>`` (DefaultPartitioner).
- ``field``: ``<field>=<value>/...`` for ``partition.field.name`` (FieldPartitioner).
- ``time``: ``path.format`` (a Joda pattern, as Kafka Connect writes it) rendered for the record's time floored
  to ``partition.duration.ms``, in ``timezone`` (TimeBasedPartitioner).

Every partitioner is a function of the record alone (and, for ``Wallclock``, of the clock), so the same records
land in the same directories on a rerun: what makes a rerun's file names collide with a dead run's instead of
duplicating them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from connect_runtime.api.errors import DataError
from connect_runtime.api.records import SinkRecord
from connect_runtime.connectors.lake._config import LakeConfig

_JODA = [("YYYY", "%Y"), ("yyyy", "%Y"), ("YY", "%y"), ("yy", "%y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"),
         ("mm", "%M"), ("ss", "%S")]
_JODA_TOKEN = re.compile("|".join(re.escape(j) for j, _ in _JODA))


def joda_to_strftime(pattern: str) -> str:
    """``'year'=YYYY/'month'=MM`` -> ``year=%Y/month=%m`` (quoted text is literal, ``''`` is a quote)."""
    out: list[str] = []
    parts = re.split(r"('(?:[^']|'')*')", pattern)
    table = dict(_JODA)
    for part in parts:
        if part.startswith("'") and part.endswith("'") and len(part) >= 2:
            out.append(part[1:-1].replace("''", "'").replace("%", "%%"))
        else:
            out.append(_JODA_TOKEN.sub(lambda m: table[m.group(0)], part.replace("%", "%%")))
    return "".join(out)


def timestamp_extractor(cfg: LakeConfig) -> Callable[[SinkRecord], int]:
    """The record's time in epoch milliseconds, as ``timestamp.extractor`` says."""
    if cfg.timestamp_extractor == "Wallclock":
        return lambda r: int(time.time() * 1000)
    if cfg.timestamp_extractor == "Record":
        def of_record(r: SinkRecord) -> int:
            if r.timestamp is None:
                raise DataError(f"ParquetSink: record {r.topic}-{r.partition}@{r.offset} has no timestamp "
                                "(timestamp.extractor=Record)")
            return int(r.timestamp)
        return of_record
    name = cfg.timestamp_field

    def of_field(r: SinkRecord) -> int:
        v = r.value.get(name) if isinstance(r.value, Mapping) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return int(v)
        if isinstance(v, str):
            try:
                dt = datetime.fromisoformat(v)
            except ValueError:
                pass
            else:
                return int((dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp() * 1000)
        raise DataError(f"ParquetSink: record {r.topic}-{r.partition}@{r.offset}: field {name!r} "
                        f"(timestamp.field) is {v!r}, not epoch milliseconds or an ISO-8601 time")
    return of_field


def partitioner(cfg: LakeConfig) -> Callable[[SinkRecord], str] | None:
    """The encoded partition of a record (its directory under the topic); ``None`` for the default
    partitioner, whose directory is ``partition=<p>`` for every record of a topic partition."""
    if cfg.partitioner == "default":
        return None
    if cfg.partitioner == "field":
        names = cfg.field_names

        def by_field(r: SinkRecord) -> str:
            v = r.value
            if not isinstance(v, Mapping):
                raise DataError(f"ParquetSink: record {r.topic}-{r.partition}@{r.offset}: the field partitioner "
                                f"needs an object value, got {type(v).__name__}")
            parts = []
            for n in names:
                if n not in v or isinstance(v[n], (Mapping, list)):
                    raise DataError(f"ParquetSink: record {r.topic}-{r.partition}@{r.offset} has no scalar field "
                                    f"{n!r} (partition.field.name)")
                parts.append(f"{n}={v[n]}")
            return "/".join(parts)
        return by_field
    fmt = joda_to_strftime(cfg.path_format)
    zone = ZoneInfo(cfg.timezone)
    width = cfg.partition_duration_ms
    ts = timestamp_extractor(cfg)

    def by_time(r: SinkRecord) -> str:
        ms = ts(r)
        floored = ms - ms % width
        return datetime.fromtimestamp(floored / 1000, tz=zone).strftime(fmt).strip("/")
    return by_time


def default_partition(partition: int) -> str:
    return f"partition={partition}"


def group_by_partition(records: list[SinkRecord], encode: Callable[[SinkRecord], str]) -> dict[str, list[Any]]:
    """The records of one topic partition by encoded partition, in offset order within each."""
    out: dict[str, list[Any]] = {}
    for r in records:
        key = encode(r)
        g = out.get(key)
        if g is None:
            out[key] = [r]
        else:
            g.append(r)
    return out


__all__ = ["default_partition", "group_by_partition", "joda_to_strftime", "partitioner", "timestamp_extractor"]
