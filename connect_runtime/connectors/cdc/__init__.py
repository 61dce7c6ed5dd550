"""Change data capture from PostgreSQL (issue 36): Debezium's events, exactly once, in bounded runs.

The design is docs/cdc.md. Where things are: ``_pgoutput`` (the ``pgoutput`` messages decoded from bytes),
``_types`` (column types as Debezium's Connect schemas and values), ``_events`` (Debezium's schemas, envelope and
records), ``_read`` (the snapshot and the stream through server-side cursors), ``_db`` (connections and the slot's
SQL), ``_config`` (the fields), ``_source`` (the connector), ``_task`` (the task; the slot advanced after commits).
"""

from __future__ import annotations

from connect_runtime.connectors.cdc._source import PostgresCdcSource
from connect_runtime.connectors.cdc._task import PostgresCdcTask

__all__ = ["PostgresCdcSource", "PostgresCdcTask"]
