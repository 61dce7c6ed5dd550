"""SqlSource against a real PostgreSQL (session cluster) and SQLite: every mode and option, the value
forms, offsets in Kafka Connect JDBC's shape, timestamp groups never split, interval mode, bad input."""

from __future__ import annotations

import json
import socket
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from connect_runtime import ConfigError, ConnectError, run_source
from connect_runtime.backends import open_backend
from tests.support.source_connectors import read_topic

SRC = "connect_runtime.connectors.sql.SqlSource"
T0 = datetime(2025, 3, 1, 12, 0, 0)


def execute(url: str, *statements: str, params: list[dict[str, Any]] | None = None) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            for s in statements:
                if params is not None and s == statements[-1]:
                    # timestamps bound as SQLAlchemy DateTime: on SQLite they are stored in SQLAlchemy's text
                    # form, the one the source compares with (SQLite compares timestamps as text)
                    stmt = sa.text(s)
                    if ":ts" in s:
                        stmt = stmt.bindparams(sa.bindparam("ts", type_=sa.DateTime()))
                    conn.execute(stmt, params)
                else:
                    conn.exec_driver_sql(s)
    finally:
        engine.dispose()


def orders(url: str, n: int, per_ts: int = 1, start: int = 0) -> None:
    """Rows id start..start+n-1; ``per_ts`` consecutive ids share a timestamp (one second apart)."""
    execute(url, "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, ts TIMESTAMP NOT NULL, amount INTEGER)",
            "INSERT INTO orders (id, ts, amount) VALUES (:id, :ts, :amount)",
            params=[{"id": i, "ts": T0 + timedelta(seconds=i // per_ts), "amount": i * 10}
                    for i in range(start, start + n)])


def cfg(url: str, **extra: Any) -> dict[str, Any]:
    return {"name": "sql-src", "connector.class": SRC, "connection.url": url, "topic.prefix": "db-",
            "poll.interval.ms": 100000, **extra}


def ids(backend: str, topic: str = "db-orders") -> list[int]:
    return [v["id"] for v in read_topic(backend, topic)]


@pytest.fixture(params=["postgresql", "sqlite"])
def db(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'src.db'}"
    return str(request.getfixturevalue("pg_database"))


def test_incrementing_reads_new_rows_only_and_commits_jdbc_offsets(db: str, sqlite_url: str) -> None:
    orders(db, 25)
    c = cfg(db, mode="incrementing", **{"incrementing.column.name": "id", "batch.max.rows": 7})
    r = run_source(c, sqlite_url)
    assert r.records == 25 and ids(sqlite_url) == list(range(25))
    assert r.source_offsets == [{"partition": {"protocol": "1", "table": "orders"}, "offset": {"incrementing": 24}}]
    assert run_source(c, sqlite_url).records == 0
    orders(db, 5, start=25)
    assert run_source(c, sqlite_url).records == 5
    assert ids(sqlite_url) == list(range(30))
    values = read_topic(sqlite_url, "db-orders")
    assert values[3] == {"id": 3, "ts": "2025-03-01T12:00:03", "amount": 30}


def test_bulk_reads_the_whole_table_every_run(db: str, sqlite_url: str) -> None:
    orders(db, 10)
    c = cfg(db, mode="bulk", **{"batch.max.rows": 3})
    assert run_source(c, sqlite_url).records == 10
    assert run_source(c, sqlite_url).records == 10
    assert sorted(ids(sqlite_url)) == sorted(list(range(10)) * 2)


@pytest.mark.parametrize("boundary", ["poll", "connector"])
def test_timestamp_and_incrementing_resume_exactly(db: str, sqlite_url: str, boundary: str) -> None:
    orders(db, 40, per_ts=5)
    c = cfg(db, mode="timestamp+incrementing", **{"timestamp.column.name": "ts", "incrementing.column.name": "id",
                                                  "batch.max.rows": 3, "transaction.boundary": boundary})
    got = 0
    for cut in (4, 9, 13):  # stop inside timestamp groups: the (ts, id) offset is exact
        got += run_source(c, sqlite_url, max_records=cut).records
    got += run_source(c, sqlite_url).records
    assert ids(sqlite_url) == list(range(40)) and got == 40
    last = run_source(c, sqlite_url)
    assert last.records == 0
    # offsets from the table's committed offset: 12:00:07, id 39
    with open_backend(sqlite_url) as be:
        store = be.offset_store(None)
        try:
            value = store.get([b'["sql-src",{"protocol":"1","table":"orders"}]'])
        finally:
            store.close()
    offset = json.loads(next(iter(value.values())))
    assert offset == {"timestamp": int((T0 + timedelta(seconds=7)).replace(tzinfo=UTC).timestamp() * 1000),
                      "timestamp_nanos": 0, "incrementing": 39}


@pytest.mark.parametrize("boundary", ["poll", "connector"])
def test_rows_sharing_a_timestamp_are_never_split_across_a_commit(db: str, sqlite_url: str, boundary: str) -> None:
    """Kafka Connect JDBC's classic loss: in timestamp mode a commit after part of a group, then
    ``ts > last`` skips the rest. Here no row is lost, and with connector boundaries none is duplicated."""
    orders(db, 60, per_ts=7)  # groups of 7 rows, larger than a batch of 3
    c = cfg(db, mode="timestamp", **{"timestamp.column.name": "ts", "batch.max.rows": 3,
                                     "transaction.boundary": boundary})
    for cut in (2, 5, 1, 8, 4):
        run_source(c, sqlite_url, max_records=cut)
    run_source(c, sqlite_url)
    got = ids(sqlite_url)
    assert set(got) == set(range(60)), "a row was lost"
    if boundary == "connector":
        assert sorted(got) == list(range(60)), "a row was written twice"
    orders(db, 7, per_ts=7, start=63)  # rows 63..69 share one new timestamp
    assert run_source(c, sqlite_url).records == 7


def test_connector_boundary_commits_only_whole_timestamp_groups(db: str, sqlite_url: str) -> None:
    orders(db, 12, per_ts=4)
    c = cfg(db, mode="timestamp", **{"timestamp.column.name": "ts", "batch.max.rows": 3,
                                     "transaction.boundary": "connector"})
    r = run_source(c, sqlite_url, max_records=6)  # one whole group (4 rows); the 2 of the next are dropped
    assert r.records == 4 and ids(sqlite_url) == [0, 1, 2, 3]
    assert r.source_offsets[0]["offset"]["timestamp"] % 1000 == 0


def test_value_forms_are_lossless_on_postgresql(pg_database: str, sqlite_url: str) -> None:
    execute(pg_database,
            "CREATE TABLE t (id BIGINT PRIMARY KEY, amount NUMERIC(30, 10), at TIMESTAMPTZ, local TIMESTAMP, d DATE, "
            "tm TIME, raw BYTEA, doc JSONB, u UUID, f DOUBLE PRECISION, big BIGINT, flag BOOLEAN, iv INTERVAL, "
            "tags TEXT[], note TEXT)",
            "INSERT INTO t VALUES (1, 12345678901234567890.0123456789, '2026-01-02 03:04:05.123456+02', "
            "'2026-01-02 03:04:05.5', '2026-01-02', '03:04:05.25', '\\x00ff10', '{\"a\": [1, 2.5, null]}', "
            "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'NaN', 9223372036854775807, true, '1 day 02:03:04.5', "
            "'{x,y}', 'é')")
    run_source(cfg(pg_database, **{"table.include.list": "t"}), sqlite_url)
    (value,) = read_topic(sqlite_url, "db-t")
    assert value == {"id": 1, "amount": "12345678901234567890.0123456789", "at": "2026-01-02T01:04:05.123456+00:00",
                     "local": "2026-01-02T03:04:05.500000", "d": "2026-01-02", "tm": "03:04:05.250000",
                     "raw": "AP8Q", "doc": {"a": [1, 2.5, None]}, "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                     "f": "NaN", "big": 9223372036854775807, "flag": True, "iv": "P1DT7384.5S", "tags": ["x", "y"],
                     "note": "é"}
    with open_backend(sqlite_url) as be:
        consumer = be.consumer(None)
        try:
            (tp,) = consumer.partitions(["db-t"])
        finally:
            consumer.close()
        (rec,) = list(be.read_range(tp, 0, 1))
    assert json.loads(rec.key) == {"id": 1}


def test_interval_mode_reads_each_interval_once_and_a_rerun_changes_nothing(db: str, sqlite_url: str) -> None:
    execute(db, "CREATE TABLE ev (id INTEGER PRIMARY KEY, ts TIMESTAMP NOT NULL)",
            "INSERT INTO ev (id, ts) VALUES (:id, :ts)",
            params=[{"id": i, "ts": datetime(2025, 1, 1) + timedelta(hours=6 * i)} for i in range(12)])  # 3 days
    days = [("2025-01-01T00:00:00+00:00", "2025-01-02T00:00:00+00:00"),
            ("2025-01-02 00:00:00+00:00", "2025-01-03 00:00:00+00:00"),
            ("2025-01-03T00:00:00Z", "2025-01-04T00:00:00Z")]
    for start, end in reversed(days):  # a backfill in any order
        c = cfg(db, mode="timestamp", **{"timestamp.column.name": "ts", "table.include.list": "ev",
                                         "interval.start": start, "interval.end": end,
                                         "transaction.boundary": "connector"})
        r = run_source(c, sqlite_url, ledger_key={"interval": start})
        assert r.records == 4
        partition = r.source_offsets[0]["partition"]
        assert partition["interval.start"].startswith(start[:10]) and partition["table"] == "ev"
        rerun = run_source(c, sqlite_url, ledger_key={"interval": start})
        assert rerun.records == 0 and rerun.interval_ranges == r.interval_ranges
    assert sorted(ids(sqlite_url, "db-ev")) == list(range(12))


def test_tables_are_spread_over_tasks_and_filtered(pg_database: str, sqlite_url: str) -> None:
    execute(pg_database, *[f"CREATE TABLE t{i} (id INTEGER PRIMARY KEY)" for i in range(5)],
            *[f"INSERT INTO t{i} SELECT g FROM generate_series(1, {i + 1}) g" for i in range(5)])
    r = run_source(cfg(pg_database, **{"tasks.max": 2, "table.exclude.list": "t0,t3"}), sqlite_url)
    assert r.records == 2 + 3 + 5
    assert sorted(r.ranges) == ["db-t1", "db-t2", "db-t4"]
    r = run_source(cfg(pg_database, name="two", **{"table.include.list": "public.t2,t4"}), sqlite_url)
    assert sorted(r.ranges) == ["db-public.t2", "db-t4"]


def test_discovery_skips_pyconnects_own_tables_unless_listed(tmp_path: Any) -> None:
    """A SQL source pointed at the database that holds pyconnect's embedded store and a SqlSink's offsets
    table (under a name of the user's choosing) reads neither unless they are listed (issue 25)."""
    shared = f"sqlite:///{tmp_path / 'shared.db'}"
    with open_backend(shared) as be:  # the embedded store's tables, in the same file
        be.create_topics({"internal": 1})
    orders(shared, 3)
    execute(shared, "CREATE TABLE sink_state (connector TEXT, topic TEXT, kafka_partition INTEGER, "
                    "next_offset BIGINT, generation BIGINT NOT NULL, updated_ms BIGINT NOT NULL, "
                    "PRIMARY KEY (connector, topic, kafka_partition))",
            "INSERT INTO sink_state VALUES ('x', 'y', 0, 5, 1, 0)")
    out = f"sqlite:///{tmp_path / 'out.db'}"
    r = run_source(cfg(shared, mode="bulk"), out)
    assert sorted(r.ranges) == ["db-orders"] and r.records == 3
    r = run_source(cfg(shared, name="listed", mode="bulk", **{"table.include.list": "orders,sink_state"}), out)
    assert sorted(r.ranges) == ["db-orders", "db-sink_state"]


def test_query_mode(db: str, sqlite_url: str) -> None:
    orders(db, 30, per_ts=2)
    c = cfg(db, name="q", mode="timestamp+incrementing", query="SELECT id, ts, amount FROM orders WHERE amount >= 100",
            **{"timestamp.column.name": "ts", "incrementing.column.name": "id", "topic.prefix": "big-orders",
               "batch.max.rows": 4})
    r = run_source(c, sqlite_url, max_records=5)
    assert r.source_offsets[0]["partition"] == {"query": "query"}
    run_source(c, sqlite_url)
    assert ids(sqlite_url, "big-orders") == list(range(10, 30))


def test_timestamp_delay_leaves_recent_rows_for_later(pg_database: str, sqlite_url: str) -> None:
    now = datetime.now(UTC).replace(tzinfo=None)
    execute(pg_database, "CREATE TABLE orders (id INTEGER PRIMARY KEY, ts TIMESTAMP NOT NULL)",
            "INSERT INTO orders VALUES (:id, :ts)",
            params=[{"id": 1, "ts": now - timedelta(hours=1)}, {"id": 2, "ts": now - timedelta(seconds=1)}])
    c = cfg(pg_database, mode="timestamp", **{"timestamp.column.name": "ts", "timestamp.delay.interval.ms": 600000})
    assert run_source(c, sqlite_url).records == 1
    c["timestamp.delay.interval.ms"] = 0
    assert run_source(c, sqlite_url).records == 1
    assert ids(sqlite_url) == [1, 2]


# --------------------------------------------------------------------------------------------- bad input


def test_unreachable_database_fails_bounded_naming_the_host_not_the_password(sqlite_url: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = cfg(f"postgresql://app@127.0.0.1:{port}/db", mode="bulk",
            **{"connection.password": "s3cr3t-pw", "connection.attempts": 2, "connection.backoff.ms": 100})
    t0 = time.monotonic()
    with pytest.raises(ConnectError) as err:
        run_source(c, sqlite_url)
    assert time.monotonic() - t0 < 30
    msg = str(err.value)
    assert f"127.0.0.1:{port}" in msg and "2 attempts" in msg and "s3cr3t-pw" not in msg


def test_missing_table_and_column_are_named(db: str, sqlite_url: str) -> None:
    orders(db, 1)
    with pytest.raises(ConfigError) as err:
        run_source(cfg(db, **{"table.include.list": "orders,nope"}), sqlite_url)
    assert "nope" in str(err.value) and "table.include.list" in err.value.errors
    with pytest.raises(ConfigError) as err:
        run_source(cfg(db, mode="incrementing", **{"incrementing.column.name": "seq"}), sqlite_url)
    assert "seq" in err.value.errors["incrementing.column.name"] and "orders" in str(err.value)


def test_config_cross_checks(sqlite_url: str, tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with pytest.raises(ConfigError) as err:
        run_source(cfg(url, mode="timestamp+incrementing", **{"interval.start": "2025-01-01"}), sqlite_url)
    assert {"timestamp.column.name", "incrementing.column.name", "interval.end"} <= set(err.value.errors)
    with pytest.raises(ConfigError) as err:
        run_source(cfg(url, mode="bulk", **{"interval.start": "2025-01-02", "interval.end": "2025-01-01"}),
                   sqlite_url)
    assert "mode" in err.value.errors
    with pytest.raises(ConfigError) as err:
        run_source(cfg(url, mode="timestamp", **{"timestamp.column.name": "ts", "interval.start": "yesterday",
                                                 "interval.end": "2025-01-01"}), sqlite_url)
    assert "ISO 8601" in err.value.errors["interval.start"]
    with pytest.raises(ConfigError) as err:
        run_source(cfg("not a url", mode="bulk"), sqlite_url)
    assert "connection.url" in err.value.errors
