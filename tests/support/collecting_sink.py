"""``CollectingSink``: an in-process test sink that keeps what ``put`` was handed, Connect values included.

Each record's ``(topic, partition, offset, value schema name, to_plain(value))`` is appended to :data:`COLLECTED`
under the connector's ``name`` (a Struct becomes a dict, so tests compare plain data); the runtime's own offsets
are committed as usual (``pre_commit`` returns what it is given).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_runtime.api import ConfigDef, SinkConnector, SinkRecord, SinkTask
from connect_runtime.api.data import Struct, to_plain

COLLECTED: dict[str, list[tuple[str, int, int, str | None, Any]]] = {}


class _CollectingTask(SinkTask):
    def start(self, props: Mapping[str, Any]) -> None:
        self.name = str(props["name"])

    def put(self, records: list[SinkRecord]) -> None:
        out = COLLECTED.setdefault(self.name, [])
        for r in records:
            schema = r.value_schema if r.value_schema is not None else (
                r.value.schema if isinstance(r.value, Struct) else None)
            out.append((r.topic, r.partition, r.offset, schema.name if schema is not None else None,
                        to_plain(r.value)))


class CollectingSink(SinkConnector):
    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def start(self, props: Mapping[str, Any]) -> None:
        self.props = dict(props)

    def task_class(self) -> type:
        return _CollectingTask

    def task_configs(self, max_tasks: int) -> list[dict[str, Any]]:
        return [dict(self.props)]
