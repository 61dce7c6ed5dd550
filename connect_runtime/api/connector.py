"""Connectors: the planners that turn one connector config into task configs.

Lifecycle, in call order (all calls come from the runtime's main thread):

1. ``initialize(context)``: the runtime hands over the context (``self.context``).
2. ``validate(props)``: checks the raw config against ``config_def()``; the runtime rejects the run
   with one :class:`~connect_runtime.api.errors.ConfigError` naming every invalid field.
3. ``start(props)``: I/O belongs here (never in ``__init__``). A source connector may read committed
   offsets through ``self.context.offset_storage_reader`` (KIP-131) to plan its tasks.
4. ``task_configs(max_tasks)``: at most ``max_tasks`` dicts of string to string, one per task to run.
   An empty list makes an empty, successful run.
5. ``stop()``: always called once ``start`` returned, also when the run fails.

While tasks run, a connector may call ``self.context.request_task_reconfiguration()`` (the runtime
asks ``task_configs`` again after the current run, or at its next planning point) or
``self.context.raise_error(exc)`` (the run fails with ``exc``).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from connect_runtime.api.config import ConfigDef, ConfigValue
from connect_runtime.api.records import TopicPartition

if TYPE_CHECKING:
    from connect_runtime.api.source import NothingRead, OffsetStorageReader


class ExactlyOnceSupport(Enum):
    """What a source connector says about exactly-once delivery (KIP-618)."""

    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"


class ConnectorTransactionBoundaries(Enum):
    """Whether a source connector can define its own transaction boundaries (KIP-618)."""

    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"


class ConnectorContext(abc.ABC):
    """What the runtime offers every connector."""

    @abc.abstractmethod
    def request_task_reconfiguration(self) -> None:
        """Ask the runtime to call ``task_configs`` again (e.g. new input appeared)."""

    @abc.abstractmethod
    def raise_error(self, exc: BaseException) -> None:
        """Fail the run with ``exc``: running tasks stop; nothing uncommitted is committed."""


class SourceConnectorContext(ConnectorContext):
    """KIP-131: a source connector reads committed source offsets, not only its tasks."""

    @property
    @abc.abstractmethod
    def offset_storage_reader(self) -> OffsetStorageReader:
        """Committed source offsets of this connector."""


class SinkConnectorContext(ConnectorContext):
    """The context of a sink connector (nothing beyond :class:`ConnectorContext` yet)."""


class Connector(abc.ABC):
    """Common base of source and sink connectors. See the module docstring for the lifecycle."""

    context: ConnectorContext

    def initialize(self, context: ConnectorContext) -> None:
        self.context = context

    def version(self) -> str:
        """The connector's version string (reported in results and logs)."""
        return getattr(type(self), "VERSION", "unknown")

    @abc.abstractmethod
    def config_def(self) -> ConfigDef:
        """The fields this connector accepts (the runtime adds its own common fields)."""

    def validate(self, props: Mapping[str, Any]) -> list[ConfigValue]:
        """Validate a raw config; the default checks it against ``config_def()``."""
        return self.config_def().validate(props)

    @abc.abstractmethod
    def start(self, props: Mapping[str, str]) -> None:
        """Start with the validated raw config."""

    @abc.abstractmethod
    def task_class(self) -> type:
        """The ``SourceTask`` or ``SinkTask`` subclass that runs this connector's work."""

    @abc.abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """At most ``max_tasks`` task configs; an empty list is an empty, successful run."""

    def stop(self) -> None:
        """Release what ``start`` acquired. Called once, also after a failure."""


class SourceConnector(Connector):
    """A connector that pulls from an external system into topics."""

    context: SourceConnectorContext

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """Whether this connector can run exactly-once. ``None`` (the default) means unknown, which
        ``exactly.once.support=required`` treats as unsupported."""
        return None

    def can_define_transaction_boundaries(
        self, props: Mapping[str, str]
    ) -> ConnectorTransactionBoundaries:
        """Whether ``transaction.boundary=connector`` is allowed for this config."""
        return ConnectorTransactionBoundaries.UNSUPPORTED

    def nothing_read(self) -> NothingRead | None:
        """Where the connector looked, when the run committed no record (called once, before ``stop``):
        e.g. it found nothing to plan, so no task ran. ``None`` (the default): it does not say. A task's own
        :meth:`SourceTask.nothing_read <connect_runtime.api.source.SourceTask.nothing_read>` comes first."""
        return None


@dataclass(frozen=True)
class DestinationOffsets:
    """What a sink that keeps its offsets in its destination holds there (see
    :meth:`SinkConnector.read_offsets`)."""

    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    """The next offset to write per topic partition (partitions never written are absent)."""
    generation: int = -1
    """The newest run generation recorded in the destination (``-1``: none). A new run of the
    connector starts above it, so a replaced offsets store (a new ``AIRFLOW_HOME``, SQLite to Kafka)
    continues from the destination instead of being refused there as a zombie."""
    where: str = ""
    """Where they live, for messages (no secrets): ``table pyconnect_sink_offsets on postgresql://db/dw``."""


class SinkConnector(Connector):
    """A connector that pushes topics into an external system.

    A sink that keeps its offsets in its destination (written in the same transaction or atomic step
    as the data; ``pre_commit`` returns ``{}``) overrides :meth:`read_offsets` and
    :meth:`alter_offsets` (KIP-875's ``SinkConnector.alterOffsets``), so offsets management (the
    admin API, ``pyconnect offsets``, the Connectors view) reads and changes the real position, and a
    new run's generation starts above the destination's. Both are called on an instance that was
    initialised but **not started**, with the connector's full config.
    """

    context: SinkConnectorContext

    def read_offsets(self, connector_config: Mapping[str, Any]) -> DestinationOffsets | None:
        """The offsets this connector keeps in its destination; ``None`` (the default): it keeps none
        there and the consumer group's committed offsets are the truth."""
        return None

    def alter_offsets(self, connector_config: Mapping[str, Any],
                      offsets: Mapping[TopicPartition, int | None], generation: int) -> bool:
        """KIP-875: set (an int: the next offset to write) or reset (``None``) these partitions' offsets
        in the destination, as ``generation`` (a generation the runtime just began for this alteration:
        writing it there fences every older run). Returns ``True`` when it did; ``False`` (the
        default) when the connector keeps no offsets there (the runtime alters the group's instead).
        Raise :class:`~connect_runtime.api.errors.ConnectError` to refuse, saying why and what to do."""
        return False


__all__ = [
    "Connector",
    "ConnectorContext",
    "ConnectorTransactionBoundaries",
    "DestinationOffsets",
    "ExactlyOnceSupport",
    "SinkConnector",
    "SinkConnectorContext",
    "SourceConnector",
    "SourceConnectorContext",
]
