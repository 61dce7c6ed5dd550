"""The Kafka backend against a real Apache Kafka 4.4.0 broker (the session's, see tests/support/kafka_broker.py;
read_committed and transactional offsets are in ``test_kafka_faithful.py``), and a round trip on Tansu, a
second Kafka-protocol broker, for what it does faithfully."""

from __future__ import annotations

import json
import logging
import socket
import time
import uuid
import zlib

import confluent_kafka as ck
import pytest

from connect_runtime.api.errors import (
    BackendError,
    BackendUnavailableError,
    ConfigError,
    ProducerFencedError,
)
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import open_backend
from connect_runtime.backends.base import ProducerRecord
from connect_runtime.backends.kafka import KafkaBackend, murmur2_partition
from tests.support.kafka_broker import eventually

pytestmark = pytest.mark.kafka

def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def backend(kafka_url: str):
    with open_backend(kafka_url, {"connect.timeout.ms": 5000}) as be:
        yield be


def _read_all(be, topic: str, timeout: float = 10.0, expect: int | None = None) -> list:
    """Every committed record of every partition of a topic, via the backend's consumer; with ``expect``, read
    again (bounded) until that many are visible (a transaction just committed: see ``eventually``)."""
    if expect is not None:
        deadline = time.monotonic() + 15.0
        while True:
            got = _read_all(be, topic, timeout)
            if len(got) >= expect or time.monotonic() >= deadline:
                return got
            time.sleep(0.05)
    c = be.consumer(None)
    try:
        parts = c.partitions([topic])
        ends = c.end_offsets(parts, timeout)
        out = []
        for tp in parts:  # from 0: see tests.support.source_connectors.read_topic on Tansu's EARLIEST offset
            out.extend(be.read_range(tp, 0, ends[tp], timeout=timeout))
        return out
    finally:
        c.close()


def test_produce_and_fetch_round_trip_with_keys_headers_and_timestamps(backend):
    topic = _name("rt")
    backend.create_topics({topic: 3})
    assert backend.list_topics()[topic] == 3
    records = [
        ProducerRecord(topic, None, f"k{i}".encode(), f"v{i}".encode(), 1_700_000_000_000 + i,
                       [("h", b"x"), ("empty", None), ("h", str(i).encode())])
        for i in range(30)
    ]
    records.append(ProducerRecord(topic, None, None, b"no-key", None, None))
    records.append(ProducerRecord(topic, 2, b"explicit", None, None, None))  # explicit partition, null value
    p = backend.producer(track_metadata=True)
    try:
        p.send(records)
        written = p.flush(10)
    finally:
        p.close()
    # partition choice: crc32(key) % partitions, keyless records to partition 0
    meta = written.metadata
    assert meta is not None and len(meta) == len(records)
    for rec, md in zip(records, meta, strict=True):
        expected = rec.partition if rec.partition is not None else (
            zlib.crc32(rec.key) % 3 if rec.key is not None else 0)
        assert (md.topic, md.partition) == (topic, expected)
    per_partition = {p: sum(1 for md in meta if md.partition == p) for p in range(3)}
    assert written.ranges == {TopicPartition(topic, p): (0, n) for p, n in per_partition.items() if n}

    got = _read_all(backend, topic)
    assert len(got) == len(records)
    by_value = {r.value: r for r in got}
    r7 = by_value[b"v7"]
    assert r7.key == b"k7"
    assert r7.headers == [("h", b"x"), ("empty", None), ("h", b"7")]
    assert r7.timestamp == 1_700_000_000_007
    assert r7.partition == zlib.crc32(b"k7") % 3
    assert by_value[b"no-key"].key is None and by_value[b"no-key"].partition == 0
    tomb = [r for r in got if r.key == b"explicit"]
    assert len(tomb) == 1 and tomb[0].value is None and tomb[0].partition == 2
    # offsets per partition are consecutive, in order
    for p in range(3):
        offs = [r.offset for r in got if r.partition == p]
        assert offs == list(range(per_partition[p]))


def test_create_topics_exist_ok_and_refusal(backend):
    topic = _name("ct")
    backend.create_topics({topic: 2})
    backend.create_topics({topic: 5})  # exists: left as it is
    assert backend.list_topics()[topic] == 2
    with pytest.raises(BackendError, match=topic):
        backend.create_topics({topic: 1}, exist_ok=False)


def test_transaction_commit_writes_records_and_offsets_together(backend):
    topic = _name("tx")
    backend.create_topics({topic: 1})
    tid = f"{backend.cluster_id}-{_name('conn')}-0"
    assert tid.startswith("connect-cluster-")
    p = backend.transactional_producer(tid, track_metadata=True)
    try:
        p.init_transactions(10)
        p.begin_transaction()
        p.send([(topic, None, None, f"a{i}".encode()) for i in range(5)])  # plain 4-tuples
        key = json.dumps(["conn", {"file": "a.txt"}], separators=(",", ":")).encode()
        w1 = p.commit_transaction([(key, b'{"position":5}')], 10)
        assert w1.ranges == {TopicPartition(topic, 0): (0, 5)}
        assert [m.offset for m in w1.metadata] == [0, 1, 2, 3, 4]
        p.begin_transaction()
        p.send([(topic, None, None, f"b{i}".encode()) for i in range(3)])
        w2 = p.commit_transaction([(key, b'{"position":8}')], 10)
        # the commit marker of the first transaction takes offset 5
        assert w2.ranges == {TopicPartition(topic, 0): (6, 9)}
    finally:
        p.close()
    store = backend.offset_store()
    try:
        want = {key: b'{"position":8}'}
        assert eventually(lambda: store.get([key]), want) == want
    finally:
        store.close()
    tp = TopicPartition(topic, 0)
    c = backend.consumer(None)
    try:
        # the end is the offset after the last record, not after the last transaction marker
        assert eventually(lambda: c.end_offsets([tp], 10), {tp: 9}) == {tp: 9}
        assert c.beginning_offsets([tp], 10) == {tp: 0}
    finally:
        c.close()
    got = list(backend.read_range(tp, 0, 9))
    assert [r.value for r in got] == [b"a0", b"a1", b"a2", b"a3", b"a4", b"b0", b"b1", b"b2"]
    assert [r.offset for r in got] == [0, 1, 2, 3, 4, 6, 7, 8]
    assert [r.value for r in backend.read_range(tp, 6, 9)] == [b"b0", b"b1", b"b2"]


def test_offsets_only_transaction(backend):
    p = backend.transactional_producer(_name("offsets-only"))
    try:
        p.init_transactions(10)
        p.begin_transaction()
        key = b'["offsets-only",{"p":1}]'
        w = p.commit_transaction([(key, b'{"o":1}')], 10)
        assert w.ranges == {}
    finally:
        p.close()
    store = backend.offset_store()
    try:
        assert eventually(lambda: store.get([key]), {key: b'{"o":1}'}) == {key: b'{"o":1}'}
    finally:
        store.close()


@pytest.mark.parametrize("flushed", [False, True], ids=["queued", "flushed-before-fencing"])
def test_an_older_producer_with_the_same_transactional_id_is_fenced(backend, flushed):
    topic = _name("fence")
    backend.create_topics({topic: 1})
    tid = _name("fenced-task")
    old = backend.transactional_producer(tid)
    new = backend.transactional_producer(tid)
    try:
        old.init_transactions(10)
        old.begin_transaction()
        old.send([(topic, None, None, b"zombie")])
        if flushed:
            old.flush(10)
        new.init_transactions(10)  # fences the old instance
        with pytest.raises(ProducerFencedError, match=tid):
            old.commit_transaction([(b'["c",{"p":0}]', b'{"o":"zombie"}')], 10)
        with pytest.raises(ProducerFencedError, match=tid):  # and stays fenced
            old.begin_transaction()
        new.begin_transaction()
        new.send([(topic, None, None, b"successor")])
        written = new.commit_transaction([(b'["c",{"p":0}]', b'{"o":"successor"}')], 10)
        assert sum(b - a for a, b in written.ranges.values()) == 1
    finally:
        old.close()
        new.close()
    store = backend.offset_store()
    try:
        want = {b'["c",{"p":0}]': b'{"o":"successor"}'}
        assert eventually(lambda: store.get([b'["c",{"p":0}]']), want) == want
    finally:
        store.close()


def test_group_offsets_commit_and_committed(backend):
    topic = _name("grp")
    backend.create_topics({topic: 2})
    group = _name("connect-sink")
    c = backend.consumer(group)
    try:
        parts = c.partitions([topic])
        assert parts == [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        assert c.committed(parts, 10) == {parts[0]: None, parts[1]: None}
        c.commit({parts[0]: 7}, 10)
        assert c.committed(parts, 10) == {parts[0]: 7, parts[1]: None}
    finally:
        c.close()
    other = backend.consumer(group)  # another consumer of the same group sees it
    try:
        assert other.committed(parts, 10)[parts[0]] == 7
    finally:
        other.close()
    nogroup = backend.consumer(None)
    try:
        assert nogroup.committed(parts, 10) == {parts[0]: None, parts[1]: None}
        with pytest.raises(BackendError, match="without a group"):
            nogroup.commit({parts[0]: 1}, 10)
    finally:
        nogroup.close()


def test_partitions_by_pattern(backend):
    base = _name("pat")
    backend.create_topics({f"{base}-a": 1, f"{base}-b": 2, f"x{base}-c": 1})
    c = backend.consumer(None)
    try:
        got = c.partitions(pattern=f"{base}-.*")
        assert got == [TopicPartition(f"{base}-a", 0), TopicPartition(f"{base}-b", 0), TopicPartition(f"{base}-b", 1)]
        assert c.partitions([f"{base}-a", "does-not-exist-" + base]) == [TopicPartition(f"{base}-a", 0)]
    finally:
        c.close()


def test_pause_resume_and_seek(backend):
    topic = _name("pause")
    backend.create_topics({topic: 2})
    p = backend.producer()
    p.send([(topic, i % 2, None, f"{i % 2}-{i // 2}".encode()) for i in range(40)])
    p.flush(10)
    p.close()
    t0, t1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c = backend.consumer(None)
    try:
        c.assign({t0: 0, t1: 0})
        c.pause([t1])
        seen: list = []
        deadline = time.monotonic() + 10
        while len(seen) < 20 and time.monotonic() < deadline:
            seen.extend(c.poll(100, 0.5))
        assert [r.offset for r in seen] == list(range(20)) and {r.partition for r in seen} == {0}
        assert c.poll(100, 0.3) == []  # partition 1 is paused
        c.resume([t1])
        more: list = []
        deadline = time.monotonic() + 10
        while len(more) < 20 and time.monotonic() < deadline:
            more.extend(c.poll(100, 0.5))
        assert [(r.partition, r.offset) for r in more] == [(1, i) for i in range(20)]
        c.seek(t0, 15)
        again: list = []
        deadline = time.monotonic() + 10
        while len(again) < 5 and time.monotonic() < deadline:
            again.extend(c.poll(100, 0.5))
        assert [(r.partition, r.offset, r.value) for r in again] == [(0, i, f"0-{i}".encode()) for i in range(15, 20)]
    finally:
        c.close()


def test_poll_returns_as_soon_as_records_are_there(backend):
    topic = _name("latency")
    backend.create_topics({topic: 1})
    p = backend.producer()
    p.send([(topic, 0, None, b"one"), (topic, 0, None, b"two")])
    p.flush(10)
    p.close()
    c = backend.consumer(None)
    try:
        c.assign({TopicPartition(topic, 0): 0})
        got: list = []
        started = time.monotonic()
        while len(got) < 2:
            got.extend(c.poll(10_000, 5.0))
        assert time.monotonic() - started < 2.0  # not the whole timeout for a short batch
        t = time.monotonic()
        assert c.poll(10_000, 0.3) == []
        assert 0.2 <= time.monotonic() - t < 2.0  # an empty poll waits about its timeout, bounded
    finally:
        c.close()


def test_offset_store_round_trip_in_connect_format_with_tombstones(kafka_url):
    store_topic = _name("connect-offsets")
    settings = {"offset.storage.topic": store_topic, "offset.storage.partitions": 5}
    k1 = b'["conn",{"file":"a.txt","dir":"/in"}]'  # written by Kafka Connect: keys in insertion order
    k1_canonical = b'["conn",{"dir":"/in","file":"a.txt"}]'
    k2 = b'["conn",{"file":"b.txt"}]'
    with open_backend(kafka_url, settings) as be:
        # a record written the way Kafka Connect writes it (murmur2 partition, unsorted key)
        raw = ck.Producer({"bootstrap.servers": kafka_url.split("://")[1]})
        first = be.offset_store()
        assert first.read_all() == {}  # creates the compacted topic on first use
        first.close()
        assert be.list_topics()[store_topic] == 5
        raw.produce(store_topic, b'{"position":10}', k1, partition=murmur2_partition(k1, 5))
        assert raw.flush(10) == 0
        store = be.offset_store()
        try:
            assert store.get([k1_canonical]) == {k1_canonical: b'{"position":10}'}
            assert store.get([k1]) == {k1: b'{"position":10}'}  # the caller's key comes back
            store.put([(k1_canonical, b'{"position":20}'), (k2, b'{"position":1}')], 10)
            assert store.read_all() == {k1_canonical: b'{"position":20}', k2: b'{"position":1}'}
            store.put([(k2, None)], 10)  # tombstone
            assert store.read_all() == {k1_canonical: b'{"position":20}'}
            assert store.get([k2]) == {}
        finally:
            store.close()
    # a fresh backend and store read the same from the topic
    with open_backend(kafka_url, settings) as be:
        store = be.offset_store()
        try:
            assert store.read_all() == {k1_canonical: b'{"position":20}'}
        finally:
            store.close()
        # the last value of a key is in the key's murmur2 partition, as Kafka Connect would write it
        c = be.consumer(None)
        try:
            tp = TopicPartition(store_topic, murmur2_partition(k2, 5))
            recs = list(be.read_range(tp, 0, c.end_offsets([tp], 10)[tp]))
            assert [(r.key, r.value) for r in recs] == [(k2, b'{"position":1}'), (k2, None)]
        finally:
            c.close()


def test_murmur2_matches_librdkafka_java_compatible_partitioner(kafka_bootstrap):
    topic = _name("murmur")
    admin = ck.admin.AdminClient({"bootstrap.servers": kafka_bootstrap})
    for fut in admin.create_topics([ck.admin.NewTopic(topic, 7, 1)]).values():
        fut.result(10)
    time.sleep(0.2)
    delivered: dict[bytes, int] = {}

    def report(err, msg):
        assert err is None
        delivered[msg.key()] = msg.partition()

    p = ck.Producer({"bootstrap.servers": kafka_bootstrap, "partitioner": "murmur2", "on_delivery": report})
    keys = [f"key-{i}".encode() * (i % 4 + 1) for i in range(200)] + [b"", b"a", b"ab", b"abc", b"abcd"]
    keys = [k for k in keys if k]  # librdkafka sends an empty key to a random partition
    for k in keys:
        p.produce(topic, b"v", k)
    assert p.flush(10) == 0
    assert {k: murmur2_partition(k, 7) for k in keys} == delivered


def test_an_offsets_topic_that_is_not_compacted_is_a_config_error(backend):
    topic = _name("not-compacted")
    backend.create_topics({topic: 1})
    with pytest.raises(ConfigError) as err:
        backend.offset_store(topic).get([b'["c",{}]'])
    assert topic in str(err.value) and "offsets.storage.topic" in str(err.value)
    assert "cleanup.policy=compact" in str(err.value)
    assert "offsets.storage.topic" in err.value.errors
    with open_backend(backend.url, {"offset.storage.topic": topic}) as be, pytest.raises(ConfigError) as err:
        be.transactional_producer(_name("t")).init_transactions(10)
    assert set(err.value.errors) == {"offset.storage.topic"} and topic in str(err.value)


def test_connector_offsets_store_is_mirrored_to_the_global_topic(kafka_url):
    # KIP-618: offsets of a connector-specific store also go to the global connect-offsets topic
    global_topic = _name("global-offsets")
    own_topic = _name("own-offsets")
    key = b'["mirrored",{"p":1}]'
    with open_backend(kafka_url, {"offset.storage.topic": global_topic}) as be:
        p = be.transactional_producer(_name("mirror-task"), own_topic)
        try:
            p.init_transactions(10)
            p.begin_transaction()
            p.commit_transaction([(key, b'{"o":3}')], 10)
        finally:
            p.close()
        own, glob = be.offset_store(own_topic), be.offset_store()
        try:
            assert eventually(own.read_all, {key: b'{"o":3}'}) == {key: b'{"o":3}'}
            assert glob.read_all() == {key: b'{"o":3}'}
        finally:
            own.close()
            glob.close()
        # at-least-once writes to a connector store are mirrored too
        store = be.offset_store(own_topic)
        try:
            store.put([(key, b'{"o":4}')], 10)
        finally:
            store.close()
        glob = be.offset_store()
        try:
            assert glob.get([key]) == {key: b'{"o":4}'}
        finally:
            glob.close()


def test_auto_commit_is_forced_off_whatever_the_settings_say(kafka_url):
    settings = {"enable.auto.commit": "true", "consumer.override.enable.auto.commit": True,
                "auto.commit.interval.ms": 100, "consumer.override.enable.auto.offset.store": True}
    topic = _name("autocommit")
    group = _name("connect-auto")
    with open_backend(kafka_url, settings) as be:
        be.create_topics({topic: 1})
        p = be.producer()
        p.send([(topic, 0, None, b"x")] * 10)
        p.flush(10)
        p.close()
        tp = TopicPartition(topic, 0)
        c = be.consumer(group)
        try:
            c.assign({tp: 0})
            got: list = []
            deadline = time.monotonic() + 10
            while len(got) < 10 and time.monotonic() < deadline:
                got.extend(c.poll(100, 0.5))
            assert len(got) == 10
            time.sleep(0.5)  # five auto-commit intervals, had it been on
            c.poll(100, 0.2)
            assert c.committed([tp], 10) == {tp: None}
        finally:
            c.close()  # a close does not commit either
        other = be.consumer(group)
        try:
            assert other.committed([tp], 10) == {tp: None}
        finally:
            other.close()


def test_a_full_local_queue_is_waited_out(kafka_url):
    topic = _name("queue-full")
    with open_backend(kafka_url, {"producer.override.queue.buffering.max.messages": 50}) as be:
        be.create_topics({topic: 1})
        p = be.producer()
        try:
            p.send([(topic, 0, None, b"%d" % i) for i in range(2000)])  # BufferError is handled
            written = p.flush(10)
        finally:
            p.close()
        assert written.ranges == {TopicPartition(topic, 0): (0, 2000)}


def test_transactional_one_partition_batches_through_a_full_queue(kafka_url):
    """The transactional producer's column path (one topic, one partition, no headers: records queued by
    map over produce) waited out on a queue of 50 records, across chunks of 1,000, with null and given
    timestamps, keys on an explicit partition, tombstones: every record lands once, in order."""
    topic = _name("tx-columns")
    with open_backend(kafka_url, {"producer.override.queue.buffering.max.messages": 50}) as be:
        be.create_topics({topic: 2})
        tid = f"{be.cluster_id}-{_name('conn')}-0"
        p = be.transactional_producer(tid)
        no_key = [ProducerRecord(topic, None, None, b"a%d" % i, None if i % 3 else 1_700_000_000_000 + i, None)
                  for i in range(2500)]
        keyed = [ProducerRecord(topic, 1, b"k%d" % i, None if i == 7 else b"b%d" % i, 1_700_000_000_000 + i, None)
                 for i in range(1200)]
        try:
            p.init_transactions(10)
            p.begin_transaction()
            p.send(no_key)
            p.send(keyed)
            written = p.commit_transaction([], 10)
        finally:
            p.close()
        assert written.ranges == {TopicPartition(topic, 0): (0, 2500), TopicPartition(topic, 1): (0, 1200)}
        got = _read_all(be, topic, expect=3700)
    by_partition = {q: [(r.key, r.value) for r in got if r.partition == q] for q in (0, 1)}
    assert by_partition[0] == [(None, r.value) for r in no_key]
    assert by_partition[1] == [(r.key, r.value) for r in keyed]
    stamped = {r.value: r.timestamp for r in got if r.partition == 0}
    assert all(stamped[r.value] == r.timestamp for r in no_key if r.timestamp is not None)


def test_a_send_to_a_partition_that_does_not_exist_is_a_backend_error(backend):
    topic = _name("nopart")
    backend.create_topics({topic: 1})
    p = backend.producer()
    try:
        with pytest.raises(BackendError):
            p.send([(topic, 5, None, b"x")])
            p.flush(5)
    finally:
        p.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("operation", ["list_topics", "offset_store", "transactional_init", "consumer_ends"])
def test_an_unreachable_cluster_fails_within_the_bound(operation, caplog):
    port = _closed_port()
    url = f"kafka://127.0.0.1:{port}"
    secret = "pw-" + uuid.uuid4().hex
    settings = {"connect.timeout.ms": 2000, "sasl.username": "u", "sasl.password": secret,
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    with open_backend(url, settings) as be, pytest.raises(BackendUnavailableError) as err:
        if operation == "list_topics":
            be.list_topics()
        elif operation == "offset_store":
            be.offset_store().get([b'["c",{}]'])
        elif operation == "transactional_init":
            be.transactional_producer("t-unreachable").init_transactions(2)
        else:
            c = be.consumer("g")
            try:
                c.end_offsets([TopicPartition("t", 0)], 2)
            finally:
                c.close()
    elapsed = time.monotonic() - started
    assert elapsed < 8, f"took {elapsed:.1f} s"
    assert f"127.0.0.1:{port}" in str(err.value)
    assert secret not in str(err.value)
    assert secret not in caplog.text


def test_bad_client_settings_are_a_config_error_naming_the_property(kafka_url):
    with open_backend(kafka_url, {"no.such.property": "1"}) as be, pytest.raises(ConfigError) as err:
        be.list_topics()
    assert "no.such.property" in str(err.value)


def test_overrides_apply_to_their_client_only(kafka_url):
    be = KafkaBackend.from_url(kafka_url, {"linger.ms": 7, "producer.override.linger.ms": 50,
                                           "consumer.override.fetch.min.bytes": 9,
                                           "admin.override.client.id": "adm", "cluster.id": "prod"})
    producer_conf = be.client_config("producer")
    consumer_conf = be.client_config("consumer")
    admin_conf = be.client_config("admin")
    assert producer_conf["linger.ms"] == 50 and consumer_conf["linger.ms"] == 7
    assert consumer_conf["fetch.min.bytes"] == 9 and "fetch.min.bytes" not in producer_conf
    assert admin_conf["client.id"] == "adm" and producer_conf["client.id"] == "pyconnect"
    assert be.cluster_id == "prod"
    for conf in (producer_conf, consumer_conf, admin_conf):
        assert "cluster.id" not in conf and conf["bootstrap.servers"] == kafka_url.split("://")[1]


def test_a_fenced_producer_keeps_failing_with_producer_fenced_error_on_send(backend):
    topic = _name("fence-send")
    backend.create_topics({topic: 1})
    tid = _name("fenced-send")
    old = backend.transactional_producer(tid)
    new = backend.transactional_producer(tid)
    try:
        old.init_transactions(10)
        old.begin_transaction()
        old.send([(topic, None, None, b"first")])
        old.flush(10)
        new.init_transactions(10)
        with pytest.raises(ProducerFencedError, match=tid):
            # the broker rejects the next produce request; librdkafka then refuses sends with a bare
            # _STATE error, which must still surface as ProducerFencedError
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                old.send([(topic, None, None, b"zombie")])
                old.flush(1)
        with pytest.raises(ProducerFencedError, match=tid):
            old.abort_transaction(1)
    finally:
        old.close()
        new.close()


def test_a_send_after_fencing_without_a_flush_is_producer_fenced_error(backend):
    """What a source task does (sends, no flush, until its transaction's boundary): once a newer instance
    fenced it, a send fails with ProducerFencedError, as the run needs to stop as a zombie."""
    topic = _name("fence-no-flush")
    backend.create_topics({topic: 1})
    tid = _name("fenced-no-flush")
    old, new = backend.transactional_producer(tid), backend.transactional_producer(tid)
    try:
        old.init_transactions(10)
        old.begin_transaction()
        old.send([(topic, 0, None, b"first")] * 5)
        new.init_transactions(10)
        with pytest.raises(ProducerFencedError, match=tid):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                old.send([(topic, 0, None, b"zombie")] * 5)
                time.sleep(0.02)
    finally:
        old.close()
        new.close()


def test_transactional_ranges_without_metadata_cover_every_partition(kafka_url):
    """Without track_metadata a transactional producer asks for delivery reports of only the first and
    last record per partition of each send; the ranges must still cover every record written, keyed
    records must land in crc32(key) % partitions, and a full local queue must be waited out."""
    topic = _name("tx-sparse")
    with open_backend(kafka_url, {"producer.override.queue.buffering.max.messages": 50}) as be:
        be.create_topics({topic: 3})
        tid = f"{be.cluster_id}-{_name('conn')}-0"
        p = be.transactional_producer(tid)
        try:
            p.init_transactions(10)
            p.begin_transaction()
            keyed = [ProducerRecord(topic, None, f"k{i}".encode(), f"v{i}".encode(), 1_700_000_000_000 + i, None)
                     for i in range(300)]
            p.send(keyed)
            p.send([(topic, 2, None, b"explicit-%d" % i) for i in range(5)] + [(topic, None, None, b"no-key")])
            written = p.commit_transaction([], 10)
        finally:
            p.close()
        per_partition = {q: sum(1 for r in keyed if zlib.crc32(r.key) % 3 == q) for q in range(3)}
        per_partition[2] += 5
        per_partition[0] += 1
        assert written.metadata is None
        assert written.ranges == {TopicPartition(topic, q): (0, n) for q, n in per_partition.items()}
        got = _read_all(be, topic, expect=306)
    assert len(got) == 306
    for r in got:
        if r.key is not None and r.key.startswith(b"k"):
            assert r.partition == zlib.crc32(r.key) % 3
    assert {r.partition for r in got if r.value.startswith(b"explicit")} == {2}
    assert [r.partition for r in got if r.value == b"no-key"] == [0]


def test_transactions_round_trip_on_tansu_too(tansu_url):
    """Tansu, a second Kafka-protocol broker (memory only), for what it does faithfully: committed transactions
    with their source offsets, records read back from offset 0, group offsets. Not read_committed filtering of
    aborted records, nor ListOffsets (wrong high watermark): the backend finds a partition's end by reading."""
    with open_backend(tansu_url, {"connect.timeout.ms": 5000}) as be:
        topic = _name("tansu")
        be.create_topics({topic: 1})
        key = b'["tansu",{"p":0}]'
        p = be.transactional_producer(_name("tansu-task"))
        try:
            p.init_transactions(10)
            for n in range(2):
                p.begin_transaction()
                p.send([(topic, 0, None, b"%d-%d" % (n, i)) for i in range(3)])
                p.commit_transaction([(key, b'{"o":%d}' % n)], 10)
        finally:
            p.close()
        store = be.offset_store()
        try:
            assert store.get([key]) == {key: b'{"o":1}'}
        finally:
            store.close()
        tp = TopicPartition(topic, 0)
        c = be.consumer(_name("connect-tansu"))
        try:
            end = c.end_offsets([tp], 10)[tp]
            assert [r.value for r in be.read_range(tp, 0, end)] == [b"0-0", b"0-1", b"0-2", b"1-0", b"1-1", b"1-2"]
            c.commit({tp: end}, 10)
            assert c.committed([tp], 10) == {tp: end}
        finally:
            c.close()


def test_a_source_run_creates_its_topics_with_the_replication_factor_of_its_config(kafka_url):
    """``topic.creation.default.replication.factor`` reaches the broker: on this one-node broker 2 replicas
    cannot be had, and the run says so (rather than silently creating one replica)."""
    from connect_runtime import run_source
    from connect_runtime.api.errors import ConnectError

    topic = _name("rf")
    cfg = {"name": _name("rf"), "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
           "topic": topic, "max.records": 5, "topic.creation.default.replication.factor": 2}
    with pytest.raises(ConnectError, match=r"(?i)replication"):
        run_source(cfg, kafka_url)
    assert run_source({**cfg, "topic.creation.default.replication.factor": 1}, kafka_url).records == 5
