"""The source half of the pipeline: a ``poll()`` batch -> transformed, converted producer records
(:class:`SourcePipeline`, what became of each record in :class:`SourceBatch`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NamedTuple

from connect_runtime.api.errors import DataError
from connect_runtime.api.records import Headers, SourceRecord
from connect_runtime.backends.base import ProducerRecord, WireHeaders
from connect_runtime.runtime.pipeline._core import (
    _SOURCE_SETTINGS,
    HEADER_CONVERTER,
    KEY_CONVERTER,
    TASK_POLL,
    VALUE_CONVERTER,
    Pipeline,
    gc_paused,
    to_bytes,
)

log = logging.getLogger(__name__)


class SourceBatch(NamedTuple):
    """What one ``poll()`` batch became; every polled record is in exactly one of ``sent``,
    ``filtered`` and ``skipped``, each in poll order."""

    out: list[ProducerRecord]          # converted records to write, in poll order
    sent: list[SourceRecord]           # the ORIGINAL polled record behind each entry of ``out`` (same index)
    filtered: list[SourceRecord]       # originals a transform dropped (-> commit_record(r, None))
    skipped: list[SourceRecord]        # originals that failed transform/convert under errors.tolerance=all
    schema: tuple[str, Any] | None = None  # (topic, value schema) of the batch's last record written, if it has one




def _describe_source(r: SourceRecord) -> str:
    return (f"source record for topic {r.topic!r} (source partition {r.source_partition!r}, "
            f"source offset {r.source_offset!r})")



class SourcePipeline(Pipeline):
    """Transforms then converts each ``poll()`` batch; see the module docstring."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SourcePipeline:
        """``config``: the raw connector config (strings or typed values). Raises one ConfigError
        naming every bad converter, transform and predicate field."""
        return cls(config, _SOURCE_SETTINGS)

    def process(self, records: list[SourceRecord]) -> SourceBatch:
        """Transform then convert; DataError naming the record when errors.tolerance=none."""
        with gc_paused():
            return self._process(records)

    def _process(self, records: list[SourceRecord]) -> SourceBatch:
        filtered: list[SourceRecord] = []
        skipped: list[SourceRecord] = []
        if self.steps:
            sent: list[SourceRecord] = []
            recs: list[SourceRecord] = []
            transform = self._transform
            for r in records:
                if isinstance(r.value, DataError):  # the task could not read it: no transform applies
                    self._failed(_describe_source(r), TASK_POLL, r.value, r.value, r.key, None)
                    skipped.append(r)
                    continue
                out, step, exc, in_predicate = transform(r)
                if exc is not None:
                    assert step is not None
                    self._step_failed(_describe_source(r), step, exc, in_predicate, r.key, r.value)
                    skipped.append(r)
                elif out is None:
                    filtered.append(r)
                else:
                    sent.append(r)
                    recs.append(out)
        else:
            sent = list(records)
            recs = sent
        if self.schema_aware:
            out = None  # record by record, with the records' schemas
        else:
            try:
                out = self._convert_batch(recs)
            except Exception:
                out = None  # redone below, outside this handler, so errors don't chain to the batch's
        if out is None:
            failed_in_transforms = len(skipped)
            out, sent = self._convert_each(sent, recs, skipped)
            if 0 < failed_in_transforms < len(skipped):  # failed in both stages: back to poll order
                position = {id(r): i for i, r in enumerate(records)}
                skipped.sort(key=lambda r: position[id(r)])
        last = recs[-1] if out and recs else None  # the run's lineage: the Connect schema a topic received
        return SourceBatch(out, sent, filtered, skipped,
                           None if last is None or last.value_schema is None else (last.topic, last.value_schema))

    def _convert_batch(self, recs: list[SourceRecord]) -> list[ProducerRecord]:
        new, PR = tuple.__new__, ProducerRecord
        kconv = self.key_converter.from_connect
        hconv = self._wire_headers
        encode_many = self._encode_many
        if encode_many is not None:
            values = encode_many([r.value for r in recs])
            return [
                new(PR, (r.topic, r.partition,
                         None if (k := r.key) is None else kconv(r.topic, k, r.headers),
                         v, r.timestamp,
                         None if (h := r.headers) is None else hconv(r.topic, h)))
                for r, v in zip(recs, values)  # noqa: B905 - the same length by construction
            ]
        vconv = self.value_converter.from_connect
        return [
            new(PR, (r.topic, r.partition,
                     None if (k := r.key) is None else kconv(r.topic, k, r.headers),
                     vconv(r.topic, r.value, r.headers),
                     r.timestamp,
                     None if (h := r.headers) is None else hconv(r.topic, h)))
            for r in recs
        ]

    def _wire_headers(self, topic: str, headers: Headers) -> WireHeaders:
        hconv = self.header_converter.from_connect
        return [(n, v if v is None or type(v) is bytes else hconv(topic, v, None)) for n, v in headers]

    def _convert_each(self, sent: list[SourceRecord], recs: list[SourceRecord],
                      skipped: list[SourceRecord]) -> tuple[list[ProducerRecord], list[SourceRecord]]:
        """Convert record by record, naming (or skipping) bad ones: a schema-aware converter's way, and the
        schemaless batch's when it failed somewhere. A record's ``key_schema`` / ``value_schema`` reach the
        converters' ``from_connect_data`` (see :func:`to_bytes`)."""
        out: list[ProducerRecord] = []
        kept: list[SourceRecord] = []
        kc, vc, hc = self.key_converter, self.value_converter, self.header_converter
        k_aware, v_aware = self.key_schemas, self.value_schemas
        for orig, r in zip(sent, recs, strict=True):
            stage = KEY_CONVERTER
            plugin: object = kc
            try:
                if isinstance(r.value, DataError):
                    stage, plugin = TASK_POLL, r.value
                    raise r.value
                key = None if r.key is None and r.key_schema is None and not k_aware else to_bytes(
                    kc, k_aware, r.topic, r.key_schema, r.key, r.headers)
                stage, plugin = VALUE_CONVERTER, vc
                value = to_bytes(vc, v_aware, r.topic, r.value_schema, r.value, r.headers)
                stage, plugin = HEADER_CONVERTER, hc
                headers = None if r.headers is None else self._wire_headers(r.topic, r.headers)
            except Exception as exc:
                self._failed(_describe_source(orig), stage, plugin, exc, orig.key, orig.value)
                skipped.append(orig)
                continue
            out.append(ProducerRecord(r.topic, r.partition, key, value, r.timestamp, headers))
            kept.append(orig)
        return out, kept


