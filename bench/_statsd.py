"""``--metrics`` for the benchmarks: a run's metrics sent as an operator's run sends them, through Airflow's ``Stats``
(``[metrics] statsd_on``) to a StatsD listener on a local UDP port that counts the packets it receives."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def statsd_metrics() -> Iterator[tuple[Any, list[int]]]:
    """``(metrics, received)``: a :class:`~airflow_pyconnect.metrics.StatsMetrics` over Airflow's Stats sending
    StatsD (legacy names on, Airflow's default) to a local listener, and a one-element list counting its packets
    (read once the block ended)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    received = [0]
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                received[0] += sock.recv(65535).count(b"\n") + 1
            except TimeoutError:
                continue

    os.environ.update({"AIRFLOW__METRICS__STATSD_ON": "True", "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
                       "AIRFLOW__METRICS__STATSD_PORT": str(sock.getsockname()[1])})
    from airflow.sdk.observability.metrics import stats_utils
    from airflow.sdk.observability.stats import Stats

    from airflow_pyconnect.metrics import StatsMetrics

    Stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=True)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield StatsMetrics({"dag_id": "bench", "task_id": "bench"}), received
    finally:
        done.set()
        reader.join(5)  # bounded: the socket's timeout wakes the reader every 0.2 s
        sock.close()


def per_commit_cost(metrics: Any, commits: int = 5000) -> float:
    """Seconds one commit point of an exactly-once source task spends on its metrics (the counts of one batch,
    the write spans of one topic, the completion and its time: what ``ExactlyOnceTask.completed`` sends), timed
    over ``commits`` commit points in a row: a figure the machine's noise hardly moves, unlike a whole run's."""
    from connect_runtime.api.records import TopicPartition
    from connect_runtime.metrics import SOURCE_RECORD_POLL_TOTAL, SOURCE_RECORD_WRITE_TOTAL, TaskMetrics

    task = TaskMetrics(metrics, "bench", 0)
    spans = [(TopicPartition("bench", 0), (0, 1000))]
    t0 = time.perf_counter()
    for _ in range(commits):
        task.add(SOURCE_RECORD_POLL_TOTAL, 1000)
        task.add_spans(SOURCE_RECORD_WRITE_TOTAL, spans)
        task.transaction(1000)
        task.commit_done(0.001)
        task.flush()
    return (time.perf_counter() - t0) / commits
