"""Debezium's heartbeat records: topic ``<topic.heartbeat.prefix>.<topic.prefix>``, key Struct
``io.debezium.connector.common.ServerNameKey`` (``serverName``), value Struct ``io.debezium.connector.common.Heartbeat``
(``ts_ms``), both version 1 as Debezium 3.6's ``SchemaFactory`` builds them, partition 0, the connector's source
partition and an offset (docs/cdc.md, "Heartbeats")."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from connect_runtime.api.data import Schema, SchemaBuilder, Struct
from connect_runtime.api.records import SourceRecord

KEY_SCHEMA = (SchemaBuilder.struct().name("io.debezium.connector.common.ServerNameKey").version(1)
              .field("serverName", Schema.STRING_SCHEMA).build())
VALUE_SCHEMA = (SchemaBuilder.struct().name("io.debezium.connector.common.Heartbeat").version(1)
                .field("ts_ms", Schema.INT64_SCHEMA).build())


def heartbeat(heartbeat_prefix: str, prefix: str, offset: Mapping[str, Any]) -> SourceRecord:
    """A heartbeat record of the connector ``prefix`` (Debezium's logical server name) carrying ``offset``."""
    return SourceRecord(source_partition={"server": prefix}, source_offset=dict(offset),
                        topic=f"{heartbeat_prefix}.{prefix}", partition=0,
                        key=Struct.from_values(KEY_SCHEMA, [prefix]), key_schema=KEY_SCHEMA,
                        value=Struct.from_values(VALUE_SCHEMA, [time.time_ns() // 1_000_000]),
                        value_schema=VALUE_SCHEMA)


def moved_offset(base: Mapping[str, Any] | None, lsn: int) -> dict[str, Any]:
    """The offset of a heartbeat at ``lsn``: ``base`` (the last record's offset, or the committed one) with ``lsn``
    and ``lsn_proc`` moved there and the snapshot keys left out (the snapshot is over). The keys that say which
    changes are written (``tx_commit_lsn``, ``event``, ``tx_end_lsn``, and Debezium's ``lsn_commit``) stay as they
    are: everything before ``lsn`` that they do not cover had nothing to write."""
    out = {k: v for k, v in (base or {}).items() if k not in ("snapshot", "last_snapshot_record")}
    out.update(lsn=lsn, lsn_proc=lsn, ts_usec=time.time_ns() // 1000)
    return out


__all__ = ["KEY_SCHEMA", "VALUE_SCHEMA", "heartbeat", "moved_offset"]
