"""``ReplaceField$Value`` / ``ReplaceField$Key``: keep, drop and rename fields of a dict value (or key).

- ``exclude``: fields to drop (comma list).
- ``include``: if set, only these fields are kept (comma list).
- ``renames``: ``old:new`` pairs (comma list), applied after include/exclude.

A tombstone passes through unchanged; any other non-dict raises DataError. The result holds a new
dict; the input is never modified.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config import ConfigDef, Type
from connect_runtime.api.records import ConnectRecord
from connect_runtime.api.transforms import Transformation
from connect_runtime.transforms._base import KeyOrValue, OnKey, require_dict


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

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating(record)
        if value is None:
            return record
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
