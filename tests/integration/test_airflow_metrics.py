"""The runtime's metrics through Airflow's ``Stats`` to a real StatsD listener (a UDP socket in the test), under a
real ``airflow dags test`` of a source and a sink with one bad record going to the dead letter topic: names,
tags (as legacy name segments: plain StatsD has none) and values checked against what the run did (its XComs).
"""

from __future__ import annotations

import json
import socket
import threading
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support.airflow_env import AirflowEnv, conn_env, shared_airflow_env

pytestmark = pytest.mark.airflow

GOOD = 40


@pytest.fixture(scope="module")
def af(tmp_path_factory: pytest.TempPathFactory) -> AirflowEnv:
    return shared_airflow_env(tmp_path_factory)


class StatsdListener:
    """A StatsD server: every datagram received on a local UDP port, kept as ``name|type -> [values]``."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.packets: list[str] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)

    def _read(self) -> None:
        while not self.done.is_set():
            try:
                data = self.sock.recv(65535)
            except TimeoutError:
                continue
            self.packets.extend(data.decode().splitlines())

    def __enter__(self) -> StatsdListener:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join(5)  # bounded: the socket's timeout wakes the reader every 0.2 s
        self.sock.close()

    def metrics(self) -> dict[tuple[str, str], list[float]]:
        out: dict[tuple[str, str], list[float]] = defaultdict(list)
        for line in self.packets:
            name, _, rest = line.partition(":")
            value, _, kind = rest.partition("|")
            out[(name, kind.split("|")[0])].append(float(value))
        return out


def test_metrics_reach_statsd_with_kafka_connect_names_and_values(af: AirflowEnv, tmp_path: Path) -> None:
    lines = tmp_path / "in"
    lines.mkdir()
    # one line that is not JSON: the sink's JsonConverter fails on it and it goes to the dead letter topic
    body = [json.dumps({"id": i}) for i in range(GOOD // 2)] + ["not json"] + \
        [json.dumps({"id": i}) for i in range(GOOD // 2, GOOD)]
    (lines / "a.txt").write_text("\n".join(body) + "\n")
    url = f"sqlite:///{tmp_path / 'm.db'}"
    out = tmp_path / "out.json"
    with StatsdListener() as statsd:
        env = {**conn_env("pyconnect_test", url), "PYCONNECT_TEST_OUT": str(out),
               "PYCONNECT_TEST_SINK_LOG": str(tmp_path / "sink.log"), "PYCONNECT_TEST_DIR": str(lines),
               "AIRFLOW__METRICS__STATSD_ON": "True", "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
               "AIRFLOW__METRICS__STATSD_PORT": str(statsd.port), "AIRFLOW__METRICS__STATSD_PREFIX": "pctest"}
        run = af.airflow("dags", "test", "pyconnect_test_metrics", "2026-03-04", extra_env=env)
    xcoms = json.loads(out.read_text())
    src, sink = xcoms["src"], xcoms["sink"]
    assert src["records"] == GOOD + 1 and sink["records"] == GOOD and sink["dead_lettered"] == 1
    m = statsd.metrics()
    assert m, "no StatsD packet arrived"

    def total(name: str, kind: str = "c") -> float:
        return sum(m.get((f"pctest.pyconnect.{name}", kind), []))

    def legacy(name: str, *segments: str, kind: str = "c") -> list[float]:
        return m.get((".".join(["pctest.pyconnect", name, *segments]), kind), [])

    # the tagged names (tags dropped by plain StatsD) add up to what the run did
    assert total("source-record-poll-total") == src["records"]
    assert total("source-record-write-total") == src["records"]
    assert total("sink-record-read-total") == GOOD + 1
    assert total("sink-record-send-total") == sink["records"]
    assert total("deadletterqueue-produce-requests") == sink["dead_lettered"] == 1
    assert total("total-record-errors") == 1 and total("total-records-skipped") == 1
    assert total("total-retries") == sink["retries"] == 0
    assert total("offset-commit-completion-total") >= 2  # at least one commit of each
    assert total("offset-commit-failure-total") == 0
    assert m[("pctest.pyconnect.offset-commit-max-time-ms", "g")]
    # source: one transaction per poll batch of 10 lines (exactly-once, transaction.boundary=poll)
    assert m[("pctest.pyconnect.transaction-size-max", "g")] == [10.0]
    assert m[("pctest.pyconnect.transaction-size-min", "g")] == [1.0]  # 41 lines: the last batch holds one

    # the legacy names carry connector, task, topic (and partition) as segments, as ti.finish.<dag>.<task>.<state>
    assert sum(legacy("source-record-poll-total", "metrics-src", "0")) == src["records"]
    assert sum(legacy("source-record-write-total", "metrics-src", "0", "metrics-events")) == src["records"]
    assert sum(legacy("sink-record-send-total", "metrics-sink", "0")) == sink["records"]
    assert sum(legacy("deadletterqueue-produce-requests", "metrics-sink", "0")) == 1
    # the lag at the end of the sink run: every record up to the source's ranges committed
    assert legacy("sink-record-lag", "metrics-sink", "0", "metrics-events", "0", kind="g") == [0.0]
    assert legacy("sink-record-lag-max", "metrics-sink", "0", kind="g") == [0.0]
    assert m[("pctest.pyconnect.sink-record-lag-max", "g")] == [0.0]
    assert sink["committed"] == {"metrics-events": {"0": GOOD + 1}}

    # the runtime's progress lines reach the task log (5 puts of 100 ms: the run outlasts progress.interval.ms)
    progress = [line for line in (run.stdout + run.stderr).splitlines()
                if "progress: sink connector 'metrics-sink':" in line]
    assert progress and all("records left to the target" in line for line in progress), run.stdout[-3000:]
