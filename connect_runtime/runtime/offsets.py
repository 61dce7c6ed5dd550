"""Source offsets in Kafka Connect's format, over a byte-level :class:`OffsetStore`.

Key: the compact JSON array ``["<connector name>",{source partition}]``; value: the compact JSON
object of the source offset; ``None`` deletes. Keys are written with sorted object keys so the same
partition always has the same bytes; keys read from a store are re-canonicalised, so offsets written
by Kafka Connect (any key order) are found too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from connect_runtime.api.errors import DataError
from connect_runtime.api.source import OffsetStorageReader
from connect_runtime.backends.base import OffsetEntry, OffsetStore, canonical_offset_key

_dumps = json.JSONEncoder(separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode


def offset_key(connector: str, partition: Mapping[str, Any]) -> bytes:
    """The stored key of one source partition of a connector."""
    try:
        return _dumps([connector, partition]).encode()
    except (TypeError, ValueError) as exc:
        raise DataError(
            f"source partition {partition!r} of connector {connector!r} is not JSON-serialisable: {exc}"
        ) from exc


def offset_value(offset: Mapping[str, Any] | None) -> bytes | None:
    """The stored value of a source offset (``None`` deletes)."""
    if offset is None:
        return None
    try:
        return _dumps(offset).encode()
    except (TypeError, ValueError) as exc:
        raise DataError(f"source offset {offset!r} is not JSON-serialisable: {exc}") from exc


def parse_key(key: bytes) -> tuple[str, dict[str, Any]] | None:
    """``(connector, partition)`` of a stored key, or ``None`` for a key not in Connect's format."""
    try:
        data = json.loads(key)
    except ValueError:
        return None
    if isinstance(data, list) and len(data) == 2 and isinstance(data[0], str) and isinstance(data[1], dict):
        return data[0], data[1]
    return None


def canonical_key(key: bytes) -> bytes:
    """Re-serialise a stored key the way :func:`offset_key` writes it (for keys from other writers):
    the rule is :func:`connect_runtime.backends.base.canonical_offset_key`, stated once there."""
    return canonical_offset_key(key)


def connector_offsets(store: OffsetStore, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every committed ``(partition, offset)`` of one connector in a store."""
    out = []
    for key, value in store.read_all().items():
        parsed = parse_key(key)
        if parsed is not None and parsed[0] == connector and value is not None:
            out.append((parsed[1], json.loads(value)))
    return out


class StoreOffsetReader(OffsetStorageReader):
    """The runtime's :class:`OffsetStorageReader` over one connector's slice of an offset store.

    With ``fallback`` (KIP-618: a connector with its own offsets store), a partition missing from the
    connector's store is read from the fallback (global) store; the reader owns and closes it.
    """

    def __init__(self, store: OffsetStore, connector: str, fallback: OffsetStore | None = None) -> None:
        self._store = store
        self._connector = connector
        self._fallback = fallback

    def close(self) -> None:
        fallback, self._fallback = self._fallback, None
        if fallback is not None:
            fallback.close()

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.offsets([partition])[0][1]

    def offsets(
        self, partitions: Iterable[Mapping[str, Any]]
    ) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
        parts = [dict(p) for p in partitions]
        keys = [offset_key(self._connector, p) for p in parts]
        found = self._store.get(keys)
        if self._fallback is not None and len(found) < len(keys):
            missing = [k for k in keys if k not in found]
            found = {**self._fallback.get(missing), **found}
        return [(p, json.loads(found[k]) if k in found else None) for p, k in zip(parts, keys, strict=True)]


class OffsetWriter:
    """Collects the latest offset per source partition between commits (snapshot, then flush).

    ``record(partition, offset)`` is cheap (a dict assignment); ``entries()`` turns the pending
    offsets into stored bytes once per commit; ``clear()`` after they were committed.
    """

    def __init__(self, connector: str) -> None:
        self._connector = connector
        self._pending: dict[str, tuple[Mapping[str, Any], Mapping[str, Any] | None]] = {}

    def record(self, partition: Mapping[str, Any] | None, offset: Mapping[str, Any] | None) -> None:
        if partition is None:
            return
        # one canonical key per partition; json is cheap next to a dict-of-dicts hash
        self._pending[_dumps(partition)] = (partition, offset)

    def __bool__(self) -> bool:
        return bool(self._pending)

    def snapshot(self) -> list[tuple[Mapping[str, Any], Mapping[str, Any] | None]]:
        return list(self._pending.values())

    def entries(self) -> list[OffsetEntry]:
        return [(offset_key(self._connector, p), offset_value(o)) for p, o in self._pending.values()]

    def clear(self) -> None:
        self._pending.clear()


__all__ = [
    "OffsetWriter",
    "StoreOffsetReader",
    "canonical_key",
    "connector_offsets",
    "offset_key",
    "offset_value",
    "parse_key",
]
