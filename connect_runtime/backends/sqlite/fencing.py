"""Fencing in this backend, read inside the caller's write transaction (so a check and the commit it
guards are one atomic step):

- producer epochs (KIP-618): ``init_transactions`` bumps the epoch of its ``transactional_id``
  (:func:`_bump_epoch`); a commit whose producer no longer holds :func:`_current_epoch` is refused;
- connector generations (``generation_guard``, the backend's ``commits_check_generation`` capability):
  a producer or group commit of a run whose generation is no longer the one in the registry entry is
  refused (:func:`_newer_generation`). Which generation is current is the runtime's decision; this
  module only reads the row it wrote.
"""

from __future__ import annotations

import json
import sqlite3

from connect_runtime.backends.sqlite.offsets import _read_entry


def _bump_epoch(conn: sqlite3.Connection, transactional_id: str) -> int:
    """Start the next epoch of ``transactional_id`` (0 for a new id) and return it."""
    current = _current_epoch(conn, transactional_id)
    epoch = 0 if current is None else current + 1
    conn.execute(
        "INSERT INTO producer_epochs(transactional_id, epoch) VALUES (?, ?)"
        " ON CONFLICT(transactional_id) DO UPDATE SET epoch = excluded.epoch",
        (transactional_id, epoch),
    )
    return epoch


def _current_epoch(conn: sqlite3.Connection, transactional_id: str) -> int | None:
    """The newest epoch initialised for ``transactional_id``, ``None`` if it never was."""
    row = conn.execute("SELECT epoch FROM producer_epochs WHERE transactional_id = ?",
                       (transactional_id,)).fetchone()
    return None if row is None else int(row[0])


def _newer_generation(conn: sqlite3.Connection, guard: tuple[str, bytes, int] | None) -> int | None:
    """The generation that has replaced ``guard``'s ``(store, key, generation)`` in the registry, or
    ``None`` when the guard's is still current (or there is no guard, or no registry entry)."""
    if guard is None:
        return None
    newest = _registry_generation(conn, guard[0], guard[1])
    return newest if newest is not None and newest != guard[2] else None


def _registry_generation(conn: sqlite3.Connection, store: str, key: bytes) -> int | None:
    """The generation held by a registry entry (a JSON object with ``"generation"``), or None."""
    raw = _read_entry(conn, store, key)
    if raw is None:
        return None
    try:
        gen = json.loads(raw).get("generation")
    except (ValueError, AttributeError):
        return None
    return gen if isinstance(gen, int) else None
