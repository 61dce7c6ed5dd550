"""SqlSink with several tasks on one new table (real PostgreSQL): the tasks race on ``auto.create`` and
``auto.evolve``; a task that lost the race refreshes its view of the table and goes on, its data
transaction intact, so every run succeeds and every row lands once."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from connect_runtime import ConnectError, run_sink
from tests.support.sql import cfg, produce, query

PARTITIONS = 8
RECORDS = 400


def test_tasks_racing_on_auto_create_all_succeed_and_write_every_row_once(
    pg_database: str, sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="connect_runtime.connectors.sql")
    produce(sqlite_url, "orders", [(None, {"id": i, "amount": i * 0.5, "note": f"n{i}"}) for i in range(RECORDS)],
            PARTITIONS)
    for run in range(6):  # a fresh table (and connector) each time: every run starts with the race
        table = f"orders_{run}"
        c = cfg(pg_database, name=f"race-{run}", **{
            "tasks.max": 4, "auto.create": "true", "table.name.format": table,
            "batch.size": 10, "consumer.max.poll.records": 20,
        })
        r = run_sink(c, sqlite_url, max_seconds=120)
        assert r.records == RECORDS
        assert query(pg_database, f"SELECT count(*), count(DISTINCT id) FROM {table}") == [(RECORDS, RECORDS)]
        offsets = query(pg_database, "SELECT sum(next_offset), count(*) FROM pyconnect_sink_offsets "
                                     f"WHERE connector = 'race-{run}'")
        assert offsets == [(RECORDS, PARTITIONS)]
    assert "was created by another task meanwhile" in caplog.text  # the race did happen


def test_tasks_racing_on_auto_evolve_all_succeed_and_write_every_row_once(
    pg_database: str, sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="connect_runtime.connectors.sql")
    rows: list[tuple[Any, Any]] = [(None, {"id": i}) for i in range(PARTITIONS)]
    # then every partition brings the same two new fields at once
    rows += [(None, {"id": PARTITIONS + i, "extra": f"e{i}", "qty": i}) for i in range(RECORDS)]
    produce(sqlite_url, "orders", rows, PARTITIONS)
    for run in range(4):
        table = f"evolving_{run}"
        base = {"tasks.max": 4, "auto.create": "true", "table.name.format": table, "batch.size": 10,
                "consumer.max.poll.records": 20}
        first = cfg(pg_database, name=f"evolve-{run}", **base)
        # the first run creates the table from the records without the new fields...
        run_sink(first, sqlite_url, until_offsets={"orders": {p: 1 for p in range(PARTITIONS)}})
        # ...the second adds the columns, all four tasks at the same moment
        r = run_sink(cfg(pg_database, name=f"evolve-{run}", **base, **{"auto.evolve": "true"}), sqlite_url,
                     max_seconds=120)
        assert r.records == RECORDS
        total = PARTITIONS + RECORDS
        assert query(pg_database, f"SELECT count(*), count(DISTINCT id), count(extra), sum(qty) FROM {table}") == [
            (total, total, RECORDS, sum(range(RECORDS)))]
    assert "was added by another task meanwhile" in caplog.text


def test_tasks_evolving_a_table_they_already_wrote_to_in_the_open_transaction(
    pg_database: str, sqlite_url: str
) -> None:
    # every task writes rows (holding locks on the table) before the new field comes: two ALTERs inside the
    # data transactions would deadlock, so each task commits what it wrote first, then alters on its own
    rows: list[tuple[Any, Any]] = [(None, {"id": i}) for i in range(PARTITIONS * 30)]
    rows += [(None, {"id": 10_000 + i, "extra": f"e{i}"}) for i in range(PARTITIONS * 30)]
    produce(sqlite_url, "orders", rows, PARTITIONS)
    for run in range(3):
        table = f"mid_{run}"
        c = cfg(pg_database, name=f"mid-{run}", **{
            "tasks.max": 4, "auto.create": "true", "auto.evolve": "true", "table.name.format": table,
            "batch.size": 10, "consumer.max.poll.records": 20,
        })
        assert run_sink(c, sqlite_url, max_seconds=120).records == len(rows)
        assert query(pg_database, f"SELECT count(*), count(DISTINCT id), count(extra) FROM {table}") == [
            (len(rows), len(rows), PARTITIONS * 30)]
        assert query(pg_database, "SELECT sum(next_offset) FROM pyconnect_sink_offsets "
                                  f"WHERE connector = 'mid-{run}'") == [(len(rows),)]


def test_an_early_commit_before_auto_evolve_stores_exactly_what_was_written(
    pg_database: str, sqlite_url: str
) -> None:
    from tests.support.sql import execute

    execute(pg_database, "CREATE TABLE orders (id BIGINT NOT NULL)")
    records: list[tuple[Any, Any]] = [(None, {"id": i}) for i in range(25)]
    records += [(None, {"id": 25 + i, "extra": f"e{i}"}) for i in range(25)]
    records[40] = (None, {"id": None, "extra": "bad"})  # fails the run after the early commit
    produce(sqlite_url, "orders", records)
    c = cfg(pg_database, **{"auto.evolve": "true", "batch.size": 10, "consumer.max.poll.records": 20})
    with pytest.raises(ConnectError) as err:
        run_sink(c, sqlite_url)
    assert "orders-0@40" in str(err.value)
    # the early commit (before the ALTER) holds the 20 rows written before it and their offset; no more
    assert query(pg_database, "SELECT count(*), max(id) FROM orders") == [(20, 19)]
    assert query(pg_database, "SELECT next_offset FROM pyconnect_sink_offsets") == [(20,)]
    r = run_sink(cfg(pg_database, **{"auto.evolve": "true", "batch.size": 10, "consumer.max.poll.records": 20,
                                     "errors.tolerance": "all"}), sqlite_url)
    assert r.records == 30 and r.skipped == 1
    assert query(pg_database, "SELECT count(*), count(DISTINCT id), count(extra) FROM orders") == [(49, 49, 24)]
