"""``Filter``: drops every record it is applied to; guard it with a predicate to drop some."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_runtime.api.records import ConnectRecord
from connect_runtime.api.transforms import Transformation


class Filter(Transformation[ConnectRecord]):
    """Drops the record (``apply`` returns ``None``). Usually with ``transforms.<name>.predicate``:
    ``predicate=is_heartbeat`` drops the matching records, ``negate=true`` keeps only those."""

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.config_def().parse(configs)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        return None
