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

Each entry also keeps its last :data:`ATTEMPTS_KEPT` **attempts** (``ConnectorRecord.attempts``), one per
generation that ran: how it ended (``stopped``, ``failed``, ``fenced``: a newer generation started while it
ran; ``died``: its heartbeat stopped) and why. A fenced run cannot change the entry otherwise (its
successor owns it), but :meth:`Registry.finish` still records its end there, and :meth:`Registry.begin`
records a predecessor that left no attempt (killed, or ended outside ``finish``). An attempt also names
the Airflow task instance that ran it when the process has Airflow's ``AIRFLOW_CTX_*`` variables (read
from the environment; the runtime never imports Airflow), and every attempt names the **host** that ran it
(:func:`hostname`: the name the orchestrator knows the worker by, else ``socket.gethostname()``), so a task that
Airflow retried on another worker shows one attempt per machine.
"""

from __future__ import annotations

import builtins
import json
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from connect_runtime.api.errors import ConnectError, ConnectorRunningError
from connect_runtime.backends.base import REGISTRY_STORE, Backend

HEARTBEAT_SECONDS = 5.0
STALE_SECONDS = 30.0
ATTEMPTS_KEPT = 20
"""Attempts (ended or fenced generations) kept per registry entry, newest last."""
ERROR_CHARS = 500

_CONTEXT_ENV = {"dag_id": "AIRFLOW_CTX_DAG_ID", "task_id": "AIRFLOW_CTX_TASK_ID",
                "run_id": "AIRFLOW_CTX_DAG_RUN_ID", "try_number": "AIRFLOW_CTX_TRY_NUMBER"}
HOSTNAME_ENV = "PYCONNECT_HOSTNAME"
"""The worker's name as the orchestrator knows it (Airflow: the task instance's ``hostname``, from ``[core]
hostname_callable``); the provider's operators set it before a run. Unset: ``socket.gethostname()``."""


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
    records: int | None = None
    """Records the generation's run delivered to its connector, when it ended and said so (sinks)."""
    ranges: dict[str, dict[str, list[int]]] | None = None
    """What a sink run delivered, ``{topic: {"<partition>": [from, to]}}`` (a source run's ranges shape), when it
    ended well; ``None`` for sources (their ranges record) and entries written before it was kept."""
    end_lag: dict[str, dict[str, int]] | None = None
    """The lag a sink run left at its end, ``{topic: {"<partition>": records}}``: its target (``until_offsets``, else
    the partition's end as it started) minus what it committed; ``None`` as for :attr:`ranges`."""
    context: dict[str, str] | None = None
    """The orchestrator's task that started this generation (``dag_id``, ``task_id``, ``run_id``,
    ``try_number`` from ``AIRFLOW_CTX_*``), or ``None``."""
    host: str = ""
    """The worker that runs this generation (:func:`hostname`); ``""`` in entries written before it was kept."""
    workers: list[dict[str, Any]] = field(default_factory=list)
    """Fan-out: each start of one of the plan's tasks (its own Airflow task instance, maybe on another worker),
    oldest first: ``{"task", "host", "try_number", "started"}`` (:func:`task_worker`), the last
    :data:`ATTEMPTS_KEPT` kept."""
    transactional: bool = True
    """Whether this generation's tasks may hold transactional producers that a newer generation must fence (every
    run but an at-least-once source run; ``True`` in entries written before it was kept)."""
    attempts: list[dict[str, Any]] = field(default_factory=list)
    """The last :data:`ATTEMPTS_KEPT` generations that ran, oldest first: ``{"generation", "state", "started",
    "finished", "error", "records", "context", "topics", "host", "workers", "ranges", "lag"}`` (``ranges`` and ``lag``:
    :attr:`ranges` and :attr:`end_lag` of a sink run that ended well, absent otherwise), ``state`` one of ``stopped``, ``failed``, ``fenced``, ``died``."""

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
        out.pop("attempts")  # the run history: :meth:`Registry.attempts`
        out.pop("transactional")  # the fencing's business
        out["running"] = self.running
        if self.state == "running" and not self.running:
            out["state"] = "stopped (no heartbeat: the run died)"
        return out


def hostname() -> str:
    """The worker's name: :data:`HOSTNAME_ENV` when the orchestrator set it, else ``socket.gethostname()``."""
    return os.environ.get(HOSTNAME_ENV) or socket.gethostname()


def owner() -> str:
    """``host:pid`` of this process (the host as :func:`hostname` says)."""
    return f"{hostname()}:{os.getpid()}"


def run_context() -> dict[str, str] | None:
    """The Airflow task instance running this process, from the ``AIRFLOW_CTX_*`` variables Airflow's task
    runner exports (``None`` outside Airflow)."""
    found = {k: os.environ[v] for k, v in _CONTEXT_ENV.items() if os.environ.get(v)}
    return found if found.get("dag_id") and found.get("task_id") else None


def _attempt(rec: ConnectorRecord, state: str, error: str | None, finished: int | None) -> dict[str, Any]:
    return {"generation": rec.generation, "state": state, "started": rec.started, "finished": finished,
            "error": None if error is None else error[:ERROR_CHARS], "records": rec.records,
            "context": rec.context, "topics": list(rec.topics), "host": rec.host, "workers": list(rec.workers),
            **{k: v for k, v in (("ranges", rec.ranges), ("lag", rec.end_lag)) if v is not None}}


def task_worker(rec: ConnectorRecord, index: int) -> None:
    """Record in ``rec.workers`` that task ``index`` of its generation starts here (:func:`hostname`, the Airflow
    try number when known)."""
    ctx = run_context() or {}
    rec.workers = [*rec.workers, {"task": index, "host": hostname(), "try_number": ctx.get("try_number"),
                                  "started": _now_ms()}][-ATTEMPTS_KEPT:]


def _record_attempt(rec: ConnectorRecord, attempt: dict[str, Any]) -> None:
    """Add (or replace: same generation) ``attempt`` in ``rec.attempts``, keeping the last ATTEMPTS_KEPT."""
    kept = [a for a in rec.attempts if a.get("generation") != attempt["generation"]]
    kept.append(attempt)
    kept.sort(key=lambda a: (a.get("started") or 0, a.get("generation") or 0))
    rec.attempts = kept[-ATTEMPTS_KEPT:]


def _left_behind(before: ConnectorRecord, successor: int) -> dict[str, Any] | None:
    """The attempt of ``before``'s generation when it ran and recorded none (it was killed, is still running,
    or ended outside :meth:`Registry.finish`); ``None`` when it recorded one or never ran."""
    if before.started is None or any(a.get("generation") == before.generation or a.get("started") == before.started
                                     for a in before.attempts):
        return None  # never ran, or recorded (an offsets change bumps the generation of a run that ended)
    if before.state == "running" and before.running:
        return _attempt(before, "fenced", f"fenced by generation {successor}, started by {owner()} while it ran",
                        None)
    if before.state == "running":
        return _attempt(before, "died", f"the run died (killed or lost): no heartbeat for {STALE_SECONDS:g} s; "
                                        f"generation {successor} replaced it", before.heartbeat)
    if before.finished is None or before.finished < before.started:
        return None  # a generation bumped by an offsets change, not a run
    return _attempt(before, "failed" if before.state.startswith("failed") else "stopped", before.error,
                    before.finished)


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
              floor: int = 0, transactional: bool = True) -> tuple[ConnectorRecord, ConnectorRecord | None]:
        """Start a new generation, at least ``floor``: ``(new entry, the previous entry or None)``. Atomic on
        SQLite. ``transactional``: whether its tasks may hold transactional producers (see the field)."""
        previous: list[ConnectorRecord | None] = [None]

        def bump(current: bytes | None) -> bytes:
            before = None if current is None else ConnectorRecord.from_json(current)
            previous[0] = before
            # strictly after the previous run's start: a run is told from an earlier one by its start (an offsets
            # change bumps the generation of a run that ended and keeps its start, see _left_behind), so two runs
            # beginning within one millisecond must not share it
            now = _now_ms() if before is None or before.started is None else max(_now_ms(), before.started + 1)
            rec = ConnectorRecord(
                name=name, scope=scope, kind=kind,
                generation=max(floor, 0 if before is None else before.generation + 1),
                tasks=0, state="running", connector_class=connector_class, offsets_store=offsets_store,
                topics=[] if before is None else before.topics,
                owns_offsets=owns_offsets or (before is not None and before.owns_offsets),
                started=now, finished=None, heartbeat=now, owner=owner(), error=None, records=None, context=run_context(),
                host=hostname(), transactional=transactional, attempts=[] if before is None else before.attempts)
            left = None if before is None else _left_behind(before, rec.generation)
            if left is not None:
                _record_attempt(rec, left)
            return rec.to_json()

        value = self.backend.update_entry(REGISTRY_STORE, registry_key(name, scope), bump, self.timeout)
        assert value is not None
        return ConnectorRecord.from_json(value), previous[0]

    def update(self, record: ConnectorRecord, **changes: Any) -> bool:
        """Apply ``changes`` to the entry if it still holds ``record``'s generation (a fenced run's
        bookkeeping never overwrites its successor's). Returns whether it did; ``record`` is updated."""

        def apply(have: ConnectorRecord) -> None:
            for k, v in changes.items():
                setattr(have, k, v)

        applied = self.modify(record, apply) is not None
        if applied:
            apply(record)
        return applied

    def modify(self, record: ConnectorRecord,
               change: Callable[[ConnectorRecord], None]) -> ConnectorRecord | None:
        """``change(entry)`` applied to the entry as it is now, inside one atomic update, if it still holds
        ``record``'s generation (what another task of the generation wrote meanwhile is kept, e.g. its done
        task). Returns the entry after, or ``None`` (nothing written) when a newer generation holds it."""
        after: list[ConnectorRecord | None] = [None]

        def update(current: bytes | None) -> bytes | None:
            after[0] = None  # called once per attempt (update_entry); the last call counts
            have = None if current is None else ConnectorRecord.from_json(current)
            if have is None or have.generation != record.generation:
                return current
            change(have)
            after[0] = have
            return have.to_json()

        self.backend.update_entry(REGISTRY_STORE, registry_key(record.name, record.scope), update, self.timeout)
        return after[0]

    def heartbeat(self, record: ConnectorRecord, topics: Sequence[str] = ()) -> bool:
        """Refresh the generation's heartbeat (and add ``topics``) if the entry still holds it; whether it does. A
        heartbeat another task of the generation wrote less than half a :data:`HEARTBEAT_SECONDS` ago is left as it
        is (the mapped tasks of a fan-out share one entry: they do not all write it)."""
        now = _now_ms()
        added = set(topics) - set(record.topics)

        def beat(have: ConnectorRecord) -> None:
            if added - set(have.topics):
                have.topics = sorted(set(have.topics) | added)
            elif have.heartbeat is not None and 0 <= now - have.heartbeat < HEARTBEAT_SECONDS * 500:
                return
            have.heartbeat = now

        after = self.modify(record, beat)
        if after is not None:
            record.heartbeat, record.topics = after.heartbeat, list(after.topics)
        return after is not None

    def finish(self, record: ConnectorRecord, *, failed: BaseException | None = None,
               topics: Sequence[str] = (), secrets: Sequence[str] = ()) -> bool:
        """Record the end of ``record``'s generation, and its attempt. When a newer generation owns the entry
        (this run was fenced), only the attempt is recorded, as ``fenced``, with what the run ended with.
        The error text kept has ``secrets`` (the config's secret values) and every URL's password masked: the
        registry is read by anyone who may view the store. Returns whether the entry was still this
        generation's."""
        from connect_runtime.secrets import scrub

        now = _now_ms()
        error = None if failed is None else scrub(f"{type(failed).__name__}: {failed}", secrets)[:ERROR_CHARS]
        changes: dict[str, Any] = {"state": "failed" if failed is not None else "stopped",
                                   "finished": now, "heartbeat": now, "error": error}
        if topics:
            changes["topics"] = sorted(set(record.topics) | set(topics))
        applied = [False]

        def change(current: bytes | None) -> bytes | None:
            applied[0] = False  # called once per attempt (update_entry); the last call counts
            have = None if current is None else ConnectorRecord.from_json(current)
            if have is None:
                return current
            if have.generation == record.generation:
                for k, v in changes.items():
                    setattr(have, k, v)
                _record_attempt(have, _attempt(have, have.state, error, now))
                applied[0] = True
            else:
                mine = ConnectorRecord.from_json(record.to_json())
                mine.topics = changes.get("topics", record.topics)
                why = f"fenced by generation {have.generation}" + (f" (started by {have.owner})" if have.owner else "")
                _record_attempt(have, _attempt(mine, "fenced", why if error is None else f"{why}; it ended with {error}",
                                               now))
            return have.to_json()

        self.backend.update_entry(REGISTRY_STORE, registry_key(record.name, record.scope), change, self.timeout)
        if applied[0]:
            for k, v in changes.items():
                setattr(record, k, v)
        return applied[0]

    def attempts(self, name: str | None = None) -> builtins.list[dict[str, Any]]:
        """The attempts of every entry (or of connector ``name``), newest first, each with ``connector``,
        ``scope`` and ``kind``; a generation running now is included as ``running``, one that ended without
        recording its attempt (a fanned-out generation whose tasks all finished) as it ended."""
        out: builtins.list[dict[str, Any]] = []
        for rec in self.list():
            if name is not None and rec.name != name:
                continue
            items = list(rec.attempts)
            recorded = any(a.get("generation") == rec.generation or a.get("started") == rec.started for a in items)
            if rec.state == "running" and not recorded:
                items.append(_attempt(rec, "running" if rec.running else "died", None if rec.running else
                                      f"the run died (killed or lost): no heartbeat for {STALE_SECONDS:g} s",
                                      None if rec.running else rec.heartbeat))
            elif not recorded and rec.started is not None and (rec.finished or 0) >= rec.started:
                # ended without Registry.finish: a fanned-out generation whose tasks all finished
                items.append(_attempt(rec, "failed" if rec.state.startswith("failed") else "stopped", rec.error,
                                      rec.finished))
            out.extend({"connector": rec.name, "scope": rec.scope, "kind": rec.kind, **a} for a in items)
        return sorted(out, key=lambda a: (-(a.get("finished") or a.get("started") or 0), a["connector"], a["scope"],
                                          -(a.get("generation") or 0)))

    def new_generation_if_idle(self, name: str, scope: str = "", *, floor: int = 0,
                               create: ConnectorRecord | None = None) -> ConnectorRecord:
        """For KIP-875 alterations: refuse while a run holds the connector, else bump the generation (to at
        least ``floor``; state unchanged), which fences any run that registered before. ``create``: the entry
        to start from when no run registered the connector in this store (a sink whose destination knows
        it). Atomic on SQLite."""
        result: list[ConnectorRecord] = []

        def bump(current: bytes | None) -> bytes | None:
            result.clear()  # called once per attempt (update_entry); the last call counts
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


__all__ = ["ATTEMPTS_KEPT", "HEARTBEAT_SECONDS", "HOSTNAME_ENV", "STALE_SECONDS", "ConnectorRecord", "ConnectorRunningError",
           "Registry", "hostname", "registry_key", "task_worker"]
