"""The connector lifecycle (runtime/lifecycle.py) with a fake connector run that records every step: the order of
validate, begin generation, start, plan, tasks, stop, finish and result; stop and finish also when a task or a
step fails; replanning on request_task_reconfiguration (KIP-131); the fan-out's plan()."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

from connect_runtime.backends.base import Backend
from connect_runtime.runtime.lifecycle import ConnectorRun
from connect_runtime.runtime.supervisor import RunState
from connect_runtime.runtime.task import WorkerTask
from connect_runtime.runtime.worker import Generation


class Task(WorkerTask):
    def __init__(self, run: FakeRun, index: int, config: dict[str, str]) -> None:
        super().__init__(run.state, index)
        self.run_ = run
        self.config = config

    def initialize_and_start(self) -> None:
        self.run_.record(f"task {self.index} start")

    def execute(self) -> None:
        self.run_.record(f"task {self.index} execute")
        if self.config.get("fail"):
            raise ValueError(f"task {self.index} failed")

    def close(self) -> None:
        self.run_.record(f"task {self.index} close")


class FakeRun(ConnectorRun[dict[str, Any]]):
    """Records every hook call in ``calls``; ``rounds`` are the task configs each plan_tasks() returns."""

    kind = "source"

    def __init__(self, backend: str | Backend, rounds: Sequence[list[dict[str, str]]] = ([{}],), *,
                 replan: int = 0, fail_in: str = "") -> None:
        super().__init__(backend)
        self.rounds = list(rounds)
        self.replan = replan
        self.fail_in = fail_in
        self.calls: list[Any] = []
        self.lock = threading.Lock()

    def record(self, call: Any) -> None:
        with self.lock:
            self.calls.append(call)

    def step(self, name: str) -> None:
        self.record(name)
        if self.fail_in == name:
            raise RuntimeError(f"{name} failed")

    def main_calls(self) -> list[Any]:
        return [c for c in self.calls if not (isinstance(c, str) and c.startswith("task "))]

    def validate(self) -> None:
        self.step("validate")
        self.state = RunState("fake", None)

    def begin_generation(self) -> Generation | None:
        self.step("begin_generation")
        return None

    def start_connector(self) -> None:
        self.step("start_connector")

    def plan_tasks(self) -> list[dict[str, str]]:
        self.step("plan_tasks")
        return self.rounds.pop(0) if len(self.rounds) > 1 else self.rounds[0]

    def create_tasks(self, configs: list[dict[str, str]]) -> list[WorkerTask]:
        self.record(("create_tasks", len(configs)))
        return [Task(self, i, c) for i, c in enumerate(configs)]

    def tasks_starting(self, tasks: Sequence[WorkerTask]) -> None:
        self.step("tasks_starting")

    def shutdown_grace(self) -> float:
        return 1.0

    def reconfiguration_requested(self) -> bool:
        if self.replan > 0:
            self.replan -= 1
            return True
        return False

    def stop_connector(self) -> None:
        self.record("stop_connector")

    def finish(self, failed: BaseException | None) -> None:
        self.record(("finish", None if failed is None else str(failed)))

    def planned(self, configs: list[dict[str, str]]) -> None:
        self.record(("planned", len(configs)))

    def result(self) -> dict[str, Any]:
        self.step("result")
        return {"ok": True}

    def release(self) -> None:
        self.record("release")
        super().release()


def test_the_order_of_a_run(sqlite_url: str) -> None:
    run = FakeRun(sqlite_url, [[{}, {}]])
    assert run.execute() == {"ok": True}
    assert run.main_calls() == ["validate", "begin_generation", "start_connector", "plan_tasks", ("create_tasks", 2),
                                "tasks_starting", "stop_connector", ("finish", None), "result", "release"]
    for i in (0, 1):
        assert [c for c in run.calls if c in (f"task {i} start", f"task {i} execute", f"task {i} close")] == [
            f"task {i} start", f"task {i} execute", f"task {i} close"]
    # every task ran between tasks_starting and stop_connector
    assert run.calls.index("tasks_starting") < min(run.calls.index(f"task {i} start") for i in (0, 1))
    assert run.calls.index("stop_connector") > max(run.calls.index(f"task {i} close") for i in (0, 1))


def test_a_failing_task_still_stops_the_connector_and_finishes_the_generation(sqlite_url: str) -> None:
    run = FakeRun(sqlite_url, [[{"fail": "yes"}]])
    with pytest.raises(ValueError, match="task 0 failed"):
        run.execute()
    assert run.main_calls() == ["validate", "begin_generation", "start_connector", "plan_tasks", ("create_tasks", 1),
                                "tasks_starting", "stop_connector", ("finish", "task 0 failed"), "release"]
    assert "task 0 close" in run.calls


@pytest.mark.parametrize("step", ["plan_tasks", "tasks_starting"])
def test_a_failing_step_after_the_start_stops_the_connector(sqlite_url: str, step: str) -> None:
    run = FakeRun(sqlite_url, fail_in=step)
    with pytest.raises(RuntimeError, match=f"{step} failed"):
        run.execute()
    calls = run.main_calls()
    assert calls[-3:] == ["stop_connector", ("finish", f"{step} failed"), "release"]
    assert not any(isinstance(c, str) and c.startswith("task ") for c in run.calls)


def test_a_connector_that_fails_to_start_is_not_stopped(sqlite_url: str) -> None:
    run = FakeRun(sqlite_url, fail_in="start_connector")
    with pytest.raises(RuntimeError, match="start_connector failed"):
        run.execute()
    assert run.main_calls() == ["validate", "begin_generation", "start_connector",
                                ("finish", "start_connector failed"), "release"]


def test_an_invalid_config_opens_nothing(sqlite_url: str) -> None:
    run = FakeRun(sqlite_url, fail_in="validate")
    with pytest.raises(RuntimeError, match="validate failed"):
        run.execute()
    assert run.main_calls() == ["validate"]


def test_no_task_configs_runs_no_task(sqlite_url: str) -> None:
    run = FakeRun(sqlite_url, [[]])
    assert run.execute() == {"ok": True}
    assert run.main_calls() == ["validate", "begin_generation", "start_connector", "plan_tasks", "stop_connector",
                                ("finish", None), "result", "release"]


def test_reconfiguration_plans_and_runs_tasks_again(sqlite_url: str) -> None:
    run = FakeRun(sqlite_url, [[{}], [{}, {}, {}]], replan=1)
    run.execute()
    assert [c for c in run.main_calls() if c == "plan_tasks" or isinstance(c, tuple)] == [
        "plan_tasks", ("create_tasks", 1), "plan_tasks", ("create_tasks", 3), ("finish", None)]
    assert run.calls.count("start_connector") == 1 and run.calls.count("stop_connector") == 1
    assert run.calls.count("task 0 execute") == 2 and run.calls.count("task 2 execute") == 1


def test_replanning_is_bounded(sqlite_url: str) -> None:
    class Bounded(FakeRun):
        max_replans = 2

    run = Bounded(sqlite_url, replan=10)
    run.execute()
    assert run.calls.count("plan_tasks") == 3


def test_no_replanning_after_a_failure(sqlite_url: str) -> None:
    run = FakeRun(sqlite_url, [[{"fail": "yes"}]], replan=5)
    with pytest.raises(ValueError):
        run.execute()
    assert run.calls.count("plan_tasks") == 1


def test_the_fan_outs_plan_starts_no_task(sqlite_url: str) -> None:
    run = FakeRun(sqlite_url, [[{}, {}]])
    assert run.plan() == [{}, {}]
    assert run.main_calls() == ["validate", "begin_generation", "start_connector", "plan_tasks", "stop_connector",
                                ("planned", 2), "release"]


def test_the_backend_a_run_opens_is_closed_an_open_one_is_left_open(sqlite_url: str) -> None:
    from connect_runtime.backends import open_backend

    run = FakeRun(sqlite_url)
    run.execute()
    assert run.owns_backend
    backend = open_backend(sqlite_url)
    try:
        shared = FakeRun(backend)
        shared.execute()
        assert not shared.owns_backend and shared.backend is backend
        backend.offset_store(None).close()  # still usable
    finally:
        backend.close()
