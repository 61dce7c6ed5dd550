"""Sink tasks and what the runtime offers them.

``SinkTask`` lifecycle, in call order (one task runs in one thread of the runtime; every call below
comes from that thread):

1. ``initialize(context)``: ``self.context`` is a :class:`SinkTaskContext`.
2. ``start(props)``: the task config.
3. ``open(partitions)``: the partitions assigned to this task. A connector that keeps its offsets in
   its destination rewinds here with ``self.context.offset({tp: next_offset})``.
4. ``put(records)`` repeatedly, possibly many times between commits. Raise
   :class:`RetriableError` to get the same records again (as Kafka Connect does, by default): after
   ``self.context.timeout(ms)`` if the task set it, else after an exponential backoff. Redelivery is
   bounded (``errors.retry.timeout`` when positive, else the run's ``max_seconds``, else 5 minutes);
   then the run fails naming what it waited for. Any other exception fails the run and commits
   nothing new.
5. At each commit point: ``pre_commit(current_offsets)`` returns the offsets the runtime commits
   for the group (next offset to read, per partition); ``{}`` commits nothing. The default flushes
   and returns ``current_offsets``. Offsets beyond what the task was given, and partitions not
   assigned to it, are ignored with a warning (Kafka Connect does the same). If ``flush`` /
   ``pre_commit`` raises, the runtime rewinds every partition to its last committed offset and
   delivers those records again, within the same bound as ``put`` retries.
   ``self.context.is_closing()`` is true while ``pre_commit`` runs for the run's final commit or for
   partitions being taken away (KIP-275; Kafka Connect proposed this but never shipped it: it is
   this runtime's own).
6. ``close(partitions)`` when partitions are taken away or the run ends.
7. ``stop()``: always called once ``start`` returned, also after a failure.

Offsets in ``current_offsets`` and in what ``pre_commit`` returns are the next offset to read (the
last delivered offset + 1), as in Kafka.

Generations (zombie fencing): every run of a sink connector is a new **generation**
(``self.context.generation``, an int that grows with every run, known from ``initialize`` on). A
newer run fences the older one's group-offset commits: the older run's next commit fails and
commits nothing. A task that keeps its offsets in its destination (returns ``{}`` from
``pre_commit``) gets no such protection from the runtime: it stores the generation next to its
offsets and refuses to write once a newer generation has written (see ``FileSink``).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping

from connect_runtime.api.records import SinkRecord, TopicPartition


class ErrantRecordReporter(abc.ABC):
    """KIP-610: report a record the task cannot write; it goes to the dead letter queue (when
    ``errors.tolerance=all``), or fails the run (``errors.tolerance=none``)."""

    @abc.abstractmethod
    def report(self, record: SinkRecord, error: BaseException) -> None:
        """Report ``record`` as failed with ``error``; returns once it is handled."""


class SinkTaskContext(abc.ABC):
    """What the runtime offers a sink task."""

    @property
    @abc.abstractmethod
    def configs(self) -> dict[str, str]:
        """The task's config."""

    @abc.abstractmethod
    def offset(
        self, offsets: Mapping[TopicPartition, int] | TopicPartition, offset: int | None = None
    ) -> None:
        """Rewind (or skip) to offsets: ``offset({tp: n})`` or ``offset(tp, n)``; the next record of
        ``tp`` delivered is the one at ``n``."""

    @abc.abstractmethod
    def assignment(self) -> set[TopicPartition]:
        """The partitions currently assigned to this task."""

    @abc.abstractmethod
    def pause(self, *partitions: TopicPartition) -> None:
        """Stop delivering records of these partitions until ``resume``."""

    @abc.abstractmethod
    def resume(self, *partitions: TopicPartition) -> None:
        """Deliver records of these partitions again."""

    @abc.abstractmethod
    def request_commit(self) -> None:
        """Ask for a commit point after the current ``put``."""

    @property
    @abc.abstractmethod
    def generation(self) -> int:
        """This run's generation of the sink connector (>= 0, larger for every newer run)."""

    @abc.abstractmethod
    def timeout(self, timeout_ms: int) -> None:
        """Wait ``timeout_ms`` before the records of a ``put`` that raised :class:`RetriableError`
        are delivered again (applies to the next redelivery only; Kafka Connect's
        ``SinkTaskContext.timeout``)."""

    @abc.abstractmethod
    def is_closing(self) -> bool:
        """True only while ``pre_commit`` runs for the final commit or a partition revocation."""

    @property
    @abc.abstractmethod
    def errant_record_reporter(self) -> ErrantRecordReporter | None:
        """The reporter for records the task cannot write (KIP-610)."""


class SinkTask(abc.ABC):
    """Pushes records into an external system. See the module docstring for the lifecycle."""

    context: SinkTaskContext

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    def version(self) -> str:
        return getattr(type(self), "VERSION", "unknown")

    @abc.abstractmethod
    def start(self, props: Mapping[str, str]) -> None:
        """Start with the task config."""

    def open(self, partitions: list[TopicPartition]) -> None:
        """Partitions were assigned to this task."""

    @abc.abstractmethod
    def put(self, records: list[SinkRecord]) -> None:
        """Write (or buffer) records. May be called many times per commit."""

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        """Make everything passed to ``put`` so far durable."""

    def pre_commit(self, current_offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The offsets to commit: by default flush, then everything delivered. Return ``{}`` when
        the connector keeps its offsets in its destination (exactly-once)."""
        self.flush(current_offsets)
        return dict(current_offsets)

    def close(self, partitions: list[TopicPartition]) -> None:
        """Partitions are taken away (or the run ends): drop their state."""

    def stop(self) -> None:
        """Release resources. Always called once ``start`` returned."""


__all__ = ["ErrantRecordReporter", "SinkTask", "SinkTaskContext"]
