"""What one sink run did: :class:`SinkRunResult`, the shape a sink run returns and the provider pushes to XCom."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

PROGRESS_INTERVAL_S = 5.0
"""``progress`` is called at most this often (and once at the end)."""

ProgressCallback = Callable[[int, float], None]
"""``progress(records_so_far, seconds)``."""


@dataclass
class SinkRunResult:
    """What one sink run did. ``to_dict()`` is the XCom shape:
    ``{"connector", "records", "committed": {topic: {"<partition>": offset}}, "dead_lettered",
    "retries", "seconds", "ranges": {topic: {"<partition>": [from, to]}}, "bytes"}``.

    ``records``: records passed to a successful ``put``; ``committed``: the offsets this run
    committed to the group ``connect-<connector>`` (next offset to read, last commit per
    partition); ``dead_lettered``: records written to the dead letter topic; ``retries``: ``put``
    calls redelivered after a :class:`RetriableError`; ``ranges``: per partition the offsets the run
    read and ended at, ``[from, to)`` (from where its tasks started after ``open()``'s rewinds to where
    they ended; partitions it read nothing of are left out), in the shape of a source result's ranges.
    ``bytes``: the keys and values (as stored in the topics) of the records delivered, dead letters not counted.
    ``skipped`` (not part of the dict) counts records tolerated with no dead letter topic configured.
    """

    connector: str
    records: int = 0
    committed: dict[str, dict[str, int]] = field(default_factory=dict)
    dead_lettered: int = 0
    retries: int = 0
    seconds: float = 0.0
    skipped: int = 0
    ranges: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    bytes: int = 0
    value_schemas: dict[str, Any] = field(default_factory=dict, compare=False)
    """Per topic, the Connect value schema of the last record delivered that had one (not in ``to_dict()``)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "connector": self.connector,
            "records": self.records,
            "committed": {t: dict(p) for t, p in self.committed.items()},
            "dead_lettered": self.dead_lettered,
            "retries": self.retries,
            "seconds": self.seconds,
            "ranges": {t: {p: list(r) for p, r in parts.items()} for t, parts in self.ranges.items()},
            "bytes": self.bytes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SinkRunResult:
        return cls(
            connector=str(data["connector"]),
            records=int(data["records"]),
            committed={
                str(t): {str(p): int(o) for p, o in parts.items()}
                for t, parts in data.get("committed", {}).items()
            },
            dead_lettered=int(data.get("dead_lettered", 0)),
            retries=int(data.get("retries", 0)),
            seconds=float(data.get("seconds", 0.0)),
            ranges={str(t): {str(p): [int(r[0]), int(r[1])] for p, r in parts.items()}
                    for t, parts in (data.get("ranges") or {}).items()},
            bytes=int(data.get("bytes") or 0),
        )


__all__ = ["PROGRESS_INTERVAL_S", "ProgressCallback", "SinkRunResult"]
