"""The one lifecycle of a bounded connector run, both directions (Kafka Connect's ``Worker`` starting a
connector and its tasks, bounded).

:class:`ConnectorRun` is a template method. :meth:`ConnectorRun.execute` runs the steps in this order::

    validate()                        config checked, every bad field named in one ConfigError; sets ``state``
    open the backend                  (a URL is opened here and closed at the end; an open Backend is left open)
    begin_generation()                register the run's generation, fence the previous one (fencing.py)
    run_connector():
        start_connector()             connector.initialize(context), connector.start(props)
        repeat:                       (KIP-131: once per request_task_reconfiguration(), at most max_replans)
            plan_tasks()              connector.task_configs(tasks.max)
            create_tasks(configs)     one WorkerTask per config (task.py); nothing is acquired yet
            run_tasks(tasks):
                tasks_starting(tasks) e.g. record the task count in the registry before any task starts
                start the threads     (no more once the run failed)
                supervise             max_seconds, external stop, progress (lines every progress.interval.ms,
                                      progress.py), heartbeat, TasksStuck (supervisor.py)
            until reconfiguration_requested() is False, the run failed, or out_of_bounds()
        stop_connector()              ALWAYS once start_connector() returned, also after a failure
        the run's first failure (state.error) is raised here
    finish(failed)                    record the generation's end in the registry (also when a step failed; the
                                      failure as explain(exc) words it, e.g. naming the generation that fenced it)
    result()                          what the run committed (only when nothing failed)
    release()                         ALWAYS: close what the run opened, then the backend it opened

:meth:`ConnectorRun.plan` is the fan-out's first half with the same steps: validate, open, begin_generation,
start_connector, plan_tasks, stop_connector (``finish(exc)`` on a failure), then ``planned(configs)``, release.

Each direction (``runtime/source``, ``runtime/sink``) subclasses it and fills in the hooks; none re-implements
the order. Hooks with a default here are optional.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from connect_runtime.backends import open_backend
from connect_runtime.backends.base import Backend
from connect_runtime.metrics import Metrics
from connect_runtime.runtime.progress import ProgressLog
from connect_runtime.runtime.supervisor import RunState, TasksStuck, supervise
from connect_runtime.runtime.task import WorkerTask
from connect_runtime.runtime.worker import Generation

log = logging.getLogger(__name__)

MAX_REPLANS = 100
"""How many times one run plans tasks again after ``request_task_reconfiguration()``."""

R = TypeVar("R")


class ConnectorRun(ABC, Generic[R]):
    """One bounded run of one connector; ``R`` is the direction's result type. See the module docstring."""

    kind: ClassVar[str] = ""
    """``"source"`` or ``"sink"``: in log lines and :class:`TasksStuck` messages."""

    max_replans: ClassVar[int] = MAX_REPLANS

    state: RunState
    """Set by :meth:`validate`: the run's stop/fail/deadline state, shared with its task threads."""

    def __init__(self, backend: str | Backend, backend_settings: Mapping[str, Any] | None = None, *,
                 progress: Callable[[int, float], None] | None = None, stop: threading.Event | None = None,
                 metrics: Metrics | None = None) -> None:
        self.t0 = time.monotonic()
        self.backend_arg = backend
        self.backend_settings = backend_settings
        self.progress = progress
        """``progress(records_so_far, seconds)``: called by :meth:`report_progress` (every ~5 s and at the end)."""
        self.external_stop = stop
        self.metrics = metrics
        """Where the tasks send their metrics (:mod:`~connect_runtime.metrics`); None: nowhere."""
        self.progress_log: ProgressLog | None = None
        self.owns_backend = not isinstance(backend, Backend)
        self._backend: Backend | None = None
        self.generation: Generation | None = None

    @property
    def backend(self) -> Backend:
        assert self._backend is not None, "the backend is opened after validate()"
        return self._backend

    # -- templates ---------------------------------------------------------------------------------
    def execute(self) -> R:
        """The whole bounded run, in the order of the module docstring."""
        self.validate()
        self.state.external_stop = self.external_stop
        self.progress_log = ProgressLog(self.kind, self.state.name, self.progress_interval_s(), self.records_so_far,
                                        self.progress_detail, started=self.t0)
        self.open_backend()
        try:
            self.generation = self.begin_generation()
            try:
                self.run_connector()
            except BaseException as exc:  # recorded as the generation's end, then raised to the caller
                failed = self.explain(exc)
                self.finish(failed)
                if failed is exc:
                    raise
                raise failed from exc
            self.finish(None)
            return self.result()
        finally:
            self.release()

    def plan(self) -> list[dict[str, str]]:
        """Fan-out, first half: a new generation and its task configs, no task started."""
        self.validate()
        self.open_backend()
        try:
            self.generation = self.begin_generation()
            try:
                self.start_connector()
                try:
                    configs = self.plan_tasks()
                finally:
                    self.stop_connector()
                if self.state.error is not None:
                    raise self.state.error
            except BaseException as exc:  # recorded as the generation's end, then raised to the caller
                self.finish(exc)
                raise
            self.planned(configs)
            return configs
        finally:
            self.release()

    def run_connector(self) -> None:
        """Start the connector, plan and run tasks (again on a reconfiguration request), always stop it."""
        self.start_connector()
        try:
            replans = 0
            while not self.state.failed:
                configs = self.plan_tasks()
                if configs:
                    self.run_tasks(self.create_tasks(configs))
                if self.state.failed or not self.reconfiguration_requested() or self.out_of_bounds():
                    break
                replans += 1
                if replans > self.max_replans:
                    log.warning("connector %s: still requesting task reconfiguration after %d replans; ending the run",
                                self.state.name, self.max_replans)
                    break
                log.info("connector %s requested task reconfiguration: planning tasks again (%d)",
                         self.state.name, replans)
        except BaseException as exc:  # the run's first failure, raised below once the connector stopped
            self.state.fail(exc)
        finally:
            self.stop_connector()
        if self.state.error is not None:
            raise self.state.error

    def run_tasks(self, tasks: Sequence[WorkerTask]) -> None:
        """Start one thread per task and supervise them until they all ended."""
        self.tasks_starting(tasks)
        threads: list[threading.Thread] = []
        names: dict[int, str] = {}
        for task in tasks:
            if self.state.failed:  # stop starting tasks after the first failure
                break
            thread = task.thread()
            names[id(thread)] = task.stuck_name
            threads.append(thread)
            thread.start()
        try:
            supervise(self.state, threads, self.shutdown_grace(), kind=self.kind,
                      progress=None if self.progress is None else self.report_progress,
                      generation=self.generation, topics=self.topics,
                      names_of=lambda t: names.get(id(t), t.name),
                      tick=None if self.progress_log is None else self.progress_log.tick)
        except TasksStuck:
            raise
        except BaseException as exc:  # e.g. the process is being told to stop: let the tasks abort first
            self.interrupted(exc, threads)
            raise

    def open_backend(self) -> None:
        self._backend = open_backend(self.backend_arg, self.backend_settings)

    # -- hooks every direction fills in ----------------------------------------------------------------
    @abstractmethod
    def validate(self) -> None:
        """Check the config (one ConfigError naming every bad field), create the connector, set :attr:`state`."""

    @abstractmethod
    def begin_generation(self) -> Generation | None:
        """Register this run's generation and fence the previous one (:mod:`connect_runtime.runtime.fencing`)."""

    @abstractmethod
    def start_connector(self) -> None:
        """``connector.initialize(context)`` and ``connector.start(props)``. A failure here is raised at once
        (the connector is not stopped: it did not start)."""

    @abstractmethod
    def plan_tasks(self) -> list[dict[str, str]]:
        """``connector.task_configs(tasks.max)``, checked."""

    @abstractmethod
    def create_tasks(self, configs: list[dict[str, str]]) -> list[WorkerTask]:
        """One worker task per task config (nothing acquired yet: that is the task's ``initialize_and_start``)."""

    @abstractmethod
    def shutdown_grace(self) -> float:
        """Seconds tasks get to stop once the run stopped (``task.shutdown.graceful.timeout.ms``)."""

    @abstractmethod
    def stop_connector(self) -> None:
        """``connector.stop()``; called once :meth:`start_connector` returned, also after a failure. A failure
        that should fail the run is recorded with ``state.fail``; this method should not raise."""

    @abstractmethod
    def finish(self, failed: BaseException | None) -> None:
        """Record the generation's end in the registry (bookkeeping: must not hide the run's own outcome)."""

    @abstractmethod
    def result(self) -> R:
        """What the run did, once it ended without failure."""

    # -- optional hooks ------------------------------------------------------------------------------
    def tasks_starting(self, tasks: Sequence[WorkerTask]) -> None:
        """Before the tasks of one round start (e.g. record the task count, so a successor fences them all)."""

    def report_progress(self) -> None:
        """Call :attr:`progress` with the records so far (only called when :attr:`progress` is set)."""

    def progress_interval_s(self) -> float:
        """Seconds between two progress lines (``progress.interval.ms``, validated); 0: none."""
        return 0.0

    def records_so_far(self) -> int:
        """The records of the progress line (read from the supervisor's thread, without a lock)."""
        return 0

    def progress_detail(self) -> str:
        """The progress line's tail (what was committed, a sink's lag to its target), or ``""``."""
        return ""

    def topics(self) -> Sequence[str]:
        """Topics the run wrote or read so far (the registry heartbeat keeps them)."""
        return ()

    def reconfiguration_requested(self) -> bool:
        """Whether the connector asked for task reconfiguration (KIP-131) during the round that just ended."""
        return False

    def out_of_bounds(self) -> bool:
        """Whether the run's bounds (max_records, max_seconds) are reached: no replanning then."""
        return False

    def interrupted(self, exc: BaseException, threads: Sequence[threading.Thread]) -> None:
        """Supervision was interrupted (e.g. ``KeyboardInterrupt``): fail the run and give the tasks the grace
        to abort before ``exc`` propagates."""
        self.state.fail(exc)
        deadline = time.monotonic() + self.shutdown_grace()
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def explain(self, exc: BaseException) -> BaseException:
        """The run's failure as the caller should see it (e.g. a fencing that names the newer generation); the
        default: ``exc`` itself."""
        return exc

    def planned(self, configs: list[dict[str, str]]) -> None:
        """:meth:`plan` only: the task configs of the new generation are known (record them)."""

    def release(self) -> None:
        """Close what the run opened; the base closes the backend if the run opened it. Extend with super()."""
        if self.owns_backend and self._backend is not None:
            self._backend.close()


__all__ = ["MAX_REPLANS", "ConnectorRun"]
