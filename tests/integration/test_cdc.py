"""PostgresCdcSource on PostgreSQL 15 (``wal_level=logical``, tests/support/postgres.py's ``logical_postgres``) into the
embedded backend: the capture behind the decoder's unit tests decoded live; a snapshot, then random transactions
spanning two tables over several bounded runs, every change once and in commit order per table; a rerun with
nothing new writes nothing; and runs SIGKILLed on observed progress, nothing lost or written twice, the slot never
confirmed past what was committed (docs/cdc.md)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import run_source
from connect_runtime.api import ConfigError
from connect_runtime.connectors.cdc._pgoutput import decode
from tests.integration.test_sink_kill import kill_loop
from tests.integration.test_sql_kill import topic_ends
from tests.support import REPO, slow_iterations
from tests.support.cdc import (
    CAPTURE_SQL,
    SLOT_AT,
    Workload,
    as_changes,
    changes_in_slot,
    committed_offset,
    confirmed_flush,
    topic_events,
)

SOURCE = "connect_runtime.connectors.cdc.PostgresCdcSource"
PYCONNECT = str(Path(sys.executable).with_name("pyconnect"))


def plain(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def test_the_capture_statements_decode_live_as_the_unit_tests_expect(logical_database: str) -> None:
    """The statements behind pgoutput_capture.txt, run again: the live messages decode to the same kinds."""
    import psycopg

    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        for i, statement in enumerate(CAPTURE_SQL):
            if i == SLOT_AT:
                with psycopg.connect(plain(logical_database) + "?replication=database", autocommit=True) as rep:
                    res = rep.pgconn.exec_(b'CREATE_REPLICATION_SLOT "s" LOGICAL pgoutput')
                    assert res.status == psycopg.pq.ExecStatus.TUPLES_OK, res.error_message
            conn.execute(statement)  # type: ignore[arg-type]
        rows = conn.execute("SELECT data FROM pg_logical_slot_peek_binary_changes('s', NULL, NULL, 'proto_version', "
                            "'1', 'publication_names', 'p')").fetchall()
    kinds = [type(decode(data)).__name__ for (data,) in rows]
    captured = Path(REPO, "tests/unit/connect_runtime/connectors/pgoutput_capture.txt").read_text().splitlines()
    assert kinds == [type(decode(bytes.fromhex(line.split()[2]))).__name__ for line in captured]


def config(url: str, prefix: str = "shop", **more: str) -> dict[str, str]:
    """The connector ``cdc-<prefix>`` (``cdc`` for ``shop``) capturing ``a`` and ``b`` into ``<prefix>.public.*``."""
    return {"name": "cdc" if prefix == "shop" else f"cdc-{prefix}", "connector.class": SOURCE, "connection.url": url,
            "topic.prefix": prefix,
            "table.include.list": "a,public.b", "exactly.once.support": "required", "poll.idle.timeout.ms": "300",
            **more}


def check_topics(store: str, work: Workload, snapshot: dict[str, dict[int, dict[str, Any]]],
                 prefix: str = "shop") -> None:
    """Each table's topic: the snapshot's rows (op r, in any order), then every change once, in commit order; the
    events replayed give the table's rows."""
    for table in ("a", "b"):
        got = as_changes(topic_events(store, f"{prefix}.public.{table}"))
        reads = [c for c in got if c[0] == "r"]
        assert {i: row for _, i, row in reads} == snapshot[table] and len(reads) == len(snapshot[table])
        stream = got[len(reads):]
        assert all(op != "r" for op, _, _ in stream), f"{table}: a snapshot read after the stream began"
        expected = work.changes[table]
        assert len(stream) == len(expected), f"{table}: {len(stream)} changes written, {len(expected)} made"
        diff = next((n for n, (g, e) in enumerate(zip(stream, expected, strict=True)) if g != e), None)
        assert diff is None, f"{table}: change {diff} is {stream[diff]}, expected {expected[diff]}"
        replay: dict[int, dict[str, Any]] = {}
        for op, i, row in got:
            if op == "d":
                del replay[i]
            else:
                assert row is not None
                replay[i] = row
        assert replay == work.rows[table]


@pytest.mark.parametrize("boundary", ["connector", "poll"])
def test_snapshot_then_changes_across_bounded_runs(logical_database: str, sqlite_url: str, boundary: str,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    import logging

    caplog.set_level(logging.INFO, logger="connect_runtime")
    work = Workload(logical_database, seed=36)
    work.create()
    work.transactions(20, inserts_only=True)
    snapshot = work.snapshot_point()
    cfg = config(logical_database, **{"transaction.boundary": boundary, "batch.max.rows": "7"})

    first = run_source(cfg, sqlite_url).to_dict()
    assert first["records"] == sum(len(rows) for rows in snapshot.values())
    (entry,) = first["source_offsets"]
    assert entry["partition"] == {"server": "shop"}
    assert entry["offset"]["snapshot"] is True and entry["offset"]["last_snapshot_record"] is True
    if boundary == "connector":
        assert first["transactions"] == 1  # the snapshot is all or nothing

    for _ in range(3):  # changes between bounded runs: each run writes what committed before it started
        before = work.records
        work.transactions(15)
        run = run_source(cfg, sqlite_url).to_dict()
        assert run["records"] == work.records - before
        check_topics(sqlite_url, work, snapshot)
        offset = run["source_offsets"][0]["offset"]
        # Debezium's keys (lsn_commit: the end of the transaction before), ours (tx_commit_lsn, event) and, as
        # the run's last record is its transaction's last change, that transaction's end (tx_end_lsn)
        assert set(offset) == {"lsn", "lsn_proc", "lsn_commit", "txId", "ts_usec", "messageType", "tx_commit_lsn",
                               "event", "tx_end_lsn"}
        assert offset["lsn_commit"] < offset["tx_commit_lsn"] < offset["tx_end_lsn"]
        # every transaction read is confirmed: the slot holds nothing the topics do not
        assert changes_in_slot(logical_database, "debezium", "dbz_publication") == []
        assert confirmed_flush(logical_database, "debezium") is not None

    again = run_source(cfg, sqlite_url).to_dict()
    assert again["records"] == 0 and again["ranges"] == {}
    assert again["empty"]["reason"] == "committed_before"
    assert "not-checked-pw" not in json.dumps(again)
    check_topics(sqlite_url, work, snapshot)
    assert "PostgresCdcSource: reading slot debezium on postgresql+psycopg://postgres:***@" in caplog.text
    assert "not-checked-pw" not in caplog.text  # the URL's password, in no log line


def test_an_offset_of_the_previous_version_resumes_without_loss_or_duplicates(logical_database: str,
                                                                              sqlite_url: str) -> None:
    """An offset committed by the previous version (``lsn_commit``: the transaction's own commit LSN, with
    ``event``; no ``tx_commit_lsn``) is read as it was written: a run stopped after some records, its offset
    rewritten in the old shape, the next run writes every change left once (the transaction it stopped in is read
    again and filtered by ``event``), then offsets of this version's shape."""
    from connect_runtime.admin import alter_offsets
    from connect_runtime.backends import open_backend

    work = Workload(logical_database, seed=3606)
    work.create()
    work.transactions(5, inserts_only=True)
    snapshot = work.snapshot_point()
    cfg = config(logical_database, **{"transaction.boundary": "connector", "batch.max.rows": "3"})
    run_source(cfg, sqlite_url)
    before = work.records
    work.transactions(12, ops=6)
    total = work.records - before
    first = run_source(cfg, sqlite_url, max_records=total // 2).to_dict()
    assert 0 < first["records"] < total
    new = committed_offset(sqlite_url, "cdc", "shop")
    assert new is not None and "tx_commit_lsn" in new
    old = {k: v for k, v in new.items() if k not in ("tx_commit_lsn", "tx_end_lsn")}
    old["lsn_commit"] = new["tx_commit_lsn"]  # the previous version's meaning
    with open_backend(sqlite_url) as backend:
        alter_offsets(backend, "cdc", [{"partition": {"server": "shop"}, "offset": old}])
    assert committed_offset(sqlite_url, "cdc", "shop") == old
    rest = run_source(cfg, sqlite_url).to_dict()
    assert first["records"] + rest["records"] == total
    check_topics(sqlite_url, work, snapshot)
    after = committed_offset(sqlite_url, "cdc", "shop")
    assert after is not None and after["tx_commit_lsn"] > old["lsn_commit"], (after, old)
    assert run_source(cfg, sqlite_url).to_dict()["records"] == 0


def test_config_errors_name_the_key(logical_database: str, sqlite_url: str) -> None:
    with pytest.raises(ConfigError, match=r"table\.include\.list.*public\.nope do not exist"):
        run_source(config(logical_database, **{"table.include.list": "nope"}), sqlite_url)
    Workload(logical_database, seed=1).create()
    import psycopg

    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute("CREATE PUBLICATION only_a FOR TABLE a")
    with pytest.raises(ConfigError, match=r"publication\.name.*does not publish public\.b"):
        run_source(config(logical_database, **{"publication.name": "only_a"}), sqlite_url)


# ------------------------------------------------------------------------------------------------------------------
# SIGKILL at any instant


def slot_not_ahead(url: str, store: str, prefix: str) -> None:
    """The slot's confirmed position is at or before the first change not committed: every transaction the witness
    slot (never advanced) holds past the committed offset is still in the connector's slot."""
    offset = committed_offset(store, config(url, prefix)["name"], prefix)
    assert offset is not None and "tx_commit_lsn" in offset, f"the snapshot committed first: {offset}"
    done = (int(offset["tx_commit_lsn"]), int(offset["event"]))
    witness = changes_in_slot(url, "witness", "dbz_publication")
    pending = [commit for commit, n in witness if (commit, n) > done and n > 0]
    flushed = confirmed_flush(url, "debezium")
    assert flushed is not None
    if pending:
        assert flushed <= pending[0], (f"the slot is confirmed to {flushed:X}, past the first change not "
                                       f"committed (transaction {pending[0]:X}; committed {done})")
    held = {commit for commit, _ in changes_in_slot(url, "debezium", "dbz_publication")}
    assert set(pending) <= held


def cdc_kill_loop(tmp_path: Path, db: str, store: str, kills: int, transactions: int, prefix: str = "shop",
                  **more: str) -> None:
    import psycopg

    work = Workload(db, seed=random.randrange(1 << 30))
    work.create()
    work.transactions(30, inserts_only=True)
    snapshot = work.snapshot_point()
    cfg = config(db, prefix, **{"transaction.boundary": "connector", "batch.max.rows": "40", **more})
    assert run_source(cfg, store).to_dict()["records"] == sum(len(r) for r in snapshot.values())
    with psycopg.connect(plain(db), autocommit=True) as conn:  # sees every change from here on, never advanced
        conn.execute("SELECT pg_create_logical_replication_slot('witness', 'pgoutput')")
    base = sum(len(r) for r in snapshot.values())
    work.transactions(transactions)
    cfg_path = tmp_path / "cdc.json"
    cfg_path.write_text(json.dumps(cfg))
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def launch(log: Path) -> subprocess.Popen[bytes]:
        if log.name != "run1.log" and log.name != "final.log":
            slot_not_ahead(db, store, prefix)  # after the previous run's kill
        with open(log, "ab") as out:
            return subprocess.Popen([PYCONNECT, "--backend", store, "run", str(cfg_path)], cwd=REPO, env=env,
                                    stdout=out, stderr=subprocess.STDOUT)

    def grow(total: int) -> int:  # a run ended before its kill: as many transactions more
        work.transactions(transactions)
        return base + work.records

    topics = [f"{prefix}.public.{t}" for t in ("a", "b")]

    def progress() -> int:  # records written: cheap on SQLite (its end offsets), counted on Kafka (commit markers)
        if store.startswith("sqlite"):
            return topic_ends(store, topics)
        return sum(len(topic_events(store, t)) for t in topics)

    kill_loop(tmp_path, store, cfg, kills=kills, progress=progress, total=base + work.records, grow=grow,
              launch=launch)
    check_topics(store, work, snapshot, prefix)
    logs = "".join(log.read_text(errors="replace") for log in tmp_path.glob("*.log"))
    assert '"records"' in logs and "not-checked-pw" not in logs  # the URL's password, in no run's output
    assert changes_in_slot(db, "debezium", "dbz_publication") == []
    if more.get("heartbeat.interval.ms"):
        assert topic_events(store, f"__debezium-heartbeat.{prefix}"), "no heartbeat was written"


def test_cdc_is_exactly_once_across_sigkills(tmp_path: Path, logical_database: str, sqlite_url: str) -> None:
    """With heartbeats after every batch (heartbeat.interval.ms=1): their offsets commit with the records."""
    cdc_kill_loop(tmp_path, logical_database, sqlite_url, kills=3, transactions=400, **{"heartbeat.interval.ms": "1"})


def test_cdc_is_exactly_once_across_sigkills_on_kafka(tmp_path: Path, logical_database: str, kafka_url: str) -> None:
    """The same on Apache Kafka (transactional producer, the offsets in its offsets topic)."""
    cdc_kill_loop(tmp_path, logical_database, kafka_url, kills=2, transactions=300,
                  prefix=f"cdc{random.randrange(1 << 30)}")


@pytest.mark.slow
def test_cdc_sigkill_loop_long(tmp_path: Path, logical_database: str, sqlite_url: str) -> None:
    cdc_kill_loop(tmp_path, logical_database, sqlite_url, kills=slow_iterations(6, 20), transactions=1500)


def test_types_snapshot_and_stream_agree_toast_and_full_identity(logical_database: str, sqlite_url: str) -> None:
    """A row read in the snapshot and the same values inserted later give equal ``after`` structs (both come from
    PostgreSQL's text output); an unchanged TOASTed column is Debezium's placeholder; ``REPLICA IDENTITY FULL``
    gives the whole ``before``."""
    import base64
    import decimal

    import psycopg

    values = ("12.30, 'hé \"x\"', true, '2026-01-02', '03:04:05.123456', '2026-01-02 03:04:05.5', "
              "'2026-01-02 03:04:05.123+02', '{\"a\": 1}', '{\"b\": [1, 2]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
              "'\\x00ff10', '{1,NULL,3}', '{\"a b\",\"c\\\"d\",NULL}', "
              "(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 400) g), -5, 9000000000, 1.5, 7.25, 'ab'")
    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, n numeric(10,2), s text NOT NULL, b boolean, d date, "
                     "tm time, ts timestamp, tz timestamptz, j json, jb jsonb, u uuid, by bytea, a int[], ta text[], "
                     "big text, i2 smallint, i8 bigint, f8 float8, vn numeric, c char(4))")
        conn.execute("CREATE TABLE f (id int PRIMARY KEY, v text)")
        conn.execute("ALTER TABLE f REPLICA IDENTITY FULL")
        conn.execute(f"INSERT INTO t VALUES (1, {values})")  # type: ignore[arg-type]
        conn.execute("INSERT INTO f VALUES (1, 'old')")
    cfg = config(logical_database, **{"table.include.list": "t,f"})
    assert run_source(cfg, sqlite_url).to_dict()["records"] == 2
    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute(f"INSERT INTO t VALUES (2, {values})")  # type: ignore[arg-type]
        conn.execute("UPDATE t SET s = 'upd' WHERE id = 1")
        conn.execute("UPDATE f SET v = 'new' WHERE id = 1")
    assert run_source(cfg, sqlite_url).to_dict()["records"] == 3

    (_, read), (_, insert), (_, update) = topic_events(sqlite_url, "shop.public.t")
    assert (read["op"], insert["op"], update["op"]) == ("r", "c", "u")
    assert {**read["after"], "id": 2} == insert["after"]
    after = read["after"]
    assert decimal.Decimal(int.from_bytes(base64.b64decode(after["n"]), "big", signed=True)).scaleb(-2) == \
        decimal.Decimal("12.30")
    assert (after["s"], after["b"], after["tz"], after["a"], after["ta"]) == (
        'hé "x"', True, "2026-01-02T01:04:05.123000Z", [1, None, 3], ["a b", 'c"d', None])
    assert (after["u"], base64.b64decode(after["by"]), after["i8"], after["f8"]) == (
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", b"\x00\xff\x10", 9000000000, 1.5)
    assert after["vn"]["scale"] == 2 and len(after["big"]) == 12800 and after["c"] == "ab  "
    assert update["before"] is None and update["after"]["s"] == "upd"
    assert update["after"]["big"] == "__debezium_unavailable_value"  # unchanged TOAST: not sent by the server
    (_, _), (_, full) = topic_events(sqlite_url, "shop.public.f")
    assert (full["op"], full["before"], full["after"]) == ("u", {"id": 1, "v": "old"}, {"id": 1, "v": "new"})


def test_a_snapshot_killed_midway_left_nothing_and_is_taken_again(tmp_path: Path, logical_database: str,
                                                                  sqlite_url: str) -> None:
    """SIGKILL once the slot exists and before the snapshot committed (it commits as one transaction): nothing is
    written, and the next run drops the slot, snapshots again (with the changes made in between) and streams on."""
    import psycopg

    from tests.support.kills import kill_on_progress

    work = Workload(logical_database, seed=7)
    work.create()
    with psycopg.connect(plain(logical_database), autocommit=True) as conn:  # a snapshot that takes a while
        conn.execute("INSERT INTO a SELECT g, 'bulk ' || g, g FROM generate_series(1000001, 1030000) g")
    work.rows["a"].update({i: {"id": i, "name": f"bulk {i}", "qty": i} for i in range(1000001, 1030001)})
    cfg_path = tmp_path / "cdc.json"
    cfg_path.write_text(json.dumps(config(logical_database, **{"transaction.boundary": "connector"})))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with open(tmp_path / "run.log", "ab") as out:
        proc = subprocess.Popen([PYCONNECT, "--backend", sqlite_url, "run", str(cfg_path)], cwd=REPO, env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    first = [None]

    def slot_created() -> int:
        first[0] = first[0] or confirmed_flush(logical_database, "debezium")  # type: ignore[assignment]
        return int(first[0] is not None)

    assert kill_on_progress(proc, slot_created, 1, rng=random.Random(3), what="the snapshot run"), \
        (tmp_path / "run.log").read_text()[-2000:]
    assert topic_events(sqlite_url, "shop.public.a") == [], "the killed snapshot committed records"
    work.transactions(10, inserts_only=True)  # in the new snapshot, not in the stream
    snapshot = work.snapshot_point()
    rerun = run_source(config(logical_database, **{"transaction.boundary": "connector"}), sqlite_url).to_dict()
    assert rerun["records"] == sum(len(rows) for rows in snapshot.values())
    assert (confirmed_flush(logical_database, "debezium") or 0) > (first[0] or 0)  # a new slot, further on
    work.transactions(20)
    run_source(config(logical_database, **{"transaction.boundary": "connector"}), sqlite_url)
    check_topics(sqlite_url, work, snapshot)


def test_a_zombie_run_writes_nothing_and_never_moves_the_slot_back(tmp_path: Path, logical_database: str,
                                                                   kafka_url: str) -> None:
    """A run frozen (SIGSTOP) mid-stream, a second run of the connector doing the whole work, then the first thawed:
    it is fenced (a newer generation started), commits nothing more, and every change is in the topics once. On
    Apache Kafka: a process frozen inside an embedded (SQLite) store's write transaction would hold its lock, and
    the successor would wait for it, not fence it."""
    import signal
    import time

    work = Workload(logical_database, seed=11)
    work.create()
    work.transactions(5, inserts_only=True)
    snapshot = work.snapshot_point()
    prefix = f"zombie{random.randrange(1 << 30)}"
    cfg = config(logical_database, prefix, **{"transaction.boundary": "connector", "batch.max.rows": "20"})
    run_source(cfg, kafka_url)
    work.transactions(600)
    cfg_path = tmp_path / "cdc.json"
    cfg_path.write_text(json.dumps(cfg))
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def start_zombie(log_path: Path) -> subprocess.Popen[bytes]:
        with open(log_path, "ab") as out:
            return subprocess.Popen([PYCONNECT, "--backend", kafka_url, "run", str(cfg_path)], cwd=REPO, env=env,
                                    stdout=out, stderr=subprocess.STDOUT)

    # The first run is frozen once it committed part of the stream (the slot moved: it advances only after a
    # commit). A run that read everything before the freeze (a fast run beside a busy test process) leaves its
    # successor nothing to take over: that attempt is a miss, and the next one gets more work.
    for attempt in range(4):
        log_path = tmp_path / f"zombie{attempt}.log"
        before = confirmed_flush(logical_database, "debezium") or 0
        zombie = start_zombie(log_path)
        try:
            deadline = time.monotonic() + 120
            while (confirmed_flush(logical_database, "debezium") or 0) <= before and zombie.poll() is None:
                assert time.monotonic() < deadline, "waited 120 s for the first run to commit a batch (slot moved)"
                time.sleep(0.005)
            if zombie.poll() is not None:  # it ended before it could be frozen
                assert zombie.returncode == 0, log_path.read_text()[-3000:]
                work.transactions(600 * 2 ** (attempt + 1))
                continue
            os.kill(zombie.pid, signal.SIGSTOP)
            frozen_at = confirmed_flush(logical_database, "debezium")
            took_over = run_source(cfg, kafka_url).to_dict()["records"]  # the successor: fences the frozen run
            moved = confirmed_flush(logical_database, "debezium")
            os.kill(zombie.pid, signal.SIGCONT)
            zombie.wait(120)
        finally:
            if zombie.poll() is None:
                zombie.kill()
                zombie.wait(30)
        if took_over == 0:  # the frozen run had read and committed everything: nothing was left to take over
            work.transactions(600 * 2 ** (attempt + 1))
            continue
        assert moved is not None and frozen_at is not None and moved > frozen_at
        assert zombie.returncode != 0 and "fenced" in log_path.read_text()
        assert confirmed_flush(logical_database, "debezium") == moved  # the zombie did not move it back
        break
    else:
        raise AssertionError("the first run read everything before it could be frozen, four times with more work")
    check_topics(kafka_url, work, snapshot, prefix)
    assert run_source(cfg, kafka_url).to_dict()["records"] == 0


def test_add_column_is_a_new_value_schema_from_that_change_on(logical_database: str, sqlite_url: str) -> None:
    """``ALTER TABLE ... ADD COLUMN`` between changes: the changes before it keep the old Value schema, those after
    have the new field (PostgreSQL sends a new Relation message; a schema registry would register a new version)."""
    import psycopg

    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute("CREATE TABLE a (id int PRIMARY KEY, name text NOT NULL, qty int)")
        conn.execute("CREATE TABLE b (id bigint PRIMARY KEY)")
        conn.execute("INSERT INTO a VALUES (1, 'one', 1)")
    cfg = config(logical_database, **{"value.converter": "org.apache.kafka.connect.json.JsonConverter",
                                      "value.converter.schemas.enable": "true"})
    run_source(cfg, sqlite_url)
    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute("INSERT INTO a VALUES (2, 'two', 2)")
        conn.execute("ALTER TABLE a ADD COLUMN note text NOT NULL DEFAULT 'n/a'")
        conn.execute("INSERT INTO a VALUES (3, 'three', 3, 'hello')")
        conn.execute("UPDATE a SET qty = 10 WHERE id = 1")
    assert run_source(cfg, sqlite_url).to_dict()["records"] == 3
    envelopes = [v for _, v in topic_events(sqlite_url, "shop.public.a")]  # Kafka Connect's {"schema", "payload"}
    events = [e["payload"] for e in envelopes]
    assert [set(v["after"]) for v in events] == [{"id", "name", "qty"}] * 2 + [{"id", "name", "qty", "note"}] * 2
    after_fields = [[f["field"] for f in e["schema"]["fields"][1]["fields"]] for e in envelopes]
    assert after_fields == [["id", "name", "qty"]] * 2 + [["id", "name", "qty", "note"]] * 2
    assert {e["schema"]["name"] for e in envelopes} == {"shop.public.a.Envelope"}
    note = envelopes[3]["schema"]["fields"][1]["fields"][3]
    assert (note["type"], note["optional"]) == ("string", False)  # NOT NULL, from the catalog
    assert events[2]["after"]["note"] == "hello" and events[3]["after"] == {"id": 1, "name": "one", "qty": 10,
                                                                             "note": "n/a"}


def test_extract_new_record_state_gives_rows_through_a_run(logical_database: str, sqlite_url: str) -> None:
    """Debezium's flattening SMT by its Debezium class name in a run: rows, deletes rewritten, tombstones dropped."""
    import psycopg

    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute("CREATE TABLE a (id int PRIMARY KEY, name text NOT NULL, qty int)")
        conn.execute("CREATE TABLE b (id bigint PRIMARY KEY)")
        conn.execute("INSERT INTO a VALUES (1, 'one', 1)")
    cfg = config(logical_database, **{"transforms": "unwrap",
                                      "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
                                      "transforms.unwrap.delete.handling.mode": "rewrite",
                                      "transforms.unwrap.add.fields": "op,lsn"})
    run_source(cfg, sqlite_url)
    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute("UPDATE a SET qty = 2 WHERE id = 1")
        conn.execute("DELETE FROM a WHERE id = 1")
    run = run_source(cfg, sqlite_url).to_dict()
    assert run["records"] == 2 and run["filtered"] == 1  # the tombstone
    rows = [v for _, v in topic_events(sqlite_url, "shop.public.a")]
    assert [(r["id"], r["qty"], r["__op"], r["__deleted"]) for r in rows] == [
        (1, 1, "r", "false"), (1, 2, "u", "false"), (1, None, "d", "true")]  # default identity: the old key
    assert all(isinstance(r["__lsn"], int) for r in rows)


def replica_sink(db: str) -> dict[str, str]:
    """SqlSink of ``shop.public.a`` into ``replica_a`` of ``db``: upsert by key, delete on tombstone, Debezium's
    ExtractNewRecordState (keeping tombstones) and a RegexRouter in the sink."""
    return {"name": "replica", "connector.class": "connect_runtime.connectors.sql.SqlSink", "connection.url": db,
            "topics": "shop.public.a", "insert.mode": "upsert", "pk.mode": "record_key", "delete.enabled": "true",
            "auto.create": "true", "transforms": "unwrap,route",
            "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
            "transforms.unwrap.drop.tombstones": "false",
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": "shop\\.public\\.(.*)", "transforms.route.replacement": "replica_$1"}


def replica_rows(db: str) -> dict[int, dict[str, Any]]:
    from tests.support.sql import query

    return {int(i): {"id": int(i), "name": n, "qty": q} for i, n, q in query(db, "SELECT id, name, qty FROM replica_a")}


def test_a_replica_through_sqlsink_equals_the_source_after_every_run(logical_database: str, pg_database: str,
                                                                     sqlite_url: str) -> None:
    """CDC source -> topic -> SqlSink (upsert by key, delete on tombstone, Debezium's ExtractNewRecordState in the
    sink) into a second database: after each pair of bounded runs the replica's table equals the source's."""
    from connect_runtime import run_sink

    work = Workload(logical_database, seed=5)
    work.create()
    work.transactions(10, inserts_only=True)
    work.snapshot_point()
    source = config(logical_database, **{"transaction.boundary": "connector", "batch.max.rows": "25"})
    sink = replica_sink(pg_database)
    for round_ in range(3):
        if round_:
            work.transactions(40)
        written = run_source(source, sqlite_url)
        run_sink(sink, sqlite_url, until_offsets=written)
        replica = replica_rows(pg_database)
        assert replica == work.rows["a"]
    assert {op for op, _, _ in work.changes["a"]} == {"c", "u", "d"}


def test_a_replica_equals_the_source_at_each_runs_point_while_changes_go_on(logical_database: str, pg_database: str,
                                                                           sqlite_url: str) -> None:
    """Changes go on in another thread while bounded runs of the source and the sink follow one another: after each
    pair the replica equals table ``a`` as it was after the last transaction the source run read (its committed
    offset's ``txId``); at the end, with the changes stopped, the topics hold every change once."""
    import threading
    import time

    from connect_runtime import run_sink

    work = Workload(logical_database, seed=8)
    work.create()
    work.transactions(10, inserts_only=True)
    snapshot = work.snapshot_point()
    source = config(logical_database, **{"transaction.boundary": "connector", "batch.max.rows": "25"})
    sink = replica_sink(pg_database)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            while not stop.is_set():
                work.transactions(5)
                time.sleep(0.05)  # changes at a pace a bounded run outruns, on a slow machine too
        except BaseException as exc:  # reported by the test's thread, which fails on it
            errors.append(exc)

    thread = threading.Thread(target=writer, name="cdc-writer", daemon=True)
    run_source(source, sqlite_url)  # the snapshot
    thread.start()
    try:
        checked = 0
        deadline = time.monotonic() + 120
        while checked < 3:
            assert time.monotonic() < deadline, f"waited 120 s for 3 runs that read changes ({checked} did)"
            written = run_source(source, sqlite_url)
            run_sink(sink, sqlite_url, until_offsets=written)
            offsets = written.to_dict()["source_offsets"]
            if not offsets or "txId" not in offsets[0]["offset"] or "lsn_commit" not in offsets[0]["offset"]:
                continue  # no change committed before this run began
            with work.lock:
                expected = work.states[int(offsets[0]["offset"]["txId"])]
            replica = replica_rows(pg_database)
            assert replica == expected
            checked += 1
    finally:
        stop.set()
        thread.join(60)
    assert not errors, errors
    run_sink(sink, sqlite_url, until_offsets=run_source(source, sqlite_url))
    check_topics(sqlite_url, work, snapshot)
    replica = replica_rows(pg_database)
    assert replica == work.rows["a"]


def test_changes_of_other_tables_do_not_hold_the_slot_back(logical_database: str, sqlite_url: str) -> None:
    """Transactions on tables the publication lacks never reach the stream; a run that read everything up to its
    start confirms the slot there, so their WAL is not kept for the next change of a captured table."""
    import psycopg

    from connect_runtime.connectors.cdc._pgoutput import parse_lsn

    work = Workload(logical_database, seed=2)
    work.create()
    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute("CREATE TABLE other (id int PRIMARY KEY, v text)")
    work.transactions(2, inserts_only=True)  # a snapshot with rows: it commits an offset (an empty one would not)
    cfg = config(logical_database)
    run_source(cfg, sqlite_url)
    made = work.records
    work.transactions(3, inserts_only=True)
    made = work.records - made
    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute("INSERT INTO other SELECT g, repeat('x', 100) FROM generate_series(1, 2000) g")
        before = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0]  # type: ignore[index]
    assert run_source(cfg, sqlite_url).to_dict()["records"] == made
    assert (confirmed_flush(logical_database, "debezium") or 0) >= parse_lsn(before)
    assert run_source(cfg, sqlite_url).to_dict()["records"] == 0


def test_snapshot_mode_never_streams_from_the_slot_and_a_lost_slot_is_named(logical_database: str,
                                                                            sqlite_url: str) -> None:
    """``snapshot.mode=never``: no op r, the changes after the slot was created; a slot dropped under committed
    offsets fails the run naming it (the changes in between are gone)."""
    import psycopg

    from connect_runtime.api.errors import ConnectError

    work = Workload(logical_database, seed=4)
    work.create()
    work.transactions(3, inserts_only=True)  # before the slot: never captured
    cfg = config(logical_database, **{"snapshot.mode": "never"})
    assert run_source(cfg, sqlite_url).to_dict()["records"] == 0
    work.snapshot_point()  # forget the changes made before the slot
    before = work.records
    work.transactions(10)
    assert run_source(cfg, sqlite_url).to_dict()["records"] == work.records - before
    for table in ("a", "b"):
        assert as_changes(topic_events(sqlite_url, f"shop.public.{table}")) == work.changes[table]
    with psycopg.connect(plain(logical_database), autocommit=True) as conn:
        conn.execute("SELECT pg_drop_replication_slot('debezium')")
    with pytest.raises(ConnectError, match=r"replication slot 'debezium' \(slot\.name\) is gone"):
        run_source(cfg, sqlite_url)


def test_a_server_without_logical_decoding_is_named(pg_database: str, sqlite_url: str) -> None:
    """The suite's other cluster runs with the default ``wal_level=replica``: the run says what to change."""
    from connect_runtime.api.errors import ConnectError

    with pytest.raises(ConnectError, match="wal_level=replica; change data capture needs wal_level=logical"):
        run_source(config(pg_database, **{"table.include.list": ""}), sqlite_url)
