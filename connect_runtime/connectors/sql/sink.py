"""SqlSink, the connector: validates the config, checks the destination once, hands every task the same
config; its offsets, kept in the destination, are read and altered here (KIP-875). The task is
:class:`connect_runtime.connectors.sql._task.SqlSinkTask`; the rules are in the package docstring."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from connect_runtime.api.config import ConfigDef, ConfigValue
from connect_runtime.api.connector import DestinationOffsets, SinkConnector
from connect_runtime.api.records import TopicPartition
from connect_runtime.connectors.sql._common import VERSION, connect, create_engine
from connect_runtime.connectors.sql._config import SINK_CONFIG, connector_name, cross_check, parse
from connect_runtime.connectors.sql._fence import OFFSETS_TABLE, alter_offsets, read_offsets
from connect_runtime.connectors.sql._task import SqlSinkTask


class SqlSink(SinkConnector):
    """Writes topics into tables; every task keeps its offsets in the destination's offsets table."""

    VERSION = VERSION

    def config_def(self) -> ConfigDef:
        return SINK_CONFIG

    def validate(self, props: Mapping[str, Any]) -> list[ConfigValue]:
        values = super().validate(props)
        if any(cv.errors for cv in values):
            return values
        errors = cross_check({cv.name: cv.value for cv in values})
        for cv in values:
            if cv.name in errors:
                cv.errors.append(f"expected {errors[cv.name]}")
        return values

    def start(self, props: Mapping[str, str]) -> None:
        cfg = parse(props)
        self._props = {k: v for k, v in props.items() if k in SINK_CONFIG.keys or k == "name"}
        engine = create_engine(cfg)
        try:
            connect(engine, cfg, "checking the destination").close()  # fail fast, bounded
        finally:
            engine.dispose()

    def task_class(self) -> type:
        return SqlSinkTask

    # -- KIP-875: the offsets kept in the destination (called on a connector that is not started) -------

    def read_offsets(self, connector_config: Mapping[str, Any]) -> DestinationOffsets:
        """The stored next offsets and the newest generation
        (:func:`connect_runtime.connectors.sql._fence.read_offsets`)."""
        return read_offsets(parse(connector_config), connector_name(connector_config))

    def alter_offsets(self, connector_config: Mapping[str, Any], offsets: Mapping[TopicPartition, int | None],
                      generation: int) -> bool:
        """Set or reset partitions' offsets as ``generation``, fencing older runs
        (:func:`connect_runtime.connectors.sql._fence.alter_offsets`)."""
        alter_offsets(parse(connector_config), connector_name(connector_config), offsets, generation)
        return True

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        # PASSWORD values stay Password objects (the runtime hands them over as they are)
        return [cast("dict[str, str]", dict(self._props)) for _ in range(max_tasks)]


__all__ = ["OFFSETS_TABLE", "SINK_CONFIG", "SqlSink", "SqlSinkTask"]
