"""CONTRACT STUB (owned by the pipeline helper; replace the bodies, keep the signatures).

The transform + convert + error-tolerance pipeline between tasks and the backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from connect_runtime.api.records import SinkRecord, SourceRecord
from connect_runtime.backends.base import ConsumedRecord, ProducerRecord


class SourceBatch(NamedTuple):
    out: list[ProducerRecord]          # converted records to write, in poll order
    sent: list[SourceRecord]           # the ORIGINAL polled record behind each entry of ``out`` (same index)
    filtered: list[SourceRecord]       # originals a transform dropped (-> commit_record(r, None))
    skipped: list[SourceRecord]        # originals that failed transform/convert under errors.tolerance=all


class SinkBatch(NamedTuple):
    records: list[SinkRecord]                          # decoded + transformed, for put()
    dead: list[tuple[ConsumedRecord, BaseException]]   # failed convert/transform under tolerance=all
    filtered: int                                      # dropped by a transform


class SourcePipeline:
    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SourcePipeline:
        """``config``: the raw connector config (strings or typed values)."""
        raise NotImplementedError

    def process(self, records: list[SourceRecord]) -> SourceBatch:
        """Transform then convert; DataError naming the record when errors.tolerance=none."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class SinkPipeline:
    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SinkPipeline:
        raise NotImplementedError

    def process(self, records: list[ConsumedRecord]) -> SinkBatch:
        raise NotImplementedError

    def dead_letter(self, record: ConsumedRecord, error: BaseException) -> ProducerRecord:
        """The DLQ record for a failed one (topic = errors.deadletterqueue.topic.name, original key/value
        bytes, headers __connect.errors.* when context headers are enabled)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError
