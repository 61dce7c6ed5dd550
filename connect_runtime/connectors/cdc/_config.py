"""PostgresCdcSource's config: the SQL connectors' ``connection.*`` fields and Debezium's names for the rest."""

from __future__ import annotations

import re
from typing import Any

from connect_runtime.api.config import ConfigDef, Importance, Range, Type
from connect_runtime.connectors.sql._common import connection_fields

SNAPSHOT_MODES = ("initial", "initial_only", "no_data", "always", "when_needed", "never")
"""Debezium 3.6's ``snapshot.mode`` values this connector offers (``never``: ``no_data``'s old name, deprecated)."""
_REFUSED_MODES = ("configuration_based", "custom")

_SLOT = re.compile(r"[a-z0-9_]{1,63}")
_PREFIX = re.compile(r"[A-Za-z0-9._-]+")
_TABLE = re.compile(r"[^.\s\"]+(\.[^.\s\"]+)?")


def _slot_name(name: str, value: Any) -> None:
    if value is not None and not _SLOT.fullmatch(str(value)):
        raise ValueError(f"a replication slot name: 1 to 63 lower-case letters, digits and underscores "
                         f"(PostgreSQL's rule), got {value!r}")


def _identifier(name: str, value: Any) -> None:
    if value is not None and not (0 < len(str(value)) <= 63 and '"' not in str(value) and "\x00" not in str(value)):
        raise ValueError(f"a PostgreSQL name of 1 to 63 characters without '\"', got {value!r}")


def _snapshot_mode(name: str, value: Any) -> None:
    if value is None or str(value) in SNAPSHOT_MODES:
        return
    also = (f" (Debezium's {value!r} needs its Java snapshotter SPI, which this connector does not load)"
            if str(value) in _REFUSED_MODES else "")
    raise ValueError(f"one of {', '.join(SNAPSHOT_MODES[:-1])} (never: no_data's deprecated name), got "
                     f"{value!r}{also}")


def _topic_prefix(name: str, value: Any) -> None:
    if value is None or not _PREFIX.fullmatch(str(value)):
        raise ValueError(f"a topic prefix of letters, digits, '.', '_' and '-' (Debezium's rule), got {value!r}")


def _tables(name: str, value: Any) -> None:
    bad = [t for t in value or [] if not _TABLE.fullmatch(str(t))]
    if bad:
        raise ValueError(f"tables as schema.table or table (for public.table), got {', '.join(map(repr, bad))}")


CDC_CONFIG = (
    connection_fields(ConfigDef())
    .define("topic.prefix", Type.STRING, validator=_topic_prefix, importance=Importance.HIGH,
            doc="Debezium's logical server name: topics are <topic.prefix>.<schema>.<table>, schema names "
                "<topic.prefix>.<schema>.<table>.Key/Value/Envelope, and the source partition {\"server\": prefix}.")
    .define("table.include.list", Type.LIST, default=[], validator=_tables, importance=Importance.HIGH,
            doc="Tables to capture, schema.table or table (public.table); exact names (Debezium's are regular "
                "expressions). Empty: every table of the publication (created FOR ALL TABLES when missing).")
    .define("slot.name", Type.STRING, default="debezium", validator=_slot_name,
            doc="The logical replication slot (pgoutput) this connector reads and advances; it belongs to this "
                "connector alone. Debezium's default.")
    .define("publication.name", Type.STRING, default="dbz_publication", validator=_identifier,
            doc="The publication whose tables are captured; created FOR TABLE table.include.list when missing, "
                "used as it is when present. Debezium's default.")
    .define("snapshot.mode", Type.STRING, default="initial", validator=_snapshot_mode,
            doc="Debezium's: initial: read every table once in the slot's exported snapshot (op r), then stream; "
                "initial_only: that snapshot and nothing more (later runs read nothing); no_data (never, "
                "deprecated): stream only, from when the slot was created; always: a new slot and snapshot at "
                "every run, then the stream from it (the changes between runs are not captured one by one); "
                "when_needed: as initial, and a new snapshot (with a WARNING) when the slot is gone or "
                "invalidated instead of an error. configuration_based and custom are refused.")
    .define("heartbeat.interval.ms", Type.INT, default=0, validator=Range.at_least(0),
            doc="Debezium's heartbeats: 0 (the default) writes none; above 0, a heartbeat record (topic "
                "<topic.heartbeat.prefix>.<topic.prefix>, key {serverName}, value {ts_ms}) carrying the current "
                "offset at most this often while streaming, and one at the end of a run whose position moved "
                "past the committed offset without a captured change (an idle captured database).")
    .define("topic.heartbeat.prefix", Type.STRING, default="__debezium-heartbeat", validator=_topic_prefix,
            doc="The heartbeat topic's prefix, Debezium's default.")
    .define("heartbeat.action.query", Type.STRING, default=None,
            doc="A statement run on the captured database at the start of each run (before the run takes its "
                "target LSN) when heartbeat.interval.ms is above 0, e.g. an update of a captured heartbeat table, "
                "so an idle captured database shows a change. Debezium runs it at every heartbeat.")
    .define("batch.max.rows", Type.INT, default=1000, validator=Range.at_least(1),
            doc="Rows (snapshot) or changes (stream) per poll at most.")
    .define("extended.headers.enabled", Type.BOOLEAN, default=True,
            doc="Debezium's: every record carries the headers __debezium.context.connectorLogicalName (topic.prefix), "
                ".taskId, .connectorName (postgresql) and .runId (one per run).")
)


def snapshot_mode(cfg: dict[str, Any]) -> str:
    """``snapshot.mode``, ``never`` read as ``no_data`` (its current name in Debezium)."""
    mode = str(cfg["snapshot.mode"])
    return "no_data" if mode == "never" else mode


def tables_of(cfg: dict[str, Any]) -> list[str]:
    """``table.include.list`` as ``schema.table`` names (``public`` where no schema is given), in the order given."""
    return [t if "." in t else f"public.{t}" for t in (str(x).strip() for x in cfg["table.include.list"]) if t]


__all__ = ["CDC_CONFIG", "SNAPSHOT_MODES", "snapshot_mode", "tables_of"]
