"""``ReplaceField$Value`` / ``ReplaceField$Key``: keep, drop and rename fields of a dict value (or key).

- ``exclude``: fields to drop (comma list).
- ``include``: if set, only these fields are kept (comma list).
- ``renames``: ``old:new`` pairs (comma list), applied after include/exclude.

A tombstone passes through unchanged. A :class:`~connect_runtime.api.data.Struct` key/value (a record with a
schema) gets the schema with the same fields kept, dropped and renamed (built once per input schema) and the
record's ``value_schema`` / ``key_schema`` becomes it, as in Kafka Connect; any other non-dict raises DataError.
The result holds a new dict or Struct; the input is never modified.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config import ConfigDef, Type
from connect_runtime.api.data import Schema, Struct
from connect_runtime.api.records import ConnectRecord
from connect_runtime.api.transforms import Transformation
from connect_runtime.transforms._base import KeyOrValue, OnKey, SchemaCache, require_dict, struct_builder


def _renames(name: str, value: Any) -> None:
    seen: set[str] = set()
    for pair in value or ():
        old, sep, new = pair.partition(":")
        if not sep or not old.strip() or not new.strip() or ":" in new:
            raise ValueError(f"a comma list of old:new field name pairs, got {pair!r}")
        if old.strip() in seen:
            raise ValueError(f"each field renamed once, got {old.strip()!r} twice")
        seen.add(old.strip())


class ReplaceField(KeyOrValue, Transformation[ConnectRecord]):
    """Keeps, drops and renames fields; see the module docstring."""

    CONFIG = (
        ConfigDef()
        .define("exclude", Type.LIST, default=[], doc="Fields to drop.")
        .define("include", Type.LIST, default=[], doc="If set, the only fields kept.")
        .define("renames", Type.LIST, default=[], validator=_renames, doc="old:new field renames.")
    )

    def config_def(self) -> ConfigDef:
        return self.CONFIG

    def configure(self, configs: Mapping[str, Any]) -> None:
        values = self.CONFIG.parse(configs)
        self.exclude = frozenset(values["exclude"])
        self.include = frozenset(values["include"])
        self.renames = {
            old.strip(): new.strip() for old, _, new in (p.partition(":") for p in values["renames"])
        }
        self.reverse = {new: old for old, new in self.renames.items()}
        self.schemas = SchemaCache()

    def _keep(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def _schema(self, schema: Schema) -> Schema:
        b = struct_builder(schema)
        for f in schema.fields:
            if self._keep(f.name):
                b.field(self.renames.get(f.name, f.name), f.schema)
        return b.build()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating(record)
        if value is None:
            return record
        if isinstance(value, Struct):
            schema = self.schemas.get(value.schema, self._schema)
            struct = Struct(schema)
            for f in schema.fields:
                struct.put(f.name, value.get(self.reverse.get(f.name, f.name)))
            return self.updated(record, struct, schema)  # type: ignore[no-any-return]
        src = require_dict(f"ReplaceField${self.part.title()}", self.part, value, record)
        exclude, include, renames = self.exclude, self.include, self.renames
        out = {
            renames.get(k, k): v
            for k, v in src.items()
            if k not in exclude and (not include or k in include)
        }
        return self.updated(record, out)  # type: ignore[no-any-return]


class ReplaceFieldValue(ReplaceField):
    """``ReplaceField$Value``."""


class ReplaceFieldKey(OnKey, ReplaceField):
    """``ReplaceField$Key``."""
