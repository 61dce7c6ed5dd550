"""Contract 6: sink consumers.

Promise (``connect_runtime.backends.base``, "Sink consumers"): read_committed, explicit assignment, offsets in
order per partition; group offsets are committed only by ``commit`` (never automatically) or, where
``group_offsets_in_transactions``, a transaction's ``send_group_offsets`` (with its commit, never after an abort or
once the producer was fenced), and read back by ``committed``; ``beginning_offsets`` / ``end_offsets`` bound what
``poll`` returns.

Each test tries to break it at the backend API (committed before and after commits, across consumers, groups and
backend objects; reading without committing; assign, re-assign, seek, pause and resume; the bounds and the
timeout of poll; partitions by name and pattern) and through the runtime (a sink run reading around an open and an
aborted transaction; ``until_offsets``; sink runs SIGKILLed at random instants and run again: every record
delivered, group offsets never ahead of what was delivered, and exactly once for a sink that keeps its offsets in
its destination).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import run_sink
from connect_runtime.api.errors import BackendError, ProducerFencedError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import Backend, ProducerRecord, open_backend
from tests.support import slow_iterations
from tests.support.contract import ends, finish, settled, sigkill, start_sink, uid, wait_until
from tests.support.sink_helpers import read_ledger, read_log

SINKS_UNFAITHFUL = ("a sink starts a partition without committed offset at beginning_offsets, and Tansu's "
                    "ListOffsets (EARLIEST) is not faithful")
UNFAITHFUL = "Tansu shows records of open and aborted transactions to read_committed readers"


def _fill(be: Backend, topic: str, partitions: int, per_partition: int) -> None:
    be.create_topics({topic: partitions})
    p = be.producer()
    try:
        p.send([ProducerRecord(topic, q, None, json.dumps([q, i]).encode())
                for i in range(per_partition) for q in range(partitions)])
        p.flush(60)
    finally:
        p.close()


def _poll_until(c: Any, n: int, limit: float = 20.0) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + limit
    while len(got) < n and time.monotonic() < deadline:
        got.extend(c.poll(1000, 0.3))
    return got


# -- at the backend API ---------------------------------------------------------------------------------------


def test_group_offsets_are_committed_by_commit_and_read_back_by_committed(backend_url: str, backend: Backend) -> None:
    topic, group = uid("grp"), uid("connect-grp")
    backend.create_topics({topic: 2})
    t0, t1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c = backend.consumer(group)
    try:
        assert c.committed([t0, t1], 30) == {t0: None, t1: None}
        c.commit({t0: 7}, 30)
        assert c.committed([t0, t1], 30) == {t0: 7, t1: None}
        c.commit({t0: 3, t1: 1}, 30)  # a commit replaces (backwards too: a rewound sink)
        assert c.committed([t0, t1], 30) == {t0: 3, t1: 1}
    finally:
        c.close()
    with open_backend(backend_url) as other:  # another consumer of the group, through another backend object
        c = other.consumer(group)
        try:
            assert c.committed([t0, t1], 30) == {t0: 3, t1: 1}
        finally:
            c.close()
        c = other.consumer(uid("connect-other"))
        try:
            assert c.committed([t0, t1], 30) == {t0: None, t1: None}
        finally:
            c.close()
        c = other.consumer(None)
        try:
            assert c.committed([t0, t1], 30) == {t0: None, t1: None}
            with pytest.raises(BackendError):
                c.commit({t0: 1}, 30)
        finally:
            c.close()


def _in_transaction(producer: Any, consumer: Any, offsets: dict[TopicPartition, int]) -> None:
    producer.begin_transaction()
    producer.send_group_offsets(consumer, offsets)


@pytest.fixture
def transactional_offsets(backend: Backend) -> Backend:
    if not backend.capabilities.group_offsets_in_transactions:
        pytest.skip("the backend does not commit group offsets in transactions (capabilities; Tansu: "
                    "TANSU_SETTINGS); the runtime commits them after its commit fence")
    return backend


def test_group_offsets_sent_to_a_transaction_land_with_its_commit_never_after_an_abort(
        transactional_offsets: Backend) -> None:
    """``send_group_offsets``: the offsets land when the transaction commits (read back by another consumer of the
    group), and not at all when it aborts."""
    backend = transactional_offsets
    topic, group = uid("txg"), uid("connect-txg")
    backend.create_topics({topic: 2})
    t0, t1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c, reader, p = backend.consumer(group), backend.consumer(group), backend.transactional_producer(uid("txg"))
    try:
        p.init_transactions(30)
        _in_transaction(p, c, {t0: 5, t1: 2})
        assert reader.committed([t0, t1], 30) == {t0: None, t1: None}, "visible before the commit"
        p.commit_transaction([], 30)
        assert reader.committed([t0, t1], 30) == {t0: 5, t1: 2}
        _in_transaction(p, c, {t0: 8})
        p.abort_transaction(30)
        assert reader.committed([t0, t1], 30) == {t0: 5, t1: 2}, "an aborted transaction's offsets landed"
        _in_transaction(p, c, {t0: 9})
        p.commit_transaction([], 30)
        assert reader.committed([t0, t1], 30) == {t0: 9, t1: 2}
    finally:
        p.close()
        c.close()
        reader.close()


def test_a_fenced_producer_never_lands_the_group_offsets_of_its_open_transaction(
        transactional_offsets: Backend) -> None:
    """A newer producer of the same transactional id initialised while the older one's transaction holds group
    offsets: the older commit raises :class:`ProducerFencedError` and its offsets never land; the newer one's do."""
    backend = transactional_offsets
    topic, group, tid = uid("txf"), uid("connect-txf"), uid("txf")
    backend.create_topics({topic: 1})
    tp = TopicPartition(topic, 0)
    c, reader = backend.consumer(group), backend.consumer(group)
    older, newer = backend.transactional_producer(tid), backend.transactional_producer(tid)
    try:
        older.init_transactions(30)
        _in_transaction(older, c, {tp: 3})
        older.commit_transaction([], 30)
        _in_transaction(older, c, {tp: 7})
        newer.init_transactions(30)
        with pytest.raises(ProducerFencedError):
            older.commit_transaction([], 30)
        assert reader.committed([tp], 30) == {tp: 3}, "the fenced producer's offsets landed"
        _in_transaction(newer, c, {tp: 5})
        newer.commit_transaction([], 30)
        assert reader.committed([tp], 30) == {tp: 5}
    finally:
        older.close()
        newer.close()
        c.close()
        reader.close()


def test_reading_never_commits_group_offsets(backend: Backend) -> None:
    topic, group = uid("no-auto"), uid("connect-no-auto")
    _fill(backend, topic, 2, 30)
    parts = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    c = backend.consumer(group)
    try:
        c.assign({tp: 0 for tp in parts})
        assert len(_poll_until(c, 60)) == 60
        time.sleep(1.0)  # many auto-commit intervals, had there been one
        c.poll(100, 0.2)
        assert c.committed(parts, 30) == {tp: None for tp in parts}
    finally:
        c.close()  # closing commits nothing either
    c = backend.consumer(group)
    try:
        assert c.committed(parts, 30) == {tp: None for tp in parts}
    finally:
        c.close()


def test_assign_reads_exactly_the_assigned_partitions_from_their_positions_in_order(backend: Backend) -> None:
    topic = uid("assign")
    _fill(backend, topic, 3, 20)
    p0, p1, p2 = (TopicPartition(topic, q) for q in range(3))
    c = backend.consumer(uid("connect-assign"))
    try:
        c.assign({p0: 5, p2: 0})
        got = _poll_until(c, 35)
        assert sorted({(r.topic, r.partition) for r in got}) == [p0, p2]
        for tp, start in ((p0, 5), (p2, 0)):
            mine = [r for r in got if (r.topic, r.partition) == tp]
            assert [r.offset for r in mine] == list(range(start, 20)), "not in offset order, or not from the position"
            assert [json.loads(r.value) for r in mine] == [[tp.partition, i] for i in range(start, 20)]
        assert c.poll(100, 0.5) == []
        c.assign({p1: 10})  # replaces the assignment
        got = _poll_until(c, 10)
        assert [(r.partition, r.offset) for r in got] == [(1, i) for i in range(10, 20)]
        assert c.poll(100, 0.5) == []
    finally:
        c.close()


def test_seek_pause_and_resume(backend: Backend) -> None:
    topic = uid("seek")
    _fill(backend, topic, 2, 20)
    t0, t1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c = backend.consumer(None)
    try:
        c.assign({t0: 0, t1: 0})
        c.pause([t1])
        got = _poll_until(c, 20)
        assert [(r.partition, r.offset) for r in got] == [(0, i) for i in range(20)]
        assert c.poll(100, 0.5) == [], "a paused partition returned records"
        c.seek(t0, 15)
        c.resume([t1])
        got = _poll_until(c, 25)
        assert sorted((r.partition, r.offset) for r in got) == [(0, i) for i in range(15, 20)] + \
            [(1, i) for i in range(20)]
        c.seek(t1, 18)
        assert [(r.partition, r.offset) for r in _poll_until(c, 2)] == [(1, 18), (1, 19)]
    finally:
        c.close()


@pytest.mark.not_on_tansu("beginning_offsets is Tansu's ListOffsets (EARLIEST), which is not faithful")
def test_beginning_and_end_offsets_bound_poll_which_keeps_its_limits(backend: Backend) -> None:
    topic = uid("bounds")
    _fill(backend, topic, 2, 25)
    parts = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    c = backend.consumer(None)
    try:
        begin, end = c.beginning_offsets(parts, 30), c.end_offsets(parts, 30)
        assert begin == {tp: 0 for tp in parts} and end == {tp: 25 for tp in parts}
        c.assign(begin)
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < 50 and time.monotonic() < deadline:
            batch = c.poll(7, 0.5)
            assert len(batch) <= 7, "poll returned more than max_records"
            got.extend(batch)
        assert all(begin[(r.topic, r.partition)] <= r.offset < end[(r.topic, r.partition)] for r in got)
        assert Counter((r.partition, r.offset) for r in got) == Counter((q, i) for q in range(2) for i in range(25))
        started = time.monotonic()
        assert c.poll(100, 0.5) == []
        assert time.monotonic() - started < 3.0, "an empty poll waited far beyond its timeout"
    finally:
        c.close()


def test_partitions_by_names_and_by_pattern(backend: Backend) -> None:
    base = uid("pat")
    backend.create_topics({f"{base}-a": 1, f"{base}-b": 2, f"x{base}-c": 1})
    c = backend.consumer(None)
    try:
        assert c.partitions(pattern=f"{base}-.*") == [TopicPartition(f"{base}-a", 0), TopicPartition(f"{base}-b", 0),
                                                      TopicPartition(f"{base}-b", 1)]
        assert c.partitions([f"{base}-b", f"{base}-missing"]) == [TopicPartition(f"{base}-b", 0),
                                                                   TopicPartition(f"{base}-b", 1)]
        assert c.partitions(pattern=f"{base}") == []  # a full match, not a search
    finally:
        c.close()


# -- through the runtime -------------------------------------------------------------------------------------


def _recording(name: str, topic: str, log: Path, **extra: Any) -> dict[str, Any]:
    return {"name": name, "connector.class": "tests.support.sink_helpers.RecordingSinkConnector", "topics": topic,
            "tasks.max": "2", "log.path": str(log), **extra}


def _delivered(log: Path) -> list[tuple[int, int]]:
    return [(r[1], r[2]) for e in read_log(log) if e["call"] == "put" for r in e["records"]]


def _committed(url: str, group: str, parts: list[TopicPartition]) -> dict[TopicPartition, int | None]:
    with open_backend(url) as be:
        c = be.consumer(group)
        try:
            return c.committed(parts, 30)
        finally:
            c.close()


@pytest.mark.not_on_tansu(UNFAITHFUL)
def test_a_sink_run_delivers_committed_records_only(backend_url: str, backend: Backend, tmp_path: Path) -> None:
    """A partition with a committed transaction, an aborted one, a committed one and one still open while the sink
    runs: the sink gets exactly the committed records and commits the end it read to."""
    topic, name = uid("sink-rc"), uid("sink-rc")
    backend.create_topics({topic: 1})
    tp = TopicPartition(topic, 0)
    p = backend.transactional_producer(uid("tid"))
    open_tx = backend.transactional_producer(uid("tid"))
    try:
        p.init_transactions(30)
        for what in ("committed", "aborted", "committed"):
            p.begin_transaction()
            p.send([ProducerRecord(topic, 0, None, json.dumps(f"{what}-{i}").encode()) for i in range(3)])
            if what == "aborted":
                p.flush(30)
                p.abort_transaction(30)
            else:
                last = p.commit_transaction([], 30)
        end = last.ranges[tp][1]
        settled(lambda: ends(backend, [tp])[tp], lambda e: e == end)
        open_tx.init_transactions(30)
        open_tx.begin_transaction()
        open_tx.send([ProducerRecord(topic, 0, None, b'"open"')])
        open_tx.flush(30)
        log = tmp_path / "calls.jsonl"
        result = run_sink(_recording(name, topic, log, **{"tasks.max": "1"}), backend_url, max_seconds=60)
    finally:
        open_tx.close()
        p.close()
    values = [r[3] for e in read_log(log) if e["call"] == "put" for r in e["records"]]
    assert values == [f"committed-{i}" for i in range(3)] * 2
    assert result.records == 6
    assert _committed(backend_url, f"connect-{name}", [tp]) == {tp: end}


@pytest.mark.not_on_tansu(SINKS_UNFAITHFUL)
def test_a_sink_run_reads_up_to_until_offsets_and_commits_them(backend_url: str, backend: Backend,
                                                               tmp_path: Path) -> None:
    topic, name = uid("sink-until"), uid("sink-until")
    _fill(backend, topic, 2, 40)
    log = tmp_path / "calls.jsonl"
    result = run_sink(_recording(name, topic, log), backend_url, until_offsets={topic: {0: 25, 1: 3}}, max_seconds=60)
    assert sorted(_delivered(log)) == sorted([(0, i) for i in range(25)] + [(1, i) for i in range(3)])
    assert result.records == 28
    parts = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    assert _committed(backend_url, f"connect-{name}", parts) == dict(zip(parts, (25, 3), strict=True))


def sink_kill_loop(url: str, tmp_path: Path, kills: int, exactly_once: bool) -> None:
    """Fill 2 partitions, then start a sink run in a real subprocess and SIGKILL it once the run delivered a random
    share of what was left, ``kills`` times; then run it to its end. After every kill the group's committed offsets
    are never ahead of what was delivered; in the end every record was delivered (exactly once for the ledger
    sink, whose offsets live in its destination) and the group offsets are at the end."""
    parts, per = 2, 1500
    topic, name = uid("sink-kill"), uid("sink-kill")
    with open_backend(url) as be:
        _fill(be, topic, parts, per)
    tps = [TopicPartition(topic, q) for q in range(parts)]
    ledger, calls = tmp_path / "ledger.tsv", tmp_path / "calls.jsonl"
    if exactly_once:
        cfg: dict[str, Any] = {"name": name, "connector.class": "tests.support.sink_helpers.LedgerSinkConnector",
                               "topics": topic, "tasks.max": "2", "ledger.path": str(ledger),
                               "consumer.max.poll.records": "40", "put.sleep.ms": "20",
                               "offset.flush.interval.ms": "0"}

        def progress() -> int:
            return len(read_ledger(ledger))
    else:
        cfg = _recording(name, topic, calls, **{"consumer.max.poll.records": "30", "put.sleep.ms": "20",
                                                "offset.flush.interval.ms": "100"})

        def progress() -> int:
            return len(set(_delivered(calls)))
    total = parts * per
    rng = random.Random(os.environ.get("PYCONNECT_SEED", "sink-kill"))
    mid_run = 0
    for i in range(kills):
        log = tmp_path / f"run-{i}.log"
        before = progress()
        target = before + max(1, int((total - before) * rng.uniform(0.05, 0.6)))
        proc = start_sink(cfg, url, log)
        try:
            wait_until(f"run {i} to deliver {target} of {total} records",
                       lambda: proc.poll() is not None or progress() >= target, 120)  # noqa: B023
        finally:
            killed = sigkill(proc)
        if not killed:
            assert proc.returncode == 0, log.read_text()[-3000:]
        mid_run += killed and before < progress() < total
        if not exactly_once:  # committed offsets only cover records the sink had already put
            delivered = set(_delivered(calls))
            for tp, off in _committed(url, f"connect-{name}", tps).items():
                missing = [o for o in range(off or 0) if (tp.partition, o) not in delivered]
                assert not missing, f"after kill {i}: {tp} committed at {off} but {missing[:5]} were never put"
    assert mid_run, "no kill landed mid-run"
    log = tmp_path / "final.log"
    assert finish(start_sink(cfg, url, log), log, 300, "the final sink run") == 0, log.read_text()[-3000:]
    if exactly_once:
        values = Counter(tuple(json.loads(v)) for _t, _p, _o, v in read_ledger(ledger))
        assert values == Counter((q, i) for q in range(parts) for i in range(per)), "not exactly once"
        assert _committed(url, f"connect-{name}", tps) == {tp: None for tp in tps}  # offsets live in the ledger
    else:
        assert set(_delivered(calls)) == {(q, i) for q in range(parts) for i in range(per)}
        assert _committed(url, f"connect-{name}", tps) == {tp: per for tp in tps}


@pytest.mark.not_on_tansu(SINKS_UNFAITHFUL)
@pytest.mark.parametrize("exactly_once", [False, True], ids=["group-offsets", "offsets-in-destination"])
def test_a_sink_killed_at_random_instants_delivers_every_record(backend_url: str, tmp_path: Path,
                                                                exactly_once: bool) -> None:
    sink_kill_loop(backend_url, tmp_path, kills=3, exactly_once=exactly_once)


@pytest.mark.slow
@pytest.mark.not_on_tansu(SINKS_UNFAITHFUL)
@pytest.mark.parametrize("exactly_once", [False, True], ids=["group-offsets", "offsets-in-destination"])
def test_a_sink_killed_at_random_instants_delivers_every_record_long(backend_url: str, tmp_path: Path,
                                                                     exactly_once: bool) -> None:
    sink_kill_loop(backend_url, tmp_path, kills=slow_iterations(8, 30), exactly_once=exactly_once)
