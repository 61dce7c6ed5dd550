"""The sink's commit fence (runtime/fencing.SinkCommitFence) closing while a task commits through it, and a
fanned-out task's try refused a new fence once a newer try of its task started.

A task abandoned after ``TasksStuck`` can still be inside a commit when the run ends and closes the fence. Closing
a Kafka client while another thread is inside a call on it is a use after free in librdkafka, so the fence's
producer must outlive the commit in flight: the committing thread closes it when its commit returns, and the task
commits nothing after the run ended. A fake backend stands in for Kafka (a backend whose commits cannot check the
generation)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.api.errors import ProducerFencedError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import open_backend
from connect_runtime.backends.base import Capabilities
from connect_runtime.runtime.errors import Stopped
from connect_runtime.runtime.fencing import SinkCommitFence, begin_generation, join_generation
from connect_runtime.runtime.registry import ATTEMPTS_KEPT, Registry


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


# -- a fanned-out try whose fence failed is not given a new one once a newer try of its task started -------------
# (its fence id is the task's: a new fence of the older try would fence the newer try back; check_newest reads
# the registry's ``workers``, real here on a SQLite file)

def _joined(backend: Any, name: str, generation: int, index: int) -> dict[str, Any]:
    record = join_generation(backend, name, "", generation, index)
    return [w for w in record.workers if w.get("task") == index][-1]


def _try_fence(backend: Any, name: str, generation: int, task: int, start: dict[str, Any]) -> SinkCommitFence:
    fence = SinkCommitFence(backend, name, generation, 5.0, task)
    fence.try_start = start
    return fence


def test_a_newer_try_of_the_task_fences_the_older_try_and_no_sibling(tmp_path: Path) -> None:
    with open_backend(f"sqlite:///{tmp_path / 'r.db'}") as backend:
        gen = begin_generation(backend, "fan", kind="sink", connector_class="x").number
        older = _try_fence(backend, "fan", gen, 0, _joined(backend, "fan", gen, 0))
        sibling = _try_fence(backend, "fan", gen, 1, _joined(backend, "fan", gen, 1))
        older.check_newest()  # no newer try: a new fence may be started
        newer = _try_fence(backend, "fan", gen, 0, _joined(backend, "fan", gen, 0))
        with pytest.raises(ProducerFencedError, match=r"a newer try of task 0 started .*fenced"):
            older.check_newest()
        newer.check_newest()
        sibling.check_newest()


def test_a_try_whose_start_left_the_registry_list_is_judged_by_the_starts_clocks(tmp_path: Path) -> None:
    with open_backend(f"sqlite:///{tmp_path / 'r.db'}") as backend:
        gen = begin_generation(backend, "fan", kind="sink", connector_class="x").number
        start = _joined(backend, "fan", gen, 0)
        first = _try_fence(backend, "fan", gen, 0, start)
        for i in range(1, ATTEMPTS_KEPT + 1):  # the siblings' starts push task 0's out of the kept list
            _joined(backend, "fan", gen, i)
        entry = Registry(backend).get("fan")
        assert entry is not None and start not in entry.workers
        first.check_newest()  # no start of task 0 after it: not fenced
        while int(time.time() * 1000) <= int(start["started"]):  # the next start's clock is past it
            time.sleep(0.001)
        _joined(backend, "fan", gen, 0)
        with pytest.raises(ProducerFencedError, match="a newer try of task 0"):
            first.check_newest()
