"""SqlSink's offsets in its destination as first-class offsets (KIP-875): ``read_offsets`` / ``alter_offsets``
on a connector that is not started, on PostgreSQL and SQLite; a replaced offsets store continues from the
destination; zombies stay fenced; no password in any message."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from connect_runtime import ConfigError, ConnectError, run_sink
from connect_runtime.api import DestinationOffsets, ProducerFencedError, TopicPartition
from connect_runtime.connectors.sql import SqlSink
from tests.support.sql import cfg, execute, open_task, produce, query

TP0, TP1, TP2 = (TopicPartition("orders", p) for p in range(3))


@pytest.fixture(params=["postgresql", "sqlite"])
def db(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'dst.db'}"
    return str(request.getfixturevalue("pg_database"))


def test_read_offsets_of_a_destination_without_the_table_or_rows(db: str) -> None:
    got = SqlSink().read_offsets(cfg(db))
    assert got == DestinationOffsets({}, -1, f"table pyconnect_sink_offsets on {db}")
    execute(db, "CREATE TABLE pyconnect_sink_offsets (connector VARCHAR(255), topic VARCHAR(255), "
                "kafka_partition INTEGER, next_offset BIGINT, generation BIGINT NOT NULL, updated_ms BIGINT NOT NULL, "
                "PRIMARY KEY (connector, topic, kafka_partition))",
            "INSERT INTO pyconnect_sink_offsets VALUES ('other', 'orders', 0, 7, 9, 0)")
    assert SqlSink().read_offsets(cfg(db)).generation == -1  # another connector's rows are not its


def test_read_offsets_after_a_run_and_claimed_rows_are_no_offsets(db: str, sqlite_url: str) -> None:
    produce(sqlite_url, "orders", [(None, {"id": i}) for i in range(20)], 2)
    c = cfg(db, **{"auto.create": "true"})
    run_sink(c, sqlite_url)
    got = SqlSink().read_offsets(c)
    (gen,) = query(db, "SELECT max(generation) FROM pyconnect_sink_offsets")[0]
    assert got.offsets == {TP0: 10, TP1: 10} and got.generation == gen >= 0
    # a run that claimed a partition and wrote nothing there: no offset, but its generation counts
    execute(db, f"INSERT INTO pyconnect_sink_offsets VALUES ('sql-sink', 'orders', 2, NULL, {gen + 3}, 0)")
    got = SqlSink().read_offsets(c)
    assert got.offsets == {TP0: 10, TP1: 10} and got.generation == gen + 3
    # offsets.table.name is honoured
    other = SqlSink().read_offsets(cfg(db, **{"offsets.table.name": "elsewhere"}))
    assert other == DestinationOffsets({}, -1, f"table elsewhere on {db}")


def test_alter_offsets_sets_and_resets_partitions_and_the_next_run_follows(db: str, sqlite_url: str) -> None:
    produce(sqlite_url, "orders", [(None, {"id": i}) for i in range(30)], 3)
    c = cfg(db, **{"auto.create": "true"})
    sink = SqlSink()
    # no table yet: alter creates it
    assert sink.alter_offsets(c, {TP0: 4, TP1: None}, 0) is True
    assert sink.read_offsets(c) == DestinationOffsets({TP0: 4}, 0, f"table pyconnect_sink_offsets on {db}")
    r = run_sink(c, sqlite_url)  # partition 0 from offset 4; 1 and 2 from the start
    assert r.records == 26
    assert query(db, "SELECT count(*), count(DISTINCT id) FROM orders") == [(26, 26)]
    assert query(db, "SELECT count(*) FROM orders WHERE id IN (0, 3, 6, 9)") == [(0,)]
    got = sink.read_offsets(c)
    assert got.offsets == {TP0: 10, TP1: 10, TP2: 10} and got.generation >= 1
    # KIP-875 as the runtime does it: a generation above every one recorded, rows of every partition raised
    gen = got.generation + 1
    assert sink.alter_offsets(c, {TP1: 8, TP2: None}, gen)
    got = sink.read_offsets(c)
    assert got.offsets == {TP0: 10, TP1: 8} and got.generation == gen
    assert query(db, "SELECT DISTINCT generation FROM pyconnect_sink_offsets") == [(gen,)]
    r = run_sink(c, sqlite_url)  # partition 1 again from 8, partition 2 from the start
    assert r.records == 2 + 10
    assert query(db, "SELECT count(*), count(DISTINCT id) FROM orders") == [(38, 26)]


def test_alter_offsets_refuses_when_a_newer_generation_wrote_and_changes_nothing(db: str) -> None:
    c = cfg(db)
    sink = SqlSink()
    assert sink.alter_offsets(c, {TP0: 5, TP1: 6}, 7)
    assert sink.alter_offsets(c, {TP0: 4}, 7)  # the same generation may alter again
    with pytest.raises(ProducerFencedError) as err:
        sink.alter_offsets(c, {TP0: 1, TP2: 1}, 6)
    msg = str(err.value)
    assert "generation 7" in msg and "generation 6" in msg and "pyconnect_sink_offsets" in msg
    assert sink.read_offsets(c) == DestinationOffsets({TP0: 4, TP1: 6}, 7, f"table pyconnect_sink_offsets on {db}")
    with pytest.raises(ConnectError, match="must not be negative"):
        sink.alter_offsets(c, {TP0: -1}, 8)


def test_bad_config_is_a_config_error_naming_the_field(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    for props, field in (({"name": "s", "topics": "orders"}, "connection.url"),
                         (cfg(url, **{"batch.size": 0}), "batch.size"),
                         (cfg(url, **{"connection.url": "not a url"}), "connection.url"),
                         (cfg(url, **{"insert.mode": "upsert"}), "pk.mode")):
        for call in (lambda p: SqlSink().read_offsets(p), lambda p: SqlSink().alter_offsets(p, {TP0: 1}, 0)):
            with pytest.raises(ConfigError) as err:
                call(props)
            assert field in err.value.errors and field in str(err.value)
    assert not (tmp_path / "x.db").exists()  # nothing was touched


def test_no_password_in_where_messages_or_logs(pg_database: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "s3cr3t-pw"  # the test cluster trusts local connections: any password is accepted
    inside = pg_database.replace("postgresql+psycopg://postgres@", f"postgresql://postgres:{secret}@")
    for c in (cfg(inside), cfg(pg_database, **{"connection.password": secret})):
        got = SqlSink().read_offsets(c)
        assert secret not in got.where and "***" in got.where and got.where.startswith("table pyconnect_sink_offsets on")
        assert SqlSink().alter_offsets(c, {TP0: 3}, 1)
        with pytest.raises(ProducerFencedError) as fenced:
            SqlSink().alter_offsets(c, {TP0: 3}, 0)
        bad = {**c, "offsets.table.name": "no_such_schema.offsets"}
        with pytest.raises(ConnectError) as err:  # the schema is missing: the database's error, named
            SqlSink().alter_offsets(bad, {TP0: 3}, 1)
        assert "no_such_schema" in str(err.value)
        for msg in (str(fenced.value), str(err.value)):
            assert secret not in msg and "***" in msg
    with pytest.raises(ConnectError) as err:  # unreachable
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        SqlSink().read_offsets(cfg(f"postgresql://app:{secret}@127.0.0.1:{port}/db",
                                   **{"connection.attempts": 1}))
    assert f"127.0.0.1:{port}" in str(err.value) and secret not in str(err.value)
    assert secret not in caplog.text


def test_a_replaced_offsets_store_continues_from_the_destination_and_zombies_stay_fenced(
    db: str, tmp_path: Any
) -> None:
    first, second = f"sqlite:///{tmp_path / 'store1.db'}", f"sqlite:///{tmp_path / 'store2.db'}"
    data = [(None, {"id": i, "note": f"n{i}"}) for i in range(40)]
    c = cfg(db, **{"auto.create": "true"})
    produce(first, "orders", data[:20], 2)
    run_sink(c, first)
    assert run_sink(c, first).records == 0  # two runs on the first store: its registry is at generation 1
    old = SqlSink().read_offsets(c)
    assert old.offsets == {TP0: 10, TP1: 10}
    # a brand-new store (a new AIRFLOW_HOME, SQLite to Kafka): the same topic data produced again, and more
    produce(second, "orders", data, 2)
    r = run_sink(c, second)  # not refused as a zombie: its generation starts above the destination's
    assert r.records == 20
    assert query(db, "SELECT count(*), count(DISTINCT id) FROM orders") == [(40, 40)]
    new = SqlSink().read_offsets(c)
    assert new.offsets == {TP0: 20, TP1: 20} and new.generation > old.generation
    assert run_sink(c, second).records == 0  # and its reruns follow as usual
    # a task of the old store's generation (a zombie of the replaced deployment) is refused, writes nothing
    with pytest.raises(ProducerFencedError, match="zombie"):
        open_task(c, old.generation, [TP0])
    assert query(db, "SELECT count(*) FROM orders") == [(40,)]
    assert SqlSink().read_offsets(c).offsets == {TP0: 20, TP1: 20}
