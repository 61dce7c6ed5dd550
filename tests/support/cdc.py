"""Helpers for the change data capture tests (issue 36): the statements behind
``tests/unit/connect_runtime/connectors/pgoutput_capture.txt`` (:data:`CAPTURE_SQL`, run in a fresh database of the
``logical_postgres`` cluster after ``CREATE_REPLICATION_SLOT "s" LOGICAL pgoutput``), and reading a slot's state."""

from __future__ import annotations

import threading
from typing import Any

CAPTURE_SQL = (
    "CREATE TABLE public.t (id int PRIMARY KEY, n numeric(10,2), s text, b boolean, d date, tm time, ts timestamp, "
    "tz timestamptz, j json, jb jsonb, u uuid, by bytea, a int[], ta text[], big text, i2 smallint, i8 bigint, "
    "f8 float8)",
    "CREATE TABLE public.u (k text PRIMARY KEY, v int)",
    "CREATE TYPE mood AS ENUM ('ok','sad')",
    "CREATE TABLE public.e (id int PRIMARY KEY, m mood)",
    "CREATE PUBLICATION p FOR TABLE t, u, e",
    # the slot is created here (its changes start after this point)
    "BEGIN",
    "INSERT INTO t VALUES (1, 12.30, 'hé \"x\"', true, '2026-01-02', '03:04:05.123456', '2026-01-02 03:04:05.5', "
    "'2026-01-02 03:04:05.123+02', '{\"a\": 1}', '{\"b\": [1, 2]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
    "'\\x00ff10', '{1,NULL,3}', '{\"a b\",\"c\\\"d\",NULL,\"NULL\"}', "
    "(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 400) g), -5, 9000000000, 1.5)",
    "INSERT INTO u VALUES ('k1', 1), ('k2', NULL)",
    "COMMIT",
    "UPDATE t SET s = 'upd' WHERE id = 1",  # the big text, TOASTed and unchanged: 'u'
    "UPDATE u SET k = 'k9' WHERE k = 'k1'",  # a key change under the default identity: the old key 'K'
    "ALTER TABLE u REPLICA IDENTITY FULL",
    "UPDATE u SET v = 7 WHERE k = 'k2'",  # the old tuple 'O'
    "DELETE FROM u WHERE k = 'k9'",
    "DELETE FROM t WHERE id = 1",  # the old key 'K'
    "INSERT INTO e VALUES (1, 'sad')",  # a Type message for the enum
    "TRUNCATE u",
)
SLOT_AT = 5
"""The index in :data:`CAPTURE_SQL` before which the slot is created."""

__all__ = ["CAPTURE_SQL", "SLOT_AT"]


# ------------------------------------------------------------------------------------------------------------------
# A workload whose every change is known, and the events the topics hold


class Workload:
    """Random transactions spanning the tables ``a (id int PRIMARY KEY, name text NOT NULL, qty int)`` and
    ``b (id bigint PRIMARY KEY, payload jsonb, tags text[])``, applied to the database and remembered: the rows
    now (:attr:`rows`) and, per table, every change in commit order (:attr:`changes`: ``(op, id, row)``, row None
    for a delete). ``records`` counts the records the changes make (a delete is two: the event and its tombstone)."""

    def __init__(self, url: str, seed: int) -> None:
        import random

        self.url = url.replace("postgresql+psycopg://", "postgresql://")
        self.rng = random.Random(seed)
        self.rows: dict[str, dict[int, dict[str, Any]]] = {"a": {}, "b": {}}
        self.changes: dict[str, list[tuple[str, int, dict[str, Any] | None]]] = {"a": [], "b": []}
        self.records = 0
        self.next_id = 1
        self.lock = threading.Lock()
        self.states: dict[int, dict[int, dict[str, Any]]] = {}
        """Table ``a``'s rows after each transaction, by its xid (what a replica shows once it has that one)."""

    def create(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("CREATE TABLE a (id int PRIMARY KEY, name text NOT NULL, qty int)")
            conn.execute("CREATE TABLE b (id bigint PRIMARY KEY, payload jsonb, tags text[])")

    def _row(self, table: str, i: int) -> dict[str, Any]:
        n = self.rng.randrange(1_000_000)
        if table == "a":
            return {"id": i, "name": f"name {n} é", "qty": None if n % 5 == 0 else n}
        return {"id": i, "payload": None if n % 7 == 0 else f'{{"n": {n}}}', "tags": [f"t{n}", None, 'q"d']}

    @staticmethod
    def _sql(table: str, row: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
        cols = list(row)
        return (f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})",
                tuple(row[c] for c in cols))

    def transactions(self, n: int, ops: int = 5, inserts_only: bool = False) -> None:
        """``n`` transactions of 1 to ``ops`` changes each, over both tables."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            for _ in range(n):
                with conn.transaction():
                    for _ in range(self.rng.randint(1, ops)):
                        self._change(conn, inserts_only)
                    xid = conn.execute("SELECT txid_current() % 4294967296").fetchone()[0]  # type: ignore[index]
                with self.lock:
                    self.states[int(xid)] = {i: dict(r) for i, r in self.rows["a"].items()}

    def _change(self, conn: Any, inserts_only: bool) -> None:
        table = self.rng.choice(("a", "b"))
        rows = self.rows[table]
        kind = "c" if inserts_only or len(rows) < 3 else self.rng.choice(("c", "c", "u", "d"))
        if kind == "c":
            i, self.next_id = self.next_id, self.next_id + 1
            row = self._row(table, i)
            conn.execute(*self._sql(table, row))
            rows[i] = row
            self.records += 1
        else:
            i = self.rng.choice(list(rows))
            if kind == "u":
                row = self._row(table, i)
                sets = ", ".join(f"{c} = %s" for c in row if c != "id")
                conn.execute(f"UPDATE {table} SET {sets} WHERE id = %s", (*[v for c, v in row.items() if c != "id"], i))
                rows[i] = row
                self.records += 1
            else:
                conn.execute(f"DELETE FROM {table} WHERE id = %s", (i,))
                del rows[i]
                row = None
                self.records += 2
        self.changes[table].append((kind, i, None if row is None else dict(row)))

    def snapshot_point(self) -> dict[str, dict[int, dict[str, Any]]]:
        """The rows as they are now (what a snapshot taken now shows); the changes so far are forgotten."""
        for table in self.changes:
            self.changes[table] = []
        return {t: {i: dict(r) for i, r in rows.items()} for t, rows in self.rows.items()}


def _records(store: str, topic: str) -> list[Any]:
    """Every record of partition 0 of ``topic`` (the backend's ``ConsumedRecord``), none when it does not exist."""
    from connect_runtime.api import TopicPartition
    from connect_runtime.backends import open_backend

    with open_backend(store) as backend:
        if topic not in backend.list_topics():
            return []
        tp = TopicPartition(topic, 0)
        consumer = backend.consumer(None)
        try:
            end = consumer.end_offsets([tp], 10)[tp]
        finally:
            consumer.close()
        return list(backend.read_range(tp, 0, end))


def topic_events(store: str, topic: str) -> list[tuple[Any, Any]]:
    """``(key, value)`` of every record of partition 0 of ``topic``, JSON decoded (value None for a tombstone)."""
    import json

    return [(json.loads(r.key) if r.key else None, json.loads(r.value) if r.value else None)
            for r in _records(store, topic)]


def topic_headers(store: str, topic: str) -> list[list[tuple[str, bytes | None]]]:
    """The headers of every record of partition 0 of ``topic``, as the topic holds them (bytes)."""
    return [[(n, None if v is None else bytes(v)) for n, v in r.headers or []] for r in _records(store, topic)]


def as_changes(events: list[tuple[Any, Any]]) -> list[tuple[str, int, dict[str, Any] | None]]:
    """Events as the workload's changes: ``(op, id, after)``; tombstones checked (they follow their delete) and
    left out; snapshot reads (``r``) as they are."""
    out: list[tuple[str, int, dict[str, Any] | None]] = []
    for n, (key, value) in enumerate(events):
        if value is None:
            prev = events[n - 1][1] if n else None
            assert prev is not None and prev["op"] == "d" and events[n - 1][0] == key, f"a stray tombstone at {n}"
            continue
        row = value["after"] if value["op"] != "d" else None
        ident = (value["after"] or value["before"])["id"]
        assert key == {"id": ident}, f"record {n}: key {key} for id {ident}"
        out.append((value["op"], ident, row))
    return out


def changes_in_slot(url: str, slot: str, publication: str) -> list[tuple[int, int]]:
    """``(commit_lsn, changes)`` of every transaction a slot still holds (a peek: the slot does not move)."""
    import psycopg

    from connect_runtime.connectors.cdc._pgoutput import Begin, Commit, Delete, Insert, Update, decode

    out: list[tuple[int, int]] = []
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        rows = conn.execute("SELECT data FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL, 'proto_version', "
                            "'1', 'publication_names', %s)", (slot, publication)).fetchall()
    count, commit = 0, 0
    for (data,) in rows:
        msg = decode(data)
        if isinstance(msg, Begin):
            count, commit = 0, msg.final_lsn
        elif isinstance(msg, (Insert, Update, Delete)):
            count += 1
        elif isinstance(msg, Commit):
            out.append((commit, count))
    return out


def confirmed_flush(url: str, slot: str) -> int | None:
    import psycopg

    from connect_runtime.connectors.cdc._pgoutput import parse_lsn

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        row = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                           (slot,)).fetchone()
    return None if row is None or row[0] is None else parse_lsn(row[0])


def committed_offset(store: str, connector: str, prefix: str) -> dict[str, Any] | None:
    """The connector's committed offset of partition ``{"server": prefix}`` (KIP-875's admin shape)."""
    from connect_runtime.admin import ConnectorNotFound, get_offsets
    from connect_runtime.backends import open_backend

    with open_backend(store) as backend:
        try:
            entries = get_offsets(backend, connector, kind="source")["offsets"]
        except ConnectorNotFound:  # no run registered the connector yet: nothing committed
            return None
    return next((e["offset"] for e in entries if e["partition"] == {"server": prefix}), None)


__all__ += ["Workload", "as_changes", "changes_in_slot", "committed_offset", "confirmed_flush", "topic_events",
            "topic_headers"]
