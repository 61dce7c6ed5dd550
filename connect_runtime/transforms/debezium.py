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
- ``route.by.field``: the record's topic becomes the value of this field of the row: ``after``'s, a delete's
  ``before``'s (whatever the delete mode makes of the delete, a tombstone included); a null or blank value keeps the
  topic, and so do the tombstones after deletes, as Debezium's (with ``rewrite-with-tombstone`` a delete and its
  tombstone may so go to different topics). A Struct field's default stands for its null (Debezium reads it with
  ``getString``). A row without the field, a field that is not a string, or a delete without ``before`` is an error
  (Debezium fails on them too, the last with a NullPointerException);
- ``drop.fields.header.name``: the record's header of that name (the first) lists fields to drop from the row, as
  Debezium's ``ExtractChangedRecordState`` writes them (``header.changed.name``, ``header.unchanged.name``: an array of
  strings). Its value is a list of names or, as this runtime's default header converter (``StringConverter``) reads
  back what Kafka Connect's writes, the text of a JSON array (``["a","b"]``); no such header, a null or an empty list
  drops nothing, anything else is an error naming the header. ``drop.fields.keep.schema.compatible`` (true, the
  default) drops only the listed fields whose schema is optional (gone from the schema too: dropping an optional field
  is a compatible change), false every listed field; ``drop.fields.from.key`` drops them from the key too (a Struct
  or dict key), by the same rule. A schemaless row has no optionality: every listed field is dropped. The drop
  applies to the whole row, added fields included (Debezium's drops after ``add.fields`` on a create or update and
  before it on a delete). Tombstones are left as they are, as Debezium's;
- ``replace.null.with.default`` (true by default, as Debezium's): where Debezium copies the row field by field (the
  rewrite modes adding ``__deleted``, a drop of fields), a null field takes its schema's default; false keeps it
  null. Elsewhere the nulls stay, as Debezium's: a row passed as it is, or copied to add ``add.fields`` only
  (Debezium's copy there reads without defaults). One difference: Debezium's drop (Kafka's ``ReplaceField`` at its
  own default) fills in the defaults even with false; here false holds there too. No meaning for schemaless rows;
- a record whose value is not an envelope (no ``op``: a heartbeat, another connector's record) passes unchanged.

Works on Structs with their schema (the new schema built once per input schema and dropped fields) and on
schemaless dicts (what the JSON converter reads back without schemas). A field named in ``add.fields`` /
``add.headers`` that the event lacks is an error naming it (Debezium leaves it out silently);
``drop.fields.from.key`` or ``drop.fields.keep.schema.compatible`` without ``drop.fields.header.name`` is a
configuration error (Debezium ignores them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from connect_runtime.api.config import ConfigDef, Type, ValidString
from connect_runtime.api.data import Schema, SchemaType, Struct
from connect_runtime.api.errors import ConfigError, DataError
from connect_runtime.api.records import ConnectRecord
from connect_runtime.api.transforms import Transformation
from connect_runtime.transforms._base import SchemaCache, describe, replaced, struct_builder

DELETED = "__deleted"
"""Debezium's field of the rewrite modes (not prefixed: Debezium's constant)."""
MODES = ("drop", "tombstone", "rewrite", "rewrite-with-tombstone", "delete-to-tombstone")
_LEGACY = ("drop.tombstones", "delete.handling.mode")
_DROP_OPTIONS = ("drop.fields.from.key", "drop.fields.keep.schema.compatible")

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
    .define("route.by.field", Type.STRING, default="",
            doc="A field of the row (after; a delete's before) whose value becomes the record's topic; a null or "
                "blank value keeps the topic, and so do tombstones.")
    .define("drop.fields.header.name", Type.STRING, default=None,
            doc="A header listing fields to drop from the row (as ExtractChangedRecordState's header.unchanged.name "
                "writes them): a list of names or the text of a JSON array; absent or empty drops nothing.")
    .define("drop.fields.from.key", Type.BOOLEAN, default=False,
            doc="Drop the fields listed in drop.fields.header.name from the key too (by the same rule).")
    .define("drop.fields.keep.schema.compatible", Type.BOOLEAN, default=True,
            doc="true: only the listed fields whose schema is optional are dropped (the schema stays compatible); "
                "false: every listed field. Schemaless rows: every listed field whatever this says.")
    .define("replace.null.with.default", Type.BOOLEAN, default=True,
            doc="Where the row is copied field by field (the rewrite modes' __deleted, a drop of fields), a null "
                "field takes its schema's default (true) or stays null (false).")
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
        self.route: str | None = (cfg["route.by.field"] or "").strip() or None
        self.drop_header: str | None = (cfg["drop.fields.header.name"] or "").strip() or None
        if self.drop_header is None:
            idle = [k for k in _DROP_OPTIONS if k in configs]
            if idle:
                raise ConfigError(errors={k: "has no effect without drop.fields.header.name, which is not set"
                                          for k in idle})
        self.drop_from_key = cfg["drop.fields.from.key"]
        self.keep_compatible = cfg["drop.fields.keep.schema.compatible"]
        self.replace_null = cfg["replace.null.with.default"]
        self.schemas = SchemaCache()
        self.key_schemas = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = record.value
        if value is None:
            if self.headers:
                record = self._with_headers(record, None)
            return record if self.keep_tombstones else None
        if isinstance(value, Struct):
            if value.schema.field("op") is None or value.schema.field("after") is None:
                return record
        elif not (isinstance(value, dict) and "op" in value and "after" in value):
            return record
        if self.headers:
            record = self._with_headers(record, value)
        drop = self._drop_names(record) if self.drop_header is not None else []
        out: ConnectRecord | None = (self._struct(record, value, drop) if isinstance(value, Struct)
                                     else self._dict(record, value, drop))
        if out is None:
            return None
        if self.route is not None:
            out = self._routed(out, value)
        if drop and self.drop_from_key:
            out = self._key_dropped(out, drop)
        return out

    def _routed(self, record: ConnectRecord, envelope: Mapping[str, Any]) -> ConnectRecord:
        """``route.by.field``: the record on the topic its row names (a null or blank name keeps it)."""
        side = "before" if envelope["op"] == "d" else "after"
        row, name = envelope[side], str(self.route)

        def bad(why: str) -> DataError:
            return DataError(f"ExtractNewRecordState: route.by.field names {name}, which {why} the {side} row of the "
                             f"change event of {describe(record)}")

        if row is None:
            raise DataError(f"ExtractNewRecordState: route.by.field reads {name} from the {side} row, which the "
                            f"change event of {describe(record)} does not have")
        if isinstance(row, Struct):
            f = row.schema.field(name)
            if f is None:
                raise bad("is not a field of")
            if f.schema.type is not SchemaType.STRING:
                raise bad(f"is a {f.schema.type.name}, not a STRING, in")
            topic = row.get(name)
        elif isinstance(row, Mapping) and name in row:
            topic = row[name]
            if topic is not None and not isinstance(topic, str):
                raise bad(f"is a {type(topic).__name__}, not a string, in")
        else:
            raise bad("is not a field of")
        return replaced(record, "topic", topic) if topic and topic.strip() else record

    def _drop_names(self, record: ConnectRecord) -> list[str]:
        """The field names the ``drop.fields.header.name`` header lists (the first header of that name, as
        Debezium's); none without the header or with a null value."""
        value = next((v for n, v in record.headers or () if n == self.drop_header), None)
        if value is None:
            return []
        names: Any = value
        if isinstance(value, (str, bytes)):
            try:
                names = json.loads(value)
            except ValueError:
                names = None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise DataError(f"ExtractNewRecordState: the header {self.drop_header} (drop.fields.header.name) of "
                            f"{describe(record)} is a {type(value).__name__} that is not a list of field names "
                            f"(nor the text of a JSON array of strings)")
        return names

    def _dropped(self, fields: Iterable[tuple[str, Schema]], names: list[str]) -> tuple[bool, frozenset[str]]:
        """Whether Debezium copies the struct to drop ``names`` (it does when its list of names to drop is not
        empty, even if none is a field), and the fields dropped: the listed optional ones while
        ``drop.fields.keep.schema.compatible``, else every listed one."""
        listed = set(names)
        if self.keep_compatible:
            gone = frozenset(n for n, s in fields if s.optional and n in listed)
            return bool(gone), gone
        return bool(listed), frozenset(n for n, _ in fields if n in listed)

    def _key_dropped(self, record: ConnectRecord, names: list[str]) -> ConnectRecord:
        """``drop.fields.from.key``: the listed fields dropped from the key (a Struct's by the same rule as the
        row's, a dict's all of them)."""
        key = record.key
        if key is None:
            return record
        if isinstance(key, dict):
            listed = set(names)
            dropped: ConnectRecord = replaced(record, "key", {k: v for k, v in key.items() if k not in listed})
            return dropped
        if not isinstance(key, Struct):
            raise DataError(f"ExtractNewRecordState: drop.fields.from.key needs a Struct or dict key, got a "
                            f"{type(key).__name__} in the record of {describe(record)}")
        copied, gone = self._dropped(((f.name, f.schema) for f in key.schema.fields), names)
        if not copied:
            return record

        def build(_: Any) -> Schema:
            b = struct_builder(key.schema)
            for f in key.schema.fields:
                if f.name not in gone:
                    b.field(f.name, f.schema)
            return b.build()

        schema = self.key_schemas.get((key.schema, gone), build)
        read = key.get if self.replace_null else key.get_without_default
        out = Struct(schema)
        for f in schema.fields:
            out.put(f.name, read(f.name))
        rekeyed: ConnectRecord = replaced(record, "key", out, "key_schema", schema)
        return rekeyed

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

    def _struct(self, record: ConnectRecord, envelope: Struct, drop: list[str]) -> Any:
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
        copied, gone = False, frozenset[str]()
        if drop:
            copied, gone = self._dropped([*((f.name, f.schema) for f in row.schema.fields),
                                          *((out, s) for out, _, s in extra)], drop)
        if not extra and not copied:
            return replaced(record, "value", row, "value_schema", row.schema)

        def build(_: Any) -> Schema:
            b = struct_builder(row.schema)
            for f in row.schema.fields:
                if f.name not in gone:
                    b.field(f.name, f.schema)
            for out, _, s in extra:
                if out not in gone:
                    b.field(out, s)
            return b.build()

        schema = self.schemas.get((row.schema, gone) if gone else row.schema, build)
        # Debezium's copies: the rewrite modes' InsertField and the drop's ReplaceField read with defaults (unless
        # replace.null.with.default=false), add.fields' own copy without
        read = row.get if self.replace_null and (self.rewrite or copied) else row.get_without_default
        out = Struct(schema)
        for f in row.schema.fields:
            if f.name not in gone:
                out.put(f.name, read(f.name))
        for name, v, _ in extra:
            if name not in gone:
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

    def _dict(self, record: ConnectRecord, envelope: dict[str, Any], drop: list[str]) -> Any:
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
        for name in drop:
            out.pop(name, None)
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
