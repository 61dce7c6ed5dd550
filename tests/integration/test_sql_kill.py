"""The SQL connectors SIGKILLed at any instant on a real PostgreSQL and started again, in real
subprocesses: the SQL sink in ``insert`` mode with no key (only the offsets it stores in the destination,
in the same transaction as the rows, keep it from writing a row twice) and the SQL source (offsets in
the embedded store's transaction with the records) each end with every row exactly once.

The bounded loops run in every suite; the ``slow`` ones scale with ``PYCONNECT_SLOW_ITERATIONS``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from connect_runtime.api import TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from tests.integration.test_sink_kill import kill_loop
from tests.support import REPO, slow_iterations
from tests.support.sql import query

PYCONNECT = str(Path(sys.executable).with_name("pyconnect"))
SINK = "connect_runtime.connectors.sql.SqlSink"
SOURCE = "connect_runtime.connectors.sql.SqlSource"


def table_count(url: str, table: str) -> int:
    """Committed rows of ``table`` (0 before the sink created it)."""
    rows = query(url, f"SELECT count(*) FROM pg_tables WHERE tablename = '{table}'")
    return int(query(url, f'SELECT count(*) FROM "{table}"')[0][0]) if rows[0][0] else 0


# --------------------------------------------------------------------------------------------------
# SqlSink: insert mode, no key


def fill_orders(store: str, n: int, parts: int, start: int = 0) -> None:
    with open_backend(store) as backend:
        backend.create_topics({"orders": parts})
        producer = backend.producer()
        try:
            for s in range(start, start + n, 10_000):
                producer.send([ProducerRecord("orders", i % parts, None, json.dumps(
                    {"i": i, "name": f"order {i}", "amount": i + 0.25, "at": "2026-01-02T03:04:05+00:00"}).encode())
                    for i in range(s, min(start + n, s + 10_000))])
            producer.flush(60)
        finally:
            producer.close()


def sql_sink_loop(tmp_path: Path, store: str, db: str, kills: int, n: int) -> None:
    parts = 3
    fill_orders(store, n, parts)

    def grow(total: int) -> int:  # a run ended before its kill: half as many orders more
        fill_orders(store, total // 2, parts, start=total)
        return total + total // 2

    # a transaction (rows + offsets) every 150 records per task: kills land inside COPY and at commits
    cfg = {"name": "sql-sink", "connector.class": SINK, "connection.url": db, "topics": "orders",
           "insert.mode": "insert", "pk.mode": "none", "auto.create": "true", "tasks.max": "2",
           "consumer.max.poll.records": "150", "offset.flush.interval.ms": "0"}
    n = kill_loop(tmp_path, store, cfg, kills=kills, total=n, grow=grow, progress=lambda: table_count(db, "orders"))

    got = Counter(int(i) for (i,) in query(db, "SELECT i FROM orders"))
    dups = {i: c for i, c in got.items() if c > 1}
    assert not dups, f"rows written twice: {sorted(dups)[:20]} ({len(dups)} in all)"
    assert set(got) == set(range(n)), f"rows lost: {sorted(set(range(n)) - set(got))[:20]}"
    assert query(db, "SELECT sum(amount) FROM orders")[0][0] == sum(i + 0.25 for i in range(n))
    # the offsets live in the destination, in the rows' transactions; the group committed nothing
    stored = {p: o for _, p, o in query(db, "SELECT topic, kafka_partition, next_offset FROM pyconnect_sink_offsets "
                                            "WHERE connector = 'sql-sink'")}
    assert stored == {p: len(range(p, n, parts)) for p in range(parts)}
    with open_backend(store) as backend:
        consumer = backend.consumer("connect-sql-sink")
        try:
            group = consumer.committed([TopicPartition("orders", p) for p in range(parts)], 10)
        finally:
            consumer.close()
    assert set(group.values()) == {None}


def test_sql_sink_insert_without_key_is_exactly_once_across_sigkills(
        tmp_path: Path, sqlite_url: str, pg_database: str) -> None:
    sql_sink_loop(tmp_path, sqlite_url, pg_database, kills=3, n=20_000)


@pytest.mark.slow
def test_sql_sink_sigkill_loop_long(tmp_path: Path, sqlite_url: str, pg_database: str) -> None:
    sql_sink_loop(tmp_path, sqlite_url, pg_database, kills=slow_iterations(8, 40), n=100_000)


# --------------------------------------------------------------------------------------------------
# SqlSource: two tables over two tasks, exactly-once into the embedded store


def topic_ends(store: str, topics: list[str]) -> int:
    with open_backend(store) as backend:
        present = [t for t in topics if t in backend.list_topics()]
        if not present:
            return 0
        consumer = backend.consumer(None)
        try:
            ends = consumer.end_offsets([TopicPartition(t, 0) for t in present], 10)
        finally:
            consumer.close()
    return sum(ends.values())


def sql_source_loop(tmp_path: Path, store: str, db: str, mode: str, kills: int, n: int) -> None:
    import psycopg

    per_ts = 7  # rows sharing a timestamp: in timestamp mode a group must never be split by a commit
    def insert(first: int, last: int) -> None:
        with psycopg.connect(db.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
            for table in ("a", "b"):
                conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (id BIGINT PRIMARY KEY, ts TIMESTAMP NOT NULL, "
                             "amount NUMERIC(12,2))")
                # rows added later are shifted by a second per row before them: later than any timestamp already
                # read, and still in the past (timestamp mode reads rows older than the database's now)
                conn.execute(f"INSERT INTO {table} SELECT g, timestamp '2025-03-01 12:00:00' + (g / {per_ts}) * "
                             f"interval '1 second' + {first} * interval '1 second', g + 0.5 "
                             f"FROM generate_series({first}, {last - 1}) AS g")

    def grow(total: int) -> int:  # a run ended before its kill: half as many rows more in each table
        rows = total // 2
        insert(rows, rows + rows // 2)
        return 2 * (rows + rows // 2)

    insert(0, n)
    cfg = {"name": "sql-src", "connector.class": SOURCE, "connection.url": db, "mode": mode,
           "table.include.list": "a,b", "topic.prefix": "db-", "tasks.max": "2", "batch.max.rows": "100",
           "incrementing.column.name": "id", "timestamp.column.name": "ts", "poll.idle.timeout.ms": "300"}
    cfg_path = tmp_path / "sql-src.json"
    cfg_path.write_text(json.dumps(cfg))
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def launch(log: Path) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            return subprocess.Popen([PYCONNECT, "--backend", store, "run", str(cfg_path)], cwd=REPO, env=env,
                                    stdout=out, stderr=subprocess.STDOUT)

    n = kill_loop(tmp_path, store, cfg, kills=kills, total=2 * n, launch=launch, grow=grow,
                  progress=lambda: topic_ends(store, ["db-a", "db-b"])) // 2

    with open_backend(store) as backend:
        for table in ("a", "b"):
            tp = TopicPartition(f"db-{table}", 0)
            consumer = backend.consumer(None)
            try:
                end = consumer.end_offsets([tp], 10)[tp]
            finally:
                consumer.close()
            values = [json.loads(r.value) for r in backend.read_range(tp, 0, end)]
            got = [v["id"] for v in values]
            dups = [i for i, c in Counter(got).items() if c > 1]
            assert not dups, f"{table}: rows written twice: {sorted(dups)[:20]} ({len(dups)} in all)"
            assert sorted(got) == list(range(n)), f"{table}: rows lost: {sorted(set(range(n)) - set(got))[:20]}"
            assert got == sorted(got)  # in the order of the mode's cursor
            assert values[10] == {"id": 10, "ts": "2025-03-01T12:00:01", "amount": "10.50"}
    # a rerun after the end finds nothing new
    rerun = subprocess.run([PYCONNECT, "--backend", store, "run", str(cfg_path)], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert topic_ends(store, ["db-a", "db-b"]) == 2 * n


@pytest.mark.parametrize("mode", ["incrementing", "timestamp"])
def test_sql_source_is_exactly_once_across_sigkills(tmp_path: Path, sqlite_url: str, pg_database: str,
                                                    mode: str) -> None:
    sql_source_loop(tmp_path, sqlite_url, pg_database, mode, kills=3, n=15_000)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["timestamp+incrementing", "timestamp"])
def test_sql_source_sigkill_loop_long(tmp_path: Path, sqlite_url: str, pg_database: str, mode: str) -> None:
    sql_source_loop(tmp_path, sqlite_url, pg_database, mode, kills=slow_iterations(8, 40), n=80_000)
