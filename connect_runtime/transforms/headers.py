"""Header transformations.

- ``InsertHeader`` (``header``, ``value.literal``): appends the header ``header`` with the string value.
- ``DropHeaders`` (``headers``): removes every header with one of the listed names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config import ConfigDef, Type, non_empty_string
from connect_runtime.api.records import ConnectRecord
from connect_runtime.api.transforms import Transformation
from connect_runtime.transforms._base import replaced


def _non_empty_list(name: str, value: Any) -> None:
    if not value:
        raise ValueError("a comma list of at least one header name")


class InsertHeader(Transformation[ConnectRecord]):
    """Appends one header with a literal string value."""

    CONFIG = (
        ConfigDef()
        .define("header", Type.STRING, validator=non_empty_string, doc="Header name.")
        .define("value.literal", Type.STRING, doc="Header value (a string).")
    )

    def config_def(self) -> ConfigDef:
        return self.CONFIG

    def configure(self, configs: Mapping[str, Any]) -> None:
        values = self.CONFIG.parse(configs)
        self.header = (values["header"], values["value.literal"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        return replaced(record, "headers", [*(record.headers or ()), self.header])  # type: ignore[no-any-return]


class DropHeaders(Transformation[ConnectRecord]):
    """Removes the headers with the listed names."""

    CONFIG = ConfigDef().define("headers", Type.LIST, validator=_non_empty_list,
                                doc="Names of the headers to remove.")

    def config_def(self) -> ConfigDef:
        return self.CONFIG

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.names = frozenset(self.CONFIG.parse(configs)["headers"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        headers = record.headers
        if not headers:
            return record
        kept = [h for h in headers if h[0] not in self.names]
        return record if len(kept) == len(headers) else replaced(record, "headers", kept)
