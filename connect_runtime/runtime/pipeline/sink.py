"""The sink half of the pipeline: consumed records -> converted, transformed :class:`SinkRecord` s
(:class:`SinkPipeline`, what became of each record in :class:`SinkBatch`), and dead-letter records
with Kafka Connect's context headers."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Mapping
from operator import itemgetter
from typing import Any, NamedTuple

import orjson

from connect_runtime.api.config import ConfigDef
from connect_runtime.api.errors import ConfigError
from connect_runtime.api.records import Headers, SinkRecord
from connect_runtime.backends.base import ConsumedRecord, ProducerRecord, WireHeaders
from connect_runtime.runtime.pipeline._core import (
    _SINK_SETTINGS,
    HEADER_CONVERTER,
    KEY_CONVERTER,
    VALUE_CONVERTER,
    Pipeline,
    RecordError,
    _class_name,
    gc_paused,
)

log = logging.getLogger(__name__)


class SinkBatch(NamedTuple):
    """What one consumed batch became: ``len(records) + len(dead) + filtered == len(batch)``;
    ``records`` and ``dead`` are in consumption order."""

    records: list[SinkRecord]                          # decoded + transformed, for put()
    dead: list[tuple[ConsumedRecord, BaseException]]   # failed convert/transform under tolerance=all
    filtered: int                                      # dropped by a transform




def _describe_sink(r: ConsumedRecord) -> str:
    return f"sink record at topic {r.topic!r} partition {r.partition} offset {r.offset}"



_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_DIGITS = b"0" * 19
"""19 digits in a row (found as 19 zeros once every digit is a zero: a C translate and a substring search,
about 8x faster than a regular expression over the batch): maybe an integer beyond 64 bits, which orjson
reads as a float (json: exactly)."""
_value_of = itemgetter(4)


def _loads_many(records: list[ConsumedRecord]) -> list[Any] | None:
    """Every record's value decoded by orjson (about 2x json's scanner on small objects), or ``None`` when
    the batch must go through :mod:`json` instead: a tombstone, a run of 19 digits anywhere (an integer
    orjson would turn into a float, or a false alarm), or any value orjson refuses (invalid JSON, and what
    only json accepts: ``NaN``, ``Infinity``, numbers beyond float range, lone surrogate escapes), so
    values and errors are exactly json's."""
    data = list(map(_value_of, records))
    if None in data or b"\n".join(data).translate(_DIGITS_AS_ZERO).find(_LONG_DIGITS) != -1:
        return None
    try:
        return list(map(orjson.loads, data))
    except (orjson.JSONDecodeError, TypeError):
        return None


def _sink_records(records: list[ConsumedRecord], values: list[Any], kconv: Any, hconv: Any) -> list[SinkRecord]:
    """The SinkRecords of a batch whose values are converted already. Made with ``object.__new__`` and plain
    attribute stores, which CPython runs about twice as fast as a call of ``SinkRecord(**fields)``; the
    records are the same (every slot set)."""
    new, SR = object.__new__, SinkRecord
    out: list[SinkRecord] = []
    append = out.append
    for (t, p, o, k, _, ts, h), v in zip(records, values):  # noqa: B905 - the same length by construction
        r = new(SR)
        r.topic = t
        r.partition = p
        r.offset = o
        r.key = None if k is None else kconv(t, k, None)
        r.value = v
        r.timestamp = ts
        r.headers = None if h is None else hconv(t, h)
        append(r)
    return out


class SinkPipeline(Pipeline):
    """Converts then transforms each consumed batch; builds dead letter records."""

    def __init__(self, config: Mapping[str, Any], settings_def: ConfigDef, task_id: int | None = None) -> None:
        super().__init__(config, settings_def)
        self.dead_letter_topic: str | None = (self.settings["errors.deadletterqueue.topic.name"] or "").strip() or None
        """Where :meth:`dead_letter` records go; ``None`` when not set (dead records are then only
        counted, never written)."""
        self.context_headers = bool(self.settings["errors.deadletterqueue.context.headers.enable"])
        self.task_id = task_id

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, task_id: int | None = None) -> SinkPipeline:
        """``config``: the raw connector config. ``task_id`` (optional) goes into the
        ``__connect.errors.task.id`` dead letter header."""
        return cls(config, _SINK_SETTINGS, task_id)

    def process(self, records: list[ConsumedRecord]) -> SinkBatch:
        """Convert then transform; DataError naming the record when errors.tolerance=none."""
        with gc_paused():
            return self._process(records)

    def _process(self, records: list[ConsumedRecord]) -> SinkBatch:
        dead: list[tuple[ConsumedRecord, BaseException]] = []
        origs: list[ConsumedRecord] = records
        if self.schema_aware:
            recs = None  # record by record, each SinkRecord with its key_schema / value_schema
        else:
            try:
                recs = self._convert_batch(records)
            except Exception:
                recs = None  # redone below, outside this handler, so errors don't chain to the batch's
        if recs is None:
            origs, recs = self._convert_each(records, dead)
        if not self.steps:
            return SinkBatch(recs, dead, 0)
        out: list[SinkRecord] = []
        filtered = 0
        transform = self._transform
        for c, r in zip(origs, recs, strict=True):
            res, step, exc, in_predicate = transform(r)
            if exc is not None:
                assert step is not None
                dead.append((c, self._step_failed(_describe_sink(c), step, exc, in_predicate, c.key, c.value)))
            elif res is None:
                filtered += 1
            else:
                out.append(res)
        if len(dead) > 1 and len(origs) < len(records):  # failed in both stages: back to consumption order
            position = {id(c): i for i, c in enumerate(records)}
            dead.sort(key=lambda d: position[id(d[0])])
        return SinkBatch(out, dead, filtered)

    def _convert_batch(self, records: list[ConsumedRecord]) -> list[SinkRecord]:
        SR = SinkRecord
        kconv = self.key_converter.to_connect
        hconv = self._connect_headers
        if self._json_value:
            values = _loads_many(records)
            if values is not None:
                return _sink_records(records, values, kconv, hconv)
            # The JSON scanner straight away; the full decoder only when the scan did not consume
            # the whole text (trailing blanks or garbage), so errors and edge cases stay its own.
            dec = self.value_converter.decode  # type: ignore[attr-defined]
            scan = self.value_converter.scan  # type: ignore[attr-defined]
            return [
                SR(topic=t, partition=p, offset=o,
                   key=None if k is None else kconv(t, k, None),
                   value=None if v is None else (
                       dec(s) if (r := scan(s := v.decode(), 0))[1] != len(s) else r[0]),
                   timestamp=ts, headers=None if h is None else hconv(t, h))
                for t, p, o, k, v, ts, h in records
            ]
        decode_many = self._decode_many
        if decode_many is not None:  # StringConverter, ByteArrayConverter: the values of the batch at once
            return _sink_records(records, decode_many(list(map(_value_of, records))), kconv, hconv)
        vconv = self.value_converter.to_connect
        return [
            SR(topic=t, partition=p, offset=o,
               key=None if k is None else kconv(t, k, None),
               value=vconv(t, v, None),
               timestamp=ts, headers=None if h is None else hconv(t, h))
            for t, p, o, k, v, ts, h in records
        ]

    def _connect_headers(self, topic: str, headers: WireHeaders) -> Headers:
        hconv = self.header_converter.to_connect
        return [(n, None if v is None else hconv(topic, v, None)) for n, v in headers]

    def _convert_each(self, records: list[ConsumedRecord], dead: list[tuple[ConsumedRecord, BaseException]]
                      ) -> tuple[list[ConsumedRecord], list[SinkRecord]]:
        """Convert record by record, naming (or dead-lettering) bad ones: a schema-aware converter's way
        (``to_connect_data``, whose schema the SinkRecord carries), and the schemaless batch's when it failed."""
        origs: list[ConsumedRecord] = []
        out: list[SinkRecord] = []
        kc, vc, hc = self.key_converter, self.value_converter, self.header_converter
        k_aware, v_aware = self.key_schemas, self.value_schemas
        for c in records:
            stage, plugin = KEY_CONVERTER, kc
            key_schema = value_schema = None
            try:
                if k_aware:
                    key_schema, key = kc.to_connect_data(c.topic, c.key, None)
                else:
                    key = None if c.key is None else kc.to_connect(c.topic, c.key, None)
                stage, plugin = VALUE_CONVERTER, vc
                if v_aware:
                    value_schema, value = vc.to_connect_data(c.topic, c.value, None)
                else:
                    value = vc.to_connect(c.topic, c.value, None)
                stage, plugin = HEADER_CONVERTER, hc
                headers = None if c.headers is None else self._connect_headers(c.topic, c.headers)
            except Exception as exc:
                dead.append((c, self._failed(_describe_sink(c), stage, plugin, exc, c.key, c.value)))
                continue
            origs.append(c)
            out.append(SinkRecord(topic=c.topic, partition=c.partition, offset=c.offset, key=key,
                                  value=value, timestamp=c.timestamp, headers=headers, key_schema=key_schema,
                                  value_schema=value_schema))
        return origs, out

    def dead_letter(self, record: ConsumedRecord, error: BaseException) -> ProducerRecord:
        """The DLQ record for a failed one (topic = errors.deadletterqueue.topic.name, original key/value
        bytes, headers __connect.errors.* when context headers are enabled)."""
        topic = self.dead_letter_topic
        if topic is None:
            raise ConfigError(errors={
                "errors.deadletterqueue.topic.name": "expected a topic name: a record was dead-lettered but "
                "no dead letter topic is configured (check SinkPipeline.dead_letter_topic first)"})
        headers: WireHeaders | None = list(record.headers) if record.headers is not None else None
        if self.context_headers:
            headers = (headers or []) + self._context_headers(record, error)
        return ProducerRecord(topic, None, record.key, record.value, record.timestamp, headers)

    def _context_headers(self, record: ConsumedRecord, error: BaseException) -> WireHeaders:
        # Kafka Connect reports the exception the failing stage threw, and the stage's plugin class.
        cause = error.__cause__ if isinstance(error, RecordError) and error.__cause__ is not None else error
        h: WireHeaders = [
            ("__connect.errors.topic", record.topic.encode()),
            ("__connect.errors.partition", str(record.partition).encode()),
            ("__connect.errors.offset", str(record.offset).encode()),
            ("__connect.errors.connector.name", self.connector_name.encode()),
        ]
        if self.task_id is not None:
            h.append(("__connect.errors.task.id", str(self.task_id).encode()))
        if isinstance(error, RecordError):
            h.append(("__connect.errors.stage", error.stage.encode()))
            h.append(("__connect.errors.class.name", error.plugin.encode()))
        h.append(("__connect.errors.exception.class.name", _class_name(cause).encode()))
        h.append(("__connect.errors.exception.message", str(cause).encode("utf-8", "replace")))
        h.append(("__connect.errors.exception.stacktrace",
                  "".join(traceback.format_exception(cause)).encode("utf-8", "replace")))
        return h

