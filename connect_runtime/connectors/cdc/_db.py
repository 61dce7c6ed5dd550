"""Connections to the captured database (psycopg 3, without SQLAlchemy: the replication connection speaks libpq's
simple query protocol only) and the slot's SQL: bounded connects, the slot's state, waiting for a slot another
backend holds, advancing it never backwards.

Every connection runs with :data:`~connect_runtime.connectors.cdc._types.SESSION_OPTIONS` (the text forms the type
mapping reads). Messages name the server with :func:`~connect_runtime.connectors.sql._tls.server` and never the
password.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from connect_runtime.api.config import Password
from connect_runtime.api.errors import ConnectError
from connect_runtime.connectors.cdc._types import SESSION_OPTIONS
from connect_runtime.connectors.sql._common import DatabaseRefused, DatabaseUnavailable, build_url, log, scrub
from connect_runtime.connectors.sql._tls import refusal, server

if TYPE_CHECKING:
    import psycopg
    from sqlalchemy.engine import URL

SLOT_WAIT_S = 60.0
"""How long a run waits for its slot while another backend holds it (a killed run's backend finishing a read)."""


def _kwargs(cfg: Mapping[str, Any]) -> tuple[URL, dict[str, Any]]:
    url = build_url(cfg)
    if url.get_backend_name() != "postgresql":
        from connect_runtime.api.errors import ConfigError

        raise ConfigError(errors={"connection.url": f"a PostgreSQL URL (postgresql://host:5432/db), got a "
                                                    f"{url.get_backend_name()} URL"})
    kw: dict[str, Any] = {k: v for k, v in url.translate_connect_args(username="user", database="dbname").items()
                          if v is not None}
    kw.update({k: v[-1] if isinstance(v, tuple) else v for k, v in url.query.items()})
    key_password = cfg.get("connection.sslpassword")
    if key_password is not None and str(getattr(key_password, "value", key_password)).strip():
        kw["sslpassword"] = key_password.value if isinstance(key_password, Password) else str(key_password)
    timeout_ms = int(cfg.get("connection.timeout.ms") or 10000)
    kw["connect_timeout"] = max(1, -(-timeout_ms // 1000))
    kw["options"] = SESSION_OPTIONS
    kw["application_name"] = "pyconnect-cdc"
    return url, kw


def connect(cfg: Mapping[str, Any], what: str, *, replication: bool = False) -> psycopg.Connection[Any]:
    """An autocommit connection (``replication=database`` for a replication connection), tried
    ``connection.attempts`` times ``connection.backoff.ms`` apart; a refusal no retry fixes fails at once."""
    import psycopg

    url, kw = _kwargs(cfg)
    if replication:
        kw["replication"] = "database"
    attempts = int(cfg.get("connection.attempts") or 3)
    backoff = int(cfg.get("connection.backoff.ms") or 0) / 1000
    last = ""
    for attempt in range(1, attempts + 1):
        try:
            return psycopg.connect(autocommit=True, **kw)
        except psycopg.OperationalError as exc:
            last = scrub(str(exc).strip(), url)
            why = refusal(last, url, float(kw["connect_timeout"]))
            if why is None and "superuser or replication role" in last:  # the role lacks REPLICATION
                why = (f"{last}; the user {url.username!r} needs the REPLICATION attribute (ALTER ROLE ... "
                       "REPLICATION) or superuser to create and read a replication slot (docs/cdc.md, Permissions)")
            if why is not None:
                raise DatabaseRefused(f"cannot connect to the {server(url)} for {what}: {scrub(why, url)}; not "
                                      "retried (a retry would fail the same way)") from None
            if attempt < attempts:
                log.warning("PostgresCdcSource: connecting to the %s for %s failed (attempt %d of %d): %s",
                            server(url), what, attempt, attempts, last)
                time.sleep(backoff)
    raise DatabaseUnavailable(f"cannot connect to the {server(url)} for {what}: {attempts} attempts "
                              f"(connection.attempts, connection.backoff.ms, connection.timeout.ms); last error: {last}")


def slot_state(conn: psycopg.Connection[Any], slot: str) -> tuple[str | None, str | None, int | None] | None:
    """``(database, plugin, active_pid)`` of the slot, or None when there is none of that name."""
    row = conn.execute("SELECT database, plugin, active_pid FROM pg_replication_slots WHERE slot_name = %s",
                       (slot,)).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def confirmed_flush(conn: psycopg.Connection[Any], slot: str) -> str | None:
    """The slot's ``confirmed_flush_lsn`` (``X/Y``), None when there is no such slot."""
    row = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                       (slot,)).fetchone()
    return None if row is None else row[0]


def when_free(conn: psycopg.Connection[Any], slot: str, what: str) -> None:
    """Wait up to :data:`SLOT_WAIT_S` until no backend holds the slot (a killed run's backend may still finish a
    read it started); then fail naming the slot and the backend."""
    deadline = time.monotonic() + SLOT_WAIT_S
    while True:
        state = slot_state(conn, slot)
        if state is None or state[2] is None:
            return
        if time.monotonic() > deadline:
            raise ConnectError(f"replication slot {slot!r} is still held by backend {state[2]} after "
                               f"{SLOT_WAIT_S:.0f} s, so this run cannot {what}: is another run of this connector "
                               "(or another consumer of the slot) still going? pg_terminate_backend() ends it")
        time.sleep(0.1)


def advance(conn: psycopg.Connection[Any], slot: str, lsn: int) -> None:
    """Confirm the slot up to ``lsn`` (``pg_replication_slot_advance``), never moving it backwards (a late call of a
    run that was overtaken is a no-op), waiting for a slot another backend holds (:func:`when_free`)."""
    import psycopg

    from connect_runtime.connectors.cdc._pgoutput import lsn_text

    deadline = time.monotonic() + SLOT_WAIT_S
    while True:
        try:
            conn.execute("SELECT pg_replication_slot_advance(slot_name, GREATEST(%s::pg_lsn, confirmed_flush_lsn)) "
                         "FROM pg_replication_slots WHERE slot_name = %s", (lsn_text(lsn), slot))
            return
        except psycopg.errors.ObjectInUse:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


__all__ = ["SLOT_WAIT_S", "advance", "confirmed_flush", "connect", "slot_state", "when_free"]
