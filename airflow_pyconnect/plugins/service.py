"""What the Connectors view shows, as plain JSON: one function per question, over the runtime's admin API.

The FastAPI app (:mod:`airflow_pyconnect.plugins.app`) checks who asks and calls these; they never
check permissions themselves. Each opens the store of one ``pyconnect`` connection through
:class:`~airflow_pyconnect.hooks.pyconnect.PyConnectHook` (so the page reads exactly the store the
operators write) and closes it before returning.

- :func:`connection_ids`: the ``pyconnect`` connections (metadata DB and ``AIRFLOW_CONN_*``) and the
  embedded default ``pyconnect_default`` when it is not defined;
- :func:`overview`: per connector its kind, state, generation, topics, committed offsets (KIP-875
  shape) and, for a sink that commits through its consumer group, end offsets and lag per topic
  partition; sinks that keep their offsets in their destination are marked ``owns_offsets``; a name with
  source offsets in the global store and no run (Kafka Connect's own connector sharing the offsets topic,
  say) is listed too, ``"registered": False``, as the offsets API knows it;
- :func:`runs`: every run, newest first: a source's committed ranges per data interval (the ranges record)
  and every attempt the registry remembers (sink runs with the range each delivered and the lag it left,
  failed, fenced or died attempts, with the reason, masked), each with the DAG run it belongs to, and one chart
  colour per connector (from its name);
- :func:`offsets`: KIP-875's ``GET /connectors/{name}/offsets``;
- :func:`alter` / :func:`reset`: KIP-875 changes, refused while a run holds the connector.

A name the offsets API does not know (no run registered it, no offsets are stored under it:
:func:`connect_runtime.admin.require_connector`) raises :class:`connect_runtime.admin.ConnectorNotFound` from
:func:`offsets`, :func:`alter` and :func:`reset` (the app answers 404, as Kafka Connect does).

A store that cannot be reached raises :class:`StoreUnavailable` whose message is one line naming the
connection; no connection setting (password, SASL config, ...) ever appears in what these return.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_pyconnect.hooks.pyconnect import (
    DEFAULT_CONN_ID,
    PyConnectHook,
    embedded_backend_url,
    open_backend_at,
)

if TYPE_CHECKING:
    from connect_runtime.backends.base import Backend

CONN_TYPE = "pyconnect"


class StoreUnavailable(Exception):
    """The store of a connection cannot be opened or read; the message is one line, free of secrets."""


class UnknownConnection(LookupError):
    """No ``pyconnect`` connection of that id."""


# -- which connections ----------------------------------------------------------------------------


def _db_connection_ids() -> list[str]:
    from airflow.models import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return list(session.scalars(select(Connection.conn_id).where(Connection.conn_type == CONN_TYPE)))


def _env_connection_ids() -> list[str]:
    from airflow.models import Connection

    out = []
    for key, value in os.environ.items():
        if not key.startswith("AIRFLOW_CONN_"):
            continue
        try:
            conn = (Connection.from_json(value, conn_id=key[13:].lower()) if value.lstrip().startswith("{")
                    else Connection(conn_id=key[13:].lower(), uri=value))
        except Exception:  # a malformed variable belongs to someone else; Airflow reports it where used
            continue
        if conn.conn_type == CONN_TYPE:
            out.append(key[13:].lower())
    return out


def connection_ids(db: Callable[[], list[str]] = _db_connection_ids) -> list[dict[str, Any]]:
    """Every ``pyconnect`` connection, sorted, and ``pyconnect_default`` (embedded when not defined)."""
    ids = set(db()) | set(_env_connection_ids())
    embedded = DEFAULT_CONN_ID not in ids
    ids.add(DEFAULT_CONN_ID)
    return [{"conn_id": c, "embedded": embedded and c == DEFAULT_CONN_ID} for c in sorted(ids)]


# -- opening a store ------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


@contextmanager
def open_store(conn_id: str, embedded: bool = False, *,
               read_only: bool = False) -> Iterator[tuple[Backend, dict[str, Any], list[str]]]:
    """``(open backend, safe description, secret values)`` of a connection's store; closed afterwards.
    ``read_only``: only looking (a SQLite path naming no file is then an error, nothing is created).

    :raises StoreUnavailable: the connection cannot be read or its store cannot be opened.
    """
    from connect_runtime.api.config import HIDDEN, mask

    secrets: list[str] = []
    try:
        if embedded:
            url, settings = embedded_backend_url(), dict[str, Any]()
            path = Path(url[len("sqlite:///"):])
            if not path.exists():
                raise StoreUnavailable(f"{conn_id}: no store yet: the embedded backend {path} does not exist "
                                       "(no PyConnect task has run on this machine)")
        else:
            url, settings = PyConnectHook(conn_id).backend_config()
        secrets = [str(settings[k]) for k, v in mask(settings).items() if v == HIDDEN and settings[k]]
        backend = open_backend_at(url, settings, read_only=read_only)
    except StoreUnavailable:
        raise
    except Exception as exc:
        raise StoreUnavailable(_scrub(f"{conn_id}: store unreachable: {type(exc).__name__}: {exc}", secrets)) from None
    kind = url.split(":", 1)[0].lower()
    where = url[len("sqlite:///"):] if kind == "sqlite" else url.split("://", 1)[-1]
    try:
        yield backend, {"conn_id": conn_id, "backend": kind, "location": where, "embedded": embedded}, secrets
    finally:
        try:
            backend.close()
        except Exception:
            pass


def _scrub(text: str, secrets: Sequence[str]) -> str:
    from connect_runtime.secrets import scrub

    return _one_line(scrub(text, secrets))


def _guard(conn_id: str, secrets: Sequence[str], exc: Exception) -> StoreUnavailable:
    return StoreUnavailable(_scrub(f"{conn_id}: store unreachable: {type(exc).__name__}: {exc}", secrets))


# -- reading --------------------------------------------------------------------------------------


def _merge_scopes(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per connector name: registry entries of several identities (scopes) folded together."""
    by_name: dict[str, dict[str, Any]] = {}
    for e in sorted(entries, key=lambda e: (e["name"], -(e.get("started") or 0))):
        have = by_name.get(e["name"])
        if have is None:
            by_name[e["name"]] = {**e, "scopes": [e.get("scope", "")]}
            continue
        have["scopes"].append(e.get("scope", ""))
        have["running"] = bool(have.get("running")) or bool(e.get("running"))
        if e.get("running"):
            have["state"] = "running"
        have["owns_offsets"] = bool(have.get("owns_offsets")) or bool(e.get("owns_offsets"))
        have["topics"] = sorted(set(have.get("topics") or []) | set(e.get("topics") or []))
    for e in by_name.values():
        e.pop("scope", None)
        e.pop("owner", None)  # host:pid of the worker: not the page's business
    return [by_name[k] for k in sorted(by_name)]


def overview(conn_id: str, embedded: bool = False) -> dict[str, Any]:
    """The connectors of one connection's store with their offsets, and lag for group-offset sinks."""
    from connect_runtime import admin

    with open_store(conn_id, embedded, read_only=True) as (backend, described, secrets):
        try:
            connectors = sorted(_merge_scopes(admin.list_connectors(backend)) + admin.unregistered_connectors(backend),
                                key=lambda c: c["name"])
            for c in connectors:
                if "offsets" not in c:  # an unregistered connector comes with its offsets
                    c["offsets"] = admin.get_offsets(backend, c["name"], kind=c["kind"],
                                                     offsets_store=c.get("offsets_store"))["offsets"]
                c["lag"] = None
                if c["kind"] == "sink":  # group offsets, or what the last run recorded in the destination
                    c["lag"] = admin.sink_lag(backend, c["name"], c.get("topics") or None)
                    c["total_lag"] = sum(p["lag"] for p in c["lag"])
                c.pop("destination_offsets", None)  # shown as offsets and lag
                if c.get("error"):
                    c["error"] = _scrub(c["error"], secrets)
        except Exception as exc:
            raise _guard(conn_id, secrets, exc) from None
    return {**described, "connectors": connectors}


def _interval_bounds(interval: str) -> tuple[str, str] | None:
    start, sep, end = interval.partition("/")
    return (start, end) if sep and start and end else None


def _airflow_run_ids(keys: list[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """``(dag_id, interval) -> run_id`` from Airflow's metadata DB (the newest run of that interval)."""
    from datetime import datetime

    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    out: dict[tuple[str, str], str] = {}
    wanted = {(str(k.get("dag_id")), str(k.get("interval"))) for k in keys if k.get("dag_id") and k.get("interval")}
    with create_session() as session:
        for dag_id, interval in sorted(wanted):
            if interval.startswith("run:"):
                out[(dag_id, interval)] = interval[4:]
                continue
            bounds = _interval_bounds(interval)
            if bounds is None:
                continue
            try:
                start, end = datetime.fromisoformat(bounds[0]), datetime.fromisoformat(bounds[1])
            except ValueError:
                continue
            run_id = session.scalar(
                select(DagRun.run_id).where(DagRun.dag_id == dag_id, DagRun.data_interval_start == start,
                                            DagRun.data_interval_end == end)
                .order_by(DagRun.run_after.desc()).limit(1))
            if run_id is not None:
                out[(dag_id, interval)] = run_id
    return out


PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac", "#1d3f6e", "#94346e", "#0f6b4a", "#8c6d31", "#17a2b8", "#5f5f5f", "#6b4c9a", "#d35400",
           "#a3c940", "#c2185b")
"""Chart colours: Tableau 10 and ten darker ones, all readable on white; a connector's is :func:`colour`."""


def colour(name: str) -> str:
    """The chart colour of connector ``name``: its FNV-1a hash (32 bits, UTF-8) into :data:`PALETTE`. It depends
    on the name only, so it stays the same when other connectors appear, on every page and connection; two names
    may share one (the legend and every row name the connector)."""
    h = 0x811C9DC5
    for b in name.encode("utf-8"):
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return PALETTE[h % len(PALETTE)]


def colours(names: Sequence[str]) -> dict[str, str]:
    """``{name: colour(name)}`` for each of ``names``."""
    return {n: colour(n) for n in sorted(set(names))}


def _lag_total(lag: Mapping[str, Mapping[str, int]] | None) -> int | None:
    return None if lag is None else sum(int(n) for parts in lag.values() for n in parts.values())


def _attempt_row(a: Mapping[str, Any], secrets: Sequence[str]) -> dict[str, Any]:
    ctx = a.get("context") or {}
    return {"type": "attempt", "connector": a["connector"], "kind": a.get("kind"), "scope": a.get("scope") or "",
            "key": {k: ctx[k] for k in ("dag_id", "task_id") if ctx.get(k)}, "run_id": ctx.get("run_id"),
            "try_number": ctx.get("try_number"), "ranges": a.get("ranges") or {}, "records": a.get("records"),
            "lag": _lag_total(a.get("lag")), "lag_partitions": a.get("lag"),
            "generation": a.get("generation"), "state": a.get("state"),
            "error": None if not a.get("error") else _scrub(a["error"], secrets),
            "started": a.get("started"), "finished": a.get("finished"),
            "updated": a.get("finished") or a.get("started") or 0, "topics": a.get("topics") or [], **_where(a)}


def _where(a: Mapping[str, Any]) -> dict[str, Any]:
    """Which worker ran an attempt: ``host`` (``None`` in entries written before hosts were kept) and, for a
    fanned-out run, ``workers`` (each start of one of its tasks: ``task``, ``host``, ``try_number``)."""
    return {"host": a.get("host") or None,
            "workers": [{k: w.get(k) for k in ("task", "host", "try_number")} for w in a.get("workers") or []]}


def _committed_by(entry: Mapping[str, Any], attempt: Mapping[str, Any]) -> bool:
    """Whether ``attempt`` (registry) is the run that last committed the ranges ``entry``: same connector,
    ended well, the entry's last commit inside its run, and the same task instance when both name one."""
    if attempt["connector"] != entry["connector"] or attempt.get("state") != "stopped":
        return False
    started, finished = attempt.get("started") or 0, attempt.get("finished") or 0
    if not started <= int(entry.get("updated") or 0) <= finished:
        return False
    ctx, key = attempt.get("context") or {}, entry["key"]
    if ctx and key.get("dag_id"):
        return (ctx.get("dag_id"), ctx.get("task_id")) == (key.get("dag_id"), key.get("task_id")) and (
            entry.get("run_id") is None or ctx.get("run_id") == entry.get("run_id"))
    return True


def runs(conn_id: str, embedded: bool = False, connector: str | None = None, limit: int = 200,
         run_ids: Callable[[list[Mapping[str, Any]]], dict[tuple[str, str], str]] = _airflow_run_ids,
         ) -> dict[str, Any]:
    """Every run of one connection's store, newest first (``updated``), at most ``limit``:

    - ``"type": "ranges"``: a source run's committed ranges for one label (a data interval), with ``run_id``
      (its DAG run, from Airflow's metadata DB; ``None`` when not found) and, when the registry still has the
      attempt that committed them, its ``state``, ``generation``, ``started`` and ``finished``;
    - ``"type": "attempt"``: every other run the registry remembers: sink runs (``records`` delivered), and
      failed, fenced or died attempts of sources and sinks with the reason (``error``, connection secrets
      masked), with ``run_id`` / ``key`` of the Airflow task instance that ran it when known;
    - a sink run's ``ranges`` (what it delivered, ``{topic: {"<partition>": [from, to]}}``), ``lag`` (the records it
      left behind at its end: its targets minus what it committed, summed) and ``lag_partitions`` (per partition),
      from its registry record: ``{}`` / ``None`` for runs recorded before they were kept, failed runs and sources;
    - on both, when the registry knows it, ``host``: the worker that ran the attempt, by the name Airflow knows it
      (``try_number`` says which try), and ``workers``: where each task of a fanned-out run ran.

    ``colours``: the chart colour of every connector of the store and of the rows (:func:`colour`: from the name).
    """
    from connect_runtime import admin

    with open_store(conn_id, embedded, read_only=True) as (backend, described, secrets):
        try:
            entries = admin.run_ranges(backend, connector, limit)
            attempts = admin.run_attempts(backend, connector, 0)
            names = [c["name"] for c in admin.list_connectors(backend)]
        except Exception as exc:
            raise _guard(conn_id, secrets, exc) from None
    found = run_ids([e["key"] for e in entries]) if entries else {}
    rows: list[dict[str, Any]] = []
    for e in entries:
        key = e["key"]
        e.update(type="ranges", kind="source", state=None, error=None, host=None, workers=[], lag=None,
                 lag_partitions=None, run_id=found.get((str(key.get("dag_id")), str(key.get("interval")))))
        rows.append(e)
    merged: set[int] = set()
    for e in rows:  # the attempt that committed a ranges entry and ended well is that row (its state and times)
        for i, a in enumerate(attempts):
            if i not in merged and _committed_by(e, a):
                merged.add(i)
                e.update(state="stopped", generation=a.get("generation"), started=a.get("started"),
                         finished=a.get("finished"), try_number=(a.get("context") or {}).get("try_number"), **_where(a))
                break
    rows.extend(_attempt_row(a, secrets) for i, a in enumerate(attempts) if i not in merged)
    rows.sort(key=lambda r: (-(r.get("updated") or 0), r["connector"], r["type"]))
    if limit:
        rows = rows[:limit]
    return {**described, "runs": rows, "colours": colours(names + [r["connector"] for r in rows])}


def offsets(conn_id: str, name: str, embedded: bool = False) -> dict[str, Any]:
    """KIP-875 ``GET /connectors/{name}/offsets`` of one connector of the store (a sink that keeps its offsets
    in its destination: what its last run recorded there, ``"as_of"``).

    :raises ConnectorNotFound: ``name`` is not known (no run registered it, no offsets are stored under it)."""
    from connect_runtime import admin

    with open_store(conn_id, embedded, read_only=True) as (backend, _described, secrets):
        try:
            return admin.get_offsets(backend, name)
        except admin.ConnectorNotFound:
            raise
        except Exception as exc:
            raise _guard(conn_id, secrets, exc) from None


# -- changing -------------------------------------------------------------------------------------


def alter(conn_id: str, name: str, offsets: Sequence[Mapping[str, Any]], embedded: bool = False) -> dict[str, Any]:
    """KIP-875 alter. :raises ConnectorRunningError: a run holds it. :raises ConfigError: bad entries."""
    from connect_runtime import admin
    from connect_runtime.api.errors import ConfigError, ConnectorRunningError

    with open_store(conn_id, embedded) as (backend, _described, secrets):
        try:
            return admin.alter_offsets(backend, name, offsets)
        except (ConnectorRunningError, ConfigError, admin.OffsetsInDestination, admin.ConnectorNotFound):
            raise
        except Exception as exc:
            raise _guard(conn_id, secrets, exc) from None


def reset(conn_id: str, name: str, embedded: bool = False) -> dict[str, Any]:
    """KIP-875 reset. :raises ConnectorRunningError: a run holds it."""
    from connect_runtime import admin
    from connect_runtime.api.errors import ConnectorRunningError

    with open_store(conn_id, embedded) as (backend, _described, secrets):
        try:
            return admin.reset_offsets(backend, name)
        except (ConnectorRunningError, admin.OffsetsInDestination, admin.ConnectorNotFound):
            raise
        except Exception as exc:
            raise _guard(conn_id, secrets, exc) from None


__all__ = ["PALETTE", "StoreUnavailable", "UnknownConnection", "alter", "colour", "colours", "connection_ids", "offsets",
           "open_store", "overview", "reset", "runs"]
