"""PostgresCdcSource's ``snapshot.mode`` values and heartbeats (docs/cdc.md, "snapshot.mode", "Heartbeats"), on
PostgreSQL 15 (``logical_postgres``) into the embedded backend: ``initial_only`` reads once and then nothing,
``no_data`` streams only, ``always`` snapshots at every run (a run killed in its snapshot leaves nothing), and
``when_needed`` takes a new snapshot with a warning when the slot is gone (a run killed in it leaves the snapshot
due); ``configuration_based`` / ``custom`` are one error naming the field. Heartbeats: an idle captured table while
another table changes, the committed offset moves and the heartbeat topic holds Debezium's records; off, no topic;
``heartbeat.action.query`` runs before the run's target, so its change is read by the same run."""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import run_source
from connect_runtime.api import ConfigError
from tests.support import REPO
from tests.support.cdc import Workload, as_changes, committed_offset, confirmed_flush, topic_events

SOURCE = "connect_runtime.connectors.cdc.PostgresCdcSource"
PYCONNECT = str(Path(sys.executable).with_name("pyconnect"))
BEATS = "__debezium-heartbeat.shop"


def plain(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def config(url: str, mode: str, **more: str) -> dict[str, str]:
    return {"name": "cdc", "connector.class": SOURCE, "connection.url": url, "topic.prefix": "shop",
            "table.include.list": "a,public.b", "exactly.once.support": "required", "poll.idle.timeout.ms": "300",
            "snapshot.mode": mode, "transaction.boundary": "connector", **more}


def snapshots(store: str, table: str) -> list[dict[int, dict[str, Any]]]:
    """The snapshots in ``shop.public.<table>`` as rows by id: a run of ``r`` events, split where ``source.snapshot``
    says a table's snapshot begins or ended (Debezium's ``first*`` / ``last*`` marks)."""
    out: list[dict[int, dict[str, Any]]] = []
    previous: dict[str, Any] | None = None
    for _, value in topic_events(store, f"shop.public.{table}"):
        if value is None or value["op"] != "r":
            previous = value
            continue
        mark = value["source"]["snapshot"]
        if previous is None or previous["op"] != "r" or mark.startswith("first") \
                or previous["source"]["snapshot"].startswith("last"):
            out.append({})
        out[-1][value["after"]["id"]] = value["after"]
        previous = value
    return out


def launch(tmp_path: Path, store: str, cfg: dict[str, str], name: str) -> subprocess.Popen[bytes]:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    with open(tmp_path / f"{name}.log", "ab") as out:
        return subprocess.Popen([PYCONNECT, "--backend", store, "run", str(path)], cwd=REPO,
                                env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=out, stderr=subprocess.STDOUT)


def bulk(work: Workload, n: int = 30000) -> None:
    """``n`` rows more in ``a`` in one statement: a snapshot that takes a while."""
    import psycopg

    first = 1_000_001 + len([i for i in work.rows["a"] if i > 1_000_000])
    with psycopg.connect(plain(work.url), autocommit=True) as conn:
        conn.execute("INSERT INTO a SELECT g, 'bulk ' || g, g FROM generate_series(%s::int, %s::int) g", (first, first + n - 1))
    work.rows["a"].update({i: {"id": i, "name": f"bulk {i}", "qty": i} for i in range(first, first + n)})


def test_unsupported_modes_are_one_error_naming_the_field(logical_database: str, sqlite_url: str) -> None:
    for mode in ("configuration_based", "custom", "sometimes"):
        with pytest.raises(ConfigError, match=r"snapshot\.mode.*one of initial, initial_only, no_data, always, "
                                               rf"when_needed .*got '{mode}'"):
            run_source(config(logical_database, mode), sqlite_url)


def test_initial_only_reads_once_without_a_slot_and_then_says_it_reads_nothing(logical_database: str,
                                                                               sqlite_url: str) -> None:
    work = Workload(logical_database, seed=61)
    work.create()
    work.transactions(8, inserts_only=True)
    rows = work.snapshot_point()
    cfg = config(logical_database, "initial_only")
    first = run_source(cfg, sqlite_url).to_dict()
    assert first["records"] == sum(len(r) for r in rows.values())
    assert confirmed_flush(logical_database, "debezium") is None  # no slot: nothing holds WAL for a stream
    work.transactions(5)
    later = run_source(cfg, sqlite_url).to_dict()
    assert later["records"] == 0 and later["empty"]["reason"] == "committed_before"
    assert "snapshot.mode=initial_only" in json.dumps(later["empty"])
    assert snapshots(sqlite_url, "a") == [rows["a"]] and snapshots(sqlite_url, "b") == [rows["b"]]


def test_no_data_and_its_old_name_never_stream_only(logical_database: str, sqlite_url: str,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="connect_runtime")
    work = Workload(logical_database, seed=62)
    work.create()
    work.transactions(3, inserts_only=True)
    assert run_source(config(logical_database, "no_data"), sqlite_url).to_dict()["records"] == 0
    work.snapshot_point()
    work.transactions(6)
    assert run_source(config(logical_database, "never"), sqlite_url).to_dict()["records"] > 0
    assert "snapshot.mode=never is deprecated" in caplog.text
    for table in ("a", "b"):
        assert as_changes(topic_events(sqlite_url, f"shop.public.{table}")) == work.changes[table]


def test_always_snapshots_at_every_run_and_a_killed_snapshot_leaves_nothing(tmp_path: Path, logical_database: str,
                                                                            sqlite_url: str) -> None:
    """Every run: a new slot with an exported snapshot, every row (op r), then the stream from that slot. The changes
    between runs are in the next snapshot, not one by one (Debezium's always). A run SIGKILLed inside its snapshot
    wrote nothing; the next run's snapshot is whole. After it, a run of ``initial`` streams on from the last slot."""
    from tests.support.kills import kill_on_progress

    work = Workload(logical_database, seed=63)
    work.create()
    work.transactions(15, inserts_only=True)
    expected = [work.snapshot_point()]
    cfg = config(logical_database, "always", **{"batch.max.rows": "50"})
    assert run_source(cfg, sqlite_url).to_dict()["records"] == sum(len(r) for r in expected[-1].values())
    slot_at = confirmed_flush(logical_database, "debezium")
    work.transactions(10)
    expected.append(work.snapshot_point())
    assert run_source(cfg, sqlite_url).to_dict()["records"] == sum(len(r) for r in expected[-1].values())
    moved = confirmed_flush(logical_database, "debezium")
    assert slot_at is not None and moved is not None and moved > slot_at  # a new slot

    bulk(work)
    written = len(topic_events(sqlite_url, "shop.public.a"))
    proc = launch(tmp_path, sqlite_url, cfg, "killed")

    def new_slot() -> int:  # the killed run dropped the slot and made its own: its snapshot is being read
        at = confirmed_flush(logical_database, "debezium")
        return int(at is not None and at > moved)

    assert kill_on_progress(proc, new_slot, 1, rng=random.Random(6), what="the always run"), \
        (tmp_path / "killed.log").read_text()[-2000:]
    assert len(topic_events(sqlite_url, "shop.public.a")) == written, "the killed snapshot committed records"
    work.transactions(5)
    expected.append(work.snapshot_point())
    rerun = run_source(cfg, sqlite_url).to_dict()
    assert rerun["records"] == sum(len(r) for r in expected[-1].values()) and rerun["transactions"] == 1
    for table in ("a", "b"):
        assert snapshots(sqlite_url, table) == [e[table] for e in expected]
        assert {op for op, _, _ in as_changes(topic_events(sqlite_url, f"shop.public.{table}"))} == {"r"}

    work.transactions(12)  # initial from here: the last always run's offset says its snapshot is done
    run_source(config(logical_database, "initial"), sqlite_url)
    for table in ("a", "b"):
        got = as_changes(topic_events(sqlite_url, f"shop.public.{table}"))
        assert [c for c in got if c[0] != "r"] == work.changes[table]


def test_when_needed_takes_a_new_snapshot_when_the_slot_is_gone_even_after_a_kill(
        tmp_path: Path, logical_database: str, sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """As ``initial`` while the slot is there; a slot dropped under committed offsets: a WARNING naming it and a new
    snapshot (``initial`` fails instead). The run first commits a heartbeat whose offset marks the snapshot begun,
    so a run SIGKILLed after that (with a new slot and no snapshot committed) leaves the snapshot due."""
    import psycopg

    from connect_runtime.api.errors import ConnectError
    from tests.support.kills import kill_on_progress

    caplog.set_level(logging.WARNING, logger="connect_runtime")
    work = Workload(logical_database, seed=64)
    work.create()
    work.transactions(10, inserts_only=True)
    first = work.snapshot_point()
    cfg = config(logical_database, "when_needed")
    run_source(cfg, sqlite_url)
    work.transactions(10)
    run_source(cfg, sqlite_url)
    for table in ("a", "b"):
        assert [c for c in as_changes(topic_events(sqlite_url, f"shop.public.{table}")) if c[0] != "r"] == \
            work.changes[table]

    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute("SELECT pg_drop_replication_slot('debezium')")
    work.transactions(10)  # lost as single changes: the next snapshot shows their result
    with pytest.raises(ConnectError, match=r"is gone.*snapshot\.mode=when_needed"):
        run_source(config(logical_database, "initial"), sqlite_url)
    bulk(work)
    written = len(topic_events(sqlite_url, "shop.public.a"))
    proc = launch(tmp_path, sqlite_url, cfg, "killed")

    def marked_and_slot_made() -> int:  # the marker committed and the new slot made: the snapshot is being read
        return int(bool(topic_events(sqlite_url, BEATS)) and confirmed_flush(logical_database, "debezium") is not None)

    assert kill_on_progress(proc, marked_and_slot_made, 1, rng=random.Random(4), what="the when_needed run"), (tmp_path / "killed.log").read_text()[-2000:]
    assert len(topic_events(sqlite_url, "shop.public.a")) == written
    marker = committed_offset(sqlite_url, "cdc", "shop")
    assert marker is not None and marker["snapshot"] is True and marker["last_snapshot_record"] is False

    work.transactions(5)
    second = work.snapshot_point()
    rerun = run_source(cfg, sqlite_url).to_dict()
    assert rerun["records"] == sum(len(r) for r in second.values())
    work.transactions(10)
    run_source(cfg, sqlite_url)  # streams on from the new slot
    for table in ("a", "b"):
        got = as_changes(topic_events(sqlite_url, f"shop.public.{table}"))
        last_read = max(n for n, c in enumerate(got) if c[0] == "r")
        assert got[last_read + 1:] == work.changes[table]

    with psycopg.connect(plain(logical_database), autocommit=True) as conn:  # gone again: in this process, its log
        conn.execute("SELECT pg_drop_replication_slot('debezium')")
    work.transactions(5)
    third = work.snapshot_point()
    assert run_source(cfg, sqlite_url).to_dict()["records"] == sum(len(r) for r in third.values()) + 1  # + marker
    assert "replication slot debezium (slot.name) is gone" in caplog.text
    assert "not captured one by one" in caplog.text
    for table in ("a", "b"):
        assert snapshots(sqlite_url, table) == [first[table], second[table], third[table]]
    assert len(topic_events(sqlite_url, BEATS)) == 2  # the markers only: heartbeats are off
    key, value = topic_events(sqlite_url, BEATS)[0]
    assert key == {"serverName": "shop"} and isinstance(value["ts_ms"], int)


def test_heartbeats_move_the_offset_of_an_idle_captured_database(logical_database: str, sqlite_url: str) -> None:
    """``a`` and ``b`` idle while ``other`` (not captured) changes a lot: with ``heartbeat.interval.ms`` the run's
    committed offset moves past those changes, in a Debezium heartbeat record (key ``ServerNameKey``, value
    ``Heartbeat``, version 1); without, the offset stays and there is no heartbeat topic. Data records stay exactly
    once with heartbeats among them; ``heartbeat.action.query`` writes a change the same run reads."""
    import psycopg

    from connect_runtime.connectors.cdc._pgoutput import parse_lsn

    work = Workload(logical_database, seed=65)
    work.create()
    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute("CREATE TABLE other (id int PRIMARY KEY, v text)")
        conn.execute("CREATE TABLE beat (id int PRIMARY KEY, at timestamptz)")
    work.transactions(3, inserts_only=True)
    work.snapshot_point()
    converters = {"key.converter": "org.apache.kafka.connect.json.JsonConverter",
                  "key.converter.schemas.enable": "true",
                  "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                  "value.converter.schemas.enable": "true"}
    off = config(logical_database, "initial", **converters)
    run_source(off, sqlite_url)
    before = committed_offset(sqlite_url, "cdc", "shop")

    def busy_elsewhere(n: int) -> int:
        with psycopg.connect(plain(logical_database), autocommit=True) as conn:
            conn.execute("INSERT INTO other SELECT g, 'x' FROM generate_series(%s::int, %s::int) g "
                         "ON CONFLICT (id) DO UPDATE SET v = other.v || 'y'", (1, n))
            return parse_lsn(conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0])  # type: ignore[index]

    busy_elsewhere(2000)
    assert run_source(off, sqlite_url).to_dict()["records"] == 0
    assert committed_offset(sqlite_url, "cdc", "shop") == before  # heartbeats off: the offset stays
    assert topic_events(sqlite_url, BEATS) == []

    on = {**off, "heartbeat.interval.ms": "1000"}
    flushed = busy_elsewhere(2000)
    run = run_source(on, sqlite_url).to_dict()
    assert run["records"] == 1  # the heartbeat
    offset = committed_offset(sqlite_url, "cdc", "shop")
    assert offset is not None and int(offset["lsn"]) >= flushed > int(before["lsn"])  # type: ignore[index]
    (key, value), = topic_events(sqlite_url, BEATS)
    assert key["schema"] == {"type": "struct", "fields": [{"type": "string", "optional": False,
                                                           "field": "serverName"}],
                             "optional": False, "name": "io.debezium.connector.common.ServerNameKey", "version": 1}
    assert value["schema"] == {"type": "struct", "fields": [{"type": "int64", "optional": False, "field": "ts_ms"}],
                               "optional": False, "name": "io.debezium.connector.common.Heartbeat", "version": 1}
    assert key["payload"] == {"serverName": "shop"} and isinstance(value["payload"]["ts_ms"], int)

    # changes among heartbeats (one after every batch here): every change once, a rerun writes nothing new
    busy = {**on, "heartbeat.interval.ms": "1", "batch.max.rows": "10"}
    made = work.records
    work.transactions(40)
    busy_elsewhere(500)
    run = run_source(busy, sqlite_url).to_dict()
    beats = len(topic_events(sqlite_url, BEATS))
    assert beats > 3 and run["records"] == work.records - made + beats - 1
    for table in ("a", "b"):
        got = [(k["payload"], None if v is None else v["payload"])
               for k, v in topic_events(sqlite_url, f"shop.public.{table}")]
        assert [c for c in as_changes(got) if c[0] != "r"] == work.changes[table]

    action = {**busy, "table.include.list": "a,public.b,beat",
              "heartbeat.action.query": "INSERT INTO beat VALUES (1, now()) ON CONFLICT (id) DO UPDATE SET at = now()"}
    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute("ALTER PUBLICATION dbz_publication ADD TABLE beat")
    run_source(action, sqlite_url)
    run_source(action, sqlite_url)
    ops = [v["payload"]["op"] for _, v in topic_events(sqlite_url, "shop.public.beat") if v is not None]
    assert ops == ["c", "u"]  # each run's own action, read by that run
    from connect_runtime.api.errors import ConnectError

    with pytest.raises(ConnectError, match=r"heartbeat\.action\.query failed on slot debezium .*nope"):
        run_source({**action, "heartbeat.action.query": "UPDATE nope SET x = 1"}, sqlite_url)
