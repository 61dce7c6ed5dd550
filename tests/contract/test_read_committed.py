"""Contract 2: only committed data is visible.

Promise (``connect_runtime.backends.base``, "Only committed data is visible"): ``Consumer.poll``,
``end_offsets``, ``read_range`` and ``read_range_batches`` return committed records only: never a record of an
open or aborted transaction, never a record past ``end_offsets``.

Each test asks all four readers (and a consumer in a group, as a sink reads) while a transaction is open, after
one was aborted or fenced, and while a source run with open transactions fails; and checks the bounds of
``read_range`` / ``read_range_batches`` against ``end_offsets``.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import run_source
from connect_runtime.api.errors import ConnectError, ProducerFencedError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import Backend, ConsumedRecord, ProducerRecord, Written
from tests.support.contract import (
    Broken,
    ends,
    json_values,
    poll_all,
    read_line,
    read_spans,
    read_topic,
    settled,
    sigkill,
    start_worker,
    uid,
)

READ_PAST_END_S = 1.0
"""``timeout`` of reads asked for more than there is: a read may wait that long for records that never come."""
UNFAITHFUL = "Tansu shows records of open, aborted and fenced transactions to read_committed readers"


def _batches(be: Backend, tp: TopicPartition, start: int, end: int, size: int) -> list[bytes | None]:
    out: list[bytes | None] = []
    for offsets, _keys, values, _ts, _headers in be.read_range_batches(tp, start, end, batch_size=size,
                                                                       timeout=READ_PAST_END_S):
        assert len(offsets) == len(values) <= size
        out.extend(values)
    return out


def _every_reader(be: Backend, tp: TopicPartition) -> dict[str, Any]:
    """What each reader returns for one partition: poll (no group and a group), end_offsets, read_range and
    read_range_batches asked for more than there is (offsets up to 1000)."""
    return {
        "end_offsets": ends(be, [tp])[tp],
        "poll": [r.value for r in poll_all(be, {tp: 0}, quiet=0.6)],
        "poll in a group": [r.value for r in poll_all(be, {tp: 0}, quiet=0.6, group=uid("connect-reader"))],
        "read_range": [r.value for r in be.read_range(tp, 0, 1000, timeout=READ_PAST_END_S)],
        "read_range_batches": _batches(be, tp, 0, 1000, 2),
    }


def _expect(values: list[bytes], end: int) -> dict[str, Any]:
    return {"end_offsets": end, "poll": values, "poll in a group": values, "read_range": values,
            "read_range_batches": values}


def _commit(be: Backend, tid: str, topic: str, values: list[bytes]) -> Written:
    p = be.transactional_producer(tid)
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.send([ProducerRecord(topic, 0, None, v) for v in values])
        return p.commit_transaction([], 30)
    finally:
        p.close()


@pytest.mark.not_on_tansu(UNFAITHFUL)
def test_an_open_transaction_is_invisible_to_every_reader(backend: Backend) -> None:
    topic = uid("open")
    backend.create_topics({topic: 1})
    tp = TopicPartition(topic, 0)
    committed = [b"c0", b"c1", b"c2"]
    first = _commit(backend, uid("tid"), topic, committed)
    a_end = first.ranges[tp][1]
    settled(lambda: ends(backend, [tp])[tp], lambda e: e == a_end)
    open_tx = backend.transactional_producer(uid("tid"))
    try:
        open_tx.init_transactions(30)
        open_tx.begin_transaction()
        open_tx.send([ProducerRecord(topic, 0, None, b"open-%d" % i) for i in range(5)])
        flushed = open_tx.flush(30)  # the records reach the store; their transaction stays open
        assert _every_reader(backend, tp) == _expect(committed, a_end)
        written = open_tx.commit_transaction([], 30)
    finally:
        open_tx.close()
    everything = committed + [b"open-%d" % i for i in range(5)]
    # what the transaction wrote is in what its flush and its commit returned
    want = _expect(everything, max(w.ranges[tp][1] for w in (flushed, written) if tp in w.ranges))
    assert settled(lambda: _every_reader(backend, tp), lambda got: got == want) == want


@pytest.mark.not_on_tansu(UNFAITHFUL)
def test_an_aborted_transaction_is_invisible_to_every_reader(backend: Backend) -> None:
    topic = uid("aborted")
    backend.create_topics({topic: 1})
    tp = TopicPartition(topic, 0)
    tid = uid("tid")
    p = backend.transactional_producer(tid)
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.send([ProducerRecord(topic, 0, None, b"before")])
        p.commit_transaction([], 30)
        p.begin_transaction()
        p.send([ProducerRecord(topic, 0, None, b"aborted-%d" % i) for i in range(5)])
        p.flush(30)
        p.abort_transaction(30)
        p.begin_transaction()
        p.send([ProducerRecord(topic, 0, None, b"after")])
        last = p.commit_transaction([], 30)
    finally:
        p.close()
    want = _expect([b"before", b"after"], last.ranges[tp][1])
    assert settled(lambda: _every_reader(backend, tp), lambda got: got == want) == want


@pytest.mark.not_on_tansu(UNFAITHFUL)
def test_a_fenced_transaction_is_invisible_to_every_reader(backend: Backend) -> None:
    topic = uid("fenced")
    backend.create_topics({topic: 1})
    tp = TopicPartition(topic, 0)
    tid = uid("tid")
    old, new = backend.transactional_producer(tid), backend.transactional_producer(tid)
    try:
        old.init_transactions(30)
        old.begin_transaction()
        old.send([ProducerRecord(topic, 0, None, b"zombie-%d" % i) for i in range(5)])
        old.flush(30)
        new.init_transactions(30)
        with pytest.raises(ProducerFencedError):
            old.commit_transaction([], 30)
        new.begin_transaction()
        new.send([ProducerRecord(topic, 0, None, b"successor")])
        last = new.commit_transaction([], 30)
    finally:
        old.close()
        new.close()
    want = _expect([b"successor"], last.ranges[tp][1])
    assert settled(lambda: _every_reader(backend, tp), lambda got: got == want) == want


def test_readers_return_nothing_past_end_offsets_and_keep_their_bounds(backend: Backend) -> None:
    """Committed records with keys, timestamps and headers: every window ``[start, end)`` of ``read_range`` and
    ``read_range_batches`` returns exactly the committed records in it (none at or past ``end_offsets``), the
    batches hold at most ``batch_size`` records, and columns not asked for are ``None``."""
    topic = uid("bounds")
    backend.create_topics({topic: 1})
    tp = TopicPartition(topic, 0)
    tid = uid("tid")
    p = backend.transactional_producer(tid)
    try:
        p.init_transactions(30)
        for t in range(3):
            p.begin_transaction()
            p.send([ProducerRecord(topic, 0, b"k%d" % (t * 4 + i), b"v%d" % (t * 4 + i), 1_700_000_000_000 + i,
                                   [("h", b"%d" % i)]) for i in range(4)])
            last = p.commit_transaction([], 30)
    finally:
        p.close()
    end = last.ranges[tp][1]
    assert settled(lambda: ends(backend, [tp])[tp], lambda e: e == end) == end
    everything = list(backend.read_range(tp, 0, end, timeout=READ_PAST_END_S))
    assert [r.value for r in everything] == [b"v%d" % i for i in range(12)]
    offsets = [r.offset for r in everything]
    assert offsets == sorted(offsets) and offsets[-1] == end - 1
    assert all(isinstance(r, ConsumedRecord) and r.topic == topic and r.partition == 0 for r in everything)
    assert everything[5].key == b"k5" and everything[5].headers == [("h", b"1")]
    assert everything[5].timestamp == 1_700_000_000_001
    assert list(backend.read_range(tp, end, end + 1000, timeout=READ_PAST_END_S)) == []
    assert [r.value for r in backend.read_range(tp, 0, end + 1000, timeout=READ_PAST_END_S)] == [r.value for r in everything]
    for start in sorted({0, offsets[3], offsets[7] + 1, end - 1}):
        for stop in sorted({offsets[4], offsets[8], end}):
            want = [r for r in everything if start <= r.offset < stop]
            assert list(backend.read_range(tp, start, stop, timeout=READ_PAST_END_S)) == want, (start, stop)
            got = []
            for offs, keys, values, stamps, headers in backend.read_range_batches(tp, start, stop, batch_size=3,
                                                                                  timeout=READ_PAST_END_S):
                assert 0 < len(offs) <= 3 and len(values) == len(offs)
                got.extend(ConsumedRecord(topic, 0, o, k, v, s, h)
                           for o, k, v, s, h in zip(offs, keys, values, stamps, headers, strict=True))
            assert got == want, (start, stop)
    for offs, keys, values, stamps, headers in backend.read_range_batches(tp, 0, end, batch_size=100, timeout=READ_PAST_END_S,
                                                                          keys=False, timestamps=False,
                                                                          headers=False):
        assert keys is None and stamps is None and headers is None and len(values) == len(offs) == 12
    # poll stops at the end as well: nothing at or past end_offsets
    polled = poll_all(backend, {tp: 0}, quiet=0.6)
    assert [r.offset for r in polled] == offsets


@pytest.mark.parametrize("how", ["read_range", "read_range_batches"])
def test_a_read_asked_for_far_past_the_end_returns_within_its_timeout(
        backend_url: str, backend_kind: str, how: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """``end`` is an upper bound, not a promise that records exist up to it: a read asked for offsets far past
    ``end_offsets`` returns the committed records and ends (bounded by its ``timeout``), it does not walk the
    empty offsets up to ``end``. (In a process of its own, killed if it does not end.)"""
    from connect_runtime.backends import open_backend

    topic = uid("far")
    with open_backend(backend_url) as be:
        be.create_topics({topic: 1})
        _commit(be, uid("tid"), topic, [b"a", b"b", b"c"])
        tp = TopicPartition(topic, 0)
        settled(lambda: ends(be, [tp])[tp], lambda e: e >= 3)
    log = tmp_path / "read.log"
    proc = start_worker("read", {"url": backend_url, "topic": topic, "partition": 0, "end": 1 << 40, "how": how,
                                 "timeout": 2}, log)
    try:
        got = read_line(proc, 15, log)
    except AssertionError as exc:
        raise Broken(f"{how} far past the end did not return within 15 s (timeout=2)") from exc
    finally:
        sigkill(proc)
    assert got["records"] == 3
    if got["seconds"] >= 8:
        raise Broken(f"{how} took {got['seconds']:.1f} s with timeout=2")


# -- through the runtime -------------------------------------------------------------------------------------


def _watch(url: str, topic: str, stop: threading.Event, seen: list[tuple[str, int, bytes | None]]) -> None:
    """A reader that keeps asking every reader while a run goes on (until ``stop``)."""
    from connect_runtime.backends import open_backend

    with open_backend(url) as be:
        tp = TopicPartition(topic, 0)
        while topic not in be.list_topics() and not stop.is_set():
            time.sleep(0.02)
        c = be.consumer(None)
        try:
            c.assign({tp: 0})
            while not stop.is_set():
                for r in c.poll(500, 0.05):
                    seen.append(("poll", r.offset, r.value))
                end = c.end_offsets([tp], 30)[tp]
                for r in be.read_range(tp, max(0, end - 20), end, timeout=30):
                    seen.append(("read_range", r.offset, r.value))
                for offs, _k, values, _t, _h in be.read_range_batches(tp, max(0, end - 20), end, timeout=30):
                    seen.extend(("read_range_batches", o, v) for o, v in zip(offs, values, strict=True))
                seen.append(("end_offsets", end, None))
        finally:
            c.close()


@pytest.mark.not_on_tansu(UNFAITHFUL)
def test_readers_during_a_run_that_fails_with_transactions_open_see_only_what_committed(backend_url: str) -> None:
    """Two tasks write one partition in transactions of 300 ms; one fails. A reader polling, reading ranges and
    asking end_offsets all along never got a record that is not committed in the end, nor an end beyond it."""
    name, topic = uid("watched"), uid("watched")
    config = {"name": name, "connector.class": "tests.support.source_connectors.ScriptedSource", "topic": topic,
              "count": -1, "batch": 5, "tasks.max": 2, "poll.sleep.ms": 5, "fail.after": 600,
              "transaction.boundary": "interval", "transaction.boundary.interval.ms": 300,
              "poll.idle.timeout.ms": 300}
    stop = threading.Event()
    seen: list[tuple[str, int, bytes | None]] = []
    watcher = threading.Thread(target=_watch, args=(backend_url, topic, stop, seen), daemon=True)
    watcher.start()
    try:
        with pytest.raises(ConnectError, match="failed on purpose"):
            run_source(config, backend_url, max_seconds=60)
        time.sleep(1.0)  # let the reader look once more after the run aborted its transactions
    finally:
        stop.set()
        watcher.join(60)
    from connect_runtime.backends import open_backend

    with open_backend(backend_url) as be:
        tp = TopicPartition(topic, 0)
        final = {r.offset: r.value for r in read_topic(be, topic)}
        final_end = ends(be, [tp])[tp]
    assert any(what != "end_offsets" for what, _, _ in seen), "the reader saw nothing while the run went on"
    wrong = [(what, off, value) for what, off, value in seen if what != "end_offsets" and final.get(off) != value]
    assert not wrong, f"records a reader got that are not committed: {wrong[:10]}"
    assert max(off for what, off, _ in seen if what == "end_offsets") <= final_end
    assert len({off for what, off, _ in seen if what == "poll"}) == len([1 for what, _, _ in seen if what == "poll"])


@pytest.mark.not_on_tansu(UNFAITHFUL)
def test_batches_a_connector_aborts_are_invisible_to_every_reader(backend_url: str) -> None:
    """transaction.boundary=connector: the task commits after every 5th record and aborts the transactions holding
    25 (just 25) and 47 (45 to 47); no reader returns a record of those, and the run's ranges read back exactly
    what it committed."""
    from connect_runtime.backends import open_backend

    name, topic = uid("aborting"), uid("aborting")
    config = {"name": name, "connector.class": "tests.support.source_connectors.ScriptedSource", "topic": topic,
              "count": 80, "batch": 10, "transaction.boundary": "connector", "commit.every": 5,
              "abort.ids": "25,47", "poll.idle.timeout.ms": 300}
    result = run_source(config, backend_url)
    kept = [n for n in range(80) if n not in (25, 45, 46, 47)]
    with open_backend(backend_url) as be:
        tp = TopicPartition(topic, 0)

        def numbers() -> dict[str, Any]:
            got = _every_reader(be, tp)
            return {what: got[what] if what == "end_offsets" else [json.loads(v)["n"] for v in got[what]]
                    for what in got}

        want = _expect(kept, ends(be, [tp])[tp])  # type: ignore[arg-type]
        assert settled(numbers, lambda g: g == want) == want
        assert [v["n"] for v in json_values(read_spans(be, result.ranges))] == kept
    assert result.records == len(kept)
