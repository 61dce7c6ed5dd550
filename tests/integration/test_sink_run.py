"""run_sink against a real SQLite backend file: commit points, KIP-275 is_closing, failures,
retries, bounds, rewinds, pause/resume and the dead letter queue."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.api import ConnectError, RetriableError, TopicPartition, WaitTimeoutError
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.runtime.sink import SinkRunResult, run_sink
from tests.support.sink_helpers import read_log

SINK = "tests.support.sink_helpers.RecordingSinkConnector"


def fill(url: str, topic: str, values: list[Any], partitions: int = 1, raw: bool = False) -> None:
    """Write values round-robin over the partitions (JSON-encoded unless raw bytes)."""
    with open_backend(url) as backend:
        backend.create_topics({topic: partitions})
        producer = backend.producer()
        try:
            producer.send([
                ProducerRecord(topic, i % partitions, None, v if raw else json.dumps(v).encode())
                for i, v in enumerate(values)
            ])
            producer.flush(30)
        finally:
            producer.close()


def group_offsets(url: str, name: str, topic: str, partitions: int = 1) -> dict[int, int | None]:
    with open_backend(url) as backend:
        consumer = backend.consumer(f"connect-{name}")
        try:
            got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 10)
        finally:
            consumer.close()
    return {tp.partition: off for tp, off in got.items()}


def config(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    base = {
        "name": "rec",
        "connector.class": SINK,
        "topics": "in",
        "log.path": str(tmp_path / "calls.jsonl"),
    }
    base.update({k.replace("_", "."): v for k, v in extra.items()})
    return base


def delivered(log_path: Path) -> list[tuple[str, int, int, Any]]:
    return [tuple(r) for e in read_log(log_path) if e["call"] == "put" for r in e["records"]]


def calls(log_path: Path, name: str) -> list[dict[str, Any]]:
    return [e for e in read_log(log_path) if e["call"] == name]


def test_a_run_delivers_each_record_once_and_the_next_run_nothing(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", list(range(20)), partitions=2)
    cfg = config(tmp_path, tasks_max="2")
    result = run_sink(cfg, sqlite_url)
    assert result.records == 20
    assert result.to_dict() == {
        "connector": "rec", "records": 20, "committed": {"in": {"0": 10, "1": 10}},
        "dead_lettered": 0, "retries": 0, "seconds": result.seconds,
        "ranges": {"in": {"0": [0, 10], "1": [0, 10]}}, "bytes": 30,  # the values "0" to "19": 10 + 2 * 10 bytes
    }
    got = delivered(tmp_path / "calls.jsonl")
    assert sorted(got) == sorted(("in", i % 2, i // 2, i) for i in range(20))
    opens = sorted(e["partitions"] for e in calls(tmp_path / "calls.jsonl", "open"))
    assert opens == [[["in", 0]], [["in", 1]]]  # round-robin: one partition per task
    assert group_offsets(sqlite_url, "rec", "in", 2) == {0: 10, 1: 10}
    again = run_sink(cfg, sqlite_url)
    assert again.records == 0 and again.committed == {}
    assert SinkRunResult.from_dict(json.loads(json.dumps(result.to_dict()))).to_dict() == result.to_dict()


def test_is_closing_is_true_exactly_once_for_the_final_commit(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", list(range(30)))
    cfg = config(tmp_path, offset_flush_interval_ms="0", consumer_max_poll_records="4")
    run_sink(cfg, sqlite_url)
    log = read_log(tmp_path / "calls.jsonl")
    pre = [e for e in log if e["call"] == "pre_commit"]
    assert len(pre) >= 8  # one per put with interval 0 (30 records / 4 per put), plus the final one
    assert [e["closing"] for e in pre] == [False] * (len(pre) - 1) + [True]
    assert [e for e in log if e["closing"]] == [pre[-1]]
    assert [e["call"] for e in log[-3:]] == ["pre_commit", "close", "stop"]
    assert pre[-1]["current"] == [["in", 0, 30]]


def test_empty_pre_commit_commits_nothing(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", list(range(10)))
    cfg = config(tmp_path, precommit_empty="true", offset_flush_interval_ms="0")
    first = run_sink(cfg, sqlite_url)
    assert first.records == 10 and first.committed == {}
    assert group_offsets(sqlite_url, "rec", "in") == {0: None}
    second = run_sink(cfg, sqlite_url)
    assert second.records == 10  # everything again: nothing was committed
    assert len(delivered(tmp_path / "calls.jsonl")) == 20


def test_a_failing_put_commits_nothing_new(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", list(range(20)))
    # commit requested during put 2 (offsets 0..9 committed), put 3 fails
    cfg = config(tmp_path, consumer_max_poll_records="5", commit_request_at="2", put_fail_at="3")
    with pytest.raises(ConnectError) as err:
        run_sink(cfg, sqlite_url)
    msg = str(err.value)
    assert "'rec'" in msg and "task 0" in msg and "disk on fire" in msg
    assert isinstance(err.value.__cause__, ValueError)
    log = read_log(tmp_path / "calls.jsonl")
    failed_at = next(i for i, e in enumerate(log) if e["call"] == "put_failed")
    assert [e["call"] for e in log[failed_at + 1:]] == ["close", "stop"]  # no pre_commit after it
    assert [e["current"] for e in log if e["call"] == "pre_commit"] == [[["in", 0, 10]]]
    assert group_offsets(sqlite_url, "rec", "in") == {0: 10}
    again = run_sink(config(tmp_path), sqlite_url)
    assert again.records == 10 and again.committed == {"in": {"0": 20}}


def test_a_failing_task_stops_the_others_without_a_final_commit(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", list(range(400)), partitions=2)
    cfg = config(tmp_path, tasks_max="2", consumer_max_poll_records="10", offset_flush_interval_ms="0",
                 put_fail_at="3", put_fail_task="0", put_sleep_ms="20")
    with pytest.raises(ConnectError, match="'rec' task 0 failed in put: ValueError: disk on fire"):
        run_sink(cfg, sqlite_url)
    log = read_log(tmp_path / "calls.jsonl")
    other = [e for e in log if e["task"] == "1"]
    assert [e["call"] for e in other[-2:]] == ["close", "stop"]
    assert not [e for e in log if e["closing"]]  # no final commit in any task
    offsets = group_offsets(sqlite_url, "rec", "in", 2)
    assert offsets[0] == 20 and (offsets[1] or 0) < 200


def test_a_task_that_fails_to_start_is_not_stopped(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", [1, 2])
    with pytest.raises(ConnectError, match="'rec' task 0 failed in start: RuntimeError: no credentials"):
        run_sink(config(tmp_path, start_fail="true"), sqlite_url)
    assert [e["call"] for e in read_log(tmp_path / "calls.jsonl")] == ["start"]
    assert group_offsets(sqlite_url, "rec", "in") == {0: None}


def test_request_commit_makes_a_commit_point(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", list(range(20)))
    cfg = config(tmp_path, consumer_max_poll_records="5", commit_request_at="2")
    run_sink(cfg, sqlite_url)
    pre = calls(tmp_path / "calls.jsonl", "pre_commit")
    assert [(e["current"], e["closing"]) for e in pre] == [([["in", 0, 10]], False), ([["in", 0, 20]], True)]


def test_retriable_put_redelivers_the_same_records(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", list(range(6)))
    cfg = config(tmp_path, put_retriable_times="3", errors_retry_timeout="10000",
                 errors_retry_delay_max_ms="5")
    result = run_sink(cfg, sqlite_url)
    assert result.retries == 3 and result.records == 6
    log = read_log(tmp_path / "calls.jsonl")
    retried = [e["offsets"] for e in log if e["call"] == "put_retriable"]
    first_put = next(e for e in log if e["call"] == "put" and e["records"])
    assert retried == [[r[2] for r in first_put["records"]]] * 3
    assert result.committed == {"in": {"0": 6}}


def test_retries_that_run_out_fail_the_run(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", list(range(6)))
    cfg = config(tmp_path, put_retriable_times="100000", errors_retry_timeout="150",
                 errors_retry_delay_max_ms="20")
    with pytest.raises(ConnectError, match=r"'rec' task 0 .*errors.retry.timeout=150") as err:
        run_sink(cfg, sqlite_url)
    assert isinstance(err.value.__cause__, RetriableError)
    attempts = len(calls(tmp_path / "calls.jsonl", "put_retriable"))
    assert 3 <= attempts < 100
    assert calls(tmp_path / "calls.jsonl", "pre_commit") == []
    assert group_offsets(sqlite_url, "rec", "in") == {0: None}


def test_retriable_put_is_redelivered_by_default(tmp_path: Path, sqlite_url: str) -> None:
    """As in Kafka Connect: errors.retry.timeout=0 (the default) does not turn off redelivery of put."""
    fill(sqlite_url, "in", list(range(3)))
    cfg = config(tmp_path, put_retriable_times="2", put_retry_timeout_ms="10")
    result = run_sink(cfg, sqlite_url)
    assert result.retries == 2 and result.records == 3
    assert result.committed == {"in": {"0": 3}}


def test_until_offsets_bounds_the_run(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", list(range(20)), partitions=2)
    cfg = config(tmp_path)
    r1 = run_sink(cfg, sqlite_url, until_offsets={"in": {0: 4, "1": 2}})
    assert r1.committed == {"in": {"0": 4, "1": 2}} and r1.records == 6
    # the shape of an upstream SourceRunResult.to_dict(): target = "to"; partition 1 not named
    r2 = run_sink(cfg, sqlite_url, until_offsets={"connector": "src", "ranges": {"in": {"0": [4, 7]}}})
    assert r2.committed == {"in": {"0": 7}} and r2.records == 3
    got = delivered(tmp_path / "calls.jsonl")
    assert sorted(got) == sorted([("in", 0, o, 2 * o) for o in range(7)] + [("in", 1, o, 2 * o + 1) for o in range(2)])
    # a target past the end is read to the end
    r3 = run_sink(cfg, sqlite_url, until_offsets={"in": {"0": 1000, "1": 1000}})
    assert r3.committed == {"in": {"0": 10, "1": 10}}


def test_max_records_and_max_seconds_bound_the_run(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", list(range(50)))
    cfg = config(tmp_path, consumer_max_poll_records="7")
    r1 = run_sink(cfg, sqlite_url, max_records=10)
    assert r1.records == 10 and r1.committed == {"in": {"0": 10}}
    seen: list[tuple[int, float]] = []
    r2 = run_sink(config(tmp_path, put_sleep_ms="100", consumer_max_poll_records="1"), sqlite_url,
                  max_seconds=0.5, progress=lambda n, s: seen.append((n, s)))
    assert 1 <= r2.records < 40 and r2.seconds < 5
    assert r2.committed == {"in": {"0": 10 + r2.records}}
    assert seen[-1][0] == r2.records


def test_rewind_in_open_rereads_from_there(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", list(range(10)))
    run_sink(config(tmp_path), sqlite_url)
    log2 = tmp_path / "second.jsonl"
    r = run_sink(config(tmp_path, open_rewind="in:0:7", log_path=str(log2)), sqlite_url)
    assert r.records == 3 and [d[2] for d in delivered(log2)] == [7, 8, 9]
    assert calls(log2, "pre_commit")[0]["current"] == [["in", 0, 10]]
    # a rewind past the committed offset skips records (connector-managed offsets)
    fill(sqlite_url, "in", list(range(10, 20)))
    log3 = tmp_path / "third.jsonl"
    r = run_sink(config(tmp_path, open_rewind="in:0:15", log_path=str(log3)), sqlite_url)
    assert [d[2] for d in delivered(log3)] == [15, 16, 17, 18, 19]


def test_rewind_during_put_takes_effect_before_the_next_poll(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", list(range(8)))
    r = run_sink(config(tmp_path, consumer_max_poll_records="3", put_rewind="2:in:0:1"), sqlite_url)
    puts = [[rec[2] for rec in e["records"]] for e in calls(tmp_path / "calls.jsonl", "put")]
    assert puts == [[0, 1, 2], [3, 4, 5], [1, 2, 3], [4, 5, 6], [7]]
    assert r.records == 13 and r.committed == {"in": {"0": 8}}


def test_paused_partitions_are_not_polled_until_resumed(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", list(range(40)), partitions=2)
    cfg = config(tmp_path, consumer_max_poll_records="3", pause_partition="in:0", resume_after_empty="3")
    result = run_sink(cfg, sqlite_url, max_seconds=30)
    assert result.records == 40
    log = read_log(tmp_path / "calls.jsonl")
    paused = next(i for i, e in enumerate(log) if e["call"] == "paused")
    resumed = next(i for i, e in enumerate(log) if e["call"] == "resumed")
    between = [r for e in log[paused + 1:resumed] if e["call"] == "put" for r in e["records"]]
    assert between and {r[1] for r in between} == {1}
    assert [e["records"] for e in log[resumed - 3:resumed]] == [[], [], []]
    assert sorted(delivered(tmp_path / "calls.jsonl")) == sorted(("in", i % 2, i // 2, i) for i in range(40))


def test_partitions_paused_for_good_fail_the_run_at_pause_timeout(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", list(range(5)))
    cfg = config(tmp_path, consumer_max_poll_records="2", pause_partition="in:0",
                 resume_after_empty="1000000", pause_timeout_ms="300")
    with pytest.raises(WaitTimeoutError, match=r"pause.timeout.ms.*in-0"):
        run_sink(cfg, sqlite_url, max_seconds=30)


def test_poison_record_goes_to_the_dead_letter_queue_with_context_headers(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", [b'{"ok": 1}', b"{not json", b"2", b'"fine"'], raw=True)
    cfg = config(tmp_path, errors_tolerance="all", errors_deadletterqueue_topic_name="dlq",
                 errors_deadletterqueue_context_headers_enable="true", report_values="2")
    result = run_sink(cfg, sqlite_url)
    assert result.dead_lettered == 2 and result.committed == {"in": {"0": 4}}
    assert [d[3] for d in delivered(tmp_path / "calls.jsonl")] == [{"ok": 1}, "fine"]
    with open_backend(sqlite_url) as backend:
        assert backend.list_topics()["dlq"] == 1
        dead = list(backend.read_range(TopicPartition("dlq", 0), 0, 100))
    assert [d.value for d in dead] == [b"{not json", b"2"]
    headers = {k: v for k, v in dead[0].headers or []}
    assert headers["__connect.errors.topic"] == b"in"
    assert headers["__connect.errors.partition"] == b"0"
    assert headers["__connect.errors.offset"] == b"1"
    assert any(k.startswith("__connect.errors.exception") for k in headers)
    assert {k: v for k, v in dead[1].headers or []}["__connect.errors.offset"] == b"2"


def test_records_reported_from_pre_commit_are_dead_lettered_as_the_converters_write_them(
        tmp_path: Path, sqlite_url: str) -> None:
    # reported after their batch is gone: written back by the value converter (JSON), as Kafka Connect does
    fill(sqlite_url, "in", [b'"keep"', b'"drop me"', b'{"a":1}', b"[1,2]"], raw=True)
    cfg = config(tmp_path, errors_tolerance="all", errors_deadletterqueue_topic_name="dlq",
                 report_values="drop me,{'a': 1}", report_at_commit="true")
    result = run_sink(cfg, sqlite_url)
    assert result.dead_lettered == 2 and result.committed == {"in": {"0": 4}}
    with open_backend(sqlite_url) as backend:
        dead = list(backend.read_range(TopicPartition("dlq", 0), 0, 100))
    assert [d.value for d in dead] == [b'"drop me"', b'{"a":1}']
    assert [d[3] for d in delivered(tmp_path / "calls.jsonl")] == ["keep", [1, 2]]


def test_without_a_dead_letter_topic_bad_records_are_skipped_and_counted(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", [b"1", b"{bad", b"3"], raw=True)
    result = run_sink(config(tmp_path, errors_tolerance="all"), sqlite_url)
    assert (result.records, result.skipped, result.dead_lettered) == (2, 1, 0)
    assert result.committed == {"in": {"0": 3}}


def test_poison_record_fails_the_run_without_tolerance(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", [b"1", b"{bad", b"3"], raw=True)
    with pytest.raises(ConnectError, match="'rec' task 0"):
        run_sink(config(tmp_path, offset_flush_interval_ms="0", consumer_max_poll_records="1"), sqlite_url)
    assert group_offsets(sqlite_url, "rec", "in") == {0: 1}


def test_reported_record_fails_the_run_without_tolerance(tmp_path: Path, sqlite_url: str) -> None:
    fill(sqlite_url, "in", [1, 2, 3])
    with pytest.raises(ConnectError, match=r"reported record in\[0\]@1 .*errors.tolerance=none") as err:
        run_sink(config(tmp_path, report_values="2"), sqlite_url)
    assert isinstance(err.value.__cause__, ValueError)
    assert group_offsets(sqlite_url, "rec", "in") == {0: None}


def test_topics_regex_and_foreign_offsets_from_pre_commit(
    tmp_path: Path, sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    fill(sqlite_url, "orders-eu", [1, 2])
    fill(sqlite_url, "orders-us", [3])
    fill(sqlite_url, "other", [4])
    cfg = config(tmp_path, precommit_foreign="true")
    del cfg["topics"]
    cfg["topics.regex"] = "orders-.*"
    with caplog.at_level(logging.WARNING, logger="connect_runtime.runtime.sink"):
        result = run_sink(cfg, sqlite_url)
    assert result.committed == {"orders-eu": {"0": 2}, "orders-us": {"0": 1}}
    assert "not-assigned" in caplog.text and "ignored" in caplog.text
