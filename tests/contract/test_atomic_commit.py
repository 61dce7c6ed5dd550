"""Contract 1: atomic commits.

Promise (``connect_runtime.backends.base``, "Atomic commits"): records sent in a transaction, the source offsets
passed to ``commit_transaction`` and every ``extra`` entry (the runtime's ranges record) become visible together,
or never: after ``abort_transaction``, after fencing, and after the process is SIGKILLed at any instant. A commit
that raised may have committed: the runtime never retries one; the next run reads the committed offsets and goes
on.

Each test tries to break it: at the backend API (a transaction with offsets and extra entries, an abort, a fenced
commit, a real subprocess committing transactions SIGKILLed at random instants) and through the runtime (an
exactly-once source run SIGKILLed at random instants and run again; a run failing with a transaction open).
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import admin, run_source
from connect_runtime.api.errors import ConnectError, ProducerFencedError
from connect_runtime.backends import Backend, ProducerRecord, Written, open_backend
from tests.support import slow_iterations
from tests.support.contract import (
    HANGING_DEFENCE_ON_TANSU,
    finish,
    json_values,
    last_json,
    read_line,
    read_spans,
    read_topic,
    settled,
    sigkill,
    start_source,
    start_worker,
    uid,
    wait_until,
)
from tests.support.source_connectors import committed_offset

ABORTED_VISIBLE_ON_TANSU = "Tansu shows records of aborted and fenced transactions to read_committed readers"


def _key(name: str, **partition: Any) -> bytes:
    return json.dumps([name, partition], separators=(",", ":"), sort_keys=True).encode()


def _ranges_json(written: Written) -> dict[str, dict[str, list[int]]]:
    out: dict[str, dict[str, list[int]]] = {}
    for tp, (first, nxt) in written.ranges.items():
        out.setdefault(tp.topic, {})[str(tp.partition)] = [first, nxt]
    return out


def _get(be: Backend, store: str | None, key: bytes) -> bytes | None:
    s = be.offset_store(store)
    try:
        return s.get([key]).get(key)
    finally:
        s.close()


# -- at the backend API ---------------------------------------------------------------------------------------


def test_records_offsets_and_extra_entries_become_visible_together(backend: Backend) -> None:
    """One commit with records in two partitions, the source offset, a mapping ``extra`` and (next commit) a
    callable ``extra`` that gets what the transaction wrote: after each commit all of it is there, and the
    callable's entry names exactly the records of its transaction."""
    topic, store, extra_store = uid("atomic"), uid("atomic-offsets"), uid("atomic-extra")
    backend.create_topics({topic: 2})
    key = _key(uid("conn"), p=0)
    seen: list[Written] = []

    def extra(written: Written) -> dict[str, list[tuple[bytes, bytes]]]:
        seen.append(written)
        return {extra_store: [(key, json.dumps({"ranges": _ranges_json(written)}).encode())]}

    p = backend.transactional_producer(uid("tid"), store)
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.send([ProducerRecord(topic, i % 2, None, b"a%d" % i) for i in range(6)])
        first = p.commit_transaction([(key, b'{"n":6}')], 30, {extra_store: [(key, b'{"first":true}')]})
        p.begin_transaction()
        p.send([ProducerRecord(topic, i % 2, None, b"b%d" % i) for i in range(4)])
        second = p.commit_transaction([(key, b'{"n":10}')], 30, extra)
    finally:
        p.close()
    assert sum(b - a for a, b in first.ranges.values()) >= 6
    assert seen == [second], "the extra callable did not get what the commit returned"

    def state() -> tuple[Any, ...]:
        values = sorted(r.value for r in read_topic(backend, topic))
        return values, _get(backend, store, key), _get(backend, extra_store, key)

    want_values = sorted([b"a%d" % i for i in range(6)] + [b"b%d" % i for i in range(4)])
    got = settled(state, lambda s: s[0] == want_values and s[1] == b'{"n":10}' and s[2] is not None
                  and s[2] != b'{"first":true}')
    assert got[0] == want_values
    assert got[1] == b'{"n":10}'
    assert got[2] is not None
    recorded = json.loads(got[2])["ranges"]
    assert sorted(r.value for r in read_spans(backend, recorded)) == sorted(b"b%d" % i for i in range(4)), \
        "the ranges the extra callable recorded do not hold exactly its transaction's records"


@pytest.mark.not_on_tansu(ABORTED_VISIBLE_ON_TANSU)
def test_an_abort_leaves_no_record_and_the_next_commit_only_its_own(backend: Backend) -> None:
    topic, store = uid("abort"), uid("abort-offsets")
    backend.create_topics({topic: 1})
    key = _key(uid("conn"), p=0)
    p = backend.transactional_producer(uid("tid"), store)
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.send([ProducerRecord(topic, 0, None, b"aborted-%d" % i) for i in range(5)])
        p.flush(30)  # the records reach the store before the abort
        p.abort_transaction(30)
        p.begin_transaction()
        p.send([ProducerRecord(topic, 0, None, b"kept")])
        written = p.commit_transaction([(key, b'{"n":1}')], 30, lambda w: {store: []})
    finally:
        p.close()
    got = settled(lambda: [r.value for r in read_topic(backend, topic)], lambda v: v == [b"kept"])
    assert got == [b"kept"]
    (tp, (first, nxt)), = written.ranges.items()
    assert [r.value for r in backend.read_range(tp, first, nxt)] == [b"kept"]
    assert _get(backend, store, key) == b'{"n":1}'


@pytest.mark.not_on_tansu(ABORTED_VISIBLE_ON_TANSU)
@pytest.mark.parametrize("flushed", [False, True], ids=["buffered", "flushed"])
def test_a_fenced_commit_leaves_no_record_offset_or_extra_entry(backend: Backend, flushed: bool) -> None:
    topic, store, extra_store = uid("fenced"), uid("fenced-offsets"), uid("fenced-extra")
    backend.create_topics({topic: 1})
    key = _key(uid("conn"), p=0)
    tid = uid("tid")
    old, new = backend.transactional_producer(tid, store), backend.transactional_producer(tid, store)
    try:
        old.init_transactions(30)
        old.begin_transaction()
        old.send([ProducerRecord(topic, 0, None, b"zombie")])
        if flushed:
            old.flush(30)
        new.init_transactions(30)
        with pytest.raises(ProducerFencedError):
            old.commit_transaction([(key, b'{"n":"zombie"}')], 30, {extra_store: [(key, b"zombie")]})
        new.begin_transaction()
        new.send([ProducerRecord(topic, 0, None, b"successor")])
        new.commit_transaction([(key, b'{"n":"successor"}')], 30)
    finally:
        old.close()
        new.close()
    got = settled(lambda: [r.value for r in read_topic(backend, topic)], lambda v: v == [b"successor"])
    assert got == [b"successor"]
    assert settled(lambda: _get(backend, store, key), lambda v: v == b'{"n":"successor"}') == b'{"n":"successor"}'
    assert _get(backend, None, key) == b'{"n":"successor"}'  # the global store's mirror
    assert _get(backend, extra_store, key) is None


def _check_txn_state(be: Backend, spec: dict[str, Any], at_least: int) -> int:
    """After a SIGKILL and fencing: every transaction is all there or not at all, the ones there are 0..K-1,
    the offset names K-1 in the producer's store and the global store, and the extra entry holds K-1's exact
    ranges. Returns K."""
    key = spec["key"].encode()

    def state() -> tuple[Any, ...]:
        values = json_values(read_topic(be, spec["topic"]))
        return values, _get(be, spec["store"], key), _get(be, None, key), _get(be, spec["extra_store"], key)

    def consistent(s: tuple[Any, ...]) -> bool:
        values, offset, mirrored, extra = s
        per_txn = Counter(v["txn"] for v in values)
        k = len(per_txn)
        return (set(per_txn) == set(range(k)) and all(n == spec["per_txn"] for n in per_txn.values())
                and k > at_least and offset == mirrored == json.dumps({"txn": k - 1}).encode()
                and extra is not None and json.loads(extra)["txn"] == k - 1)

    values, offset, mirrored, extra = settled(state, consistent)
    per_txn = Counter(v["txn"] for v in values)
    k = len(per_txn)
    partial = {t: n for t, n in per_txn.items() if n != spec["per_txn"]}
    assert not partial, f"transactions visible in part (txn: records): {partial}"
    assert set(per_txn) == set(range(k)), f"transactions visible with gaps: {sorted(set(range(k)) - set(per_txn))}"
    assert k > at_least, f"transaction {at_least} was reported committed but is not visible ({k} are)"
    assert offset == json.dumps({"txn": k - 1}).encode(), f"offset {offset!r} for {k} visible transactions"
    assert mirrored == offset, f"the global store holds {mirrored!r}, the producer's store {offset!r}"
    assert extra is not None and json.loads(extra)["txn"] == k - 1, f"extra entry {extra!r} for {k} transactions"
    recorded = read_spans(be, json.loads(extra)["ranges"])
    assert sorted((v["txn"], v["i"]) for v in json_values(recorded)) == [(k - 1, i) for i in range(spec["per_txn"])], \
        "the extra entry's ranges do not hold exactly the last transaction's records"
    return k


def backend_kill_loop(url: str, tmp_path: Path, kills: int, seed: int) -> None:
    rng = random.Random(seed)
    spec = {"url": url, "tid": uid("kill-tid"), "topic": uid("kill"), "partitions": 2, "per_txn": 40,
            "store": uid("kill-offsets"), "extra_store": uid("kill-extra"), "key": _key(uid("kill"), p=0).decode()}
    with open_backend(url) as be:
        be.create_topics({spec["topic"]: 2})
        k = 0
        for i in range(kills):
            log = tmp_path / f"worker-{i}.log"
            proc = start_worker("txn-loop", spec, log)
            try:
                last = read_line(proc, 60, log)["committed"]
                time.sleep(rng.uniform(0.0, 0.25))
            finally:
                assert sigkill(proc), f"the worker ended by itself: {log.read_text()[-2000:]}"
            assert proc.stdout is not None
            for line in proc.stdout.read().splitlines():
                last = max(last, json.loads(line)["committed"])
            # what the next instance does first: fence the dead one (its open transaction, if any, is aborted)
            be.fence_transactional_ids([spec["tid"]], 30)
            new_k = _check_txn_state(be, spec, last)
            assert new_k > k
            k = new_k


@pytest.mark.not_on_tansu(ABORTED_VISIBLE_ON_TANSU)
def test_a_process_killed_at_random_instants_leaves_whole_transactions(backend_url: str, tmp_path: Path) -> None:
    backend_kill_loop(backend_url, tmp_path, kills=3, seed=11)


@pytest.mark.slow
@pytest.mark.not_on_tansu(ABORTED_VISIBLE_ON_TANSU)
def test_a_process_killed_at_random_instants_leaves_whole_transactions_long(backend_url: str, tmp_path: Path) -> None:
    backend_kill_loop(backend_url, tmp_path, kills=slow_iterations(5, 40), seed=12)


# -- through the runtime -------------------------------------------------------------------------------------


def _scripted(name: str, topic: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "connector.class": "tests.support.source_connectors.ScriptedSource", "topic": topic,
            "poll.idle.timeout.ms": 300, **extra}


def check_source_exactly_once(url: str, name: str, topic: str, tasks: int, per_task: int,
                              ledger: dict[str, Any] | None) -> None:
    """Every record of every task exactly once and in order; each task's committed offset names its last record;
    the ranges record (if any) holds exactly every record."""
    with open_backend(url) as be:
        def state() -> list[Any]:
            return json_values(read_topic(be, topic))

        values = settled(state, lambda v: len(v) >= tasks * per_task)
        for t in range(tasks):
            ns = [v["n"] for v in values if v["task"] == t]
            dup = [n for n, c in Counter(ns).items() if c > 1]
            assert not dup, f"task {t}: records written twice: {dup[:10]}"
            assert ns == list(range(per_task)), f"task {t}: {len(ns)} records, missing " \
                                                f"{sorted(set(range(per_task)) - set(ns))[:10]}"
            assert committed_offset(url, name, {"task": t, "round": 1}) == {"n": per_task}
        if ledger is not None:
            held = admin.interval_ranges(be, name, ledger)
            recorded = [(v["task"], v["n"]) for v in json_values(read_spans(be, held["ranges"]))]
            assert sorted(recorded) == sorted((v["task"], v["n"]) for v in values), \
                "the ranges record does not hold exactly the committed records"
            assert held["records"] == tasks * per_task


def source_kill_loop(url: str, tmp_path: Path, kills: int, seed: int) -> None:
    """Run an exactly-once source (2 tasks, one transaction per poll, one partition shared by both tasks) in a
    real subprocess and SIGKILL it at a random instant after its first poll, ``kills`` times; then run it to its
    end: every record exactly once, offsets and the ranges record agree with the data."""
    rng = random.Random(seed)
    name, topic = uid("eos-kill"), uid("eos-kill")
    # a task polls 7 records every 10 ms (at most ~560 per run of 0.8 s after its first poll): enough records
    # that the last kill still lands before the end and the final run has records left to write
    tasks, per_task = 2, 1500 + 600 * kills
    config = _scripted(name, topic, count=per_task, batch=7, **{"tasks.max": tasks, "poll.sleep.ms": 10})
    ledger = {"interval": "kill-loop"}
    mid_run = 0
    for i in range(kills):
        log, marker = tmp_path / f"run-{i}.log", tmp_path / f"polled-{i}"
        proc = start_source({**config, "marker.file": str(marker)}, url, log, ledger_key=ledger)
        try:
            wait_until(f"run {i} to poll", lambda: marker.exists() or proc.poll() is not None, 90)  # noqa: B023
            time.sleep(rng.uniform(0.0, 0.8))
        finally:
            killed = sigkill(proc)
        if not killed:
            assert proc.returncode == 0, f"run {i} failed: {log.read_text()[-3000:]}"
        mid_run += killed
    assert mid_run, "no kill landed mid-run"
    log = tmp_path / "final.log"
    proc = start_source({**config, "poll.sleep.ms": 0}, url, log, ledger_key=ledger)
    assert finish(proc, log, 300, "the final run") == 0, log.read_text()[-3000:]
    result = last_json(log)
    assert result["records"] > 0, "every kill came after the records were all written"
    check_source_exactly_once(url, name, topic, tasks, per_task, ledger)
    with open_backend(url) as be:
        assert result["interval_ranges"] == admin.interval_ranges(be, name, ledger)["ranges"]


@pytest.mark.not_on_tansu(ABORTED_VISIBLE_ON_TANSU)
def test_an_exactly_once_source_killed_at_random_instants_writes_every_record_once(
        backend_url: str, tmp_path: Path) -> None:
    source_kill_loop(backend_url, tmp_path, kills=3, seed=21)


@pytest.mark.slow
@pytest.mark.not_on_tansu(ABORTED_VISIBLE_ON_TANSU)
def test_an_exactly_once_source_killed_at_random_instants_long(backend_url: str, tmp_path: Path) -> None:
    source_kill_loop(backend_url, tmp_path, kills=slow_iterations(4, 30), seed=22)


@pytest.mark.not_on_tansu(ABORTED_VISIBLE_ON_TANSU)
def test_a_run_failing_with_a_transaction_open_leaves_data_offsets_and_ranges_in_agreement(backend_url: str) -> None:
    """Two tasks, transactions of 300 ms; task 1 fails mid-transaction. Whatever committed (records, offsets,
    ranges record) agrees; the open transactions of both tasks left nothing."""
    name, topic = uid("fail"), uid("fail")
    ledger = {"interval": "fail"}
    config = _scripted(name, topic, count=-1, batch=5, **{
        "tasks.max": 2, "poll.sleep.ms": 5, "fail.after": 400, "transaction.boundary": "interval",
        "transaction.boundary.interval.ms": 300})
    with pytest.raises(ConnectError, match="failed on purpose"):
        run_source(config, backend_url, ledger_key=ledger, max_seconds=60)
    with open_backend(backend_url) as be:
        def state() -> tuple[Any, ...]:
            values = json_values(read_topic(be, topic))
            offsets = [committed_offset(backend_url, name, {"task": t, "round": 1}) for t in range(2)]
            return values, offsets

        def agree(s: tuple[Any, ...]) -> bool:
            values, offsets = s
            return all(sorted(v["n"] for v in values if v["task"] == t) == list(range((offsets[t] or {"n": 0})["n"]))
                       for t in range(2))

        values, offsets = settled(state, agree)
        for t in range(2):
            ns = sorted(v["n"] for v in values if v["task"] == t)
            held = (offsets[t] or {"n": 0})["n"]
            assert ns == list(range(held)), f"task {t}: offset {offsets[t]} but records {ns[:3]}...{ns[-3:]}"
        assert all(v["n"] < 400 for v in values if v["task"] == 1)
        held = admin.interval_ranges(be, name, ledger)
        recorded = sorted((v["task"], v["n"]) for v in json_values(read_spans(be, held["ranges"])))
        assert recorded == sorted((v["task"], v["n"]) for v in values)
        assert held["records"] == len(values)


@pytest.mark.not_on_tansu(HANGING_DEFENCE_ON_TANSU)
def test_runs_that_stop_mid_way_go_on_from_the_committed_offsets(backend_url: str) -> None:
    """Runs stopped by ``max_records``, then one to the end: each goes on from the offsets the one before
    committed, so every record is there once, and each run's ranges hold exactly its own records."""
    name, topic = uid("goes-on"), uid("goes-on")
    config = _scripted(name, topic, count=90, batch=4, **{"tasks.max": 1})
    results = [run_source(config, backend_url, max_records=30), run_source(config, backend_url, max_records=30),
               run_source(config, backend_url)]
    assert sum(r.records for r in results) == 90
    check_source_exactly_once(backend_url, name, topic, 1, 90, None)
    with open_backend(backend_url) as be:
        seen = [[v["n"] for v in json_values(read_spans(be, r.ranges))] for r in results]
    assert [n for run in seen for n in run] == list(range(90)), seen
