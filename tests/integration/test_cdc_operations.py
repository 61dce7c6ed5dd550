"""Running PostgresCdcSource (docs/cdc.md, "Operations"), on PostgreSQL 15 with ``wal_level=logical``: a slot the
server invalidated (``max_slot_wal_keep_size``) is one error naming the slot and the fix, and the fix works (a new
snapshot); the Connectors view's JSON shows Debezium's offsets as Kafka Connect's REST API does; retiring the
pipeline with the documented SQL leaves no slot and no publication."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from connect_runtime import run_source
from connect_runtime.api.errors import ConnectError
from tests.support.cdc import Workload

SOURCE = "connect_runtime.connectors.cdc.PostgresCdcSource"


def plain(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def config(url: str) -> dict[str, str]:
    return {"name": "cdc-ops", "connector.class": SOURCE, "connection.url": url, "topic.prefix": "ops",
            "table.include.list": "a,b", "slot.name": "ops_slot", "publication.name": "ops_pub",
            "exactly.once.support": "required", "poll.idle.timeout.ms": "300"}


def wal_status(url: str, slot: str) -> str | None:
    import psycopg

    with psycopg.connect(plain(url), autocommit=True) as conn:
        row = conn.execute("SELECT wal_status FROM pg_replication_slots WHERE slot_name = %s", (slot,)).fetchone()
    return None if row is None else row[0]


def test_an_invalidated_slot_is_one_error_naming_it_and_the_fix_and_the_fix_works(
        logical_database: str, sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """``max_slot_wal_keep_size`` set low, the slot left behind while WAL grows, a checkpoint: the server
    invalidates the slot (``wal_status`` ``lost``); the next run fails naming the slot, the setting and the two
    steps back (or snapshot.mode=when_needed, which takes them itself); after them, a run takes a new snapshot
    holding every row."""
    import psycopg

    from connect_runtime import admin
    from connect_runtime.backends import open_backend

    work = Workload(logical_database, seed=360)
    work.create()
    work.transactions(5, inserts_only=True)
    cfg = config(logical_database)
    assert run_source(cfg, sqlite_url).to_dict()["records"] > 0  # the snapshot: offsets committed
    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'")  # the cluster is this session's own
        conn.execute("SELECT pg_reload_conf()")
        try:
            for _ in range(3):  # WAL the slot has not confirmed, in segments of its own
                work.transactions(3)
                conn.execute("SELECT pg_switch_wal()")
            conn.execute("CHECKPOINT")
            assert wal_status(logical_database, "ops_slot") == "lost", "the server did not invalidate the slot"
        finally:
            conn.execute("ALTER SYSTEM RESET max_slot_wal_keep_size")
            conn.execute("SELECT pg_reload_conf()")
    with pytest.raises(ConnectError) as failed:
        run_source(cfg, sqlite_url)
    message = str(failed.value)
    for said in ("replication slot 'ops_slot' (slot.name) was invalidated", "max_slot_wal_keep_size",
                 "SELECT pg_drop_replication_slot('ops_slot')", "pyconnect offsets reset"):
        assert said in message, f"{said!r} is not in the error: {message}"
    assert "not-checked-pw" not in message and "snapshot.mode=when_needed" in message

    # snapshot.mode=when_needed instead: a WARNING naming the slot, the marker heartbeat, then a new snapshot
    caplog.set_level(logging.WARNING, logger="connect_runtime")
    rows = sum(len(r) for r in work.rows.values())
    renewed = run_source({**cfg, "snapshot.mode": "when_needed"}, sqlite_url).to_dict()
    assert renewed["records"] == rows + 1 and renewed["source_offsets"][0]["offset"]["last_snapshot_record"]
    assert "replication slot ops_slot (slot.name) is invalidated by the server (wal_status lost)" in caplog.text
    assert wal_status(logical_database, "ops_slot") == "reserved"

    # the fix the error names: drop the slot, delete the offsets; the next run is a new snapshot of every row
    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute("SELECT pg_drop_replication_slot('ops_slot')")
    with open_backend(sqlite_url) as backend:
        admin.reset_offsets(backend, "cdc-ops")
    again = run_source(cfg, sqlite_url).to_dict()
    assert again["records"] == rows and again["source_offsets"][0]["offset"]["last_snapshot_record"], again
    assert wal_status(logical_database, "ops_slot") == "reserved"


def test_the_view_shows_debeziums_offsets_and_retiring_leaves_no_slot(logical_database: str, sqlite_url: str,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """The Connectors view's JSON (``service.overview``, what the page and its API show): the source partition
    ``{"server": prefix}`` and Debezium's offset keys, LSNs as numbers as Kafka Connect's REST API shows
    Debezium's; no password of the source. Then the retirement SQL of docs/cdc.md: no slot, no publication."""
    import psycopg

    from airflow_pyconnect.plugins import service

    work = Workload(logical_database, seed=361)
    work.create()
    work.transactions(3, inserts_only=True)
    cfg = config(logical_database)
    run_source(cfg, sqlite_url)
    work.transactions(4)
    run_source(cfg, sqlite_url)
    monkeypatch.setenv("AIRFLOW_CONN_PC_CDC", json.dumps({"conn_type": "pyconnect", "host": sqlite_url}))
    got = service.overview("pc_cdc")
    (listed,) = [c for c in got["connectors"] if c["name"] == "cdc-ops"]
    assert listed["kind"] == "source" and sorted(listed["topics"]) == ["ops.public.a", "ops.public.b"]
    (entry,) = listed["offsets"]
    assert entry["partition"] == {"server": "ops"}
    offset = entry["offset"]
    assert {"lsn", "lsn_commit", "lsn_proc", "txId", "ts_usec"} <= set(offset), offset
    assert all(isinstance(offset[k], int) for k in ("lsn", "lsn_commit", "lsn_proc", "txId", "ts_usec")), offset
    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        confirmed = conn.execute("SELECT confirmed_flush_lsn - '0/0'::pg_lsn FROM pg_replication_slots "
                                 "WHERE slot_name = 'ops_slot'").fetchone()[0]  # type: ignore[index]
    # the slot is past what was committed: the end of the last transaction read (and Debezium's lsn_commit before it)
    assert offset["lsn_commit"] < offset["tx_end_lsn"] <= int(confirmed), (offset, confirmed)
    assert "not-checked-pw" not in json.dumps(got)

    # retiring the pipeline (docs/cdc.md): the slot and the publication dropped, nothing left holding WAL
    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                     "WHERE slot_name = 'ops_slot'")
        conn.execute("DROP PUBLICATION IF EXISTS ops_pub")
        assert conn.execute("SELECT count(*) FROM pg_replication_slots WHERE database = current_database()"
                            ).fetchone()[0] == 0  # type: ignore[index]
        assert conn.execute("SELECT count(*) FROM pg_publication").fetchone()[0] == 0  # type: ignore[index]


def test_a_role_with_replication_and_select_only_captures_from_a_publication_its_owner_made(
        logical_database: str, sqlite_url: str) -> None:
    """docs/cdc.md "Permissions": ``REPLICATION`` and ``SELECT`` on the tables are enough when the tables' owner
    created the publication; without ``REPLICATION`` the run fails saying what the role lacks."""
    import uuid

    import psycopg

    work = Workload(logical_database, seed=362)
    work.create()
    work.transactions(4, inserts_only=True)
    role = "cdc_" + uuid.uuid4().hex[:10]
    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN REPLICATION")
        conn.execute(f"GRANT SELECT ON a, b TO {role}")
        conn.execute("CREATE PUBLICATION ops_pub FOR TABLE a, b")  # by the tables' owner
    try:
        as_role = logical_database.replace("postgres:", f"{role}:", 1)
        assert f"//{role}:" in as_role
        cfg = config(as_role)
        assert run_source(cfg, sqlite_url).to_dict()["records"] == sum(len(r) for r in work.rows.values())
        before = work.records
        work.transactions(5)
        assert run_source(cfg, sqlite_url).to_dict()["records"] == work.records - before
        with psycopg.connect(plain(logical_database), autocommit=True) as conn:
            conn.execute(f"ALTER ROLE {role} NOREPLICATION")
        with pytest.raises(ConnectError) as failed:  # at once: no retry gives the role an attribute
            run_source({**cfg, "name": "cdc-ops-2", "slot.name": "ops_slot_2", "connection.attempts": "5",
                        "connection.backoff.ms": "60000"}, sqlite_url)
        message = str(failed.value)
        assert f"the user {role!r} needs the REPLICATION attribute" in message and "not retried" in message, message
        assert "not-checked-pw" not in message
    finally:
        with psycopg.connect(plain(logical_database), autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE database = current_database() AND active_pid IS NULL")
            conn.execute(f"REVOKE ALL ON a, b FROM {role}")
            conn.execute(f"DROP ROLE {role}")
