"""Contract 3: fencing.

Promise (``connect_runtime.backends.base``, "Fencing"): ``init_transactions`` fences every older producer of the
same ``transactional_id``: its next ``commit_transaction`` raises :class:`ProducerFencedError` and writes nothing.
Every older generation of a connector (any task index, whatever the new task count) is fenced when a new one
begins: by the backend inside each commit when ``commits_check_generation`` (``generation_guard``), else by the
runtime initialising every transactional id of the older generation (``Backend.fence_transactional_ids``). Sink
group commits are fenced the same way.

Each test tries to break it: zombies of one transactional id (in a transaction, between transactions, a chain of
three), ``fence_transactional_ids``, the generation guard, and through the runtime a retry that plans fewer tasks
(fan-out with ``plan_source`` / ``run_source_task``, and two ``run_source`` runs), an older plan's task started
after a newer plan, and a newer sink run against an older one.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import plan_source, run_sink, run_source, run_source_task
from connect_runtime.api.errors import ProducerFencedError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import Backend, ProducerRecord, open_backend
from connect_runtime.runtime.registry import Registry
from tests.support.contract import (
    Broken,
    in_thread,
    json_values,
    read_line,
    read_topic,
    settled,
    sigkill,
    start_worker,
    uid,
    wait_until,
)
from tests.support.sink_helpers import read_log
from tests.support.source_connectors import committed_offset

UNFAITHFUL = "Tansu shows records of fenced (aborted) transactions to read_committed readers"
TANSU_TIMES_OUT = ("Tansu answers the commit of a producer fenced by fence_transactional_ids with a retriable error "
                   "until commit_transaction times out (Apache Kafka answers PRODUCER_FENCED)")
SINKS_UNFAITHFUL = ("a sink starts a partition without committed offset at beginning_offsets, and Tansu's "
                    "ListOffsets (EARLIEST) is not faithful")


def _attempt_commit(p: Any, topic: str, value: bytes) -> None:
    p.begin_transaction()
    p.send([ProducerRecord(topic, 0, None, value)])
    p.commit_transaction([], 30)


# -- at the backend API ---------------------------------------------------------------------------------------


@pytest.mark.not_on_tansu("with three producers of one transactional id, Tansu's coordinator times out the "
                          "newest one's commit (seen: _TIMED_OUT after 30 s) where Apache Kafka commits it")
@pytest.mark.parametrize("when", ["in-a-transaction", "between-transactions"])
def test_init_transactions_fences_every_older_producer_of_the_id(backend: Backend, when: str) -> None:
    """A chain of three instances of one id: each newer one fences the ones before; a fenced one stays fenced
    (every later attempt to commit raises ProducerFencedError); the newest commits."""
    topic = uid("zombie")
    backend.create_topics({topic: 1})
    tid = uid("tid")
    first, second, third = (backend.transactional_producer(tid) for _ in range(3))
    try:
        first.init_transactions(30)
        if when == "in-a-transaction":
            first.begin_transaction()
            first.send([ProducerRecord(topic, 0, None, b"first")])
        else:
            _attempt_commit(first, topic, b"first-committed")
        second.init_transactions(30)
        second.begin_transaction()
        second.send([ProducerRecord(topic, 0, None, b"second")])
        third.init_transactions(30)
        with pytest.raises(ProducerFencedError):
            if when == "in-a-transaction":
                first.commit_transaction([], 30)
            else:
                _attempt_commit(first, topic, b"first-again")
        with pytest.raises(ProducerFencedError):
            second.commit_transaction([], 30)
        for zombie in (first, second):  # and they stay fenced
            with pytest.raises(ProducerFencedError):
                _attempt_commit(zombie, topic, b"zombie-again")
        _attempt_commit(third, topic, b"third")
    finally:
        for p in (first, second, third):
            p.close()


@pytest.mark.not_on_tansu(UNFAITHFUL)
def test_what_fenced_producers_sent_never_shows(backend: Backend) -> None:
    topic = uid("zombie")
    backend.create_topics({topic: 1})
    tid = uid("tid")
    old, new = backend.transactional_producer(tid), backend.transactional_producer(tid)
    try:
        old.init_transactions(30)
        _attempt_commit(old, topic, b"old-committed")
        old.begin_transaction()
        old.send([ProducerRecord(topic, 0, None, b"old-open-%d" % i) for i in range(10)])
        old.flush(30)
        new.init_transactions(30)
        with pytest.raises(ProducerFencedError):
            old.send([ProducerRecord(topic, 0, None, b"old-late")])
            old.commit_transaction([], 30)
        _attempt_commit(new, topic, b"new-committed")
    finally:
        old.close()
        new.close()
    want = [b"old-committed", b"new-committed"]
    assert settled(lambda: [r.value for r in read_topic(backend, topic)], lambda v: v == want) == want


@pytest.mark.not_on_tansu(TANSU_TIMES_OUT)
def test_fence_transactional_ids_fences_every_producer_of_those_ids_only(backend: Backend) -> None:
    topic = uid("fence-ids")
    backend.create_topics({topic: 1})
    ids = [uid("tid") for _ in range(4)]
    producers = [backend.transactional_producer(t) for t in ids]
    try:
        for i, p in enumerate(producers):
            p.init_transactions(30)
            p.begin_transaction()
            p.send([ProducerRecord(topic, 0, None, b"p%d" % i)])
        backend.fence_transactional_ids(ids[:3], 30)
        for p in producers[:3]:
            with pytest.raises(ProducerFencedError):
                p.commit_transaction([], 30)
        producers[3].commit_transaction([], 30)  # another id: not fenced
    finally:
        for p in producers:
            p.close()


def test_a_generation_guard_fences_commits_of_an_older_generation(backend: Backend) -> None:
    """When the backend checks ``generation_guard`` inside its commits (``commits_check_generation``), a
    producer's and a consumer's commit of generation 1 are refused, writing nothing, once the entry holds
    generation 2; a backend that does not leaves this to the runtime (tested through the runtime below)."""
    if not backend.capabilities.commits_check_generation:
        pytest.skip("the backend does not check generation_guard in its commits (capabilities); the runtime fences "
                    "older generations itself: see the runtime tests of this module")
    topic, store, group = uid("guard"), uid("registry"), uid("connect-guard")
    backend.create_topics({topic: 1})
    tp = TopicPartition(topic, 0)
    key = b'["guarded",{"scope":""}]'
    backend.update_entry(store, key, lambda _old: json.dumps({"generation": 1}).encode())
    offsets_key = b'["guarded",{"p":0}]'
    p = backend.transactional_producer(uid("tid"))
    c = backend.consumer(group)
    try:
        p.generation_guard = (store, key, 1)
        c.generation_guard = (store, key, 1)
        p.init_transactions(30)
        p.begin_transaction()
        p.send([ProducerRecord(topic, 0, None, b"gen-1")])
        p.commit_transaction([(offsets_key, b'{"n":1}')], 30)
        c.commit({tp: 1}, 30)
        backend.update_entry(store, key, lambda _old: json.dumps({"generation": 2}).encode())
        p.begin_transaction()
        p.send([ProducerRecord(topic, 0, None, b"gen-1-late")])
        with pytest.raises(ProducerFencedError, match="generation"):
            p.commit_transaction([(offsets_key, b'{"n":2}')], 30)
        with pytest.raises(ProducerFencedError, match="generation"):
            c.commit({tp: 2}, 30)
        assert c.committed([tp], 30) == {tp: 1}
    finally:
        p.close()
        c.close()
    assert [r.value for r in read_topic(backend, topic)] == [b"gen-1"]
    s = backend.offset_store()
    try:
        assert s.get([offsets_key]) == {offsets_key: b'{"n":1}'}
    finally:
        s.close()


# -- through the runtime -------------------------------------------------------------------------------------


def _stable(read: Any, quiet: float = 1.5, limit: float = 20.0) -> Any:
    """``read()`` once it returned the same twice ``quiet`` seconds apart (commits in flight have shown)."""
    deadline = time.monotonic() + limit
    last = read()
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = read()
        if now == last:
            return now
        last = now
    return last


def _planning(name: str, topic: str, tasks: int, sleep_ms: int, lines: int = 600) -> dict[str, Any]:
    """PlanningSource: one task per unfinished file (a, b, c), five lines per poll and transaction."""
    return {"name": name, "connector.class": "tests.support.source_connectors.PlanningSource", "topic": topic,
            "files": f"a:{lines},b:{lines},c:{lines}", "tasks.max": tasks, "poll.sleep.ms": sleep_ms,
            "poll.idle.timeout.ms": 300}


def _old_plan_running(url: str, name: str, topic: str) -> tuple[dict[str, Any], list[Any]]:
    """Plan 3 tasks (an older generation) and run each with run_source_task in a thread until every one
    committed something."""
    config = _planning(name, topic, 3, 100)
    old = plan_source(config, url)
    assert [t["index"] for t in old["tasks"]] == [0, 1, 2]
    runs = [in_thread(run_source_task, config, url, old, i, max_seconds=90) for i in range(3)]
    wait_until("every task of the older plan to commit",
               lambda: all(committed_offset(url, name, {"file": f}) for f in "abc") or any(
                   "error" in out for _t, out in runs), 90)
    assert not [out for _t, out in runs if "error" in out], [out for _t, out in runs]
    return old, runs


@pytest.mark.not_on_tansu(TANSU_TIMES_OUT + "; the newer plan fences the older tasks with fence_transactional_ids, "
                          "so an older task caught inside a transaction may fail with a timeout, not ProducerFencedError "
                          "(seen once in CI)")
def test_a_retry_that_plans_fewer_tasks_fences_every_task_of_the_older_plan(backend_url: str) -> None:
    """Fan-out: an older plan of 3 tasks runs; a retry plans 1 task. Every older task (indexes 1 and 2 included,
    which the new plan does not have) ends with ProducerFencedError at its next commit, and a task of the older
    plan started afterwards is refused."""
    name, topic = uid("fewer"), uid("fewer")
    old, runs = _old_plan_running(backend_url, name, topic)
    new = plan_source(_planning(name, topic, 1, 0), backend_url)
    assert new["generation"] > old["generation"] and len(new["tasks"]) == 1
    for i, (t, out) in enumerate(runs):
        t.join(60)
        assert not t.is_alive(), f"task {i} of the older plan still runs 60 s after the newer plan"
        assert isinstance(out.get("error"), ProducerFencedError), f"task {i} of the older plan: {out}"
    with pytest.raises(ProducerFencedError):
        run_source_task(_planning(name, topic, 3, 100), backend_url, old, 2, max_seconds=10)


def test_a_task_of_an_older_plan_starting_while_a_newer_plan_begins_is_fenced(backend_url: str) -> None:
    """An older plan's task 2 passes its start-up check, then is slow to start (its connector names its task class
    only once a newer plan of one task has begun). Task 2 belongs to the older generation: whatever its
    index, however late it starts, it commits nothing (its first commit raises ProducerFencedError), so the newer
    plan's task, run once task 2 is going, writes every line exactly once."""
    import tests.support.source_connectors as connectors

    name, topic = uid("late"), uid("late")
    old_config = {**_planning(name, topic, 3, 20, lines=300), "connector.class":
                  "tests.support.source_connectors.GatedStartPlanningSource"}
    old = plan_source(old_config, backend_url)
    gate = threading.Event()
    connectors.START_WAITING.clear()
    connectors.START_GATE[0] = gate
    try:
        late, out = in_thread(run_source_task, old_config, backend_url, old, 2, max_seconds=60)
        assert connectors.START_WAITING.wait(30), f"task 2 did not start: {out}"  # it passed its check
        new_config = _planning(name, topic, 1, 0, lines=300)
        new = plan_source(new_config, backend_url)
    finally:
        connectors.START_GATE[0] = None
        gate.set()  # task 2 goes on starting, after the newer plan began
    time.sleep(2.0)  # task 2 is going (polling, trying to commit)
    with open_backend(backend_url) as be:
        early = [v for v in json_values(read_topic(be, topic)) if v["file"] == "c"]
    result = run_source_task(new_config, backend_url, new, 0)
    late.join(60)
    assert not late.is_alive()
    with open_backend(backend_url) as be:
        got = settled(lambda: Counter((v["file"], v["line"]) for v in json_values(read_topic(be, topic))),
                      lambda c: sum(c.values()) >= 900)
    if early:
        raise Broken(f"task 2 of the older plan committed {len(early)} lines after the newer plan began ({out})")
    late_records = out["result"].records if "result" in out else 0
    if not isinstance(out.get("error"), ProducerFencedError) and late_records:
        raise Broken(f"task 2 of the older plan committed {late_records} records after the newer plan began: {out}")
    assert result.records == 900
    assert [k for k, n in got.items() if n > 1] == [], "lines written twice"


@pytest.mark.not_on_tansu(TANSU_TIMES_OUT)
def test_a_cleared_task_of_a_finished_plan_commits_nothing_once_a_newer_plan_began(backend_url: str,
                                                                                  tmp_path: Path) -> None:
    """Airflow's Clear on a mapped task instance of an older fan-out run: its task reruns in a plan whose generation
    had finished (every task done). Plan 1 (2 tasks) runs both to a bound; its task 1 is rerun in another process:
    it joins generation 1, initialises its producer, passes its checks, and is held at a barrier in ``start()``;
    plan 2 (1 task) begins; task 1 goes on. It commits nothing (ProducerFencedError naming both generations): file
    b's lines and committed offset stay where plan 1 left them."""
    name, topic = uid("cleared"), uid("cleared")
    config = {**_planning(name, topic, 2, 0, lines=200),
              "connector.class": "tests.support.source_connectors.GatedTaskPlanningSource"}
    old = plan_source(config, backend_url)
    assert [t["index"] for t in old["tasks"]] == [0, 1]
    for i in (0, 1):
        assert run_source_task(config, backend_url, old, i, max_records=20).records == 20
    with open_backend(backend_url) as be:
        finished = Registry(be).get(name)
        assert finished is not None and finished.generation == old["generation"] and finished.state == "stopped"

        def lines_of_b() -> list[int]:
            return sorted(v["line"] for v in json_values(read_topic(be, topic)) if v["file"] == "b")

        assert lines_of_b() == list(range(20))
    assert committed_offset(backend_url, name, {"file": "b"}) == {"line": 20}
    log = tmp_path / "cleared.log"
    proc = start_worker("source-task", {"url": backend_url, "config": config, "plan": old, "index": 1, "gate": True},
                        log)
    try:
        assert read_line(proc, 120, log) == {"waiting": True}  # joined, initialised, checked: held in start()
        new = plan_source(_planning(name, topic, 1, 0, lines=200), backend_url)
        assert new["generation"] > old["generation"]
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out = read_line(proc, 120, log)
    finally:
        sigkill(proc)
    with open_backend(backend_url) as be:
        after = _stable(lines_of_b)
    if after != list(range(20)) or "error" not in out:
        raise Broken(f"the cleared task 1 of finished generation {old['generation']} committed beside generation "
                     f"{new['generation']}: {out}; file b holds lines {after[:3]}..{after[-3:]} ({len(after)})")
    assert out["error"] == "ProducerFencedError", out
    assert f"generation {old['generation']}" in out["message"] and f"generation {new['generation']}" in out["message"], out
    assert committed_offset(backend_url, name, {"file": "b"}) == {"line": 20}


@pytest.mark.not_on_tansu(UNFAITHFUL)
def test_nothing_of_the_older_plan_commits_after_a_retry_that_plans_fewer_tasks(backend_url: str) -> None:
    """As above, and what the older tasks committed stops at the newer plan: each file's lines and committed
    offset agree, nothing more shows once the newer plan exists, and its one task finishes every file from
    there: every line exactly once."""
    name, topic = uid("fewer"), uid("fewer")
    _old, runs = _old_plan_running(backend_url, name, topic)
    new_config = _planning(name, topic, 1, 0)
    new = plan_source(new_config, backend_url)
    with open_backend(backend_url) as be:
        def lines() -> list[tuple[str, int]]:
            return sorted((v["file"], v["line"]) for v in json_values(read_topic(be, topic)))

        at_fencing = _stable(lines)
        for t, _out in runs:
            t.join(60)
        assert all("error" in out for _t, out in runs)
        after = _stable(lines)
        assert after == at_fencing, f"the older plan's tasks committed after the newer plan: " \
                                    f"{sorted(set(after) - set(at_fencing))[:10]}"
        for f in "abc":
            done = [n for g, n in after if g == f]
            assert done == list(range(len(done))), f"file {f}: lines {done[:5]}..."
            assert committed_offset(backend_url, name, {"file": f}) == {"line": len(done)}
    result = run_source_task(new_config, backend_url, new, 0)
    assert result.records == 3 * 600 - len(after)
    with open_backend(backend_url) as be:
        want = Counter({(f, i): 1 for f in "abc" for i in range(600)})
        got = settled(lambda: Counter((v["file"], v["line"]) for v in json_values(read_topic(be, topic))),
                      lambda c: c == want)
    assert [k for k, n in got.items() if n > 1] == [], "lines written twice"
    assert got == want


@pytest.mark.not_on_tansu(UNFAITHFUL)
def test_a_run_with_fewer_tasks_fences_a_running_run(backend_url: str) -> None:
    """Run A (3 tasks, one file each) is still running when run B (1 task for all files) starts: A ends with
    ProducerFencedError and every line of every file is written exactly once."""
    name, topic = uid("files"), uid("lines")

    def planning(tasks: int, sleep_ms: int) -> dict[str, Any]:
        return {"name": name, "connector.class": "tests.support.source_connectors.PlanningSource", "topic": topic,
                "files": "a:300,b:300,c:300", "tasks.max": tasks, "poll.sleep.ms": sleep_ms,
                "poll.idle.timeout.ms": 300}

    a, out_a = in_thread(run_source, planning(3, 60), backend_url, max_seconds=60)
    wait_until("run A to commit lines of every file",
               lambda: all(committed_offset(backend_url, name, {"file": f}) for f in "abc"), 60)
    b = run_source(planning(1, 0), backend_url)
    a.join(60)
    assert not a.is_alive(), "run A still runs 60 s after run B ended"
    assert isinstance(out_a.get("error"), ProducerFencedError), out_a
    assert b.generation is not None and b.generation > 0
    with open_backend(backend_url) as be:
        want = {(f, i) for f in "abc" for i in range(300)}

        def lines() -> Counter[tuple[str, int]]:
            return Counter((v["file"], v["line"]) for v in json_values(read_topic(be, topic)))

        got = settled(lines, lambda c: set(c) == want)
    assert [k for k, n in got.items() if n > 1] == [], "lines written twice"
    assert set(got) == want, "lines lost"


def _fill(url: str, topic: str, n: int) -> None:
    with open_backend(url) as be:
        be.create_topics({topic: 1})
        p = be.producer()
        try:
            p.send([ProducerRecord(topic, 0, None, json.dumps(i).encode()) for i in range(n)])
            p.flush(60)
        finally:
            p.close()


@pytest.mark.not_on_tansu(SINKS_UNFAITHFUL)
def test_a_newer_sink_run_fences_the_group_commits_of_an_older_one(backend_url: str, tmp_path: Path) -> None:
    """Sink run A commits after every slow put; run B of the same connector starts, reads to the end and commits
    it. A's next commit is refused (ProducerFencedError) and the group keeps B's offsets."""
    topic, name = uid("sink-in"), uid("sink")
    n = 1500
    _fill(backend_url, topic, n)
    log_a, log_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    base = {"name": name, "connector.class": "tests.support.sink_helpers.RecordingSinkConnector", "topics": topic,
            "tasks.max": "1", "consumer.max.poll.records": "20", "offset.flush.interval.ms": "0"}
    a, out_a = in_thread(run_sink, {**base, "log.path": str(log_a), "put.sleep.ms": "150"}, backend_url,
                         max_seconds=90)
    tp = TopicPartition(topic, 0)

    def committed() -> int | None:
        with open_backend(backend_url) as be:
            c = be.consumer(f"connect-{name}")
            try:
                return c.committed([tp], 30)[tp]
            finally:
                c.close()

    wait_until("run A to commit", lambda: committed() is not None, 60)
    b = run_sink({**base, "log.path": str(log_b)}, backend_url, max_seconds=90)
    assert b.records > 0
    a.join(60)
    assert not a.is_alive(), "run A still runs 60 s after run B ended"
    assert isinstance(out_a.get("error"), ProducerFencedError), out_a
    assert committed() == n
    time.sleep(0.5)
    assert committed() == n
    put_b = [r[3] for e in read_log(log_b) if e["call"] == "put" for r in e["records"]]
    put_a = [r[3] for e in read_log(log_a) if e["call"] == "put" for r in e["records"]]
    assert set(put_a) | set(put_b) == set(range(n)), "records no run delivered"
