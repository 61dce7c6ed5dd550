"""The source commit as a checkpoint object (quix-streams' ``Checkpoint``; Kafka Connect's ``SubmittedRecords``
and ``OffsetStorageWriter``): what a task dispatched since its last commit point, and how it is committed.

Committing a :class:`Checkpoint` takes these steps, in this order:

1. **Settle in-flight.** The previous checkpoint's commit has completed and been reported (steps 3 to 5) before
   this one commits: a producer has one open transaction (exactly-once ``settle()``; at-least-once flushes first).
2. **Offsets and ranges ledger.** The latest source offset per source partition (:meth:`Checkpoint.offsets`)
   and the task's entry in the ranges record (:class:`~connect_runtime.runtime.source.ledger.TaskLedger`) are
   written with the records: exactly-once in the same transaction (KIP-618); at-least-once after the records
   were flushed.
3. **Commit.** Exactly-once: the transaction commits (on the task's committer thread where a commit waits on I/O,
   an :class:`InFlight` until step 1 of the next checkpoint or the run's end); at-least-once: the offsets and the
   ledger entry are written to their stores. The run's totals and spans are then updated
   (``SourceRunState.committed``).
4. **commit_record.** KIP-416: every polled record of the checkpoint, in poll order, with its
   :class:`RecordMetadata` (``None`` for a record a transform dropped, error tolerance skipped, or the connector
   aborted): :meth:`Checkpoint.report`, only when the task overrides ``commit_record``. At-least-once reports a
   record when its flush succeeded, before step 3.
5. **task.commit().** The task hears the commit point.

A checkpoint that is dropped (a failure, an abort, the end of a run with connector-defined boundaries) commits
nothing; its records are polled again by the next run.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, is_
from typing import Any

from connect_runtime.api.errors import ConnectError, DataError
from connect_runtime.api.records import RecordMetadata, SourceRecord, TopicPartition
from connect_runtime.api.source import SourceTask
from connect_runtime.backends.base import OffsetEntry, Written
from connect_runtime.runtime.offsets import OffsetWriter

_source_partition_of = attrgetter("source_partition")


class Checkpoint:
    """What a task dispatched since its last commit point: the latest source offset per source partition, the
    counts, and (only when the task overrides ``commit_record``) the records to report. Committing it is the
    task's transaction (the steps in the module docstring); dropping it forgets it."""

    __slots__ = ("bytes", "filtered", "polled", "records", "schemas", "sent", "skipped", "spans", "writer")

    def __init__(self, connector: str) -> None:
        self.writer = OffsetWriter(connector)
        self.records = self.filtered = self.skipped = 0
        self.bytes = 0  # keys and values of the written records, as converted (the lineage's output size)
        self.schemas: dict[str, Any] = {}  # per topic, the value schema of the last record written with one
        self.sent: list[SourceRecord] = []    # originals of written records, send order (tracking only)
        self.polled: list[SourceRecord] = []  # every polled original, poll order (tracking only)
        self.spans: list[tuple[TopicPartition, tuple[int, int]]] = []  # at-least-once: what flushes wrote

    def __bool__(self) -> bool:
        return bool(self.records or self.filtered or self.skipped or self.writer)

    def record_offsets(self, records: list[SourceRecord], label: str) -> None:
        """Remember the last source offset per source partition of a batch (paid per batch, not per record:
        one identity scan, then one write per distinct partition object, in poll order)."""
        writer = self.writer
        parts = list(map(_source_partition_of, records))
        if all(map(is_, parts, repeat(parts[-1]))):  # one partition object (the common case): no step per record
            picked = [records[-1]]
        else:
            last = {id(sp): i for i, sp in enumerate(parts)}
            picked = [records[i] for i in sorted(last.values())]
        for r in picked:
            try:
                writer.record(r.source_partition, r.source_offset)
            except (TypeError, ValueError) as exc:
                raise DataError(f"{label}: source partition {r.source_partition!r} of a record for topic "
                                f"{r.topic!r} is not JSON-serialisable: {exc}") from exc

    def absorb(self, other: Checkpoint) -> None:
        """Take over ``other``'s content (at-least-once: flushed records move to the offsets to write)."""
        for p, o in other.writer.snapshot():
            self.writer.record(p, o)
        self.records += other.records
        self.bytes += other.bytes
        self.schemas.update(other.schemas)
        self.filtered += other.filtered
        self.skipped += other.skipped
        self.sent.extend(other.sent)
        self.polled.extend(other.polled)
        self.spans.extend(other.spans)
        other.clear()

    def offsets(self) -> tuple[list[OffsetEntry], list[Any]]:
        """Step 2: the offset entries to write, and per entry its (partition, offset) for the result."""
        entries = self.writer.entries()
        return entries, [(e[0], po) for e, po in zip(entries, self.writer.snapshot(), strict=True)]

    def report(self, task: SourceTask, metadata: Sequence[RecordMetadata] | None, label: str) -> None:
        """Step 4 (KIP-416): ``commit_record`` for every polled record, in poll order; ``metadata`` holds one
        entry per written record (``sent``), in send order."""
        sent, polled = self.sent, self.polled
        if not sent:
            metadata = []
        if metadata is None or len(metadata) != len(sent):
            raise ConnectError(
                f"{label}: the backend returned {0 if metadata is None else len(metadata)} record metadata "
                f"for {len(sent)} written records; commit_record() needs one per record")
        by_id = dict(zip(map(id, sent), metadata, strict=True))
        for r in polled:
            task.commit_record(r, by_id.get(id(r)))

    def clear(self) -> None:
        self.writer.clear()
        self.records = self.filtered = self.skipped = self.bytes = 0
        self.schemas = {}
        self.sent = []
        self.polled = []
        self.spans = []


@dataclass
class InFlight:
    """Step 3 under way (exactly-once): a transaction's commit, the checkpoint it commits and its offsets (for
    the run's result)."""

    future: Future[Written]
    checkpoint: Checkpoint
    offsets: list[Any]
    took: list[float]
    """Seconds the commit took (set by whoever ran it; the ``offset-commit-max-time-ms`` and ``-avg-time-ms`` metrics)."""


__all__ = ["Checkpoint", "InFlight"]
