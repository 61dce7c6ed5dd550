"""``ExtractNewRecordState``: Debezium's change event envelope flattened to the row (Debezium's SMT of that name,
``io.debezium.transforms.ExtractNewRecordState``), for sinks that want rows.

- a create, update or snapshot read (``op`` c, u, r) becomes the ``after`` row, with its schema (the envelope's
  ``after`` schema, e.g. ``<prefix>.<schema>.<table>.Value``);
- deletes and the tombstones after them: ``delete.tombstone.handling.mode`` (Debezium 2.5+, the only way in
  Debezium 3): ``drop`` drops both; ``tombstone`` turns a delete into a null value (with the row's schema, as
  Debezium's) and drops the tombstone; ``rewrite`` keeps a delete as its ``before`` row plus ``__deleted: "true"``
  (every other row gets ``__deleted: "false"``) and drops the tombstone; ``rewrite-with-tombstone`` the same,
  keeping the tombstone; ``delete-to-tombstone`` turns a delete into a tombstone (null value and schema) and drops
  the original tombstone. Not set: Debezium 2's two options decide, with their defaults (``delete.handling.mode``
  drop | none | rewrite, default drop; ``drop.tombstones``, default true), so existing configurations keep their
  meaning (Debezium 3 removed them; its default is ``tombstone``); setting the new one with either is an error;
- ``add.fields``: metadata added to the row as ``<add.fields.prefix><name>`` (``__`` by default): ``op``,
  ``ts_ms`` and the other envelope fields by name, a source field by name (``table``, ``lsn``) or as
  ``source.<field>`` (added as ``__source_<field>``); ``name:NEW`` names it ``<prefix>NEW``;
- ``add.headers``: the same references added as headers (``<add.headers.prefix><name>``, ``__`` by default), on
  every change event and tombstone (a tombstone gets only ``op``, as ``d``), their values as text;
- a record whose value is not an envelope (no ``op``: a heartbeat, another connector's record) passes unchanged.

Works on Structs with their schema (the new schema built once per input schema) and on schemaless dicts (what the
JSON converter reads back without schemas). Not here (yet): ``route.by.field``, ``drop.fields.*``,
``replace.null.with.default``. A field named in ``add.fields`` / ``add.headers`` that the event lacks is an error
naming it (Debezium leaves it out silently).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config import ConfigDef, Type, ValidString
from connect_runtime.api.data import Schema, Struct
from connect_runtime.api.errors import ConfigError, DataError
from connect_runtime.api.records import ConnectRecord
from connect_runtime.api.transforms import Transformation
from connect_runtime.transforms._base import SchemaCache, describe, replaced, struct_builder

DELETED = "__deleted"
"""Debezium's field of the rewrite modes (not prefixed: Debezium's constant)."""
MODES = ("drop", "tombstone", "rewrite", "rewrite-with-tombstone", "delete-to-tombstone")
_LEGACY = ("drop.tombstones", "delete.handling.mode")

CONFIG = (
    ConfigDef()
    .define("delete.tombstone.handling.mode", Type.STRING, default=None, validator=ValidString.in_(*MODES),
            doc="Debezium 2.5+'s: drop (deletes and tombstones dropped); tombstone (a delete becomes a null value, "
                "the tombstone is dropped; Debezium 3's default); rewrite (a delete becomes its before row with "
                "__deleted=true, every row gets __deleted, tombstones dropped); rewrite-with-tombstone (the same, "
                "tombstones kept); delete-to-tombstone (a delete becomes a tombstone, the original is dropped). "
                "Unset: drop.tombstones and delete.handling.mode decide.")
    .define("drop.tombstones", Type.BOOLEAN, default=True,
            doc="Debezium 2's (removed in 3): drop the tombstone that follows each delete (true, its default) or "
                "keep it. Not with delete.tombstone.handling.mode.")
    .define("delete.handling.mode", Type.STRING, default="drop", validator=ValidString.in_("drop", "none", "rewrite"),
            doc="Debezium 2's (removed in 3): drop: delete events are dropped; none: kept with a null value; "
                "rewrite: kept as the before row with __deleted=true (every row gets __deleted). Not with "
                "delete.tombstone.handling.mode.")
    .define("add.fields", Type.LIST, default=[],
            doc="Envelope or source fields to add to the row (op, ts_ms, table, lsn, source.ts_ms, ...), each as "
                "<add.fields.prefix><name> (a dot becomes an underscore).")
    .define("add.fields.prefix", Type.STRING, default="__", doc="Prefix of the added fields' names.")
    .define("add.headers", Type.LIST, default=[],
            doc="Envelope or source fields to add as headers, named as add.fields names its fields (with "
                "add.headers.prefix); a tombstone gets only op (d).")
    .define("add.headers.prefix", Type.STRING, default="__", doc="Prefix of the added headers' names.")
)


def _references(specs: list[Any], prefix: str, key: str) -> list[tuple[str | None, str, str]]:
    """Debezium's field references: ``(struct or None, field, new name)`` of ``field``, ``struct.field`` and
    either with ``:NEW`` (new name ``<prefix>NEW``; else ``<prefix>field`` or ``<prefix>struct_field``)."""
    out: list[tuple[str | None, str, str]] = []
    for spec in (str(f).strip() for f in specs):
        if not spec:
            continue
        ref, colon, rename = spec.partition(":")
        struct, _, name = ref.rpartition(".")
        if not name or (colon and not rename) or ":" in rename or "." in struct:
            raise ConfigError(errors={key: f"a field reference is field, struct.field, or either with :NEW_NAME; "
                                           f"got {spec!r}"})
        out.append((struct or None, name, prefix + (rename if colon else ref.replace(".", "_"))))
    return out


def _header_value(value: Any) -> str | bytes | None:
    """A header's value as text (Kafka Connect's SimpleHeaderConverter writes a primitive as its text)."""
    if value is None or isinstance(value, (str, bytes)):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class ExtractNewRecordState(Transformation[ConnectRecord]):
    """The row of a Debezium change event. See the module docstring."""

    def config_def(self) -> ConfigDef:
        return CONFIG

    def configure(self, configs: Mapping[str, Any]) -> None:
        cfg = CONFIG.parse(configs)
        mode = cfg["delete.tombstone.handling.mode"]
        if mode is not None:
            both = [k for k in _LEGACY if k in configs]
            if both:
                raise ConfigError(errors={k: "Debezium 2's option, replaced by delete.tombstone.handling.mode, which "
                                             "is set too: keep one" for k in both})
            self.keep_tombstones = mode == "rewrite-with-tombstone"
            self.delete = {"drop": "drop", "tombstone": "null", "delete-to-tombstone": "tombstone"}.get(
                mode, "rewrite")
        else:
            self.keep_tombstones = not cfg["drop.tombstones"]
            self.delete = {"drop": "drop", "none": "tombstone", "rewrite": "rewrite"}[
                str(cfg["delete.handling.mode"]).lower()]
        self.rewrite = self.delete == "rewrite"
        self.fields = _references(cfg["add.fields"], cfg["add.fields.prefix"], "add.fields")
        self.headers = _references(cfg["add.headers"], cfg["add.headers.prefix"], "add.headers")
        self.schemas = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = record.value
        if value is None:
            if self.headers:
                record = self._with_headers(record, None)
            return record if self.keep_tombstones else None
        if isinstance(value, Struct):
            if value.schema.field("op") is None or value.schema.field("after") is None:
                return record
            if self.headers:
                record = self._with_headers(record, value)
            out: ConnectRecord | None = self._struct(record, value)
            return out
        if isinstance(value, dict) and "op" in value and "after" in value:
            if self.headers:
                record = self._with_headers(record, value)
            flat: ConnectRecord | None = self._dict(record, value)
            return flat
        return record

    def _with_headers(self, record: ConnectRecord, envelope: Mapping[str, Any] | None) -> ConnectRecord:
        """``add.headers`` appended to the record's headers (a tombstone: ``op`` only, as ``d``)."""
        if envelope is None:
            added = [(out, _header_value("d")) for _, name, out in self.headers if name == "op"]
        else:
            added = [(out, _header_value(self._pick(record, envelope, where, name, "add.headers")))
                     for where, name, out in self.headers]
        return replaced(record, "headers", [*(record.headers or []), *added]) if added else record

    def _pick(self, record: ConnectRecord, envelope: Mapping[str, Any], where: str | None, name: str,
              key: str = "add.fields") -> Any:
        holder: Any = envelope if where is None else envelope.get(where)
        if where is None and name not in self._names(envelope):
            holder = envelope.get("source")
        if where == "transaction" and holder is None and _has(envelope, "transaction"):
            return None  # no transaction block (a snapshot, or transaction metadata off): null, as Debezium's
        if holder is None or name not in self._names(holder):
            raise DataError(f"ExtractNewRecordState: {key} names {(where + '.') if where else ''}{name}, which "
                            f"the change event of {describe(record)} does not have")
        return holder[name]

    @staticmethod
    def _names(m: Any) -> Any:
        return [f.name for f in m.schema.fields] if isinstance(m, Struct) else m

    def _row_of(self, envelope: Mapping[str, Any]) -> tuple[Any, bool] | None:
        """The row and whether it is a delete; None when the record is dropped."""
        if envelope["op"] == "d":
            if self.delete == "drop":
                return None
            return (envelope["before"] if self.rewrite else None), True
        return envelope["after"], False

    def _struct(self, record: ConnectRecord, envelope: Struct) -> Any:
        picked = self._row_of(envelope)
        if picked is None:
            return None
        row, deleted = picked
        if row is None:  # tombstone mode keeps the row's schema (a null payload, not a Kafka tombstone), as Debezium's
            schema = envelope.schema.field("after").schema if self.delete == "null" else None  # type: ignore[union-attr]
            return replaced(record, "value", None, "value_schema", schema)
        extra = [(out, self._pick(record, envelope, where, name), self._field_schema(envelope, where, name))
                 for where, name, out in self.fields]
        if self.rewrite:
            extra.append((DELETED, "true" if deleted else "false", Schema.OPTIONAL_STRING_SCHEMA))
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
        if self.rewrite:
            out[DELETED] = "true" if deleted else "false"
        return replaced(record, "value", out)


def _has(envelope: Mapping[str, Any], name: str) -> bool:
    if isinstance(envelope, Struct):
        return envelope.schema.field(name) is not None
    return name in envelope


def _optional(schema: Schema) -> Schema:
    """The schema, optional (an added field may be null on other events, as Debezium adds them)."""
    return Schema(schema.type, True, schema.default, schema.name, schema.version, schema.doc, schema.parameters,
                  schema.fields, schema.key_schema, schema.value_schema)


__all__ = ["ExtractNewRecordState"]
