"""An unreachable Kafka cluster is reported in a few lines, not one per client per retry (issue 25: 65 identical
lines for one unreachable broker). librdkafka's log line and the error callback of the same event count once."""

from __future__ import annotations

import logging
import socket

import pytest

from connect_runtime import run_source
from connect_runtime.api.errors import BackendUnavailableError
from connect_runtime.backends.kafka import _logs


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_cluster_is_reported_in_a_few_lines(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="connect_runtime.backends.kafka")
    url = f"kafka://127.0.0.1:{_closed_port()}"
    config = {"name": "dg", "connector.class": "connect_runtime.connectors.datagen.DataGenSource", "topic": "t",
              "max.records": "5"}
    with pytest.raises(BackendUnavailableError, match="could not be reached"):
        run_source(config, url, backend_settings={"connect.timeout.ms": 3000})
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("connect_runtime.backends.kafka")
             and r.levelno >= logging.WARNING]
    refused = [line for line in lines if "Connection refused" in line]
    assert len(refused) == 1, lines  # librdkafka's line and the error callback's are one event
    assert len(lines) <= 3, lines


def test_a_repeated_event_is_logged_again_after_the_interval_saying_how_many_were_left_out(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    quiet = _logs._Quiet()
    logger = logging.getLogger("test.quiet")
    caplog.set_level(logging.INFO, logger="test.quiet")
    now = [100.0]
    monkeypatch.setattr(_logs.time, "monotonic", lambda: now[0])
    for i in range(5):  # the same event: timings and client numbers differ
        quiet.emit(logger, logging.WARNING, f"b:9092/1: Connect failed (after {i}ms in state CONNECT)",
                   f"[pyconnect#producer-{i}] b:9092/1: Connect failed (after {i}ms in state CONNECT)")
    quiet.emit(logger, logging.WARNING, "another event", "another event")
    now[0] += quiet.INTERVAL + 1
    quiet.emit(logger, logging.WARNING, "b:9092/1: Connect failed (after 7ms in state CONNECT)", "again")
    assert [r.getMessage() for r in caplog.records] == [
        "[pyconnect#producer-0] b:9092/1: Connect failed (after 0ms in state CONNECT)", "another event",
        f"again (4 more like it in the last {quiet.INTERVAL:g} s left out)"]
