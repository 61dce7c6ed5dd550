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

    # -- what the destination is (the provider's lineage: docs/lineage.md) -------------------------------------

    def table_columns(self, connector_config: Mapping[str, Any], topics: list[str]) -> dict[str, dict[str, Any]]:
        """Per topic, its table as the database describes it: ``{"table": name, "schema": schema or None,
        "database": name, "columns": [(column, SQL type), ...]}`` (called on a connector that is not started, after
        a run). A table that does not exist is left out; a database that cannot be reached raises."""
        import sqlalchemy as sa

        cfg = parse(connector_config)
        engine = create_engine(cfg)
        out: dict[str, dict[str, Any]] = {}
        try:
            with connect(engine, cfg, "describing the tables", attempts=1) as conn:
                inspector = sa.inspect(conn)
                for topic in topics:
                    name = str(cfg["table.name.format"]).replace("${topic}", topic)
                    table, schema = (name.split(".", 1)[::-1] if "." in name else (name, None))
                    if not inspector.has_table(table, schema=schema):
                        continue
                    if schema is None and conn.dialect.name == "postgresql":
                        schema = conn.exec_driver_sql("SELECT current_schema()").scalar()
                    columns = [(str(c["name"]), str(c["type"])) for c in inspector.get_columns(table, schema=schema)]
                    out[topic] = {"table": table, "schema": schema, "database": engine.url.database,
                                  "columns": columns}
        finally:
            engine.dispose()
        return out

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        # PASSWORD values stay Password objects (the runtime hands them over as they are)
        return [cast("dict[str, str]", dict(self._props)) for _ in range(max_tasks)]


__all__ = ["OFFSETS_TABLE", "SINK_CONFIG", "SqlSink", "SqlSinkTask"]
