"""The runtime's own parts of contracts 3 and 4, without a Kafka broker.

- Fencing an older generation where commits cannot check it (``commits_check_generation`` off, as on Kafka): an
  SQLite backend whose commits ignore ``generation_guard`` leaves it all to the runtime. An older plan's task whose
  ``init_transactions`` came after the newer plan fenced its transactional id commits nothing (it reads the
  registry after initialising its producer); one initialised before is fenced at its next commit.
- A run's reported spans (``_exact_spans``): on a backend with transaction markers only spans of ONE task (one
  transactional producer) separated by exactly one offset are joined (that offset is the task's own commit marker);
  spans of two tasks one offset apart may hold another writer's record between them and stay apart.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tests.support.source_connectors as connectors
from connect_runtime import plan_source, ranges, run_source_task
from connect_runtime.api.errors import ProducerFencedError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import ProducerRecord
from connect_runtime.backends.base import REGISTRY_STORE
from connect_runtime.backends.sqlite import SQLiteBackend, SQLiteTransactionalProducer
from connect_runtime.runtime.source.result import exact_spans as _exact_spans
from connect_runtime.runtime.source.state import SourceRunState as _Run
from tests.support.source_connectors import committed_offset, read_topic

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)


# -- fencing where commits do not check the generation ---------------------------------------------------------


class _UnguardedProducer(SQLiteTransactionalProducer):
    """Fenced only by a newer ``init_transactions`` of its id: its commits ignore ``generation_guard`` (Kafka's)."""

    @property  # type: ignore[override]
    def generation_guard(self) -> tuple[str, bytes, int] | None:
        return None

    @generation_guard.setter
    def generation_guard(self, value: tuple[str, bytes, int] | None) -> None:
        pass


class _KafkaLikeSQLite(SQLiteBackend):
    capabilities = dataclasses.replace(SQLiteBackend.capabilities, commits_check_generation=False)

    def transactional_producer(self, transactional_id: str, offset_store: str | None = None, *,
                               track_metadata: bool = False) -> SQLiteTransactionalProducer:
        return _UnguardedProducer(self, transactional_id, offset_store, track_metadata=track_metadata)


@pytest.fixture
def kafka_like(tmp_path: Path) -> Any:
    path = tmp_path / "kafka-like.db"
    be = _KafkaLikeSQLite(path, url=f"sqlite:///{path}")
    try:
        yield be
    finally:
        be.close()


def _in_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def body() -> None:
        try:
            out["result"] = fn(*args, **kwargs)
        except BaseException as exc:
            out["error"] = exc

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, out


def _planning(name: str, topic: str, tasks: int, sleep_ms: int, lines: int, gated: bool = False) -> dict[str, Any]:
    cls = "GatedStartPlanningSource" if gated else "PlanningSource"
    return {"name": name, "connector.class": f"tests.support.source_connectors.{cls}", "topic": topic,
            "files": f"a:{lines},b:{lines},c:{lines}", "tasks.max": tasks, "poll.sleep.ms": sleep_ms,
            "poll.idle.timeout.ms": 100}


def _lines(url: str, topic: str) -> Counter[tuple[str, int]]:
    return Counter((v["file"], v["line"]) for v in read_topic(url, topic))


def test_the_kafka_like_backend_leaves_generation_fencing_to_the_runtime(kafka_like: _KafkaLikeSQLite) -> None:
    """What the tests below rely on: a commit of generation 0 goes through after generation 1 began."""
    kafka_like.create_topics({"t": 1})
    key = b'["x",{"scope":""}]'
    kafka_like.update_entry(REGISTRY_STORE, key, lambda _old: json.dumps({"generation": 0}).encode())
    p = kafka_like.transactional_producer("x-0")
    try:
        p.generation_guard = (REGISTRY_STORE, key, 0)
        p.init_transactions(10)
        kafka_like.update_entry(REGISTRY_STORE, key, lambda _old: json.dumps({"generation": 1}).encode())
        p.begin_transaction()
        p.send([ProducerRecord("t", 0, None, b"{}")])
        p.commit_transaction([], 10)
    finally:
        p.close()
    assert read_topic(kafka_like.url, "t") == [{}]


def test_an_older_plans_task_initialised_after_the_newer_plan_fenced_it_commits_nothing(
        kafka_like: _KafkaLikeSQLite) -> None:
    """Task 2 of an older plan of 3 passes its start-up check, then starts (initialises its producer) only after a
    newer plan of 1 task began and fenced transactional ids 0-2: it holds the newest epoch of id 2, which nobody
    fences again, so only its registry read after ``init_transactions`` stops it."""
    url, name, topic = kafka_like.url, "late", "late"
    old_config = _planning(name, topic, 3, 5, 30, gated=True)
    old = plan_source(old_config, kafka_like)
    gate = threading.Event()
    connectors.START_WAITING.clear()
    connectors.START_GATE[0] = gate
    try:
        late, out = _in_thread(run_source_task, old_config, kafka_like, old, 2, max_seconds=30)
        assert connectors.START_WAITING.wait(30), f"task 2 did not start: {out}"
        new_config = _planning(name, topic, 1, 0, 30)
        new = plan_source(new_config, kafka_like)
        assert new["generation"] > old["generation"]
    finally:
        connectors.START_GATE[0] = None
        gate.set()
    late.join(30)
    assert not late.is_alive()
    assert isinstance(out.get("error"), ProducerFencedError), out
    assert "generation" in str(out["error"])
    assert _lines(url, topic) == Counter(), "the older plan's task committed after the newer plan began"
    assert committed_offset(url, name, {"file": "c"}) is None
    result = run_source_task(new_config, kafka_like, new, 0)
    assert result.records == 90
    assert _lines(url, topic) == Counter({(f, i): 1 for f in "abc" for i in range(30)})


def test_an_older_plans_task_initialised_before_the_newer_plan_is_fenced_at_its_next_commit(
        kafka_like: _KafkaLikeSQLite) -> None:
    """The other order: task 2 passed its registry read and commits; the newer plan then fences its id (every id of
    the older plan's task count), so its next commit raises and nothing more of it shows."""
    url, name, topic = kafka_like.url, "early", "early"
    old = plan_source(_planning(name, topic, 3, 20, 600), kafka_like)
    running, out = _in_thread(run_source_task, _planning(name, topic, 3, 20, 600), kafka_like, old, 2,
                              max_seconds=30)
    deadline = time.monotonic() + 30
    while not committed_offset(url, name, {"file": "c"}) and "error" not in out and time.monotonic() < deadline:
        time.sleep(0.02)
    assert committed_offset(url, name, {"file": "c"}), f"task 2 did not commit: {out}"
    new_config = _planning(name, topic, 1, 0, 600)
    new = plan_source(new_config, kafka_like)
    at_fencing = _lines(url, topic)
    running.join(30)
    assert not running.is_alive()
    assert isinstance(out.get("error"), ProducerFencedError), out
    assert _lines(url, topic) == at_fencing, "the older plan's task committed after the newer plan began"
    done = sorted(n for f, n in at_fencing if f == "c")
    assert done == list(range(len(done))) and 0 < len(done) < 600
    assert committed_offset(url, name, {"file": "c"}) == {"line": len(done)}
    result = run_source_task(new_config, kafka_like, new, 0)
    assert result.records == 3 * 600 - len(done)
    assert _lines(url, topic) == Counter({(f, i): 1 for f in "abc" for i in range(600)})


# -- a run's spans ----------------------------------------------------------------------------------------------


def _run(*commits: tuple[int, TopicPartition, tuple[int, int]]) -> _Run:
    run = _Run("spans", None, None)
    for writer, tp, span in commits:
        run.committed([(tp, span)], span[1] - span[0], 0, 0, [], transaction=True, writer=writer)
    return run


def test_one_tasks_spans_one_marker_apart_are_joined() -> None:
    run = _run((0, TP, (0, 2)), (0, TP, (3, 5)), (0, TP, (6, 9)), (0, TP, (11, 12)))
    assert _exact_spans(run, join_markers=True) == {"t": {0: [(0, 9), (11, 12)]}}
    assert _exact_spans(run, join_markers=False) == {"t": {0: [(0, 2), (3, 5), (6, 9), (11, 12)]}}


def test_spans_of_two_tasks_one_offset_apart_are_not_joined() -> None:
    """Offset 7 lies between task 1's span [6, 7) and task 0's span [8, 9): neither task's marker needs to be there
    (task 0's marker of [3, 5) is offset 5), so it may be another connector's record, and the run's ranges must not
    hold it."""
    run = _run((0, TP, (3, 5)), (1, TP, (6, 7)), (0, TP, (8, 9)), (1, TP, (10, 12)), (1, TP, (13, 14)))
    got = _exact_spans(run, join_markers=True)
    # task 0: [3,5) and [8,9) are 3 apart (not joined); task 1: [10,12)+[13,14) joined over its marker 12
    assert got == {"t": {0: [(3, 5), (6, 7), (8, 9), (10, 14)]}}
    assert ranges.dump(got) == {"t": {"0": [[3, 5], [6, 7], [8, 9], [10, 14]]}}


def test_touching_spans_of_two_tasks_are_one_span_and_partitions_stay_apart() -> None:
    """Spans that touch (no offset between them) are one span whoever wrote them; each partition on its own."""
    run = _run((0, TP, (0, 3)), (1, TP, (3, 4)), (1, OTHER, (0, 1)), (0, OTHER, (2, 3)), (1, OTHER, (5, 6)))
    assert _exact_spans(run, join_markers=True) == {"t": {0: [(0, 4)], 1: [(0, 1), (2, 3), (5, 6)]}}


def test_a_joined_span_that_holds_another_tasks_span_stays_one_span() -> None:
    """Task 1's record committed inside task 0's open transaction (the documented limit) lies inside task 0's
    span; the result is still sorted, non-overlapping spans."""
    run = _run((0, TP, (0, 4)), (1, TP, (2, 3)), (0, TP, (5, 7)), (1, TP, (9, 10)))
    assert _exact_spans(run, join_markers=True) == {"t": {0: [(0, 7), (9, 10)]}}
