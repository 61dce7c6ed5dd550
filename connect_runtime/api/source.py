"""Source tasks and what the runtime offers them.

``SourceTask`` lifecycle, in call order (one task runs in one thread of the runtime; every call below
comes from that thread):

1. ``initialize(context)``: ``self.context`` is a :class:`SourceTaskContext`.
2. ``start(props)``: the task config from ``task_configs``; read committed offsets here through
   ``self.context.offset_storage_reader`` to resume where the last run stopped.
3. ``poll()`` repeatedly: a list of :class:`SourceRecord`, or ``None``/``[]`` when nothing is ready
   (the run ends when every task stays idle for the idle timeout, or at its bound). Don't block
   for long: a poll should return within about a second.
4. ``commit_record(record, metadata)`` for every record returned by ``poll``, once it is durably
   written (exactly-once: once its transaction committed), with its :class:`RecordMetadata`
   (KIP-416); with ``metadata=None`` when a transform filtered it or error tolerance skipped it.
   Exactly-once: every ``commit_record`` of a committed transaction, then ``commit()``, come before
   the task's next ``poll``, on every backend, and also when the run then ends because another task
   failed or was fenced (a committed transaction is always reported; one that did not commit never is).
5. ``commit()`` after each successful commit of offsets (a transaction boundary in exactly-once
   mode, an offset flush in at-least-once mode).
6. ``stop()``: always called once ``start`` returned, also after a failure or fencing. Just before it, when
   every ``poll`` of the run returned nothing, the runtime asks :meth:`SourceTask.nothing_read` why.

Failure: an exception from ``poll`` fails the run; what was committed before stays committed and
nothing after the last commit is committed. A :class:`ProducerFencedError` means a newer instance of
this task took over; the runtime stops this one without committing.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from connect_runtime.api.records import RecordMetadata, SourceRecord

NO_INPUT = "no_input"
""":attr:`NothingRead.reason`: there was no input where the source looked (an empty folder, no row, no table)."""
COMMITTED_BEFORE = "committed_before"
""":attr:`NothingRead.reason`: input was there, and every part of it was committed by an earlier run."""


@dataclass(frozen=True)
class NothingRead:
    """Why a source read nothing in a run: where it looked and what it found there.

    Returned by :meth:`SourceTask.nothing_read` and :meth:`SourceConnector.nothing_read
    <connect_runtime.api.connector.SourceConnector.nothing_read>`; the runtime puts it in the run's result
    (``empty``), so a run that wrote nothing says whether its input was missing or already committed.
    No secrets: ``where`` is shown in logs and XCom (a database URL without its password)."""

    where: str
    """What was looked at, e.g. ``/data/2026-11-28 (pattern *.csv)`` or ``table orders on postgresql://db/dw``."""
    reason: str = NO_INPUT
    """:data:`NO_INPUT` or :data:`COMMITTED_BEFORE`."""
    detail: str = ""
    """One optional sentence more (e.g. ``3 matching files, each read to its end by an earlier run``)."""

    def __post_init__(self) -> None:
        if self.reason not in (NO_INPUT, COMMITTED_BEFORE):
            raise ValueError(f"NothingRead.reason must be {NO_INPUT!r} or {COMMITTED_BEFORE!r}, got {self.reason!r}")

    def message(self) -> str:
        """One sentence naming the place: ``no input found at X`` or ``everything at X was committed before``."""
        head = (f"no input found at {self.where}" if self.reason == NO_INPUT
                else f"everything at {self.where} was committed before")
        return f"{head} ({self.detail})" if self.detail else head


class OffsetStorageReader(abc.ABC):
    """Reads committed source offsets. Partitions and offsets are small JSON-serialisable dicts."""

    @abc.abstractmethod
    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        """The committed offset of one source partition, or ``None`` if none was committed."""

    @abc.abstractmethod
    def offsets(
        self, partitions: Iterable[Mapping[str, Any]]
    ) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
        """``(partition, offset or None)`` for each partition asked for, in the order given
        (dicts are not hashable, so this is a list of pairs rather than a mapping)."""


class TransactionContext(abc.ABC):
    """Lets a task define transaction boundaries (``transaction.boundary=connector``, KIP-618).

    Calls take effect after the current ``poll`` batch has been dispatched: with ``record`` given, the
    transaction ends right after that record; without, after the whole batch.
    """

    @abc.abstractmethod
    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        """Commit the current transaction (after ``record``, or after the current batch)."""

    @abc.abstractmethod
    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        """Abort the current transaction (up to and including ``record``, or the current batch).

        The aborted records are discarded (no reader sees them); their source offsets are still committed, as
        Kafka Connect's ``ExactlyOnceWorkerSourceTask`` does, so the task is not handed the same records again."""


class SourceTaskContext(abc.ABC):
    """What the runtime offers a source task."""

    @property
    @abc.abstractmethod
    def configs(self) -> dict[str, str]:
        """The task's config."""

    @property
    @abc.abstractmethod
    def offset_storage_reader(self) -> OffsetStorageReader:
        """Committed source offsets of this connector."""

    @property
    @abc.abstractmethod
    def transaction_context(self) -> TransactionContext | None:
        """Set only when the run uses ``transaction.boundary=connector``."""


class SourceTask(abc.ABC):
    """Pulls records from an external system. See the module docstring for the lifecycle."""

    context: SourceTaskContext

    def initialize(self, context: SourceTaskContext) -> None:
        self.context = context

    def version(self) -> str:
        return getattr(type(self), "VERSION", "unknown")

    @abc.abstractmethod
    def start(self, props: Mapping[str, str]) -> None:
        """Start with the task config; resume from committed offsets."""

    @abc.abstractmethod
    def poll(self) -> list[SourceRecord] | None:
        """The next records, or ``None``/``[]`` when nothing is ready."""

    def commit(self) -> None:
        """Called after offsets were committed (a transaction boundary or an offset flush)."""

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None = None) -> None:
        """KIP-416: ``record`` was written at ``metadata``; ``None`` when it was filtered or skipped.

        The runtime only calls this on tasks that override it, so the default costs nothing.
        """

    def nothing_read(self) -> NothingRead | None:
        """Where this task looked, when every ``poll`` of the run returned nothing (called once, before
        ``stop``); ``None`` (the default): the task does not say. See :class:`NothingRead`."""
        return None

    def stop(self) -> None:
        """Release resources. Always called once ``start`` returned."""


__all__ = [
    "COMMITTED_BEFORE",
    "NO_INPUT",
    "NothingRead",
    "OffsetStorageReader",
    "SourceTask",
    "SourceTaskContext",
    "TransactionContext",
]
