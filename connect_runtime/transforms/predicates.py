"""Built-in predicates, for ``transforms.<name>.predicate``.

- ``TopicNameMatches`` (``pattern``): the whole topic name matches the regular expression.
- ``HasHeaderKey`` (``name``): the record has at least one header with this name.
- ``RecordIsTombstone``: the record's value is ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config import ConfigDef, Type, non_empty_string, valid_regex
from connect_runtime.api.records import ConnectRecord
from connect_runtime.api.transforms import Predicate


def _pattern(name: str, value: Any) -> None:
    non_empty_string(name, value)
    valid_regex(name, value)


class TopicNameMatches(Predicate[ConnectRecord]):
    """True when the whole topic name matches ``pattern``."""

    CONFIG = ConfigDef().define("pattern", Type.STRING, validator=_pattern,
                                doc="Regular expression the whole topic name must match.")

    def config_def(self) -> ConfigDef:
        return self.CONFIG

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.pattern = re.compile(self.CONFIG.parse(configs)["pattern"])

    def test(self, record: ConnectRecord) -> bool:
        return self.pattern.fullmatch(record.topic) is not None


class HasHeaderKey(Predicate[ConnectRecord]):
    """True when the record has a header called ``name``."""

    CONFIG = ConfigDef().define("name", Type.STRING, validator=non_empty_string, doc="Header name.")

    def config_def(self) -> ConfigDef:
        return self.CONFIG

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.name = self.CONFIG.parse(configs)["name"]

    def test(self, record: ConnectRecord) -> bool:
        headers = record.headers
        return bool(headers) and any(h[0] == self.name for h in headers)  # type: ignore[union-attr]


class RecordIsTombstone(Predicate[ConnectRecord]):
    """True when the record's value is ``None``."""

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.config_def().parse(configs)

    def test(self, record: ConnectRecord) -> bool:
        return record.value is None
