"""The runtime's metrics (connect_runtime.metrics) and progress lines (runtime/progress.py): the mapping of what a
run did to Kafka Connect's metric names, the no-op default, a Metrics that raises, and the progress lines'
cadence and fields, on real runs over SQLite."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import ConfigError, run_sink, run_source
from connect_runtime.api.records import TopicPartition
from connect_runtime.metrics import METRIC_NAMES, NO_METRICS, TaskMetrics
from connect_runtime.runtime.progress import ProgressLog

RECORDING_SINK = "tests.support.sink_helpers.RecordingSinkConnector"
GOOD = 40


class Recorder:
    """A Metrics that keeps every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float, dict[str, str]]] = []

    def incr(self, name: str, count: int, tags: Mapping[str, str]) -> None:
        self.calls.append(("incr", name, count, dict(tags)))

    def gauge(self, name: str, value: float, tags: Mapping[str, str]) -> None:
        self.calls.append(("gauge", name, value, dict(tags)))

    def timing(self, name: str, ms: float, tags: Mapping[str, str]) -> None:
        self.calls.append(("timing", name, ms, dict(tags)))

    def total(self, name: str, **tags: str) -> float:
        return sum(v for kind, n, v, t in self.calls if kind == "incr" and n == name
                   and all(t.get(k) == w for k, w in tags.items()))

    def gauges(self, name: str) -> list[tuple[float, dict[str, str]]]:
        return [(v, t) for kind, n, v, t in self.calls if kind == "gauge" and n == name]


def lines_source(tmp_path: Path) -> dict[str, Any]:
    """A directory source of GOOD JSON lines and one line that is not JSON (string values)."""
    d = tmp_path / "in"
    d.mkdir()
    body = [json.dumps({"id": i}) for i in range(GOOD // 2)] + ["not json"] + \
        [json.dumps({"id": i}) for i in range(GOOD // 2, GOOD)]
    (d / "a.txt").write_text("\n".join(body) + "\n")
    return {"name": "lines", "connector.class": "connect_runtime.connectors.files.DirectorySource",
            "directory": str(d), "topic": "ev", "format": "text", "batch.size": "10", "file.final.ms": "0",
            "value.converter": "connect_runtime.converters.StringConverter", "poll.idle.timeout.ms": "100"}


def sink_config(tmp_path: Path, **extra: str) -> dict[str, Any]:
    return {"name": "rec", "connector.class": RECORDING_SINK, "topics": "ev", "log.path": str(tmp_path / "s.log"),
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "ev-dlq",
            "consumer.max.poll.records": "10", "offset.flush.interval.ms": "0", **extra}


def test_a_source_and_a_sink_run_send_what_they_did(tmp_path: Path, sqlite_url: str) -> None:
    src_metrics, sink_metrics = Recorder(), Recorder()
    src = run_source(lines_source(tmp_path), sqlite_url, metrics=src_metrics)
    assert src.records == GOOD + 1
    tags = {"connector": "lines", "task": "0"}
    assert src_metrics.total("source-record-poll-total", **tags) == GOOD + 1
    assert src_metrics.total("source-record-write-total", topic="ev", **tags) == GOOD + 1
    assert src_metrics.total("offset-commit-completion-total") == src.transactions == 5
    assert src_metrics.total("offset-commit-failure-total") == 0
    sizes = {n: [v for v, _ in src_metrics.gauges(f"transaction-size-{n}")] for n in ("min", "max", "avg")}
    assert sizes == {"min": [1], "max": [10], "avg": [(GOOD + 1) / 5]}

    sink = run_sink(sink_config(tmp_path, **{"put.retriable.times": "2", "precommit.fail.times": "1"}), sqlite_url,
                    until_offsets=src, metrics=sink_metrics)
    m = sink_metrics
    tags = {"connector": "rec", "task": "0"}
    # the failed pre_commit rewound the first put's 10 records: delivered again, and counted again (as the result)
    assert sink.records == GOOD + 10 and sink.dead_lettered == 1 and sink.retries == 2
    assert m.total("sink-record-send-total", **tags) == sink.records
    errors = m.total("total-record-errors", **tags)
    assert errors == m.total("total-records-skipped", **tags) == 1
    assert m.total("sink-record-read-total", **tags) == sink.records + errors  # every record read: sent or an error
    assert m.total("total-retries", **tags) == sink.retries
    assert m.total("offset-commit-failure-total", **tags) == 1
    assert m.total("offset-commit-completion-total", **tags) >= 1
    assert m.total("deadletterqueue-produce-requests", **tags) == sink.dead_lettered
    assert m.total("deadletterqueue-produce-failures") == 0
    assert m.gauges("sink-record-lag") == [(0, {**tags, "topic": "ev", "partition": "0"})]
    assert m.gauges("sink-record-lag-max") == [(0, tags)]
    assert {n for _, n, _, _ in src_metrics.calls + m.calls} <= set(METRIC_NAMES)


def test_the_lag_at_the_end_is_the_target_minus_what_was_committed(tmp_path: Path, sqlite_url: str) -> None:
    src = run_source(lines_source(tmp_path), sqlite_url)
    m = Recorder()
    sink = run_sink(sink_config(tmp_path), sqlite_url, until_offsets=src, max_records=15, metrics=m)
    committed = sink.committed["ev"]["0"]
    assert committed < GOOD + 1
    assert m.gauges("sink-record-lag-max") == [(GOOD + 1 - committed, {"connector": "rec", "task": "0"})]
    # a sink that keeps its offsets in its destination (pre_commit returns {}): what its last pre_commit was given
    m = Recorder()
    again = run_sink(sink_config(tmp_path, **{"precommit.empty": "true", "name": "dest"}), sqlite_url,
                     until_offsets=src, metrics=m)
    assert again.committed == {} and again.records == GOOD
    assert m.gauges("sink-record-lag-max") == [(0, {"connector": "dest", "task": "0"})]
    assert m.total("offset-commit-skip-total") >= 1 and m.total("offset-commit-completion-total") == 0


def test_no_metrics_by_default_and_nothing_kept(tmp_path: Path, sqlite_url: str) -> None:
    src = run_source(lines_source(tmp_path), sqlite_url)  # metrics=None
    assert src.records == GOOD + 1
    task = TaskMetrics(None, "c", 0)
    assert task.sink is NO_METRICS and not task.enabled
    task.add("sink-record-read-total", 5)
    task.flush(force=True)
    assert task.counts == {} and task.topic_counts == {}


class Broken(Recorder):
    def incr(self, name: str, count: int, tags: Mapping[str, str]) -> None:
        raise OSError("statsd is down")


def test_a_metrics_sink_that_raises_never_fails_a_run(tmp_path: Path, sqlite_url: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="connect_runtime.metrics"):
        src = run_source(lines_source(tmp_path), sqlite_url, metrics=Broken())
    assert src.records == GOOD + 1
    warned = [r for r in caplog.records if r.name == "connect_runtime.metrics"]
    assert len(warned) == 1 and "statsd is down" in warned[0].getMessage()


def test_task_metrics_count_per_batch_and_send_at_flush() -> None:
    m = Recorder()
    task = TaskMetrics(m, "c", 3, every_s=3600)
    task.add("source-record-poll-total", 10)
    task.add("source-record-poll-total", 0)
    task.add("source-record-poll-total", 5)
    task.add_spans("source-record-write-total", [(TopicPartition("a", 0), (0, 7)), (TopicPartition("a", 1), (3, 4)),
                                                 (TopicPartition("b", 0), (10, 12))])
    assert m.calls == []  # nothing sent before the commit point
    task.flush()
    assert m.calls == []  # nor before every_s passed since the task started (or its last send)
    task.flush(force=True)
    tags = {"connector": "c", "task": "3"}
    assert sorted(m.calls, key=str) == sorted([
        ("incr", "source-record-poll-total", 15, tags),
        ("incr", "source-record-write-total", 8, {**tags, "topic": "a"}),
        ("incr", "source-record-write-total", 2, {**tags, "topic": "b"})], key=str)
    task.flush(force=True)
    assert len(m.calls) == 3  # nothing counted since: nothing sent
    task.send_transaction_sizes()
    assert len(m.calls) == 3  # no transaction: no size
    for n in (4, 1, 7):
        task.transaction(n)
    task.send_transaction_sizes()
    assert m.calls[3:] == [("gauge", "transaction-size-min", 1, tags), ("gauge", "transaction-size-max", 7, tags),
                           ("gauge", "transaction-size-avg", 4.0, tags)]
    task.commit_done(0.002)
    task.commit_done(0.004)
    task.commit_failed()
    task.flush(force=True)
    assert sorted(m.calls[6:], key=str) == sorted([
        ("incr", "offset-commit-completion-total", 2, tags), ("incr", "offset-commit-failure-total", 1, tags),
        ("gauge", "offset-commit-max-time-ms", 4.0, tags), ("gauge", "offset-commit-avg-time-ms", 3.0, tags)], key=str)


# -- progress lines ----------------------------------------------------------------------------------


def test_progress_lines_are_at_most_one_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    counter = iter(range(1000))
    log = ProgressLog("source", "c", 10.0, lambda: next(counter) * 100, lambda: "7 committed", started=0.0)
    with caplog.at_level(logging.INFO, logger="connect_runtime.runtime.progress"):
        for now in (0.0, 5.0, 9.99):
            log.tick(now)
        assert caplog.messages == []  # a run shorter than the interval logs nothing
        for now in (10.0, 10.05, 19.9, 20.0, 20.1, 35.0, 36.0):
            log.tick(now)
    assert caplog.messages == [
        "progress: source connector 'c': 0 records in 10.0 s (0 records/s); 7 committed",
        "progress: source connector 'c': 100 records in 20.0 s (5 records/s); 7 committed",
        "progress: source connector 'c': 200 records in 35.0 s (6 records/s); 7 committed",
    ]
    off = ProgressLog("sink", "c", 0.0, lambda: 1, started=0.0)
    with caplog.at_level(logging.INFO, logger="connect_runtime.runtime.progress"):
        off.tick(1e9)
    assert off.lines == 0


def test_a_slow_sink_run_logs_progress_with_its_lag(tmp_path: Path, sqlite_url: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """Each put sleeps 40 ms and takes 2 records: the run lasts at least 21 puts (0.84 s), more than the 200 ms
    interval, so it logs at least one line, and never more than one per interval."""
    src = run_source(lines_source(tmp_path), sqlite_url)
    config = sink_config(tmp_path, **{"put.sleep.ms": "40", "consumer.max.poll.records": "2",
                                      "progress.interval.ms": "200"})
    t0 = time.monotonic()
    with caplog.at_level(logging.INFO, logger="connect_runtime.runtime.progress"):
        run_sink(config, sqlite_url, until_offsets=src)
    elapsed = time.monotonic() - t0
    lines = [m for m in caplog.messages if m.startswith("progress: ")]
    assert 1 <= len(lines) <= elapsed / 0.2 + 1, (elapsed, lines)
    pattern = (r"progress: sink connector 'rec': (\d+) records in [\d.]+ s \([\d,]+ records/s\); "
               r"(\d+) records left to the target")
    for line in lines:
        match = re.fullmatch(pattern, line)
        assert match, line
        assert int(match[1]) <= GOOD and int(match[2]) <= GOOD + 1


@pytest.mark.parametrize("value", ["-1", "often"])
def test_progress_interval_is_validated(tmp_path: Path, sqlite_url: str, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        run_source({**lines_source(tmp_path), "progress.interval.ms": value}, sqlite_url)
    assert "progress.interval.ms" in str(err.value)
    with pytest.raises(ConfigError) as err:
        run_sink({**sink_config(tmp_path), "progress.interval.ms": value}, sqlite_url)
    assert "progress.interval.ms" in str(err.value)


def test_every_metric_name_is_kafka_connects_or_says_why() -> None:
    # names Kafka Connect has as they are; our additions are its percentages and averages as counters and timers
    ours = {"offset-commit-failure-total", "sink-record-lag"}
    assert set(METRIC_NAMES) - ours == set(METRIC_NAMES) & KAFKA_CONNECT_NAMES


KAFKA_CONNECT_NAMES = {
    "source-record-poll-total", "source-record-write-total", "sink-record-read-total", "sink-record-send-total",
    "offset-commit-completion-total", "offset-commit-skip-total", "offset-commit-max-time-ms",
    "offset-commit-avg-time-ms", "transaction-size-min", "transaction-size-max",
    "transaction-size-avg", "total-retries", "total-record-errors", "total-records-skipped",
    "deadletterqueue-produce-requests", "deadletterqueue-produce-failures", "sink-record-lag-max",
}
"""Task metrics of Kafka Connect 4.4.0's ConnectMetricsRegistry (the ones this runtime sends)."""
