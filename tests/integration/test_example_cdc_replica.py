"""The CDC example DAG (dags/example_postgres_cdc.py) under real Airflow 3 (``airflow dags test`` per run, the
session's Airflow home), PostgreSQL 15 with ``wal_level=logical`` as the source, the suite's other cluster as the
replica, a local folder as the lake, the embedded SQLite backend.

Random inserts, updates and deletes in transactions spanning both tables, between runs and while the runs go on (a
thread); a run of the DAG killed (SIGKILL) once its ``capture`` task committed part of a backlog, then run again for
the same logical date (a retry: a new attempt, the same data interval).
After every run the replica equals the source as it was after the last transaction ``capture`` read (its XCom's
committed offset: the snapshot, or the transaction ``txId``); the run after the changes stopped brings it to the
source as it is, and the topics hold every change once, in commit order per table. After every run the lake holds
exactly the topics' changes up to their end, each once (the files cover the topic from 0 to its end, each in the
folder of the day its rows committed; no offset, and no ``(__lsn, __txId, id)``, twice), each row the event's row
with its ``__op``, ``__lsn``, ``__txId``, ``__source_ts_ms`` and ``__offset``; the retry of the killed run writes
what the killed ``capture`` committed into the lake once; the last run's lake, folded by key, is the source's table. The ``capture`` task's
OpenLineage event names the captured tables; no log shows the source's password. About 2 minutes on a quiet
2-core machine (6.5 at a load of 18): slow.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO
from tests.support.airflow_env import AirflowEnv, conn_env, shared_airflow_env
from tests.support.cdc import as_changes, topic_events
from tests.support.kills import kill_loop, kill_on_progress, kill_point

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.timeout(1500)]

DAG_ID = "example_postgres_cdc"
TABLES = ("customers", "orders")
DAG_TEST_TIMEOUT_S = 420


class Shop:
    """The source's two tables, changed by random transactions spanning both, and remembered: the rows now
    (:attr:`rows`), every change per table in commit order (:attr:`changes`, ``(op, id, row or None)``), the rows
    of both tables after each transaction by its xid (:attr:`states`), and the records the changes make
    (:attr:`records`: a delete is two, the event and its tombstone). One transaction at a time (:attr:`lock`): the
    test and its writer thread share it."""

    def __init__(self, url: str, seed: int) -> None:
        self.url = url.replace("postgresql+psycopg://", "postgresql://")
        self.rng = random.Random(seed)
        self.rows: dict[str, dict[int, dict[str, Any]]] = {t: {} for t in TABLES}
        self.changes: dict[str, list[tuple[str, int, dict[str, Any] | None]]] = {t: [] for t in TABLES}
        self.states: dict[int, dict[str, dict[int, dict[str, Any]]]] = {}
        self.records = 0
        self.next_id = 1
        self.lock = threading.Lock()

    def create(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, tier int)")
            conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL, qty int, note text)")

    def now(self) -> dict[str, dict[int, dict[str, Any]]]:
        return {t: {i: dict(r) for i, r in rows.items()} for t, rows in self.rows.items()}

    def transactions(self, n: int) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            for _ in range(n):
                with self.lock:
                    with conn.transaction():
                        for _ in range(self.rng.randint(1, 4)):
                            self._change(conn, self.rng.choice(TABLES))
                        xid = conn.execute("SELECT txid_current() % 4294967296").fetchone()[0]  # type: ignore[index]
                    self.states[int(xid)] = self.now()

    def _change(self, conn: Any, table: str) -> None:
        rows = self.rows[table]
        op = "c" if len(rows) < 3 else self.rng.choice(("c", "c", "u", "d"))
        i = self.rng.choice(list(rows)) if op != "c" else self.next_id
        n = self.rng.randrange(1_000_000)
        row = ({"id": i, "name": f"customer {n} é", "tier": None if n % 4 == 0 else n % 3} if table == "customers"
               else {"id": i, "customer_id": n % 50, "qty": n % 9, "note": None if n % 3 == 0 else f'note "{n}"'})
        if op == "c":
            self.next_id += 1
            conn.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join(['%s'] * len(row))})",
                         tuple(row.values()))
        elif op == "u":
            sets = ", ".join(f"{c} = %s" for c in row if c != "id")
            conn.execute(f"UPDATE {table} SET {sets} WHERE id = %s", (*[v for c, v in row.items() if c != "id"], i))
        else:
            conn.execute(f"DELETE FROM {table} WHERE id = %s", (i,))
        if op == "d":
            del rows[i]
        else:
            rows[i] = row
        self.records += 2 if op == "d" else 1
        self.changes[table].append((op, i, None if op == "d" else dict(row)))


def _rows(url: str, table: str) -> dict[int, dict[str, Any]]:
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        cur = conn.execute(f"SELECT * FROM {table}")
        names = [d.name for d in cur.description or []]
        return {int(r[0]): dict(zip(names, r, strict=True)) for r in cur}


def _postgres_conn(url: str) -> str:
    from sqlalchemy.engine import make_url

    u = make_url(url)
    return json.dumps({"conn_type": "postgres", "host": u.host, "port": u.port, "schema": u.database,
                       "login": u.username, "password": u.password or ""})


def _written(store: str) -> int:
    """Records committed to the two topics."""
    from connect_runtime.api import TopicPartition
    from connect_runtime.backends import open_backend

    with open_backend(store) as backend:
        tps = [TopicPartition(f"shop.public.{t}", 0) for t in TABLES if f"shop.public.{t}" in backend.list_topics()]
        if not tps:
            return 0
        consumer = backend.consumer(None)
        try:
            return sum(consumer.end_offsets(tps, 10).values())
        finally:
            consumer.close()


def _lake_is_exact(store: str, lake: str) -> dict[str, list[dict[str, Any]]]:
    """The lake's rows per topic, checked against the topic: the files hold offsets 0 to the topic's end exactly
    (``files_for`` refuses a gap, an overlap or a file past it), one row per change (tombstones left out) and
    nothing twice, each row the event's row and its metadata columns."""
    import pyarrow.parquet as pq

    from connect_runtime.connectors.lake import files_for

    out: dict[str, list[dict[str, Any]]] = {}
    for table in TABLES:
        topic = f"shop.public.{table}"
        events = topic_events(store, topic)
        files = files_for(lake, {topic: {0: [(0, len(events))]}}) if events else []
        rows = []
        for f in files:  # each file under the day its rows committed (dt=<UTC day of __source_ts_ms>)
            got = pq.read_table(f.url.removeprefix("file://")).to_pylist()
            days = {datetime.fromtimestamp(r["__source_ts_ms"] / 1000, UTC).strftime("/dt=%Y-%m-%d/") for r in got}
            assert all(day in f.url for day in days), f"{f.url} holds rows of the days {days}"
            rows += got
        rows.sort(key=lambda r: int(r["__offset"]))
        assert len({r["__offset"] for r in rows}) == len(rows), f"{topic}: an offset twice in the lake"
        # a snapshot row's (lsn, txId) are the slot's consistent point and the snapshot's xmin, which the first change
        # after it may share (its transaction takes the xid the snapshot saw as next; its first WAL record starts at
        # the consistent point): a change is (snapshot or not, lsn, txId, key)
        assert len({(r["__op"] == "r", r["__lsn"], r["__txId"], r["id"]) for r in rows}) == len(rows), (
            f"{topic}: a change (snapshot or not, lsn, txId, key) twice in the lake")
        expected = []
        for offset, (_, value) in enumerate(events):
            if value is not None:
                deleted = value["op"] == "d"
                source = value["source"]
                expected.append({**(value["before"] if deleted else value["after"]), "__op": value["op"],
                                 "__lsn": source["lsn"], "__txId": source["txId"], "__source_ts_ms": source["ts_ms"],
                                 "__deleted": "true" if deleted else "false", "__offset": offset})
        diff = next((n for n, (g, e) in enumerate(zip(rows, expected, strict=False)) if g != e), None)
        assert diff is None and len(rows) == len(expected), (
            f"{topic}: {len(rows)} lake rows, {len(expected)} changes in the topic; first difference at "
            f"{diff}: {rows[diff] if diff is not None else None} != {expected[diff] if diff is not None else None}")
        out[table] = rows
    return out


def test_the_cdc_example_keeps_a_replica_exact_across_runs_changes_and_a_killed_run(
        tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, logical_database: str, pg_database: str) -> None:
    af: AirflowEnv = shared_airflow_env(tmp_path_factory)
    dag_file = af.dags / f"{DAG_ID}.py"
    shutil.copy(REPO / "dags" / f"{DAG_ID}.py", dag_file)
    try:
        check_the_example(af, tmp_path, logical_database, pg_database)
    finally:
        dag_file.unlink()  # the session's other Airflow tests parse that folder


def check_the_example(af: AirflowEnv, tmp_path: Path, logical_database: str, pg_database: str) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    lake = str(tmp_path / "lake")
    lineage = tmp_path / "lineage.jsonl"
    env = {**conn_env("pyconnect_default", store),
           "AIRFLOW_CONN_PYCONNECT_CDC_SOURCE": _postgres_conn(logical_database),
           "AIRFLOW_CONN_PYCONNECT_CDC_REPLICA": _postgres_conn(pg_database),
           "AIRFLOW_VAR_PYCONNECT_CDC_BATCH_ROWS": "20",  # many commits per run: a kill lands between two
           "AIRFLOW_VAR_PYCONNECT_LAKE_URL": lake,
           "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(lineage),
                                                          "append": True}),
           "AIRFLOW__OPENLINEAGE__EXECUTION_TIMEOUT": "120"}
    secret = str(__import__("sqlalchemy").engine.make_url(logical_database).password)
    shop = Shop(logical_database, seed=3636)
    shop.create()
    shop.transactions(15)
    snapshot = shop.now()  # what the first run's snapshot shows (no change goes on until it is read)
    shop.changes = {t: [] for t in TABLES}
    snapshot_rows = sum(len(r) for r in snapshot.values())
    rng = random.Random(36)
    hour = iter(range(1, 24))
    outputs: list[str] = []

    def run_id(when: str) -> str:
        """The DAG run of logical date ``when`` (``airflow dags test`` names it after the time it ran)."""
        (row,) = af.query("SELECT run_id FROM dag_run WHERE dag_id = ? AND logical_date LIKE ?", DAG_ID,
                          f"{when[:10]} {when[11:19]}%")
        return str(row[0])

    def finished(out: str, when: str) -> dict[str, Any]:
        """The run succeeded; its ``capture`` XCom."""
        outputs.append(out)
        assert "state=success" in out.replace(" ", "") or "DagRunState.SUCCESS" in out, (
            f"the DAG run of {when} did not succeed:\n" + "\n".join(out.splitlines()[-60:]))
        rows = af.query("SELECT value FROM xcom WHERE dag_id = ? AND task_id = 'capture' AND key = 'return_value' "
                        "AND run_id = ?", DAG_ID, run_id(when))
        assert len(rows) == 1, f"no capture XCom for the run of {when}"
        value = json.loads(str(rows[0][0]))
        return json.loads(value) if isinstance(value, str) else value

    def run() -> tuple[str, dict[str, Any]]:
        when = f"2026-01-01T{next(hour):02d}:00:00+00:00"
        out = af.airflow("dags", "test", DAG_ID, when, extra_env=env, timeout=DAG_TEST_TIMEOUT_S, check=False)
        return when, finished(out.stdout + out.stderr, when)

    expected_last: dict[str, dict[int, dict[str, Any]]] = snapshot

    def replica_is_at_the_runs_offset(xcom: dict[str, Any]) -> None:
        """The replica equals the source after the last transaction the run read (its committed offset); the lake
        holds the topics' changes exactly."""
        _lake_is_exact(store, lake)
        nonlocal expected_last
        offsets = xcom["source_offsets"]
        if offsets:
            (entry,) = offsets
            assert entry["partition"] == {"server": "shop"}, entry
            offset = entry["offset"]
            if offset.get("snapshot"):
                expected_last = snapshot
            else:
                xid = int(offset["txId"])
                deadline = time.monotonic() + 30  # the writer records a state right after its commit
                while xid not in shop.states:
                    assert time.monotonic() < deadline, f"no transaction {xid} recorded by the writer after 30 s"
                    time.sleep(0.05)
                with shop.lock:
                    expected_last = shop.states[xid]
        for table in TABLES:
            replica = _rows(pg_database, table)
            assert replica == expected_last[table], (
                f"{table}: the replica differs from the source at the run's offset {offsets}: "
                f"{len(replica)} rows, expected {len(expected_last[table])}")

    # the first run: the publication, the slot, the snapshot, into the replica
    _, xcom = run()
    assert xcom["records"] == snapshot_rows and xcom["source_offsets"][0]["offset"]["snapshot"], xcom
    replica_is_at_the_runs_offset(xcom)
    shop.transactions(20)  # between runs

    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            while not stop.is_set():
                shop.transactions(3)
                time.sleep(0.05)  # a pace the runs outrun, on a slow machine too
        except BaseException as exc:  # the test's thread fails on it
            errors.append(exc)

    thread = threading.Thread(target=writer, name="cdc-example-writer", daemon=True)
    thread.start()
    try:
        _, xcom = run()  # while the changes go on
        assert xcom["records"] > 0, xcom
        replica_is_at_the_runs_offset(xcom)

        killed: list[tuple[str, int, int]] = []

        def attempt() -> bool:
            """A run killed (SIGKILL to its process group) once ``capture`` committed part of the backlog."""
            shop.transactions(150)
            done, made = _written(store), snapshot_rows + shop.records
            when = f"2026-01-01T{next(hour):02d}:00:00+00:00"
            log = tmp_path / f"run-{when[11:13]}.log"
            proc = af.popen("dags", "test", DAG_ID, when, extra_env=env, log=log, new_session=True)
            try:
                landed = kill_on_progress(proc, lambda: _written(store), kill_point(rng, done, made, 0.2, 0.7),
                                          rng=rng, bound_s=DAG_TEST_TIMEOUT_S, what="the CDC example's run")
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(60)
            if landed:
                killed.append((when, done, _written(store)))
            else:  # it ended first: a run like the others
                replica_is_at_the_runs_offset(finished(log.read_text(errors="replace"), when))
            return landed

        kill_loop(attempt, lambda: None, kills=1, max_grows=3, what="the CDC example's run")
        ((when, before, at_kill),) = killed
        # the same logical date again: what a retry of the killed task does (a new attempt, the same data interval;
        # ``airflow dags test`` has no scheduler to retry it, and replaces the DAG run)
        out = af.airflow("dags", "test", DAG_ID, when, extra_env=env, timeout=DAG_TEST_TIMEOUT_S, check=False)
        xcom = finished(out.stdout + out.stderr, when)
        assert at_kill > before and xcom["records"] > 0, (before, at_kill, xcom)
        # the interval's ledger holds what the killed attempt committed and what the retry did, nothing else
        assert xcom["interval_records"] == at_kill - before + xcom["records"], (before, at_kill, xcom)
        replica_is_at_the_runs_offset(xcom)
    finally:
        stop.set()
        thread.join(60)
    assert not errors, errors

    # the changes stopped: the next run brings the replica to the source as it is
    _, xcom = run()
    replica_is_at_the_runs_offset(xcom)
    for table in TABLES:
        assert _rows(pg_database, table) == shop.rows[table] == _rows(logical_database, table)
        got = as_changes(topic_events(store, f"shop.public.{table}"))
        reads = [c for c in got if c[0] == "r"]
        assert {i: row for _, i, row in reads} == snapshot[table] and len(reads) == len(snapshot[table])
        stream = got[len(reads):]
        made = shop.changes[table]
        assert len(stream) == len(made), f"{table}: {len(stream)} changes written, {len(made)} made"
        diff = next((n for n, (g, e) in enumerate(zip(stream, made, strict=True)) if g != e), None)
        assert diff is None, f"{table}: change {diff} is {stream[diff]}, expected {made[diff]}"
    for table, rows in _lake_is_exact(store, lake).items():  # the history folded by key: the table as it is
        folded: dict[int, dict[str, Any]] = {}
        for r in rows:
            if r["__op"] == "d":
                del folded[r["id"]]
            else:
                folded[r["id"]] = {k: v for k, v in r.items() if not k.startswith("__")}
        assert folded == shop.rows[table], f"{table}: the lake's last rows per key differ from the source"
        assert {r["__op"] for r in rows} == {"r", "c", "u", "d"}, table
    assert {op for t in TABLES for op, _, _ in shop.changes[t]} == {"c", "u", "d"}

    # OpenLineage: the capture task read the two tables and wrote their topics
    db, port = logical_database.rsplit("/", 1)[1], logical_database.split("@", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
    events = [json.loads(line) for line in lineage.read_text().splitlines() if line.strip()]
    capture = [e for e in events if e["eventType"] == "COMPLETE" and e["job"]["name"] == f"{DAG_ID}.capture"]
    assert capture, f"no COMPLETE event of {DAG_ID}.capture in {lineage}"
    assert [(d["namespace"], d["name"]) for d in capture[-1]["inputs"]] == [
        (f"postgres://127.0.0.1:{port}", f"{db}.public.{t}") for t in TABLES]
    for text in [*outputs, *(p.read_text(errors="replace") for p in tmp_path.glob("run-*.log"))]:
        assert secret not in text, "the source's password is in an Airflow log"
