"""What only a faithful Kafka broker shows (Apache Kafka, the session's broker): read_committed readers never
see aborted or fenced transactions, and source offsets written inside a transaction become visible when it
commits, never before (Tansu shows aborted records, so these never ran on it)."""

from __future__ import annotations

import uuid

import pytest

from connect_runtime.api.errors import ProducerFencedError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import open_backend
from tests.support.kafka_broker import eventually

pytestmark = [pytest.mark.kafka, pytest.mark.faithful_kafka]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def backend(faithful_kafka_url: str):
    # a store of this test's own, so earlier runs on the same cluster do not interfere
    with open_backend(faithful_kafka_url, {"offset.storage.topic": _name("pyconnect-test-offsets"),
                                           "offset.storage.partitions": 3}) as be:
        yield be


def _values(be, tp: TopicPartition) -> list[bytes]:
    c = be.consumer(None)
    try:
        end = c.end_offsets([tp], 30)[tp]
        begin = c.beginning_offsets([tp], 30)[tp]
    finally:
        c.close()
    return [r.value for r in be.read_range(tp, begin, end, timeout=30)]


def test_read_committed_hides_an_aborted_transaction_and_its_offsets(backend):
    topic = _name("aborted")
    backend.create_topics({topic: 1})
    tp = TopicPartition(topic, 0)
    key = b'["aborted",{"p":0}]'
    p = backend.transactional_producer(_name("abort-task"))
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.send([(topic, 0, None, b"committed")])
        p.commit_transaction([(key, b'{"o":1}')], 30)
        p.begin_transaction()
        p.send([(topic, 0, None, b"aborted")])
        p.flush(30)  # the records reach the broker before the abort
        p.abort_transaction(30)
        p.begin_transaction()
        p.send([(topic, 0, None, b"after")])
        p.commit_transaction([], 30)
    finally:
        p.close()
    # read again until the last commit's marker is written: a broker showing the aborted record never matches
    assert eventually(lambda: _values(backend, tp), [b"committed", b"after"]) == [b"committed", b"after"]
    store = backend.offset_store()
    try:
        assert eventually(lambda: store.get([key]), {key: b'{"o":1}'}) == {key: b'{"o":1}'}
    finally:
        store.close()


def test_a_fenced_zombie_writes_nothing_visible(backend):
    topic = _name("zombie")
    backend.create_topics({topic: 1})
    tp = TopicPartition(topic, 0)
    key = b'["zombie",{"p":0}]'
    tid = _name("zombie-task")
    old, new = backend.transactional_producer(tid), backend.transactional_producer(tid)
    try:
        old.init_transactions(30)
        old.begin_transaction()
        old.send([(topic, 0, None, b"zombie")])
        old.flush(30)
        new.init_transactions(30)
        with pytest.raises(ProducerFencedError):
            old.commit_transaction([(key, b'{"o":"zombie"}')], 30)
        new.begin_transaction()
        new.send([(topic, 0, None, b"successor")])
        new.commit_transaction([(key, b'{"o":"successor"}')], 30)
    finally:
        old.close()
        new.close()
    assert eventually(lambda: _values(backend, tp), [b"successor"]) == [b"successor"]
    store = backend.offset_store()
    try:
        assert eventually(store.read_all, {key: b'{"o":"successor"}'}) == {key: b'{"o":"successor"}'}
    finally:
        store.close()


def test_offsets_of_an_open_transaction_are_invisible_until_it_commits(backend):
    topic = _name("open")
    backend.create_topics({topic: 1})
    key = b'["open",{"p":0}]'
    p = backend.transactional_producer(_name("open-task"))
    store = backend.offset_store()
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.send([(topic, 0, None, b"r")])
        p.flush(30)
        # records of the open transaction are past the last stable offset: not readable, no end yet
        c = backend.consumer(None)
        try:
            assert c.end_offsets([TopicPartition(topic, 0)], 30) == {TopicPartition(topic, 0): 0}
        finally:
            c.close()
        assert store.get([key]) == {}
        p.commit_transaction([(key, b'{"o":1}')], 30)
        assert eventually(lambda: store.get([key]), {key: b'{"o":1}'}) == {key: b'{"o":1}'}
    finally:
        store.close()
        p.close()
