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
6. ``stop()``: always called once ``start`` returned, also after a failure or fencing.

Failure: an exception from ``poll`` fails the run; what was committed before stays committed and
nothing after the last commit is committed. A :class:`ProducerFencedError` means a newer instance of
this task took over; the runtime stops this one without committing.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from typing import Any

from connect_runtime.api.records import RecordMetadata, SourceRecord


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

    def stop(self) -> None:
        """Release resources. Always called once ``start`` returned."""


__all__ = ["OffsetStorageReader", "SourceTask", "SourceTaskContext", "TransactionContext"]
