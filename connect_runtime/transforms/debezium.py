"""``ExtractNewRecordState``: Debezium's change event envelope flattened to the row (Debezium's SMT of that name,
``io.debezium.transforms.ExtractNewRecordState``), for sinks that want rows.

- a create, update or snapshot read (``op`` c, u, r) becomes the ``after`` row, with its schema (the envelope's
  ``after`` schema, e.g. ``<prefix>.<schema>.<table>.Value``);
- a delete (``op`` d): ``delete.handling.mode=drop`` (the default) drops it; ``none`` keeps it with a null value;
  ``rewrite`` keeps it as the ``before`` row plus ``__deleted: "true"`` (and every other row gets
  ``__deleted: "false"``);
- a tombstone (null value): dropped when ``drop.tombstones`` (the default), else kept;
- ``add.fields``: metadata added to the row as ``<add.fields.prefix><name>`` (``__`` by default): ``op``,
  ``ts_ms`` and the other envelope fields by name, a source field by name (``table``, ``lsn``) or as
  ``source.<field>`` (added as ``__source_<field>``);
- a record whose value is not an envelope (no ``op``: a heartbeat, another connector's record) passes unchanged.

Works on Structs with their schema (the new schema built once per input schema) and on schemaless dicts (what the
JSON converter reads back without schemas). Not here (yet): ``add.headers``, ``route.by.field``,
``drop.fields.*``, ``replace.null.with.default``, and Debezium 2.5's ``delete.tombstone.handling.mode``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config import ConfigDef, Type, ValidString
from connect_runtime.api.data import Schema, Struct
from connect_runtime.api.errors import DataError
from connect_runtime.api.records import ConnectRecord
from connect_runtime.api.transforms import Transformation
from connect_runtime.transforms._base import SchemaCache, describe, replaced, struct_builder

DELETED = "deleted"

CONFIG = (
    ConfigDef()
    .define("drop.tombstones", Type.BOOLEAN, default=True,
            doc="Drop the tombstone that follows each delete (true, Debezium's default) or keep it.")
    .define("delete.handling.mode", Type.STRING, default="drop", validator=ValidString.in_("drop", "none", "rewrite"),
            doc="drop: delete events are dropped; none: kept with a null value; rewrite: kept as the before row "
                "with __deleted=true (every row gets __deleted).")
    .define("add.fields", Type.LIST, default=[],
            doc="Envelope or source fields to add to the row (op, ts_ms, table, lsn, source.ts_ms, ...), each as "
                "<add.fields.prefix><name> (a dot becomes an underscore).")
    .define("add.fields.prefix", Type.STRING, default="__", doc="Prefix of the added fields' names.")
)


class ExtractNewRecordState(Transformation[ConnectRecord]):
    """The row of a Debezium change event. See the module docstring."""

    def config_def(self) -> ConfigDef:
        return CONFIG

    def configure(self, configs: Mapping[str, Any]) -> None:
        cfg = CONFIG.parse(configs)
        self.drop_tombstones: bool = cfg["drop.tombstones"]
        self.mode = str(cfg["delete.handling.mode"]).lower()
        self.prefix: str = cfg["add.fields.prefix"]
        self.fields: list[tuple[str | None, str, str]] = []
        for spec in (str(f).strip() for f in cfg["add.fields"]):
            if spec:
                struct, _, name = spec.rpartition(".")
                self.fields.append((struct or None, name, self.prefix + spec.replace(".", "_")))
        self.schemas = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = record.value
        if value is None:
            return None if self.drop_tombstones else record
        if isinstance(value, Struct):
            if value.schema.field("op") is None or value.schema.field("after") is None:
                return record
            out: ConnectRecord | None = self._struct(record, value)
            return out
        if isinstance(value, dict) and "op" in value and "after" in value:
            flat: ConnectRecord | None = self._dict(record, value)
            return flat
        return record

    def _pick(self, record: ConnectRecord, envelope: Mapping[str, Any], where: str | None, name: str) -> Any:
        holder: Any = envelope if where is None else envelope.get(where)
        if where is None and name not in self._names(envelope):
            holder = envelope.get("source")
        if holder is None or name not in self._names(holder):
            raise DataError(f"ExtractNewRecordState: add.fields names {(where + '.') if where else ''}{name}, which "
                            f"the change event of {describe(record)} does not have")
        return holder[name]

    @staticmethod
    def _names(m: Any) -> Any:
        return [f.name for f in m.schema.fields] if isinstance(m, Struct) else m

    def _row_of(self, envelope: Mapping[str, Any]) -> tuple[Any, bool] | None:
        """The row and whether it is a delete; None when the record is dropped."""
        if envelope["op"] == "d":
            if self.mode == "drop":
                return None
            return (envelope["before"] if self.mode == "rewrite" else None), True
        return envelope["after"], False

    def _struct(self, record: ConnectRecord, envelope: Struct) -> Any:
        picked = self._row_of(envelope)
        if picked is None:
            return None
        row, deleted = picked
        if row is None:
            return replaced(record, "value", None, "value_schema", None)
        extra = [(out, self._pick(record, envelope, where, name), self._field_schema(envelope, where, name))
                 for where, name, out in self.fields]
        if self.mode == "rewrite":
            extra.append((self.prefix + DELETED, "true" if deleted else "false", Schema.OPTIONAL_STRING_SCHEMA))
        if not extra:
            return replaced(record, "value", row, "value_schema", row.schema)

        def build(schema: Schema) -> Schema:
            b = struct_builder(schema)
            for f in schema.fields:
                b.field(f.name, f.schema)
            for out, _, s in extra:
                b.field(out, s)
            return b.build()

        schema = self.schemas.get(row.schema, build)
        out = Struct(schema)
        for f in row.schema.fields:
            out.put(f.name, row.get_without_default(f.name))
        for name, v, _ in extra:
            out.put(name, v)
        return replaced(record, "value", out, "value_schema", schema)

    @staticmethod
    def _field_schema(envelope: Struct, where: str | None, name: str) -> Schema:
        holder = envelope.schema if where is None else envelope.schema.field(where).schema  # type: ignore[union-attr]
        f = holder.field(name)
        if f is None and where is None:
            src = envelope.schema.field("source")
            f = src.schema.field(name) if src is not None else None
        if f is None:
            raise DataError(f"ExtractNewRecordState: add.fields names {name}, which the change event does not have")
        s = f.schema
        return s if s.optional else _optional(s)

    def _dict(self, record: ConnectRecord, envelope: dict[str, Any]) -> Any:
        picked = self._row_of(envelope)
        if picked is None:
            return None
        row, deleted = picked
        if row is None:
            return replaced(record, "value", None)
        out = dict(row)
        for where, name, key in self.fields:
            out[key] = self._pick(record, envelope, where, name)
        if self.mode == "rewrite":
            out[self.prefix + DELETED] = "true" if deleted else "false"
        return replaced(record, "value", out)


def _optional(schema: Schema) -> Schema:
    """The schema, optional (an added field may be null on other events, as Debezium adds them)."""
    return Schema(schema.type, True, schema.default, schema.name, schema.version, schema.doc, schema.parameters,
                  schema.fields, schema.key_schema, schema.value_schema)


__all__ = ["ExtractNewRecordState"]
