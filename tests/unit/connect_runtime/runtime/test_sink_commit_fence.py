"""The sink's commit fence (runtime/fencing.SinkCommitFence) closing while a task commits through it.

A task abandoned after ``TasksStuck`` can still be inside a commit when the run ends and closes the fence. Closing
a Kafka client while another thread is inside a call on it is a use after free in librdkafka, so the fence's
producer must outlive the commit in flight: the committing thread closes it when its commit returns, and the task
commits nothing after the run ended. A fake backend stands in for Kafka (a backend whose commits cannot check the
generation)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from connect_runtime.api.records import TopicPartition
from connect_runtime.backends.base import Capabilities
from connect_runtime.runtime.errors import Stopped
from connect_runtime.runtime.fencing import SinkCommitFence


class FakeProducer:
    def __init__(self, gate: threading.Event | None) -> None:
        self.gate = gate
        self.inside = threading.Event()
        self.calls: list[str] = []
        self.closed_while_inside = False
        self._in_call = False

    def init_transactions(self, timeout: float) -> None:
        self.calls.append("init")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def commit_transaction(self, offsets: Any, timeout: float, extra: Any = None) -> None:
        self._in_call = True
        self.inside.set()
        try:
            if self.gate is not None:
                assert self.gate.wait(10), "the test never opened the gate"
            self.calls.append("commit")
        finally:
            self._in_call = False

    def close(self) -> None:
        self.closed_while_inside |= self._in_call
        self.calls.append("close")


class FakeBackend:
    capabilities = Capabilities()  # like Kafka: commits cannot check the generation
    cluster_id = "c"

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.producers: list[FakeProducer] = []
        self.gate = gate

    def transactional_producer(self, tid: str, store: str) -> FakeProducer:
        self.producers.append(FakeProducer(self.gate))
        return self.producers[-1]


OFFSETS = {TopicPartition("t", 0): 10}


def _fence(backend: FakeBackend) -> SinkCommitFence:
    fence = SinkCommitFence(backend, "sink", generation=3, timeout_s=5.0)  # type: ignore[arg-type]
    fence.begin()
    return fence


def test_a_close_during_a_commit_leaves_the_producer_to_the_committing_task() -> None:
    gate = threading.Event()
    backend = FakeBackend(gate)
    fence = _fence(backend)
    (producer,) = backend.producers
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            fence.commit(0, OFFSETS)
        except BaseException as exc:
            errors.append(exc)

    task = threading.Thread(target=commit)
    task.start()
    assert producer.inside.wait(5)
    fence.close()  # returns at once: the commit is in flight
    assert "close" not in producer.calls
    gate.set()
    task.join(5)
    assert not task.is_alive() and errors == []
    assert producer.calls == ["init", "begin", "commit", "close"]  # closed once its commit returned
    assert not producer.closed_while_inside
    with pytest.raises(Stopped, match="commits nothing more"):
        fence.commit(0, OFFSETS)  # the run ended: no new fence, no commit
    assert len(backend.producers) == 1


def test_a_close_between_commits_closes_the_producer_at_once() -> None:
    backend = FakeBackend()
    fence = _fence(backend)
    fence.commit(0, OFFSETS)
    fence.close()
    (producer,) = backend.producers
    assert producer.calls == ["init", "begin", "commit", "close"]
    fence.close()  # twice is harmless
    assert producer.calls.count("close") == 1
