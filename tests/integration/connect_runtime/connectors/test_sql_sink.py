"""SqlSink against a real PostgreSQL (session cluster) and SQLite: modes, keys, auto.create/evolve, deletes,
offsets in the destination, fencing, lossless round trip from SqlSource, bad input."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from connect_runtime import ConfigError, ConnectError, run_sink, run_source
from connect_runtime.api import ProducerFencedError, SinkRecord, TopicPartition
from tests.support.source_connectors import read_topic
from tests.support.sql import cfg, execute, open_task, produce, query


@pytest.fixture(params=["postgresql", "sqlite"])
def db(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'dst.db'}"
    return str(request.getfixturevalue("pg_database"))


def test_insert_without_key_writes_each_record_once_and_keeps_offsets_in_the_destination(
    db: str, sqlite_url: str
) -> None:
    produce(
        sqlite_url, "orders", [(None, {"id": i, "amount": i * 1.5, "note": f"n{i}"}) for i in range(500)], 3
    )
    execute(db, "CREATE TABLE orders (id BIGINT, amount DOUBLE PRECISION, note TEXT)")
    c = cfg(db, **{"batch.size": 64, "consumer.max.poll.records": 50, "offset.flush.interval.ms": 0})
    r = run_sink(c, sqlite_url)
    assert r.records == 500 and r.committed == {}  # pre_commit returned {}: nothing in the consumer group
    assert query(db, "SELECT count(*), count(DISTINCT id), sum(amount) FROM orders") == [
        (500, 500, 1.5 * 499 * 250)
    ]
    offsets = query(
        db,
        "SELECT connector, topic, kafka_partition, next_offset FROM pyconnect_sink_offsets "
        "ORDER BY kafka_partition",
    )
    assert offsets == [
        ("sql-sink", "orders", 0, 167),
        ("sql-sink", "orders", 1, 167),
        ("sql-sink", "orders", 2, 166),
    ]
    # a rerun resumes at the stored offsets (the group has nothing): nothing is written twice
    assert run_sink(c, sqlite_url).records == 0
    produce(sqlite_url, "orders", [(None, {"id": 500 + i, "amount": 0, "note": "late"}) for i in range(6)], 3)
    assert run_sink(c, sqlite_url).records == 6
    assert query(db, "SELECT count(*), count(DISTINCT id) FROM orders") == [(506, 506)]


def test_upsert_by_record_key_last_write_wins_and_a_rerun_changes_nothing(db: str, sqlite_url: str) -> None:
    produce(
        sqlite_url, "orders", [({"id": i % 10}, {"amount": i, "status": "s" + str(i)}) for i in range(45)]
    )
    c = cfg(db, **{"insert.mode": "upsert", "pk.mode": "record_key", "auto.create": "true", "batch.size": 7})
    run_sink(c, sqlite_url)
    rows = query(db, "SELECT id, amount, status FROM orders ORDER BY id")
    assert rows == [
        (i, 40 + i if 40 + i < 45 else 30 + i, f"s{40 + i if 40 + i < 45 else 30 + i}") for i in range(10)
    ]
    before = query(db, "SELECT * FROM orders ORDER BY id")
    assert run_sink(c, sqlite_url).records == 0
    assert query(db, "SELECT * FROM orders ORDER BY id") == before


def test_upsert_by_value_fields_with_a_primitive_key_column(db: str, sqlite_url: str) -> None:
    produce(
        sqlite_url,
        "orders",
        [
            (None, {"day": "d1", "shop": "a", "total": 1}),
            (None, {"day": "d1", "shop": "b", "total": 2}),
            (None, {"day": "d1", "shop": "a", "total": 3}),
        ],
    )
    c = cfg(
        db,
        **{
            "insert.mode": "upsert",
            "pk.mode": "record_value",
            "pk.fields": "day,shop",
            "auto.create": "true",
        },
    )
    run_sink(c, sqlite_url)
    assert query(db, "SELECT day, shop, total FROM orders ORDER BY shop") == [("d1", "a", 3), ("d1", "b", 2)]
    produce(sqlite_url, "items", [("k1", {"qty": 1}), ("k2", {"qty": 2}), ("k1", {"qty": 5})])
    c = cfg(
        db,
        name="items",
        topics="items",
        **{
            "insert.mode": "upsert",
            "pk.mode": "record_key",
            "pk.fields": "sku",
            "auto.create": "true",
            "table.name.format": "t_${topic}",
        },
    )
    run_sink(c, sqlite_url)
    assert query(db, "SELECT sku, qty FROM t_items ORDER BY sku") == [("k1", 5), ("k2", 2)]


def test_update_mode_and_deletes(db: str, sqlite_url: str) -> None:
    execute(
        db,
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, status TEXT)",
        "INSERT INTO orders VALUES (1, 'new'), (2, 'new'), (3, 'new')",
    )
    produce(sqlite_url, "orders", [({"id": 1}, {"status": "paid"}), ({"id": 9}, {"status": "ghost"})])
    run_sink(cfg(db, **{"insert.mode": "update", "pk.mode": "record_key"}), sqlite_url)
    assert query(db, "SELECT id, status FROM orders ORDER BY id") == [(1, "paid"), (2, "new"), (3, "new")]
    produce(
        sqlite_url,
        "orders",
        [
            ({"id": 2}, None),
            ({"id": 3}, {"status": "shipped"}),
            ({"id": 4}, {"status": "x"}),
            ({"id": 4}, None),
            ({"id": 1}, None),
            ({"id": 1}, {"status": "again"}),
        ],
    )
    # the same connector switched to upsert with deletes resumes after the 2 records it already wrote
    c = cfg(db, **{"insert.mode": "upsert", "pk.mode": "record_key", "delete.enabled": "true"})
    assert run_sink(c, sqlite_url).records == 6
    assert query(db, "SELECT id, status FROM orders ORDER BY id") == [(1, "again"), (3, "shipped")]


def test_auto_evolve_adds_nullable_columns_and_drift_without_it_fails_naming_the_field(
    db: str, sqlite_url: str
) -> None:
    produce(sqlite_url, "orders", [(None, {"id": 1, "a": "x"})])
    run_sink(cfg(db, **{"auto.create": "true"}), sqlite_url)  # the table is created from the first record
    produce(sqlite_url, "orders", [(None, {"id": 2, "a": "y", "b": 5, "doc": {"k": [1]}})])
    with pytest.raises(ConnectError) as err:
        run_sink(cfg(db, **{"auto.create": "true"}), sqlite_url)
    assert "'b'" in str(err.value) and "auto.evolve" in str(err.value)
    assert query(db, "SELECT count(*) FROM orders") == [(1,)]  # the failed transaction wrote nothing
    run_sink(cfg(db, **{"auto.create": "true", "auto.evolve": "true"}), sqlite_url)
    rows = query(db, "SELECT id, a, b, doc FROM orders ORDER BY id")
    assert [r[:3] for r in rows] == [(1, "x", None), (2, "y", 5)]
    assert rows[0][3] is None and (rows[1][3] == {"k": [1]} or json.loads(rows[1][3]) == {"k": [1]})


def test_missing_table_without_auto_create_is_named(db: str, sqlite_url: str) -> None:
    produce(sqlite_url, "orders", [(None, {"id": 1})])
    with pytest.raises(ConnectError) as err:
        run_sink(cfg(db), sqlite_url)
    assert "'orders' does not exist" in str(err.value) and "auto.create" in str(err.value)


def test_a_value_that_does_not_fit_names_the_record_or_goes_to_the_dead_letter_queue(
    pg_database: str, sqlite_url: str
) -> None:
    execute(pg_database, "CREATE TABLE orders (id BIGINT NOT NULL, code VARCHAR(5), amount NUMERIC(6, 2))")
    good = [(None, {"id": i, "code": "ok", "amount": "1.25"}) for i in range(20)]
    produce(
        sqlite_url,
        "orders",
        [*good[:7], (None, {"id": 7, "code": "far-too-long", "amount": "1"}), *good[8:13]],
    )
    with pytest.raises(ConnectError) as err:
        run_sink(cfg(pg_database), sqlite_url)
    assert "orders-0@7" in str(err.value) and "does not fit table orders" in str(err.value)
    assert query(pg_database, "SELECT count(*) FROM orders") == [(0,)]
    produce(sqlite_url, "orders", [(None, {"id": None, "code": "x"}), (None, "not an object"), *good[16:]])
    with pytest.raises(ConnectError) as err:
        run_sink(cfg(pg_database), sqlite_url)
    assert "orders-0@7" in str(err.value) or "orders-0@14" in str(err.value)
    assert query(pg_database, "SELECT count(*) FROM orders") == [(0,)]
    c = cfg(
        pg_database,
        **{
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": "orders-dlq",
            "errors.deadletterqueue.context.headers.enable": "true",
        },
    )
    r = run_sink(c, sqlite_url)
    assert r.dead_lettered == 3
    # in the order they were reported: "not an object" fails conversion in put, the two rows when written
    dead = read_topic(sqlite_url, "orders-dlq")
    assert sorted(dead, key=json.dumps) == sorted(
        [{"id": 7, "code": "far-too-long", "amount": "1"}, {"id": None, "code": "x"}, "not an object"], key=json.dumps
    )
    # 7 + 5 + 4 good records, each once
    assert query(pg_database, "SELECT count(*), sum(amount) FROM orders") == [(16, Decimal("20.00"))]


def test_a_zombie_generation_cannot_commit(db: str, sqlite_url: str) -> None:
    produce(sqlite_url, "orders", [(None, {"id": i}) for i in range(10)])
    c = cfg(db, **{"auto.create": "true"})
    run_sink(c, sqlite_url)
    (gen,) = query(db, "SELECT generation FROM pyconnect_sink_offsets")[0]
    tp = TopicPartition("orders", 0)
    # a run that started before the newest one (its generation is lower) and is still alive: a zombie
    zombie, zctx = open_task(c, gen + 1, [tp])
    assert zctx.rewinds == {tp: 10}
    newer, _ = open_task(c, gen + 2, [tp])  # the newer run claims the partition
    try:
        zombie.put([SinkRecord(topic="orders", partition=0, offset=10, value={"id": 100})])
        with pytest.raises(ProducerFencedError) as err:
            zombie.pre_commit({tp: 11})
        assert "generation" in str(err.value) and "zombie" in str(err.value)
        with pytest.raises(ProducerFencedError):  # and stays fenced
            zombie.put([SinkRecord(topic="orders", partition=0, offset=11, value={"id": 101})])
        assert query(db, "SELECT count(*) FROM orders") == [(10,)]
        assert query(db, "SELECT next_offset, generation FROM pyconnect_sink_offsets") == [(10, gen + 2)]
    finally:
        zombie.stop()
        newer.stop()


def test_lossless_round_trip_postgresql_to_postgresql(pg_database: str, sqlite_url: str) -> None:
    cols = (
        "id BIGINT PRIMARY KEY, amount NUMERIC(30, 10), at TIMESTAMPTZ, local TIMESTAMP, d DATE, raw BYTEA, "
        "doc JSONB, f DOUBLE PRECISION, flag BOOLEAN, note TEXT"
    )
    execute(
        pg_database,
        f"CREATE TABLE src ({cols})",
        f"CREATE TABLE dst_insert ({cols})",
        f"CREATE TABLE dst_upsert ({cols})",
        "INSERT INTO src VALUES (1, 12345678901234567890.0123456789, '2026-01-02 03:04:05.123456+02', "
        "'2026-01-02 03:04:05.5', '2026-01-02', '\\x00ff10', '{\"a\": [1, 2.5, null]}', 0.1, true, 'é'), "
        "(2, -0.0000000001, NULL, NULL, NULL, '', '[]', 'Infinity', false, '')",
    )
    run_source(
        {
            "name": "rt",
            "connector.class": "connect_runtime.connectors.sql.SqlSource",
            "connection.url": pg_database,
            "table.include.list": "src",
            "topic.prefix": "",
        },
        sqlite_url,
    )
    for table, mode in (("dst_insert", "insert"), ("dst_upsert", "upsert")):
        run_sink(
            cfg(
                pg_database,
                name=table,
                topics="src",
                **{"table.name.format": table, "insert.mode": mode, "pk.mode": "record_key"},
            ),
            sqlite_url,
        )
        assert query(pg_database, f"SELECT * FROM {table} ORDER BY id") == query(
            pg_database, "SELECT * FROM src ORDER BY id"
        )


def test_config_cross_checks(sqlite_url: str, tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with pytest.raises(ConfigError) as err:
        run_sink(cfg(url, **{"insert.mode": "upsert", "delete.enabled": "true"}), sqlite_url)
    assert {"pk.mode", "delete.enabled"} <= set(err.value.errors)
    with pytest.raises(ConfigError) as err:
        run_sink(cfg(url, **{"insert.mode": "merge", "pk.mode": "kafka"}), sqlite_url)
    assert {"insert.mode", "pk.mode"} <= set(err.value.errors)


def test_unreachable_database_fails_bounded_naming_the_host_not_the_password(
    pg_database: str, sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    import socket

    produce(sqlite_url, "orders", [(None, {"id": i}) for i in range(5)])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = cfg(
        f"postgresql://app@127.0.0.1:{port}/db",
        **{"connection.password": "s3cr3t-pw", "connection.attempts": 2, "connection.backoff.ms": 100},
    )
    with pytest.raises(ConnectError) as err:
        run_sink(c, sqlite_url, max_seconds=60)
    msg = str(err.value)
    assert f"127.0.0.1:{port}" in msg and "2 attempts" in msg
    assert "s3cr3t-pw" not in msg and "s3cr3t-pw" not in caplog.text
    # nothing was consumed for good: once the database is there, every record arrives once
    r = run_sink(cfg(pg_database, **{"auto.create": "true"}), sqlite_url)
    assert r.records == 5 and query(pg_database, "SELECT count(*) FROM orders") == [(5,)]
