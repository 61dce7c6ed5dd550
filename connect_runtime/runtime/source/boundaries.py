"""Transaction boundaries: when a source task commits (Kafka Connect's ``TransactionBoundaryManager``), as
strategy objects that own their state (the time of the last commit, the connector's requests).

- :class:`PollBoundary` (``transaction.boundary=poll``): every poll batch is one transaction;
- :class:`IntervalBoundary` (``transaction.boundary=interval``, and the at-least-once offset flushes of
  ``offset.flush.interval.ms``): every ``interval`` seconds;
- :class:`ConnectorBoundary` (``transaction.boundary=connector``): where the task asks through its
  ``TransactionContext``; what it dispatched after its last request is dropped when the run stops.
"""

from __future__ import annotations

import time
from typing import Protocol

from connect_runtime.api.records import SourceRecord
from connect_runtime.runtime.source.config import SourcePlan
from connect_runtime.runtime.source.contexts import SourceTransactionContext


class Dispatcher(Protocol):
    """What a boundary drives: the task's send and commit steps."""

    def send(self, records: list[SourceRecord]) -> None: ...

    def after_batch(self) -> None: ...

    def commit(self) -> None: ...

    def abort(self) -> None: ...


class Boundary:
    """The base strategy: never commits on its own; the run's end commits the last checkpoint."""

    commit_final = True
    """Whether the run's last open checkpoint is committed when the run stops."""

    transaction_context: SourceTransactionContext | None = None
    """The context the task asks for boundaries through (``transaction.boundary=connector`` only)."""

    def __init__(self) -> None:
        self.last_commit = time.monotonic()

    def committed(self, now: float) -> None:
        """A commit point started at ``now``."""
        self.last_commit = now

    def after_batch(self, now: float) -> bool:
        """Commit after a dispatched poll batch?"""
        return False

    def due(self, now: float) -> bool:
        """Commit before the next poll (time-based boundaries)?"""
        return False

    def dispatch(self, records: list[SourceRecord], task: Dispatcher) -> None:
        """Send one poll batch and let the task decide on a commit after it."""
        task.send(records)
        task.after_batch()


class PollBoundary(Boundary):
    """``transaction.boundary=poll``: every poll batch is one transaction."""

    def after_batch(self, now: float) -> bool:
        return True


class IntervalBoundary(Boundary):
    """``transaction.boundary=interval`` / at-least-once offset flushes: every ``interval`` seconds."""

    def __init__(self, interval: float) -> None:
        super().__init__()
        self.interval = interval

    def after_batch(self, now: float) -> bool:
        return now - self.last_commit >= self.interval

    def due(self, now: float) -> bool:
        return now - self.last_commit >= self.interval


class ConnectorBoundary(Boundary):
    """``transaction.boundary=connector``: only where the task asks (``TransactionContext``); what it
    dispatched after its last request is dropped when the run stops, its offsets not committed."""

    commit_final = False

    def __init__(self) -> None:
        super().__init__()
        self.transaction_context = SourceTransactionContext()

    def dispatch(self, records: list[SourceRecord], task: Dispatcher) -> None:
        """Cut the batch where the task asked for a commit or an abort of a record, then apply the request for the
        whole batch, if any."""
        assert self.transaction_context is not None
        cuts, batch_action = self.transaction_context.take(records)
        start = 0
        for i, action in cuts:
            task.send(records[start:i + 1])
            start = i + 1
            if action == "commit":
                task.commit()
            else:
                task.abort()
        if start < len(records):
            task.send(records[start:])
        if batch_action == "commit":
            task.commit()
        elif batch_action == "abort":
            task.abort()


def boundary_for(plan: SourcePlan, exactly_once: bool) -> Boundary:
    """The boundary strategy of a task of ``plan``."""
    v = plan.values
    if not exactly_once:
        return IntervalBoundary(v["offset.flush.interval.ms"] / 1000)
    if plan.boundary == "poll":
        return PollBoundary()
    if plan.boundary == "connector":
        return ConnectorBoundary()
    interval = v["transaction.boundary.interval.ms"]
    return IntervalBoundary((v["offset.flush.interval.ms"] if interval is None else interval) / 1000)


__all__ = ["Boundary", "ConnectorBoundary", "Dispatcher", "IntervalBoundary", "PollBoundary", "boundary_for"]
