"""The state one source run shares between its main thread and its task threads: the run's bounds
(``max_records`` as a budget, the deadline, idleness of every task), and what was committed (totals, spans per
topic partition and writer, the latest source offsets), all guarded by one lock taken per batch or commit,
never per record."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from connect_runtime.api.records import SourceRecord, TopicPartition
from connect_runtime.api.source import NothingRead
from connect_runtime.runtime.supervisor import RunState


class SourceRunState(RunState):
    """State shared by the main thread and the task threads (guarded by ``lock``)."""

    def __init__(self, name: str, max_records: int | None, deadline: float | None) -> None:
        super().__init__(name, deadline)
        self.remaining = max_records
        self.idle: set[int] = set()
        self.n_tasks = 0
        # committed totals
        self.records = 0
        self.bytes = 0
        self.schemas: dict[str, Any] = {}  # per topic, the latest committed value schema (the lineage's)
        self.transactions = 0
        self.filtered = 0
        self.skipped = 0
        # per topic partition, per writer (task index: one transactional id), the spans it committed
        self.spans: dict[TopicPartition, dict[int, list[tuple[int, int]]]] = {}
        self.offsets: dict[bytes, tuple[Mapping[str, Any], Mapping[str, Any] | None]] = {}
        self.topics: set[str] = set()
        # why nothing was read, by task index (or "connector"): see runtime/source/empty.py
        self.nothing_read: dict[int | str, NothingRead] = {}

    def budget_exhausted(self) -> bool:
        return self.remaining is not None and self.remaining <= 0

    def out_of_bounds(self) -> bool:
        return self.failed or self.budget_exhausted() or self.past_deadline()

    def begin_round(self, n_tasks: int) -> None:
        """A new set of tasks starts: forget the previous round's idleness (the run's bounds stay)."""
        with self.lock:
            self.n_tasks = n_tasks
            self.idle.clear()
            if self.stop.is_set() and not self.out_of_bounds():
                self.stop.clear()
                self.stop_reason = ""
                self.stop_at = None

    def set_idle(self, index: int, idle: bool) -> None:
        with self.lock:
            if idle:
                self.idle.add(index)
                if len(self.idle) >= self.n_tasks:
                    self._stop_locked("every task is idle")
            else:
                self.idle.discard(index)

    def reserve(self, records: list[SourceRecord]) -> list[SourceRecord]:
        """The part of a polled batch the run may still write (``max_records``)."""
        if self.remaining is None:
            return records
        with self.lock:
            n = min(len(records), max(self.remaining, 0))
            self.remaining -= n
            if self.remaining <= 0:
                self._stop_locked("max_records reached")
        return records if n == len(records) else records[:n]

    def report_nothing_read(self, who: int | str, report: Any) -> None:
        """Keep a task's (or the connector's) :class:`NothingRead`; anything else is ignored."""
        if isinstance(report, NothingRead):
            with self.lock:
                self.nothing_read[who] = report

    # -- accounting --------------------------------------------------------------------------------
    def committed(self, spans: Iterable[tuple[TopicPartition, tuple[int, int]]], records: int, filtered: int,
                  skipped: int, offsets: Sequence[tuple[bytes, tuple[Mapping[str, Any], Mapping[str, Any] | None]]],
                  transaction: bool, writer: int, size: int = 0, schemas: Mapping[str, Any] | None = None) -> None:
        """``writer``: the index of the task that committed (its producer's transactional id); ``size``: the bytes
        of the committed records' keys and values; ``schemas``: per topic, the value schema of its last record."""
        with self.lock:
            self.records += records
            self.bytes += size
            if schemas:
                self.schemas.update(schemas)
            self.filtered += filtered
            self.skipped += skipped
            if transaction:
                self.transactions += 1
            for tp, span in spans:
                self.spans.setdefault(tp, {}).setdefault(writer, []).append(span)
                self.topics.add(tp.topic)
            for key, po in offsets:
                self.offsets[key] = po


__all__ = ["SourceRunState"]
