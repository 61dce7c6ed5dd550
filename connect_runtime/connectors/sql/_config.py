"""SqlSink's configuration (Kafka Connect JDBC sink's names; the package docstring says what each does), shared
by the connector and its tasks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config import ConfigDef, Importance, Range, Type, ValidString, non_empty_string
from connect_runtime.api.errors import ConfigError
from connect_runtime.connectors.sql._common import connection_fields
from connect_runtime.connectors.sql._fence import OFFSETS_TABLE

SINK_CONFIG = (
    connection_fields(ConfigDef())
    .define("table.name.format", Type.STRING, default="${topic}", validator=non_empty_string,
            doc="Destination table per topic; ${topic} is replaced by the record's topic.")
    .define("insert.mode", Type.STRING, default="insert", validator=ValidString.in_("insert", "upsert", "update"),
            importance=Importance.HIGH,
            doc="insert: INSERT (COPY on PostgreSQL); upsert: insert or update by key; update: update by key.")
    .define("pk.mode", Type.STRING, default="none", validator=ValidString.in_("none", "record_key", "record_value"),
            importance=Importance.HIGH, doc="Where the primary key comes from.")
    .define("pk.fields", Type.LIST, default=[],
            doc="Key columns: for record_key, the key's fields (a primitive key needs exactly one name; default all "
                "fields of an object key); for record_value, the value's fields (default all).")
    .define("auto.create", Type.BOOLEAN, default=False, doc="Create a missing table from the first records.")
    .define("auto.evolve", Type.BOOLEAN, default=False, doc="Add a nullable column for a field the table lacks.")
    .define("delete.enabled", Type.BOOLEAN, default=False,
            doc="A record with a null value deletes the row of its key (needs pk.mode=record_key).")
    .define("batch.size", Type.INT, default=3000, validator=Range.at_least(1),
            doc="Rows written per statement (or COPY) at most; commits happen at the runtime's commit points.")
    .define("offsets.table.name", Type.STRING, default=OFFSETS_TABLE, validator=non_empty_string,
            doc="Table (in the destination) holding the sink's consumed offsets and generation.")
    .define("max.retries", Type.INT, default=10, validator=Range.at_least(0),
            doc="Times in a row a lost or restarting database is retried (the JDBC sink's name) before the run "
                "fails; each retry rolls back, waits retry.backoff.ms and delivers again from the last commit.")
    .define("retry.backoff.ms", Type.INT, default=3000, validator=Range.at_least(0),
            doc="Wait before each such retry (the JDBC sink's name). A database that stays down fails the run "
                "after about max.retries x (retry.backoff.ms + connecting) ms, bounded by errors.retry.timeout.")
)


def connector_name(props: Mapping[str, Any]) -> str:
    return str(props.get("name") or "sql-sink")


def cross_check(cfg: Mapping[str, Any]) -> dict[str, str]:
    errors: dict[str, str] = {}
    mode, pk = str(cfg["insert.mode"]).lower(), str(cfg["pk.mode"]).lower()
    if mode in ("upsert", "update") and pk == "none":
        errors["pk.mode"] = f"record_key or record_value (insert.mode={mode} needs a key)"
    if cfg["delete.enabled"] and pk != "record_key":
        errors["delete.enabled"] = "false, or pk.mode=record_key (a delete is found by the record key)"
    return errors


def parse(props: Mapping[str, Any]) -> dict[str, Any]:
    """The config parsed and cross-checked (a :class:`ConfigError` naming every bad field)."""
    cfg = SINK_CONFIG.parse(props)
    errors = cross_check(cfg)
    if errors:
        raise ConfigError(errors=errors)
    return cfg


__all__ = ["SINK_CONFIG", "connector_name", "cross_check", "parse"]
