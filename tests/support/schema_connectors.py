"""Connectors that hand over and receive records with Connect schemas, for the runtime tests of schemas.

:class:`StructSource` writes ``count`` orders (a Struct of :data:`ORDER`, key a STRING) per task and then stays
idle; :class:`CollectingSink` keeps every SinkRecord it is given in :data:`RECEIVED` under its ``probe``, and
reports (errant record reporter) those whose ``id`` is in ``report.ids``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import threading
from collections.abc import Mapping
from typing import Any

from connect_runtime.api import (
    ConfigDef,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Type,
)
from connect_runtime.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Timestamp

ORDER = (SchemaBuilder.struct().name("shop.Order").version(1)
         .field("id", Schema.INT64_SCHEMA)
         .field("amount", Decimal.schema(2))
         .field("day", Date.schema())
         .field("at", Timestamp.schema())
         .field("note", Schema.OPTIONAL_STRING_SCHEMA)
         .build())
RECEIVED: dict[str, list[SinkRecord]] = {}
_LOCK = threading.Lock()


def order(n: int) -> Struct:
    return Struct(ORDER, {"id": n, "amount": decimal.Decimal(n).scaleb(-2) - decimal.Decimal("0.50"),
                          "day": dt.date(2024, 1, 1) + dt.timedelta(days=n),
                          "at": dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=n),
                          "note": None if n % 2 else f"n{n}"})


_SOURCE = (ConfigDef().define("topic", Type.STRING, doc="Topic.")
           .define("count", Type.INT, default=10, doc="Orders per task."))


class StructSourceTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.topic = props["topic"]
        self.count = int(props.get("count", "10"))
        self.n = 0

    def poll(self) -> list[SourceRecord] | None:
        if self.n >= self.count:
            return None
        out = []
        while self.n < self.count and len(out) < 4:
            out.append(SourceRecord(source_partition={"orders": 0}, source_offset={"n": self.n + 1},
                                    topic=self.topic, key=f"o{self.n}", key_schema=Schema.STRING_SCHEMA,
                                    value=order(self.n), value_schema=ORDER))
            self.n += 1
        return out

    def stop(self) -> None:
        pass


class StructSource(SourceConnector):
    def config_def(self) -> ConfigDef:
        return _SOURCE

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type:
        return StructSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


_SINK = (ConfigDef().define("probe", Type.STRING, doc="RECEIVED key.")
         .define("report.ids", Type.LIST, default=[], doc="Orders reported as failed."))


class CollectingSinkTask(SinkTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.probe = props["probe"]
        self.report = {int(x) for x in (props.get("report.ids") or "").split(",") if x}

    def put(self, records: list[SinkRecord]) -> None:
        kept: list[Any] = []
        for r in records:
            if isinstance(r.value, Struct) and r.value["id"] in self.report:
                reporter = self.context.errant_record_reporter
                assert reporter is not None
                reporter.report(r, ValueError(f"cannot store order {r.value['id']}"))
            else:
                kept.append(r)
        with _LOCK:
            RECEIVED.setdefault(self.probe, []).extend(kept)

    def stop(self) -> None:
        pass


class CollectingSink(SinkConnector):
    def config_def(self) -> ConfigDef:
        return _SINK

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type:
        return CollectingSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass
