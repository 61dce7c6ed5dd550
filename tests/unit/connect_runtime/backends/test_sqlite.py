"""The embedded SQLite backend, against real files (across processes:
tests/integration/connect_runtime/backends/test_sqlite_processes.py)."""

from __future__ import annotations

import sqlite3
import threading
import time
import zlib
from pathlib import Path

import pytest

from connect_runtime.api.errors import (
    BackendError,
    BackendUnavailableError,
    ConfigError,
    DataError,
    ProducerFencedError,
)
from connect_runtime.api.records import RecordMetadata, TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.backends.sqlite import (
    SQLiteBackend,
    decode_headers,
    encode_headers,
    parse_url,
)
from tests.support.records import TP0, produce, read_all, rec, values


@pytest.fixture
def backend(sqlite_url: str):
    b = open_backend(sqlite_url)
    yield b
    b.close()




# -- URL and settings ------------------------------------------------------------------------------


def test_absolute_url_creates_parent_directories_and_schema(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "x.db"
    with open_backend(f"sqlite:///{path}") as b:
        assert isinstance(b, SQLiteBackend)
        assert b.path == path
        assert b.list_topics() == {}
    assert path.exists()
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"topics", "partitions", "records", "source_offsets", "group_offsets", "producer_epochs"} <= tables
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_relative_url_is_relative_to_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_url("sqlite:///rel/x.db") == Path("rel/x.db")
    assert parse_url("sqlite:////abs/x.db") == Path("/abs/x.db")
    with open_backend("sqlite:///rel/x.db") as b:
        b.create_topics({"t": 1})
    assert (tmp_path / "rel" / "x.db").exists()


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "sqlite://", "sqlite:///", "sqlite://host/x.db",
                                 "sqlite:///file::memory:?cache=shared"])
def test_bad_urls_are_config_errors_naming_the_backend(url: str) -> None:
    with pytest.raises(ConfigError) as err:
        open_backend(url)
    assert "backend" in err.value.errors
    assert url in str(err.value)


def test_memory_url_says_why() -> None:
    with pytest.raises(ConfigError, match=r"in-memory.*processes must share"):
        open_backend("sqlite:///:memory:")
    with pytest.raises(ConfigError, match="processes must share"):
        SQLiteBackend(":memory:")


def test_every_bad_setting_is_named_in_one_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        open_backend(f"sqlite:///{tmp_path}/x.db",
                     {"busy.timeout.ms": "soon", "synchronous": "OFF", "default.partitions": 0, "cluster.id": ""})
    assert set(err.value.errors) == {"busy.timeout.ms", "synchronous", "default.partitions", "cluster.id"}
    assert "'soon'" in err.value.errors["busy.timeout.ms"]
    assert "NORMAL" in err.value.errors["synchronous"]


def test_settings_are_applied(tmp_path: Path) -> None:
    with open_backend(f"sqlite:///{tmp_path}/x.db",
                      {"busy.timeout.ms": "1500", "synchronous": "full", "default.partitions": 4}) as b:
        assert b.cluster_id is None
        assert b._db.busy_timeout_ms == 1500
        conn = b._db.connect()
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 1500
        conn.close()
        p = b.producer()
        p.send([rec(b"v")])
        p.flush(5)
        assert b.list_topics() == {"t": 4}
    with open_backend(f"sqlite:///{tmp_path}/x.db", {"cluster.id": "prod"}) as b:
        assert b.cluster_id == "prod"


def test_a_file_that_is_not_a_database_is_a_backend_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not an sqlite database, not at all" * 100)
    with pytest.raises(BackendError, match=str(path)) as err:
        open_backend(f"sqlite:///{path}")
    assert isinstance(err.value.__cause__, sqlite3.DatabaseError)


# -- transactions ----------------------------------------------------------------------------------


def test_commit_makes_records_and_offsets_visible_together(sqlite_url: str) -> None:
    writer = open_backend(sqlite_url)
    reader = open_backend(sqlite_url)  # another connection, as another process would have
    try:
        p = writer.transactional_producer("conn-0")
        p.init_transactions(5)
        p.begin_transaction()
        p.send([rec(b"a"), rec(b"b")])
        p.send([rec(b"c")])
        store = reader.offset_store()
        consumer = reader.consumer(None)
        consumer.assign({TP0: 0})
        # uncommitted: nothing is visible to a concurrent reader
        assert consumer.poll(10, 0.05) == []
        assert consumer.end_offsets([TP0], 1) == {TP0: 0}
        assert store.read_all() == {}
        written = p.commit_transaction([(b'["c",{"f":1}]', b'{"pos":3}')], 5)
        assert written.ranges == {TP0: (0, 3)}
        assert written.metadata is None
        assert values(consumer.poll(10, 1)) == [b"a", b"b", b"c"]
        assert store.read_all() == {b'["c",{"f":1}]': b'{"pos":3}'}
        assert consumer.end_offsets([TP0], 1) == {TP0: 3}
        # the next transaction continues the offsets
        p.begin_transaction()
        p.send([rec(b"d")])
        assert p.commit_transaction([], 5).ranges == {TP0: (3, 4)}
        assert [(r.offset, r.value) for r in consumer.poll(10, 1)] == [(3, b"d")]
    finally:
        writer.close()
        reader.close()


def test_abort_leaves_nothing(backend: SQLiteBackend) -> None:
    p = backend.transactional_producer("conn-0")
    p.init_transactions(5)
    p.begin_transaction()
    p.send([rec(b"lost")])
    p.abort_transaction(5)
    assert read_all(backend) == []
    assert backend.offset_store().read_all() == {}
    p.begin_transaction()
    p.send([rec(b"kept")])
    assert p.commit_transaction([(b"k", b"v")], 5).ranges == {TP0: (0, 1)}
    assert [(r.offset, r.value) for r in read_all(backend)] == [(0, b"kept")]


def test_offsets_only_transaction_and_deletes(backend: SQLiteBackend) -> None:
    p = backend.transactional_producer("conn-0", "my-offsets")
    p.init_transactions(5)
    p.begin_transaction()
    w = p.commit_transaction([(b"k1", b"1"), (b"k2", b"2"), (b"k1", b"3")], 5)
    assert w.ranges == {}
    store = backend.offset_store("my-offsets")
    assert store.read_all() == {b"k1": b"3", b"k2": b"2"}  # the last entry of a key wins
    assert backend.offset_store("other").read_all() == {}  # other stores are separate
    # KIP-618: a connector-specific store is mirrored to the global store in the same transaction
    assert backend.offset_store().read_all() == {b"k1": b"3", b"k2": b"2"}
    p.begin_transaction()
    p.commit_transaction([(b"k2", None)], 5)
    assert store.read_all() == {b"k1": b"3"}
    assert store.get([b"k1", b"k2", b"nope"]) == {b"k1": b"3"}


def test_track_metadata_reports_each_record_in_send_order(backend: SQLiteBackend) -> None:
    backend.create_topics({"m": 2})
    p = backend.transactional_producer("conn-0", track_metadata=True)
    p.init_transactions(5)
    p.begin_transaction()
    p.send([rec(b"0", topic="m", partition=1), rec(b"1", topic="m", partition=0, timestamp=7),
            rec(b"2", topic="m", partition=1)])
    before = int(time.time() * 1000)
    w = p.commit_transaction([], 5)
    after = int(time.time() * 1000)
    assert w.metadata is not None
    assert [(m.topic, m.partition, m.offset) for m in w.metadata] == [("m", 1, 0), ("m", 0, 0), ("m", 1, 1)]
    assert w.metadata[1] == RecordMetadata("m", 0, 0, 7)
    assert before <= w.metadata[0].timestamp <= after
    assert w.metadata[0].timestamp == w.metadata[2].timestamp  # one commit time per transaction
    assert w.ranges == {TopicPartition("m", 1): (0, 2), TopicPartition("m", 0): (0, 1)}


def test_misuse_is_reported(backend: SQLiteBackend) -> None:
    p = backend.transactional_producer("conn-0")
    with pytest.raises(BackendError, match="init_transactions"):
        p.begin_transaction()
    p.init_transactions(5)
    with pytest.raises(BackendError, match="begin_transaction"):
        p.send([rec(b"x")])
    with pytest.raises(BackendError, match="without begin_transaction"):
        p.commit_transaction([], 5)
    p.begin_transaction()
    with pytest.raises(BackendError, match="while a transaction is open"):
        p.begin_transaction()


def test_fencing_in_one_process(backend: SQLiteBackend) -> None:
    old = backend.transactional_producer("src-0")
    old.init_transactions(5)
    old.begin_transaction()
    old.send([rec(b"old")])
    new = backend.transactional_producer("src-0")
    new.init_transactions(5)
    assert (old.epoch, new.epoch) == (0, 1)
    with pytest.raises(ProducerFencedError) as err:
        old.commit_transaction([(b"k", b"old")], 5)
    message = str(err.value)
    assert "'src-0'" in message and "epoch 0" in message and "epoch 1" in message
    assert read_all(backend) == [] and backend.offset_store().read_all() == {}
    with pytest.raises(ProducerFencedError):  # stays fenced
        old.begin_transaction()
    new.begin_transaction()
    new.send([rec(b"new")])
    new.commit_transaction([(b"k", b"new")], 5)
    assert values(read_all(backend)) == [b"new"]
    # another id is independent
    other = backend.transactional_producer("src-1")
    other.init_transactions(5)
    assert other.epoch == 0


# -- partitioning and topics -----------------------------------------------------------------------


def test_partition_choice(tmp_path: Path) -> None:
    with open_backend(f"sqlite:///{tmp_path}/x.db", {"default.partitions": 3}) as b:
        p = b.producer(track_metadata=True)
        keys = [b"alpha", b"beta", b"gamma", b"delta", b"epsilon"]
        p.send([rec(b"v", topic="k", key=k) for k in keys] + [rec(b"nokey", topic="k")])
        w = p.flush(5)
        assert b.list_topics() == {"k": 3}  # auto-created with default.partitions
        assert [m.partition for m in w.metadata] == [zlib.crc32(k) % 3 for k in keys] + [0]
        assert sum(b - a for a, b in w.ranges.values()) == 6


def test_a_partition_out_of_range_is_a_data_error_and_writes_nothing(backend: SQLiteBackend) -> None:
    backend.create_topics({"two": 2})
    p = backend.transactional_producer("conn-0")
    p.init_transactions(5)
    p.begin_transaction()
    p.send([rec(b"ok", topic="two", partition=1), rec(b"bad", topic="two", partition=2)])
    with pytest.raises(DataError, match=r"'two' has 2 partition.*partition 2"):
        p.commit_transaction([(b"k", b"v")], 5)
    assert read_all(backend, TopicPartition("two", 1)) == []
    assert backend.offset_store().read_all() == {}
    # a negative one too, with a plain producer; a topic created by the failed write is rolled back
    plain = backend.producer()
    plain.send([rec(b"x", topic="fresh"), rec(b"y", topic="two", partition=-1)])
    with pytest.raises(DataError, match=r"'two'.*-1"):
        plain.flush(5)
    assert backend.list_topics() == {"two": 2}
    plain.send([rec(b"x", topic="fresh")])
    assert plain.flush(5).ranges == {TopicPartition("fresh", 0): (0, 1)}


def test_a_key_that_is_not_bytes_is_a_data_error(tmp_path: Path) -> None:
    with open_backend(f"sqlite:///{tmp_path}/x.db", {"default.partitions": 2}) as b:
        p = b.producer()
        p.send([ProducerRecord("t", None, "text-key", b"v")])
        with pytest.raises(DataError, match="key 'text-key' is not bytes"):
            p.flush(5)


def test_create_and_list_topics(backend: SQLiteBackend) -> None:
    backend.create_topics({"a": 3, "dlq": 1})
    backend.create_topics({"a": 5})  # exists: left as it is
    assert backend.list_topics() == {"a": 3, "dlq": 1}
    with pytest.raises(BackendError, match="'a' already exists"):
        backend.create_topics({"a": 1}, exist_ok=False)
    with pytest.raises(ConfigError, match="partitions of b"):
        backend.create_topics({"b": 0})
    assert backend.list_topics() == {"a": 3, "dlq": 1}


def test_short_plain_tuples_are_accepted(backend: SQLiteBackend) -> None:
    p = backend.producer()
    p.send([("t", None, b"k", b"v"), ("t", 0, None, b"w", 5)])
    p.flush(5)
    got = read_all(backend)
    assert [(r.key, r.value, r.headers) for r in got] == [(b"k", b"v", None), (None, b"w", None)]
    assert got[1].timestamp == 5


def test_headers_round_trip(backend: SQLiteBackend) -> None:
    headers = [("a", b"1"), ("a", b""), ("none", None), ("ünï", bytes(range(256)))]
    assert decode_headers(encode_headers(headers)) == headers
    assert encode_headers(None) is None and encode_headers([]) is None
    assert decode_headers(encode_headers([("s", "tèxt")])) == [("s", "tèxt".encode())]  # type: ignore[list-item]
    with pytest.raises(DataError, match="cannot be stored"):
        encode_headers([("n", 5)])  # type: ignore[list-item]
    with pytest.raises(DataError, match="cannot be stored"):
        encode_headers([(b"bytes-name", b"v")])  # type: ignore[list-item]
    with pytest.raises(DataError, match="unknown encoding"):
        decode_headers(b"\x07junk")
    p = backend.producer()
    p.send([rec(b"v", headers=headers), rec(b"w")])
    p.flush(5)
    got = read_all(backend)
    assert got[0].headers == headers and got[1].headers is None


# -- non-transactional producer and offset store ---------------------------------------------------


def test_plain_producer_writes_on_flush(backend: SQLiteBackend) -> None:
    p = backend.producer()
    p.send([rec(b"1"), rec(b"2")])
    assert read_all(backend) == []
    w = p.flush(5)
    assert w.ranges == {TP0: (0, 2)} and w.metadata is None
    assert p.flush(5).ranges == {}
    p.send([rec(b"dropped")])
    p.close()
    assert values(read_all(backend)) == [b"1", b"2"]
    with pytest.raises(BackendError, match="after close"):
        p.send([rec(b"x")])


def test_offset_store_put_get_delete(backend: SQLiteBackend) -> None:
    store = backend.offset_store()
    store.put([(b"a", b"1"), (b"b", b"2")], 5)
    store.put([(b"a", None), (b"c", b"3")], 5)
    assert store.read_all() == {b"b": b"2", b"c": b"3"}
    many = [f"k{i}".encode() for i in range(1200)]
    store.put([(k, k) for k in many], 5)
    assert store.get([*many, b"missing"]) == {k: k for k in many}
    with pytest.raises(DataError, match="not bytes"):
        store.put([("text", b"v")], 5)
    assert backend.offset_store("connect-offsets").get([b"b"]) == {b"b": b"2"}


# -- consumer --------------------------------------------------------------------------------------



def test_consumer_poll_orders_each_partition_and_honours_max_records(backend: SQLiteBackend) -> None:
    backend.create_topics({"m": 3})
    produce(backend, [rec(f"{p}-{i}".encode(), topic="m", partition=p) for i in range(5) for p in range(3)])
    c = backend.consumer("g")
    parts = c.partitions(["m"])
    assert parts == [TopicPartition("m", p) for p in range(3)]
    c.assign({tp: 0 for tp in parts})
    seen: dict[int, list[int]] = {0: [], 1: [], 2: []}
    while True:
        batch = c.poll(4, 0.05)
        assert len(batch) <= 4
        if not batch:
            break
        for r in batch:
            seen[r.partition].append(r.offset)
            assert r.value == f"{r.partition}-{r.offset}".encode()
    assert seen == {p: [0, 1, 2, 3, 4] for p in range(3)}


def test_poll_waits_at_most_its_timeout_and_wakes_on_a_commit(backend: SQLiteBackend) -> None:
    c = backend.consumer(None)
    c.assign({TP0: 0})
    t0 = time.monotonic()
    assert c.poll(10, 0.3) == []
    assert 0.29 <= time.monotonic() - t0 < 5
    timer = threading.Timer(0.2, produce, (backend, [rec(b"late")]))
    timer.start()
    try:
        t0 = time.monotonic()
        assert values(c.poll(10, 10)) == [b"late"]
        assert time.monotonic() - t0 < 5
    finally:
        timer.join(10)


def test_seek_pause_resume(backend: SQLiteBackend) -> None:
    backend.create_topics({"m": 2})
    produce(backend, [rec(f"{p}-{i}".encode(), topic="m", partition=p) for i in range(3) for p in range(2)])
    a, b = TopicPartition("m", 0), TopicPartition("m", 1)
    c = backend.consumer("g")
    c.assign({a: 1, b: 0})
    c.pause([b])
    assert [(r.partition, r.offset) for r in c.poll(10, 0.05)] == [(0, 1), (0, 2)]
    assert c.poll(10, 0.05) == []
    c.resume([b])
    assert [(r.partition, r.offset) for r in c.poll(10, 0.05)] == [(1, 0), (1, 1), (1, 2)]
    c.seek(a, 0)
    assert [(r.partition, r.offset) for r in c.poll(1, 0.05)] == [(0, 0)]
    c.seek(b, 2)
    assert sorted((r.partition, r.offset) for r in c.poll(10, 0.05)) == [(0, 1), (0, 2), (1, 2)]
    with pytest.raises(BackendError, match=r"m\[5\].*not assigned"):
        c.seek(TopicPartition("m", 5), 0)
    with pytest.raises(DataError, match=r"m\[0\].*-1"):
        c.seek(a, -1)
    c.assign({b: 0})  # replaces the assignment
    assert {r.partition for r in c.poll(10, 0.05)} == {1}


def test_commit_and_committed(sqlite_url: str, backend: SQLiteBackend) -> None:
    backend.create_topics({"m": 2})
    a, b = TopicPartition("m", 0), TopicPartition("m", 1)
    c = backend.consumer("connect-sink")
    assert c.committed([a, b], 5) == {a: None, b: None}
    c.commit({a: 3}, 5)
    c.commit({a: 4, b: 1}, 5)
    with open_backend(sqlite_url) as other:
        assert other.consumer("connect-sink").committed([a, b], 5) == {a: 4, b: 1}
        assert other.consumer("another-group").committed([a], 5) == {a: None}
    no_group = backend.consumer(None)
    assert no_group.committed([a], 5) == {a: None}
    with pytest.raises(BackendError, match="group"):
        no_group.commit({a: 1}, 5)


def test_beginning_and_end_offsets(backend: SQLiteBackend) -> None:
    backend.create_topics({"m": 2})
    produce(backend, [rec(b"x", topic="m", partition=0)] * 3)
    c = backend.consumer(None)
    a, b, nope = TopicPartition("m", 0), TopicPartition("m", 1), TopicPartition("nope", 0)
    assert c.beginning_offsets([a, b, nope], 5) == {a: 0, b: 0, nope: 0}
    assert c.end_offsets([a, b, nope], 5) == {a: 3, b: 0, nope: 0}


def test_partitions_by_list_and_full_match_pattern(backend: SQLiteBackend) -> None:
    backend.create_topics({"orders": 2, "orders-eu": 1, "old-orders": 1, "payments": 1})
    c = backend.consumer(None)
    assert c.partitions(pattern="orders.*") == [TopicPartition("orders", 0), TopicPartition("orders", 1),
                                                TopicPartition("orders-eu", 0)]
    assert c.partitions(pattern="order") == []  # full match, not search
    assert c.partitions(["payments", "missing"]) == [TopicPartition("payments", 0)]
    with pytest.raises(ConfigError, match="invalid regular expression"):
        c.partitions(pattern="(")


# -- read_range ------------------------------------------------------------------------------------


def test_read_range_bounds(backend: SQLiteBackend) -> None:
    produce(backend, [rec(str(i).encode()) for i in range(25)])
    assert [r.offset for r in backend.read_range(TP0, 5, 12, batch_size=3)] == list(range(5, 12))
    assert [r.offset for r in backend.read_range(TP0, 20, 100)] == list(range(20, 25))
    assert list(backend.read_range(TP0, 7, 7)) == []
    assert list(backend.read_range(TP0, 30, 40)) == []
    assert list(backend.read_range(TopicPartition("nope", 0), 0, 10)) == []
    first = next(iter(backend.read_range(TP0, 0, 1)))
    assert (first.topic, first.partition, first.offset, first.value) == ("t", 0, 0, b"0")


# -- errors, threads, lifecycle --------------------------------------------------------------------


def test_a_lock_held_past_the_busy_timeout_is_backend_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    with open_backend(f"sqlite:///{path}", {"busy.timeout.ms": 200}) as b:
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            p = b.producer()
            p.send([rec(b"x")])
            t0 = time.monotonic()
            with pytest.raises(BackendUnavailableError, match=str(path)) as err:
                p.flush(5)
            assert time.monotonic() - t0 < 3
            assert "200 ms" in str(err.value) and "busy.timeout.ms=200" in str(err.value)
            assert isinstance(err.value.__cause__, sqlite3.OperationalError)
            # a shorter call timeout wins over busy.timeout.ms
            store = b.offset_store()
            with pytest.raises(BackendUnavailableError, match="longer than the 50 ms"):
                store.put([(b"k", b"v")], 0.05)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        p.send([rec(b"y")])
        assert p.flush(5).ranges == {TP0: (0, 2)}  # the record that waited in vain is still buffered
        assert values(read_all(b)) == [b"x", b"y"]


def test_backend_is_shared_by_threads(backend: SQLiteBackend) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            backend.create_topics({f"topic-{n}": 1})
            p = backend.producer()
            for i in range(20):
                p.send([rec(f"{n}:{i}".encode())])
                p.flush(10)
            p.close()
            assert f"topic-{n}" in backend.list_topics()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert [r.offset for r in read_all(backend)] == list(range(80))


def test_close_closes_everything(sqlite_url: str) -> None:
    b = open_backend(sqlite_url)
    p = b.producer()
    c = b.consumer("g")
    c.assign({TP0: 0})
    c.poll(1, 0)
    b.list_topics()
    b.close()
    with pytest.raises(BackendError, match="after close"):
        p.send([rec(b"x")])
    with pytest.raises(BackendError, match="after close"):
        c.poll(1, 0)
    with pytest.raises(BackendError, match="after close"):
        b.list_topics()
    b.close()  # idempotent


# -- several processes -----------------------------------------------------------------------------


# -- storage layout, fork ------------------------------------------------------------------------


def test_a_position_past_the_end_never_reads_the_next_partition(backend: SQLiteBackend) -> None:
    backend.create_topics({"m": 2, "n": 1})
    produce(backend, [rec(b"m1", topic="m", partition=1), rec(b"n0", topic="n")])
    c = backend.consumer(None)
    a = TopicPartition("m", 0)
    c.assign({a: 1 << 41})
    assert c.poll(10, 0.05) == []
    assert list(backend.read_range(a, 0, 1 << 62)) == []
    assert list(backend.read_range(TopicPartition("m", 7), 0, 10)) == []
    assert c.end_offsets([TopicPartition("m", 7)], 1) == {TopicPartition("m", 7): 0}


def test_topic_records_view_shows_topic_partition_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    with open_backend(f"sqlite:///{path}") as b:
        b.create_topics({"m": 2})
        produce(b, [rec(b"a", topic="m", partition=1), rec(b"b", topic="m", partition=1), rec(b"c", topic="z")])
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT topic, partition, offset, value FROM topic_records ORDER BY topic, partition, offset")
    assert rows.fetchall() == [("m", 1, 0, b"a"), ("m", 1, 1, b"b"), ("z", 0, 0, b"c")]
    conn.close()


def test_schema_of_another_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    open_backend(f"sqlite:///{path}").close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '99' WHERE name = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(BackendError, match=r"schema version 99 .*supported version"):
        open_backend(f"sqlite:///{path}")


def test_unknown_settings_are_ignored_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="connect_runtime.backends.sqlite"), \
            open_backend(f"sqlite:///{tmp_path}/x.db", {"busy_timeout_ms": 5, "default.partitions": "2"}) as b:
        b.create_topics({"x": 1})
    assert "busy_timeout_ms" in caplog.text and "busy.timeout.ms" in caplog.text


def test_a_value_of_an_unsupported_type_is_a_data_error_naming_the_partition(backend: SQLiteBackend) -> None:
    p = backend.transactional_producer("conn-0")
    p.init_transactions(5)
    p.begin_transaction()
    p.send([rec(b"fine"), ProducerRecord("t", None, None, ["not", "bytes"])])
    with pytest.raises(DataError, match=r"t\[0\]"):
        p.commit_transaction([(b"k", b"v")], 5)
    assert read_all(backend) == [] and backend.offset_store().read_all() == {}


def test_a_commit_that_timed_out_on_the_lock_can_be_retried(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    with open_backend(f"sqlite:///{path}", {"busy.timeout.ms": 100}) as b:
        p = b.transactional_producer("conn-0")
        p.init_transactions(5)
        p.begin_transaction()
        p.send([rec(b"1"), rec(b"2")])
        plain = b.producer()
        plain.send([rec(b"plain")])
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(BackendUnavailableError):
                p.commit_transaction([(b"k", b"v")], 5)
            with pytest.raises(BackendUnavailableError):
                plain.flush(5)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert read_all(b) == []
        assert p.commit_transaction([(b"k", b"v")], 5).ranges == {TP0: (0, 2)}
        assert plain.flush(5).ranges == {TP0: (2, 3)}
        assert values(read_all(b)) == [b"1", b"2", b"plain"]
        assert b.offset_store().read_all() == {b"k": b"v"}


def test_opening_an_existing_file_needs_no_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    with open_backend(f"sqlite:///{path}") as b:
        produce(b, [rec(b"a")])
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with open_backend(f"sqlite:///{path}", {"busy.timeout.ms": 100}) as b:  # a reader, e.g. Spark
            assert values(read_all(b)) == [b"a"]
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
