"""The supervisor (runtime/supervisor.py) and the task thread template (runtime/task.py), without a connector or
a broker: tasks that end, fail or hang past the grace, the progress cadence, the generation heartbeat."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from itertools import pairwise

import pytest

from connect_runtime.runtime import supervisor
from connect_runtime.runtime.supervisor import RunState, TasksStuck, supervise
from connect_runtime.runtime.task import WorkerTask


class Task(WorkerTask):
    """A worker task that records its steps; ``work`` is its execute()."""

    def __init__(self, state: RunState, index: int, work: float | Exception | threading.Event = 0.0) -> None:
        super().__init__(state, index)
        self.work = work
        self.steps: list[str] = []

    def initialize_and_start(self) -> None:
        self.steps.append("start")

    def execute(self) -> None:
        self.steps.append("execute")
        if isinstance(self.work, Exception):
            raise self.work
        if isinstance(self.work, threading.Event):
            self.work.wait(10)  # a task that ignores the run's stop
        else:
            time.sleep(self.work)

    def close(self) -> None:
        self.steps.append("close")


def started(*tasks: WorkerTask) -> list[threading.Thread]:
    threads = [t.thread() for t in tasks]
    for t in threads:
        t.start()
    return threads


def test_tasks_that_end_end_the_supervision() -> None:
    state = RunState("c", None)
    tasks = [Task(state, 0), Task(state, 1, 0.05)]
    supervise(state, started(*tasks), 1.0, kind="source")
    assert not state.failed and not state.stop.is_set()
    assert [t.steps for t in tasks] == [["start", "execute", "close"]] * 2


def test_a_failing_task_fails_the_run_and_is_closed() -> None:
    state = RunState("c", None)
    boom = ValueError("boom")
    tasks = [Task(state, 0, boom), Task(state, 1)]
    supervise(state, started(*tasks), 1.0, kind="sink")
    assert state.error is boom
    assert state.stop.is_set() and "boom" in state.stop_reason
    assert tasks[0].steps == ["start", "execute", "close"]


def test_a_failing_close_fails_the_run() -> None:
    class BadClose(Task):
        def close(self) -> None:
            raise RuntimeError("close failed")

    state = RunState("c", None)
    supervise(state, started(BadClose(state, 0)), 1.0, kind="source")
    assert isinstance(state.error, RuntimeError)


def test_the_first_failure_is_the_runs_error() -> None:
    state = RunState("c", None)
    first, second = ValueError("first"), ValueError("second")
    state.fail(first)
    state.fail(second)
    assert state.error is first


def test_a_task_stuck_past_the_grace_fails_the_run_naming_it() -> None:
    state = RunState("conn", None)
    hang = threading.Event()
    tasks = [Task(state, 0), Task(state, 7, hang)]
    threads = started(*tasks)
    try:
        state.request_stop("every task is idle")
        t0 = time.monotonic()
        with pytest.raises(TasksStuck) as caught:
            supervise(state, threads, 0.2, kind="source", names_of=lambda t: f"<{t.name}>")
        assert time.monotonic() - t0 < 2
    finally:
        hang.set()
    message = str(caught.value)
    assert "<conn-task-7>" in message and "conn-task-0" not in message
    assert "task.shutdown.graceful.timeout.ms=200" in message and "every task is idle" in message
    assert state.error is caught.value


def test_the_deadline_stops_the_run_and_starts_the_grace() -> None:
    state = RunState("c", time.monotonic() + 0.1)
    hang = threading.Event()
    threads = started(Task(state, 0, hang))
    try:
        with pytest.raises(TasksStuck, match="max_seconds reached"):
            supervise(state, threads, 0.1, kind="source")
    finally:
        hang.set()
    assert state.stop_reason == "max_seconds reached"


def test_an_external_stop_stops_the_run() -> None:
    state = RunState("c", None)
    state.external_stop = threading.Event()
    state.external_stop.set()
    done = threading.Event()

    class UntilStopped(Task):
        def execute(self) -> None:
            self.state.stop.wait(5)
            done.set()

    supervise(state, started(UntilStopped(state, 0)), 1.0, kind="source")
    assert done.is_set() and "stop requested" in state.stop_reason and not state.failed


def test_progress_is_reported_at_its_cadence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "PROGRESS_EVERY", 0.1)
    state = RunState("c", None)
    calls: list[float] = []
    supervise(state, started(Task(state, 0, 0.55)), 1.0, kind="source",
              progress=lambda: calls.append(time.monotonic()))
    assert 3 <= len(calls) <= 6
    assert all(b - a >= 0.09 for a, b in pairwise(calls))


def test_a_failing_progress_callback_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "PROGRESS_EVERY", 0.01)
    state = RunState("c", None)

    def progress() -> None:
        raise OSError("stdout closed")

    class UntilStopped(Task):
        def execute(self) -> None:
            self.state.stop.wait(5)

    supervise(state, started(UntilStopped(state, 0)), 1.0, kind="source", progress=progress)
    assert isinstance(state.error, OSError)


def test_the_generation_heartbeat_is_written_with_the_topics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "HEARTBEAT_SECONDS", 0.1)

    class Generation:
        def __init__(self) -> None:
            self.beats: list[list[str]] = []

        def heartbeat(self, topics: Sequence[str] = ()) -> None:
            self.beats.append(list(topics))

    state = RunState("c", None)
    generation = Generation()
    supervise(state, started(Task(state, 0, 0.45)), 1.0, kind="source", generation=generation,
              topics=lambda: ["a", "b"])
    assert 2 <= len(generation.beats) <= 5
    assert all(b == ["a", "b"] for b in generation.beats)


def test_a_heartbeat_that_does_not_return_never_holds_the_supervisor(monkeypatch: pytest.MonkeyPatch) -> None:
    """A store that does not answer (a broker restarting) holds the heartbeat, one at a time, never the loop:
    the run ends when its tasks end, with that heartbeat still inside its call."""
    monkeypatch.setattr(supervisor, "HEARTBEAT_SECONDS", 0.01)
    release = threading.Event()

    class Generation:
        def __init__(self) -> None:
            self.calls = 0
            self.returned = False

        def heartbeat(self, topics: Sequence[str] = ()) -> None:
            self.calls += 1
            release.wait(5)  # bounded, so the test's thread ends whatever happens
            self.returned = True

    state = RunState("c", None)
    generation = Generation()
    try:
        supervise(state, started(Task(state, 0, 0.3)), 1.0, kind="source", generation=generation)
        assert generation.calls == 1, "a second heartbeat started while the first was still in its call"
        assert not generation.returned, "the supervisor waited for the heartbeat's call to return"
    finally:
        release.set()
