"""The connector registry: generations, task counts and run state, kept in the backend.

Every run of a connector is a **generation** (Kafka Connect: the connector's task generation, KIP-618's
task count records). Starting a run bumps the generation of ``(connector, scope)`` *before* the
connector reads its offsets, and fences every task of every older generation:

- on SQLite, each transactional producer carries ``generation_guard`` and its commit checks, inside the
  same write transaction, that its generation is still the newest: an older run's task (whatever its
  index, whatever the new run's task count) can never commit again;
- on Kafka, the runtime initialises a producer for every transactional id of the previous generation
  (the registry stores how many tasks it started), which bumps their epochs on the brokers.

``scope`` is a task identity inside one connector (e.g. a data interval): runs of different scopes do
not fence each other, retries of the same scope do. Sink runs are registered too (kind ``sink``).

The registry is one entry per ``(connector, scope)`` in the offset store
:data:`~connect_runtime.backends.base.REGISTRY_STORE`, key ``["<connector>", {"scope": "<scope>"}]``,
value a JSON object (:class:`ConnectorRecord`), so it lives in the same file or Kafka cluster as the
data and needs no new backend primitive. A run writes a heartbeat every :data:`HEARTBEAT_SECONDS`; a
``running`` entry whose heartbeat is older than :data:`STALE_SECONDS` belonged to a run that died
(SIGKILL, lost worker) and counts as stopped.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from connect_runtime.api.errors import ConnectError, ConnectorRunningError
from connect_runtime.backends.base import REGISTRY_STORE, Backend

HEARTBEAT_SECONDS = 5.0
STALE_SECONDS = 30.0


def registry_key(name: str, scope: str = "") -> bytes:
    return json.dumps([name, {"scope": scope}], separators=(",", ":"), sort_keys=True).encode()


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class ConnectorRecord:
    """One registry entry. Times are epoch milliseconds."""

    name: str
    scope: str = ""
    kind: str = "source"
    generation: int = 0
    tasks: int = 0
    state: str = "stopped"
    connector_class: str = ""
    offsets_store: str | None = None
    topics: list[str] = field(default_factory=list)
    owns_offsets: bool = False
    started: int | None = None
    finished: int | None = None
    heartbeat: int | None = None
    owner: str = ""
    error: str | None = None
    done_tasks: list[int] = field(default_factory=list)
    """Fan-out: indexes of the plan's tasks that finished (the generation stops when all did)."""
    destination: str | None = None
    """A sink that keeps its offsets in its destination: where (``DestinationOffsets.where``)."""
    destination_offsets: list[list[Any]] = field(default_factory=list)
    """Its offsets there after the last run or alteration, ``[[topic, partition, next offset], ...]``
    (a mirror for the Connectors view; the destination is the truth)."""
    destination_read: int | None = None
    """When the mirror was read (epoch ms)."""

    @property
    def running(self) -> bool:
        """A run holds the connector: state ``running`` with a fresh heartbeat."""
        return (self.state == "running" and self.heartbeat is not None
                and _now_ms() - self.heartbeat < STALE_SECONDS * 1000)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> ConnectorRecord:
        raw = json.loads(data)
        known = {k: raw[k] for k in cls.__dataclass_fields__ if k in raw}
        return cls(**known)

    def public(self) -> dict[str, Any]:
        """The JSON shape the admin API, the CLI and the UI show."""
        out = asdict(self)
        out.pop("heartbeat")
        out["running"] = self.running
        if self.state == "running" and not self.running:
            out["state"] = "stopped (no heartbeat: the run died)"
        return out


def owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Registry:
    """Reads and writes registry entries of one backend."""

    def __init__(self, backend: Backend, timeout: float = 30.0) -> None:
        self.backend = backend
        self.timeout = timeout

    def get(self, name: str, scope: str = "") -> ConnectorRecord | None:
        store = self.backend.offset_store(REGISTRY_STORE)
        try:
            key = registry_key(name, scope)
            value = store.get([key]).get(key)
        finally:
            store.close()
        return None if value is None else ConnectorRecord.from_json(value)

    def list(self) -> list[ConnectorRecord]:
        store = self.backend.offset_store(REGISTRY_STORE)
        try:
            values = store.read_all()
        finally:
            store.close()
        out = []
        for value in values.values():
            try:
                out.append(ConnectorRecord.from_json(value))
            except (ValueError, TypeError):
                continue
        return sorted(out, key=lambda r: (r.name, r.scope))

    def begin(self, name: str, *, scope: str = "", kind: str, connector_class: str,
              offsets_store: str | None = None, owns_offsets: bool = False,
              floor: int = 0) -> tuple[ConnectorRecord, ConnectorRecord | None]:
        """Start a new generation, at least ``floor``: ``(new entry, the previous entry or None)``. Atomic on
        SQLite."""
        previous: list[ConnectorRecord | None] = [None]

        def bump(current: bytes | None) -> bytes:
            before = None if current is None else ConnectorRecord.from_json(current)
            previous[0] = before
            now = _now_ms()
            rec = ConnectorRecord(
                name=name, scope=scope, kind=kind,
                generation=max(floor, 0 if before is None else before.generation + 1),
                tasks=0, state="running", connector_class=connector_class, offsets_store=offsets_store,
                topics=[] if before is None else before.topics,
                owns_offsets=owns_offsets or (before is not None and before.owns_offsets),
                started=now, finished=None, heartbeat=now, owner=owner(), error=None)
            return rec.to_json()

        value = self.backend.update_entry(REGISTRY_STORE, registry_key(name, scope), bump, self.timeout)
        assert value is not None
        return ConnectorRecord.from_json(value), previous[0]

    def update(self, record: ConnectorRecord, **changes: Any) -> bool:
        """Apply ``changes`` to the entry if it still holds ``record``'s generation (a fenced run's
        bookkeeping never overwrites its successor's). Returns whether it did; ``record`` is updated."""
        applied = [False]

        def change(current: bytes | None) -> bytes | None:
            have = None if current is None else ConnectorRecord.from_json(current)
            if have is None or have.generation != record.generation:
                return current
            for k, v in changes.items():
                setattr(have, k, v)
            applied[0] = True
            return have.to_json()

        self.backend.update_entry(REGISTRY_STORE, registry_key(record.name, record.scope), change, self.timeout)
        if applied[0]:
            for k, v in changes.items():
                setattr(record, k, v)
        return applied[0]

    def heartbeat(self, record: ConnectorRecord, topics: Sequence[str] = ()) -> bool:
        changes: dict[str, Any] = {"heartbeat": _now_ms()}
        if topics and set(topics) - set(record.topics):
            changes["topics"] = sorted(set(record.topics) | set(topics))
        return self.update(record, **changes)

    def finish(self, record: ConnectorRecord, *, failed: BaseException | None = None,
               topics: Sequence[str] = ()) -> bool:
        changes: dict[str, Any] = {"state": "failed" if failed is not None else "stopped",
                                   "finished": _now_ms(), "heartbeat": _now_ms(),
                                   "error": None if failed is None else f"{type(failed).__name__}: {failed}"[:500]}
        if topics:
            changes["topics"] = sorted(set(record.topics) | set(topics))
        return self.update(record, **changes)

    def new_generation_if_idle(self, name: str, scope: str = "", *, floor: int = 0,
                               create: ConnectorRecord | None = None) -> ConnectorRecord:
        """For KIP-875 alterations: refuse while a run holds the connector, else bump the generation (to at
        least ``floor``; state unchanged), which fences any run that registered before. ``create``: the entry
        to start from when no run registered the connector in this store (a sink whose destination knows
        it). Atomic on SQLite."""
        result: list[ConnectorRecord] = []

        def bump(current: bytes | None) -> bytes | None:
            if current is None:
                if create is None:
                    return None
                current = create.to_json()
            rec = ConnectorRecord.from_json(current)
            if rec.running:
                raise ConnectorRunningError(
                    f"connector {name!r} is running (generation {rec.generation}, started by {rec.owner}); "
                    f"stop it (or wait for its run to end) before altering or resetting its offsets")
            rec.generation = max(rec.generation + 1, floor)
            result.append(rec)
            return rec.to_json()

        self.backend.update_entry(REGISTRY_STORE, registry_key(name, scope), bump, self.timeout)
        if not result:
            raise ConnectError(f"connector {name!r} is not known to this store (no run has registered it)")
        return result[0]


__all__ = ["HEARTBEAT_SECONDS", "STALE_SECONDS", "ConnectorRecord", "ConnectorRunningError", "Registry",
           "registry_key"]
