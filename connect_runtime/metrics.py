"""A run's metrics, named as Kafka Connect names its task metrics (``ConnectMetricsRegistry``), sent to whatever
:class:`Metrics` the caller gives the run (the Airflow provider forwards them to Airflow's ``Stats``; the default,
:data:`NO_METRICS`, drops them). The runtime imports no metrics library.

The worker tasks count per batch (plain integer additions, :class:`TaskMetrics`) and send what they counted at a
commit point at most every :data:`FLUSH_EVERY_S` seconds, and at the task's end: never per record, and a task
whose transactions are small (a commit per poll of a few records) sends no more than one that commits rarely.
Every metric carries the tags ``connector`` and ``task`` (the Kafka Connect task id); per-topic and per-partition
ones add ``topic`` and ``partition``. The names, their types and their Kafka Connect counterparts are listed in docs/operations.md:

==============================================  =======  ========================================================
name                                            type     when
==============================================  =======  ========================================================
``source-record-poll-total``                  counter  records ``poll()`` returned (within ``max_records``)
``source-record-write-total``                 counter  records committed, per ``topic``
``sink-record-read-total``                    counter  records consumed (up to the run's targets)
``sink-record-send-total``                    counter  records handed to a ``put`` that succeeded
``offset-commit-completion-total``            counter  commits that completed (a source transaction or offset
                                                       flush; a sink group commit)
``offset-commit-skip-total``                  counter  sink commit points with nothing to commit
``offset-commit-failure-total``               counter  commits (or a sink's ``pre_commit``) that failed
``offset-commit-max-time-ms`` / ``-avg-...``     gauge    the longest and the mean commit since the last send
``transaction-size-min`` / ``-max`` / ``-avg``  gauge    records per committed transaction (exactly-once source),
                                                       at the task's end
``total-retries``                             counter  ``put`` calls redelivered after a ``RetriableError``
``total-record-errors``                       counter  records that failed conversion, a transform, or that the
                                                       task reported (``errors.tolerance=all``)
``total-records-skipped``                     counter  the same records: skipped (and dead-lettered when a topic
                                                       is set)
``deadletterqueue-produce-requests``          counter  records written to the dead letter topic (once flushed)
``deadletterqueue-produce-failures``          counter  dead letters whose flush failed
``sink-record-lag``                           gauge    per ``topic``/``partition`` at the task's end: the run's
                                                       target minus the committed offset
``sink-record-lag-max``                       gauge    the largest of those, per task
==============================================  =======  ========================================================

A :class:`Metrics` that raises never fails a run: the error is logged once per task and the metric dropped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Protocol

from connect_runtime.api.records import TopicPartition

log = logging.getLogger(__name__)

SOURCE_RECORD_POLL_TOTAL = "source-record-poll-total"
SOURCE_RECORD_WRITE_TOTAL = "source-record-write-total"
SINK_RECORD_READ_TOTAL = "sink-record-read-total"
SINK_RECORD_SEND_TOTAL = "sink-record-send-total"
OFFSET_COMMIT_COMPLETION_TOTAL = "offset-commit-completion-total"
OFFSET_COMMIT_SKIP_TOTAL = "offset-commit-skip-total"
OFFSET_COMMIT_FAILURE_TOTAL = "offset-commit-failure-total"
OFFSET_COMMIT_MAX_TIME_MS = "offset-commit-max-time-ms"
OFFSET_COMMIT_AVG_TIME_MS = "offset-commit-avg-time-ms"
TRANSACTION_SIZE_MIN = "transaction-size-min"
TRANSACTION_SIZE_MAX = "transaction-size-max"
TRANSACTION_SIZE_AVG = "transaction-size-avg"
TOTAL_RETRIES = "total-retries"
TOTAL_RECORD_ERRORS = "total-record-errors"
TOTAL_RECORDS_SKIPPED = "total-records-skipped"
DLQ_PRODUCE_REQUESTS = "deadletterqueue-produce-requests"
DLQ_PRODUCE_FAILURES = "deadletterqueue-produce-failures"
SINK_RECORD_LAG = "sink-record-lag"
SINK_RECORD_LAG_MAX = "sink-record-lag-max"

METRIC_NAMES = (
    SOURCE_RECORD_POLL_TOTAL, SOURCE_RECORD_WRITE_TOTAL, SINK_RECORD_READ_TOTAL, SINK_RECORD_SEND_TOTAL,
    OFFSET_COMMIT_COMPLETION_TOTAL, OFFSET_COMMIT_SKIP_TOTAL, OFFSET_COMMIT_FAILURE_TOTAL, OFFSET_COMMIT_MAX_TIME_MS,
    OFFSET_COMMIT_AVG_TIME_MS,
    TRANSACTION_SIZE_MIN, TRANSACTION_SIZE_MAX, TRANSACTION_SIZE_AVG, TOTAL_RETRIES, TOTAL_RECORD_ERRORS,
    TOTAL_RECORDS_SKIPPED, DLQ_PRODUCE_REQUESTS, DLQ_PRODUCE_FAILURES, SINK_RECORD_LAG, SINK_RECORD_LAG_MAX,
)
"""Every metric a run sends (the names above)."""

FLUSH_EVERY_S = 1.0
"""A task sends what it counted at most this often (at a commit point), and once more at its end."""


class Metrics(Protocol):
    """Where a run's metrics go. Called from task threads (each task at most once a second per metric, and at its
    end; never per record); an implementation must be thread-safe and should not block. The runtime sends counters
    and gauges; ``timing`` completes the protocol (StatsD's third kind): the runtime sends no timer today."""

    def incr(self, name: str, count: int, tags: Mapping[str, str]) -> None:
        """Add ``count`` to the counter ``name``."""

    def gauge(self, name: str, value: float, tags: Mapping[str, str]) -> None:
        """Set the gauge ``name`` to ``value``."""

    def timing(self, name: str, ms: float, tags: Mapping[str, str]) -> None:
        """Record that ``name`` took ``ms`` milliseconds."""


class NoMetrics:
    """The default :class:`Metrics`: drops everything."""

    def incr(self, name: str, count: int, tags: Mapping[str, str]) -> None:
        pass

    def gauge(self, name: str, value: float, tags: Mapping[str, str]) -> None:
        pass

    def timing(self, name: str, ms: float, tags: Mapping[str, str]) -> None:
        pass


NO_METRICS = NoMetrics()


class TaskMetrics:
    """One worker task's metrics: counts (records, commits, errors) are added per batch or commit (:meth:`add`, an
    integer addition) and sent by :meth:`flush`, at most every ``every_s`` seconds unless forced (the task's end);
    transaction sizes and the lag are sent at the task's end. Used from the task's own thread only."""

    def __init__(self, metrics: Metrics | None, connector: str, task: int, every_s: float = FLUSH_EVERY_S) -> None:
        self.sink = NO_METRICS if metrics is None else metrics
        self.enabled = not isinstance(self.sink, NoMetrics)
        self.tags = {"connector": connector, "task": str(task)}
        self.every_s = every_s
        self.counts: dict[str, int] = {}
        self.topic_counts: dict[tuple[str, str], int] = {}
        self.commit_s_sum = self.commit_s_max = 0.0
        self.commits = 0  # completed since the last send (their times)
        self.txn_count = self.txn_sum = 0
        self.txn_min = self.txn_max = 0
        self._sent_at = time.monotonic()
        self._warned = False

    def add(self, name: str, n: int) -> None:
        """Count ``n`` for ``name`` (sent at the next :meth:`flush`)."""
        if n:
            counts = self.counts
            counts[name] = counts.get(name, 0) + n

    def add_spans(self, name: str, spans: Iterable[tuple[TopicPartition, tuple[int, int]]]) -> None:
        """Count committed offset spans ``[from, to)`` per topic for ``name`` (once per commit)."""
        tc = self.topic_counts
        for tp, (first, end) in spans:
            key = (name, tp[0])
            tc[key] = tc.get(key, 0) + (end - first)

    def flush(self, force: bool = False) -> None:
        """Send what was counted since the last send, if ``every_s`` passed since it (or ``force``)."""
        if not force and time.monotonic() - self._sent_at < self.every_s:
            return
        self._sent_at = time.monotonic()
        counts, topic_counts, commits = self.counts, self.topic_counts, self.commits
        if not (counts or topic_counts or commits):
            return
        self.counts, self.topic_counts = {}, {}
        self.commits, s_sum, s_max = 0, self.commit_s_sum, self.commit_s_max
        self.commit_s_sum = self.commit_s_max = 0.0
        if not self.enabled:
            return
        for name, n in counts.items():
            self._send("incr", name, n, self.tags)
        for (name, topic), n in topic_counts.items():
            self._send("incr", name, n, {**self.tags, "topic": topic})
        if commits:
            self._send("gauge", OFFSET_COMMIT_MAX_TIME_MS, s_max * 1000, self.tags)
            self._send("gauge", OFFSET_COMMIT_AVG_TIME_MS, s_sum / commits * 1000, self.tags)

    def commit_done(self, seconds: float) -> None:
        """A commit completed in ``seconds``."""
        self.add(OFFSET_COMMIT_COMPLETION_TOTAL, 1)
        self.commits += 1
        self.commit_s_sum += seconds
        self.commit_s_max = max(self.commit_s_max, seconds)

    def commit_failed(self) -> None:
        self.add(OFFSET_COMMIT_FAILURE_TOTAL, 1)

    def commit_skipped(self) -> None:
        self.add(OFFSET_COMMIT_SKIP_TOTAL, 1)

    def transaction(self, records: int) -> None:
        """A transaction of ``records`` committed (its size is summarised by :meth:`send_transaction_sizes`)."""
        if self.txn_count == 0:
            self.txn_min = self.txn_max = records
        else:
            self.txn_min = min(self.txn_min, records)
            self.txn_max = max(self.txn_max, records)
        self.txn_count += 1
        self.txn_sum += records

    def send_transaction_sizes(self) -> None:
        """``transaction-size-min/max/avg`` over the transactions this task committed (none: nothing sent)."""
        if self.enabled and self.txn_count:
            self._send("gauge", TRANSACTION_SIZE_MIN, self.txn_min, self.tags)
            self._send("gauge", TRANSACTION_SIZE_MAX, self.txn_max, self.tags)
            self._send("gauge", TRANSACTION_SIZE_AVG, self.txn_sum / self.txn_count, self.tags)

    def send_lag(self, lag: Mapping[TopicPartition, int]) -> None:
        """``sink-record-lag`` per partition and ``sink-record-lag-max`` (only for a task that has partitions)."""
        if not self.enabled or not lag:
            return
        for tp, n in sorted(lag.items()):
            self._send("gauge", SINK_RECORD_LAG, n, {**self.tags, "topic": tp[0], "partition": str(tp[1])})
        self._send("gauge", SINK_RECORD_LAG_MAX, max(lag.values()), self.tags)

    def _send(self, kind: str, name: str, value: float, tags: Mapping[str, str]) -> None:
        try:
            getattr(self.sink, kind)(name, value, tags)
        except Exception as exc:  # metrics never fail a run
            if not self._warned:
                self._warned = True
                log.warning("connector %s task %s: sending metric %s failed (%s: %s); further failures are not "
                            "logged", self.tags["connector"], self.tags["task"], name, type(exc).__name__, exc)


def elapsed(since: float) -> float:
    """Seconds since ``since`` (a :func:`time.perf_counter` instant)."""
    return time.perf_counter() - since


__all__ = [
    "DLQ_PRODUCE_FAILURES",
    "DLQ_PRODUCE_REQUESTS",
    "FLUSH_EVERY_S",
    "METRIC_NAMES",
    "NO_METRICS",
    "OFFSET_COMMIT_AVG_TIME_MS",
    "OFFSET_COMMIT_COMPLETION_TOTAL",
    "OFFSET_COMMIT_FAILURE_TOTAL",
    "OFFSET_COMMIT_MAX_TIME_MS",
    "OFFSET_COMMIT_SKIP_TOTAL",
    "SINK_RECORD_LAG",
    "SINK_RECORD_LAG_MAX",
    "SINK_RECORD_READ_TOTAL",
    "SINK_RECORD_SEND_TOTAL",
    "SOURCE_RECORD_POLL_TOTAL",
    "SOURCE_RECORD_WRITE_TOTAL",
    "TOTAL_RECORDS_SKIPPED",
    "TOTAL_RECORD_ERRORS",
    "TOTAL_RETRIES",
    "TRANSACTION_SIZE_AVG",
    "TRANSACTION_SIZE_MAX",
    "TRANSACTION_SIZE_MIN",
    "Metrics",
    "NoMetrics",
    "TaskMetrics",
    "elapsed",
]
