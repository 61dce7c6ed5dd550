"""Issue 10, sink side: the promise off the happy path, on real SQLite files and a real Tansu broker.

Each test sets up a case that broke on the earlier main: a zombie run committing after its successor,
``pre_commit`` answering offsets the task was never given, ``RetriableError`` / failing ``flush``
redelivery and its bound, a stuck task, ``tasks.max`` and passwords handled unlike a source run.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import TopicPartition, open_backend, run_sink
from connect_runtime.api import Password
from connect_runtime.api.errors import ConfigError, ConnectError, ProducerFencedError, WaitTimeoutError
from connect_runtime.backends import ProducerRecord
from tests.support.sink_helpers import SEEN, read_ledger, read_log

SINK = "tests.support.sink_helpers.RecordingSinkConnector"


def fill(url: str, topic: str, n: int, partitions: int = 1) -> None:
    with open_backend(url) as backend:
        backend.create_topics({topic: partitions})
        producer = backend.producer()
        try:
            producer.send([ProducerRecord(topic, i % partitions, None, json.dumps(i).encode()) for i in range(n)])
            producer.flush(30)
        finally:
            producer.close()


def group_offset(url: str, name: str, topic: str, partition: int = 0) -> int | None:
    with open_backend(url) as backend:
        consumer = backend.consumer(f"connect-{name}")
        try:
            return consumer.committed([TopicPartition(topic, partition)], 10)[TopicPartition(topic, partition)]
        finally:
            consumer.close()


def in_thread(fn: Any, *args: Any, **kwargs: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def body() -> None:
        try:
            out["result"] = fn(*args, **kwargs)
        except BaseException as exc:
            out["error"] = exc

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, out


def wait_for(what: str, check: Any, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"waited {seconds:g} s for {what}"
        time.sleep(0.02)


def calls(path: Path, call: str) -> list[dict[str, Any]]:
    return [e for e in read_log(path) if e["call"] == call]


# ---- 1. generations: a newer run fences the older one's commits -----------------------------------


@pytest.mark.parametrize("backend_kind", ["sqlite", pytest.param("kafka", marks=pytest.mark.kafka)])
def test_a_newer_run_fences_the_older_runs_group_commits(backend_kind: str, tmp_path: Path,
                                                         request: pytest.FixtureRequest) -> None:
    url = (f"sqlite:///{tmp_path / 'pyconnect.db'}" if backend_kind == "sqlite"
           else request.getfixturevalue("fresh_kafka_url"))
    fill(url, "in", 20)
    release = tmp_path / "release"
    zombie_log, fresh_log = tmp_path / "zombie.jsonl", tmp_path / "fresh.jsonl"
    base = {"name": "fenced", "connector.class": SINK, "topics": "in", "consumer.max.poll.records": "5",
            "offset.flush.interval.ms": "0"}
    zombie_cfg = {**base, "log.path": str(zombie_log), "put.block.at": "2", "put.block.file": str(release)}
    t, out = in_thread(run_sink, zombie_cfg, url, until_offsets={"in": {"0": 20}})
    wait_for("the first run to block in its second put", lambda: calls(zombie_log, "blocked"))
    assert group_offset(url, "fenced", "in") == 5  # the zombie committed its first put

    fresh = run_sink({**base, "log.path": str(fresh_log)}, url)  # the retry: a newer generation
    assert fresh.committed == {"in": {"0": 20}} and fresh.records == 15
    [zombie_start] = calls(zombie_log, "start")
    [fresh_start] = calls(fresh_log, "start")
    assert fresh_start["generation"] > zombie_start["generation"]

    release.touch()
    t.join(60)
    assert not t.is_alive()
    err = out.get("error")
    assert isinstance(err, ProducerFencedError), out
    assert "'fenced' task 0" in str(err) and "fenced" in str(err)
    assert group_offset(url, "fenced", "in") == 20  # the zombie's commit of 10 did not land


# ---- 2. pre_commit answers beyond what was delivered --------------------------------------------


def test_offsets_beyond_what_was_delivered_are_ignored_with_a_warning(
        tmp_path: Path, sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    fill(sqlite_url, "in", 200)
    cfg = {"name": "ahead", "connector.class": SINK, "topics": "in", "log.path": str(tmp_path / "c.jsonl"),
           "precommit.ahead": "100", "consumer.max.poll.records": "50"}
    with caplog.at_level(logging.WARNING, logger="connect_runtime.runtime.sink"):
        result = run_sink(cfg, sqlite_url, max_records=100)
    assert result.records == 100
    assert result.committed == {}  # +100 past what the task was given: nothing is committed
    assert group_offset(sqlite_url, "ahead", "in") is None
    assert any("in-0" in r.getMessage() and "past the 100 the task was given" in r.getMessage()
               for r in caplog.records)
    # a partition not assigned to the task is named too
    fill(sqlite_url, "other", 3)
    caplog.clear()
    cfg2 = {**cfg, "name": "foreign", "precommit.ahead": "", "precommit.foreign": "true"}
    with caplog.at_level(logging.WARNING, logger="connect_runtime.runtime.sink"):
        result2 = run_sink(cfg2, sqlite_url, max_records=10)
    assert result2.committed == {"in": {"0": 10}}
    assert any("not-assigned-7" in r.getMessage() and "not assigned" in r.getMessage() for r in caplog.records)


# ---- 3. RetriableError and failing flush/pre_commit: redelivered, bounded -------------------------


def test_retriable_put_waits_what_the_task_asked_for(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", 4)
    log_path = tmp_path / "c.jsonl"
    cfg = {"name": "backoff", "connector.class": SINK, "topics": "in", "log.path": str(log_path),
           "put.retriable.times": "3", "put.retry.timeout.ms": "150"}
    result = run_sink(cfg, sqlite_url)
    assert (result.retries, result.records, result.committed) == (3, 4, {"in": {"0": 4}})
    times = [e["t"] for e in calls(log_path, "put_retriable")]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(gaps) == 2 and all(g >= 0.15 for g in gaps), gaps  # context.timeout(150) was honoured


def test_retriable_put_is_bounded_by_max_seconds_and_says_so(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", 4)
    cfg = {"name": "forever", "connector.class": SINK, "topics": "in", "log.path": str(tmp_path / "c.jsonl"),
           "put.retriable.times": "1000000", "put.retry.timeout.ms": "20"}
    with pytest.raises(ConnectError, match=r"'forever' task 0 .*RetriableError.*max_seconds \(1 s\) ran out"):
        run_sink(cfg, sqlite_url, max_seconds=1)
    assert group_offset(sqlite_url, "forever", "in") is None


def test_a_failing_pre_commit_rewinds_and_redelivers(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", 12)
    log_path = tmp_path / "c.jsonl"
    cfg = {"name": "flaky-flush", "connector.class": SINK, "topics": "in", "log.path": str(log_path),
           "consumer.max.poll.records": "4", "offset.flush.interval.ms": "0", "precommit.fail.times": "2",
           "errors.retry.delay.max.ms": "10"}
    result = run_sink(cfg, sqlite_url)
    assert result.committed == {"in": {"0": 12}}
    puts = [[r[2] for r in e["records"]] for e in calls(log_path, "put")]
    # first put [0..3], its commit fails -> rewound to 0 and delivered again, fails again -> again, then on
    assert puts[:3] == [[0, 1, 2, 3]] * 3 and puts[3:] == [[4, 5, 6, 7], [8, 9, 10, 11]]
    assert len(calls(log_path, "pre_commit_failed")) == 2


def test_a_pre_commit_that_keeps_failing_fails_the_run_naming_the_bound(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", 8)
    cfg = {"name": "broken-flush", "connector.class": SINK, "topics": "in", "log.path": str(tmp_path / "c.jsonl"),
           "consumer.max.poll.records": "4", "offset.flush.interval.ms": "0",
           "precommit.fail.times": "1000000", "errors.retry.timeout": "300", "errors.retry.delay.max.ms": "20"}
    with pytest.raises(ConnectError, match=r"pre_commit raised .*errors.retry.timeout=300 ms ran out.*OSError"):
        run_sink(cfg, sqlite_url)
    assert group_offset(sqlite_url, "broken-flush", "in") is None


def test_a_commit_point_that_always_fails_is_bounded_though_earlier_ones_succeed(tmp_path: Path,
                                                                                 sqlite_url: str) -> None:
    """pre_commit fails whenever the task was given offset 8 (it returns {}: the rewind goes back to 0, where
    pre_commit succeeds again): the retry bound counts from the first failure at 8, not from the last success
    before it (each such success used to restart it, so the run retried forever: issue 32's ParquetSink runs
    still going after 300 s)."""
    fill(sqlite_url, "in", 12)
    cfg = {"name": "late-flush", "connector.class": SINK, "topics": "in", "log.path": str(tmp_path / "c.jsonl"),
           "consumer.max.poll.records": "4", "offset.flush.interval.ms": "0", "precommit.empty": "true",
           "precommit.fail.from": "8", "errors.retry.timeout": "500", "errors.retry.delay.max.ms": "20"}
    with pytest.raises(ConnectError, match=r"pre_commit raised .*errors.retry.timeout=500 ms ran out.*OSError"):
        run_sink(cfg, sqlite_url, max_seconds=60)
    assert len(calls(tmp_path / "c.jsonl", "pre_commit_failed")) >= 2


# ---- 4. a stuck task is bounded; tasks.max and passwords as in a source run ----------------------


def test_a_stuck_sink_task_is_bounded_like_a_source_task(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", 4)
    cfg = {"name": "stuck", "connector.class": SINK, "topics": "in", "log.path": str(tmp_path / "c.jsonl"),
           "put.hang": "true", "task.shutdown.graceful.timeout.ms": "300"}
    t0 = time.monotonic()
    with pytest.raises(WaitTimeoutError, match=r"'stuck': tasks 0 did not .*task.shutdown.graceful.timeout.ms=300"):
        run_sink(cfg, sqlite_url, max_seconds=0.5)
    assert time.monotonic() - t0 < 60  # not the 120 s the task sleeps
    assert group_offset(sqlite_url, "stuck", "in") is None


def test_tasks_max_is_bounded_and_never_cut_silently(tmp_path: Path, sqlite_url: str) -> None:
    cfg = {"name": "many", "connector.class": SINK, "topics": "in", "log.path": str(tmp_path / "c.jsonl"),
           "tasks.max": "100000"}
    with pytest.raises(ConfigError, match=r"tasks.max: expected at most 1024") as err:
        run_sink(cfg, sqlite_url)
    assert "tasks.max" in err.value.errors
    fill(sqlite_url, "in", 2)
    with pytest.raises(ConnectError, match=r"task_configs\(1\) returned 3 task configs \(more than tasks.max\)"):
        run_sink({"name": "greedy", "connector.class": "tests.support.sink_helpers.GreedySink",
                  "topics": "in"}, sqlite_url)


def test_connectors_get_password_objects_as_in_a_source_run(sqlite_url: str) -> None:
    fill(sqlite_url, "in", 1)
    SEEN.clear()
    run_sink({"name": "secret", "connector.class": "tests.support.sink_helpers.SecretSink",
              "topics": "in", "secret": Password("hunter2")}, sqlite_url)
    assert isinstance(SEEN["connector"], Password) and SEEN["connector"].value == "hunter2"
    assert isinstance(SEEN["task"], Password) and SEEN["task"].value == "hunter2"
    assert "hunter2" not in repr(SEEN)


def test_a_stop_event_ends_the_run_at_once_and_commits_nothing_more(tmp_path: Path, sqlite_url: str) -> None:
    """Airflow's on_kill sets the run's stop event: the tasks stop without a further commit; the next run
    delivers what was consumed but not committed, so the ledger still holds each offset once."""
    fill(sqlite_url, "in", 400)
    ledger = str(tmp_path / "ledger")
    cfg = {"name": "killed", "connector.class": "tests.support.sink_helpers.LedgerSinkConnector", "topics": "in",
           "ledger.path": ledger, "put.sleep.ms": "50", "consumer.max.poll.records": "10"}
    stop = threading.Event()
    t, out = in_thread(run_sink, cfg, sqlite_url, stop=stop)
    time.sleep(1.0)
    t0 = time.monotonic()
    stop.set()
    t.join(30)
    assert not t.is_alive() and time.monotonic() - t0 < 10
    assert "error" not in out, out
    assert out["result"].records < 400
    run_sink(cfg, sqlite_url)
    offsets = [int(row[2]) for row in read_ledger(ledger)]
    assert sorted(offsets) == list(range(400)), "lost or written twice after a stopped run"
