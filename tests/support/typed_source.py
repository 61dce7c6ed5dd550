"""A source connector of typed records for the schema pipeline tests: ``ShipmentSource`` writes Structs of a
flat Connect schema (every column type a SQL table and a Spark DataFrame hold: integers, a decimal, a date, a
timestamp, optional fields) with ``value_schema`` set, so a schema-aware value converter (the AvroConverter)
registers and writes it.

Config: ``topic``; ``schema`` (``v1``; ``v2`` adds an optional field, a BACKWARD-compatible change; ``v3`` adds a
required field with no default, an incompatible one); ``first.id`` and ``count`` (ids ``first.id`` ..
``first.id + count - 1``). One task, source partition ``{"topic": topic, "schema": schema}``, offset ``{"id": next}``:
a run of the same name resumes after what it committed. :func:`shipment` is record ``i``'s value, for the checks.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config import ConfigDef, Range, Type, ValidString
from connect_runtime.api.connector import SourceConnector
from connect_runtime.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Timestamp
from connect_runtime.api.records import SourceRecord
from connect_runtime.api.source import SourceTask


def _shipment_schema(version: int) -> Schema:
    b = (SchemaBuilder.struct().name("shop.Shipment").version(version)
         .field("id", Schema.INT64_SCHEMA)
         .field("customer", Schema.STRING_SCHEMA)
         .field("qty", Schema.INT32_SCHEMA)
         .field("amount", Decimal.builder(2).parameter("connect.decimal.precision", "10"))
         .field("weight", Schema.OPTIONAL_FLOAT64_SCHEMA)
         .field("express", Schema.BOOLEAN_SCHEMA)
         .field("day", Date.schema())
         .field("shipped_at", Timestamp.schema())
         .field("note", Schema.OPTIONAL_STRING_SCHEMA))
    if version >= 2:
        b = b.field("carrier", Schema.OPTIONAL_STRING_SCHEMA)
    if version >= 3:
        b = b.field("zone", Schema.INT32_SCHEMA)
    return b.build()


SHIPMENT_SCHEMAS = {"v1": _shipment_schema(1), "v2": _shipment_schema(2), "v3": _shipment_schema(3)}


def shipment(i: int, version: str = "v1") -> Struct:
    """Record ``i``: every fourth leaves the optional fields null; amounts and instants are exact."""
    schema = SHIPMENT_SCHEMAS[version]
    full = i % 4 != 3
    s = Struct(schema)
    s.put("id", i).put("customer", f"c-{i % 7}é").put("qty", i * 3 - 10)
    s.put("amount", decimal.Decimal(f"{i * 98765 % 10000000}.{i % 100:02d}"))
    s.put("weight", i / 8 if full else None).put("express", i % 2 == 0)
    s.put("day", dt.date(2026, 11, 1) + dt.timedelta(days=i % 30))
    s.put("shipped_at", dt.datetime(2026, 11, 26, 8, 0, tzinfo=dt.UTC) + dt.timedelta(minutes=i, milliseconds=i))
    s.put("note", f"note {i}" if full else None)
    if "carrier" in {f.name for f in schema.fields}:
        s.put("carrier", f"carrier-{i % 3}" if full else None)
    if "zone" in {f.name for f in schema.fields}:
        s.put("zone", i % 5)
    s.validate()
    return s


CONFIG = (
    ConfigDef()
    .define("topic", Type.STRING, doc="Topic to write to.")
    .define("schema", Type.STRING, default="v1", validator=ValidString.in_(*SHIPMENT_SCHEMAS),
            doc="Which version of the shipment schema the records have.")
    .define("first.id", Type.LONG, default=0, validator=Range.at_least(0), doc="The first record's id.")
    .define("count", Type.LONG, default=10, validator=Range.at_least(0), doc="How many records to write.")
)


class ShipmentSource(SourceConnector):
    def config_def(self) -> ConfigDef:
        return CONFIG

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type:
        return ShipmentTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


class ShipmentTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        v = CONFIG.parse(props)
        self.topic, self.version = str(v["topic"]), str(v["schema"])
        self.end = int(v["first.id"]) + int(v["count"])
        self.partition = {"topic": self.topic, "schema": self.version}
        committed = self.context.offset_storage_reader.offset(self.partition)
        self.next = int(committed["id"]) if committed else int(v["first.id"])

    def poll(self) -> list[SourceRecord] | None:
        if self.next >= self.end:
            return None
        ids = range(self.next, min(self.next + 100, self.end))
        self.next = ids[-1] + 1
        schema = SHIPMENT_SCHEMAS[self.version]
        return [SourceRecord(source_partition=self.partition, source_offset={"id": i + 1}, topic=self.topic,
                             key=None, value=shipment(i, self.version), value_schema=schema) for i in ids]

    def stop(self) -> None:
        pass


def shipment_values(first: int, count: int, version: str = "v1") -> list[dict[str, Any]]:
    """The records' values as plain dicts (field name to Python value), in id order."""
    return [dict(shipment(i, version)) for i in range(first, first + count)]
