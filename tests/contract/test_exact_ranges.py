"""Contract 4: exact ranges.

Promise (``connect_runtime.backends.base``, "Exact ranges"): ``Written.ranges`` gives, per partition,
``[first, next)`` of what one flush or commit wrote. One writer: exactly its records. Writers on one partition at
once: the range holds this writer's records and, with ``transaction_markers``, its own marker offsets, which
committed readers skip; records of another writer committed inside one of this writer's transactions are not
told apart there (documented limit). ``Capabilities.transaction_markers``: a committed transaction leaves one
marker offset after its last record in each partition it wrote, so two spans of one writer separated by exactly
one offset hold nothing of anyone else.

Each test tries to break it at the backend API (commits and flushes over several partitions, consecutive commits,
two writers taking turns and overlapping) and through the runtime (one run, fan-out tasks merged, two connectors
writing one partition at once: every run's ranges hold all of its records, and another writer's records only
where the documented limit allows).
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter
from typing import Any

import pytest

from connect_runtime import admin, plan_source, ranges, run_source, run_source_task
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import Backend, ConsumedRecord, ProducerRecord, Written, open_backend
from tests.support.contract import (
    HANGING_DEFENCE_ON_TANSU,
    Broken,
    in_thread,
    json_values,
    read_spans,
    read_topic,
    settled,
    uid,
)


def _read(be: Backend, written: Written) -> dict[TopicPartition, list[bytes | None]]:
    out: dict[TopicPartition, list[bytes | None]] = {}
    for tp, (first, nxt) in written.ranges.items():
        out[tp] = [r.value for r in be.read_range(tp, first, nxt, timeout=30)]
    return out


def _sent(records: list[ProducerRecord]) -> dict[TopicPartition, list[bytes | None]]:
    out: dict[TopicPartition, list[bytes | None]] = {}
    for r in records:
        assert r.partition is not None
        out.setdefault(TopicPartition(r.topic, r.partition), []).append(r.value)
    return out


def _settled_read(be: Backend, written: Written, want: dict[TopicPartition, list[bytes | None]]) -> Any:
    return settled(lambda: _read(be, written), lambda got: got == want)


# -- at the backend API ---------------------------------------------------------------------------------------


def test_each_commit_of_one_writer_names_exactly_its_records(backend: Backend) -> None:
    """Four transactions over three partitions (one partition left out by some): each commit's ranges name
    exactly the partitions it wrote and, read back, exactly its records in send order; with ``track_metadata``
    every record's offset lies in its partition's range, which starts at the first and ends after the last."""
    topic = uid("one-writer")
    backend.create_topics({topic: 3})
    p = backend.transactional_producer(uid("tid"), track_metadata=True)
    commits: list[tuple[Written, list[ProducerRecord]]] = []
    try:
        p.init_transactions(30)
        for t, counts in enumerate(([3, 1, 0], [0, 5, 2], [1, 1, 1], [4, 0, 0])):
            records = [ProducerRecord(topic, part, None, b"%d-%d-%d" % (t, part, i))
                       for part, n in enumerate(counts) for i in range(n)]
            p.begin_transaction()
            p.send(records)
            commits.append((p.commit_transaction([], 30), records))
    finally:
        p.close()
    for written, records in commits:
        want = _sent(records)
        assert set(written.ranges) == set(want), "ranges name partitions the commit did not write, or miss some"
        assert _settled_read(backend, written, want) == want
        assert written.metadata is not None and len(written.metadata) == len(records)
        for tp, (first, nxt) in written.ranges.items():
            offsets = [m.offset for m in written.metadata if (m.topic, m.partition) == tp]
            assert offsets == sorted(offsets) and (offsets[0], offsets[-1] + 1) == (first, nxt), (tp, offsets)


def test_each_flush_of_a_plain_producer_names_exactly_its_records(backend: Backend) -> None:
    topic = uid("plain")
    backend.create_topics({topic: 2})
    p = backend.producer()
    try:
        flushes = []
        for f in range(3):
            records = [ProducerRecord(topic, i % 2, None, b"%d-%d" % (f, i)) for i in range(2 * f + 1)]
            p.send(records)
            flushes.append((p.flush(30), records))
    finally:
        p.close()
    for written, records in flushes:
        want = _sent(records)
        assert set(written.ranges) == set(want)
        assert _read(backend, written) == want


def test_consecutive_commits_of_one_writer_are_apart_by_its_markers_only(backend: Backend) -> None:
    """What ``transaction_markers`` tells the runtime: with it, the next commit of the same writer starts exactly
    one offset (its marker) after the previous one's range; without it, exactly where it ended."""
    topic = uid("markers")
    backend.create_topics({topic: 1})
    tp = TopicPartition(topic, 0)
    p = backend.transactional_producer(uid("tid"))
    spans = []
    try:
        p.init_transactions(30)
        for t in range(4):
            p.begin_transaction()
            p.send([ProducerRecord(topic, 0, None, b"%d-%d" % (t, i)) for i in range(t + 1)])
            spans.append(p.commit_transaction([], 30).ranges[tp])
    finally:
        p.close()
    gap = 1 if backend.capabilities.transaction_markers else 0
    assert [b[0] - a[1] for a, b in itertools.pairwise(spans)] == [gap] * 3, spans
    assert [b - a for a, b in spans] == [1, 2, 3, 4]


def test_two_writers_taking_turns_each_get_only_their_records(backend: Backend) -> None:
    topic = uid("turns")
    backend.create_topics({topic: 1})
    a, b = backend.transactional_producer(uid("tid-a")), backend.transactional_producer(uid("tid-b"))
    commits: list[tuple[Written, list[ProducerRecord]]] = []
    try:
        a.init_transactions(30)
        b.init_transactions(30)
        for t in range(6):
            p, who = (a, b"a") if t % 2 == 0 else (b, b"b")
            records = [ProducerRecord(topic, 0, None, who + b"-%d-%d" % (t, i)) for i in range(3)]
            p.begin_transaction()
            p.send(records)
            commits.append((p.commit_transaction([], 30), records))
    finally:
        a.close()
        b.close()
    for written, records in commits:
        want = _sent(records)
        assert _settled_read(backend, written, want) == want


def test_two_writers_with_overlapping_transactions_keep_to_the_documented_limit(backend: Backend) -> None:
    """Writer A's transaction is open while writer B commits one of its own into the same partition, then A sends
    more and commits. A's range holds all of A's records and starts and ends with A's records; B's records may be
    inside it only because B's transaction committed while A's was open (the documented limit), and never on a
    backend without ``transaction_markers``. B's range holds exactly B's records."""
    topic = uid("overlap")
    backend.create_topics({topic: 1})
    tp = TopicPartition(topic, 0)
    a, b = backend.transactional_producer(uid("tid-a")), backend.transactional_producer(uid("tid-b"))
    try:
        a.init_transactions(30)
        b.init_transactions(30)
        a.begin_transaction()
        a.send([ProducerRecord(topic, 0, None, b"a-%d" % i) for i in range(3)])
        time.sleep(0.3)  # the records reach the store while the transaction is open (where a backend sends early)
        b.begin_transaction()
        b.send([ProducerRecord(topic, 0, None, b"b-%d" % i) for i in range(3)])
        wb = b.commit_transaction([], 30)
        a.send([ProducerRecord(topic, 0, None, b"a-%d" % i) for i in range(3, 6)])
        wa = a.commit_transaction([], 30)
    finally:
        a.close()
        b.close()
    assert _settled_read(backend, wb, {tp: [b"b-%d" % i for i in range(3)]}) == {tp: [b"b-%d" % i for i in range(3)]}
    got = settled(lambda: _read(backend, wa), lambda g: len([v for v in g.get(tp, []) if v.startswith(b"a-")]) == 6)[tp]
    mine = [v for v in got if v.startswith(b"a-")]
    assert mine == [b"a-%d" % i for i in range(6)], f"A's range misses A's records: {got}"
    assert got[0].startswith(b"a-") and got[-1].startswith(b"a-"), f"A's range is not tight: {got}"
    foreign = [v for v in got if not v.startswith(b"a-")]
    if not backend.capabilities.transaction_markers:
        assert foreign == [], f"another writer's records in A's range on a backend without markers: {got}"
    else:
        assert set(foreign) <= {b"b-0", b"b-1", b"b-2"}


# -- through the runtime -------------------------------------------------------------------------------------


def _scripted(name: str, topic: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "connector.class": "tests.support.source_connectors.ScriptedSource", "topic": topic,
            "poll.idle.timeout.ms": 300, "tag": name, **extra}


def test_one_run_of_one_task_reports_one_range_of_exactly_its_records(backend_url: str) -> None:
    name, topic = uid("one"), uid("one")
    result = run_source(_scripted(name, topic, count=40, batch=6), backend_url)
    parts = result.to_dict()["ranges"][topic]
    assert list(parts) == ["0"] and len(parts["0"]) == 2 and isinstance(parts["0"][0], int), \
        f"one writer, one partition: one [from, to] pair expected, got {parts}"
    with open_backend(backend_url) as be:
        got = settled(lambda: [v["n"] for v in json_values(read_spans(be, result.ranges))],
                      lambda v: v == list(range(40)))
    assert got == list(range(40))


def test_fan_out_tasks_ranges_merged_hold_every_record_once(backend_url: str) -> None:
    name, topic = uid("fan"), uid("fan")
    config = {"name": name, "connector.class": "tests.support.source_connectors.PlanningSource", "topic": topic,
              "files": "a:70,b:50,c:30", "tasks.max": 3, "poll.idle.timeout.ms": 300}
    plan = plan_source(config, backend_url)
    results = [run_source_task(config, backend_url, plan, t["index"]) for t in plan["tasks"]]
    merged = ranges.merge(*(r.ranges for r in results))
    with open_backend(backend_url) as be:
        def lines() -> Counter[tuple[str, int]]:
            return Counter((v["file"], v["line"]) for v in json_values(read_spans(be, merged)))

        want = Counter({(f, i): 1 for f, n in (("a", 70), ("b", 50), ("c", 30)) for i in range(n)})
        assert settled(lines, lambda c: c == want) == want
        for r in results:
            assert len(read_spans(be, r.ranges)) == r.records


def _transactions(records: list[ConsumedRecord], tag: str, batch: int) -> list[tuple[int, int]]:
    """Offset spans ``[first, last]`` of each transaction of connector ``tag`` (one per poll of ``batch``
    records of a task, transaction.boundary=poll)."""
    spans: dict[tuple[int, int], list[int]] = {}
    for r in records:
        v = json.loads(r.value)
        if v["tag"] == tag:
            spans.setdefault((v["task"], v["n"] // batch), []).append(r.offset)
    return [(min(o), max(o)) for o in spans.values()]


@pytest.mark.not_on_tansu(HANGING_DEFENCE_ON_TANSU)
@pytest.mark.parametrize("what", ["ranges", "ranges record"])
def test_runs_of_two_connectors_on_one_partition_report_ranges_of_their_records(
        backend_url: str, backend: Backend, what: str) -> None:
    """Connectors L and R (three tasks each, a transaction per poll of one record) write one partition at once,
    each recording its ranges (ledger key). Each run's ranges (``what``: the run result's, or its ranges record)
    hold all of its records, once; a record of the other connector inside them must be inside one of this
    connector's transactions (committed while it was open: the documented limit; with one record per
    transaction, never), and never on a backend without ``transaction_markers``."""
    topic = uid("shared")
    batch = 1
    names = [uid("left"), uid("right")]
    ledger = {"interval": "shared"}
    backend.create_topics({topic: 1})
    runs = [in_thread(run_source, _scripted(n, topic, count=-1, batch=batch, **{"tasks.max": 3}),
                      backend_url, max_seconds=4, ledger_key=ledger) for n in names]
    for t, _out in runs:
        t.join(90)
    markers = backend.capabilities.transaction_markers
    total = sum(out["result"].records for _t, out in runs)
    assert all(out["result"].records > 0 for _t, out in runs), [out for _t, out in runs]
    everything = settled(lambda: read_topic(backend, topic), lambda rs: len(rs) >= total)
    assert len(everything) == total, f"{len(everything)} records in the topic, the runs committed {total}"
    assert {r.partition for r in everything} == {0}
    for name, (_t, out) in zip(names, runs, strict=True):
        result = out["result"]
        own = sorted(r.offset for r in everything if json.loads(r.value)["tag"] == name)
        assert len(own) == result.records > 0
        txns = _transactions(everything, name, batch)
        held = result.ranges if what == "ranges" else admin.interval_ranges(backend, name, ledger)["ranges"]
        # what a reader of each span gets (the spans cut out of the partition read once: there are many spans)
        spans = ranges.parse(held)[topic][0]
        got = [r for r in everything if any(first <= r.offset < nxt for first, nxt in spans)]
        assert sorted(r.offset for r in got if json.loads(r.value)["tag"] == name) == own, \
            f"{name}: its {what} do not hold all of its records"
        foreign = [r for r in got if json.loads(r.value)["tag"] != name]
        if not markers:
            assert foreign == [], f"{name}: its {what} hold records of the other connector"
        outside = [(r.offset, json.loads(r.value)) for r in foreign
                   if not any(first < r.offset < last for first, last in txns)]
        if outside:
            raise Broken(f"{name}: its {what} hold {len(outside)} records of the other connector that are in none "
                         f"of its own transactions, e.g. {outside[:3]}")
