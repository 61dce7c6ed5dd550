"""One worker task: the thread that runs one connector task (Kafka Connect's ``WorkerTask``).

:meth:`WorkerTask.run` is the thread body, written once as a template::

    initialize_and_start()   create the clients (producer / consumer, offset store, pipeline), create the
                             connector's task, initialize(context) and start(config) it
    execute()                the direction's loop until the run stops or ends, and its final commit
    on_failure(exc)          any exception from the two steps above (default: the run's failure, RunState.fail)
    close()                  ALWAYS, after success or failure: stop the connector's task if it started,
                             abort what is open, close the clients; an exception here is passed to on_failure
    closed()                 ALWAYS, last: e.g. send the task's last metrics (connect_runtime.metrics); never raises

The source direction (:mod:`connect_runtime.runtime.source`) fills these in for its poll -> send -> commit
loop (exactly-once and at-least-once subclasses differ only in their commit hooks); the sink direction
(:mod:`connect_runtime.runtime.sink`) for its poll -> put -> pre_commit -> group commit loop.

``__init__`` acquires nothing (no I/O, no clients): a task that is never started (the run failed while its
tasks were being started) is dropped without :meth:`run` or :meth:`close`.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod

from connect_runtime.runtime.supervisor import RunState


class WorkerTask(ABC):
    """The base of both directions' worker tasks; subclasses fill in the three abstract steps."""

    def __init__(self, state: RunState, index: int) -> None:
        self.state = state
        self.index = index
        """The task's number in the run (its ``task_configs`` position; a fan-out task keeps its plan's)."""

    @property
    def thread_name(self) -> str:
        """The name of the task's thread (logs, thread dumps)."""
        return f"{self.state.name}-task-{self.index}"

    @property
    def stuck_name(self) -> str:
        """How :class:`~connect_runtime.runtime.supervisor.TasksStuck` names this task."""
        return self.thread_name

    def thread(self) -> threading.Thread:
        """A daemon thread running :meth:`run` (a stuck task must not keep the process alive)."""
        return threading.Thread(target=self.run, name=self.thread_name, daemon=True)

    # -- the template ------------------------------------------------------------------------------
    def run(self) -> None:
        """The thread body: start, execute, always close; every failure goes to :meth:`on_failure`."""
        try:
            self.initialize_and_start()
            self.execute()
        except BaseException as exc:  # a thread body: a failure must reach the run, never die with the thread
            self.on_failure(exc)
        finally:
            try:
                self.close()
            except BaseException as exc:  # a thread body, as above: e.g. the connector task's stop() raised
                self.on_failure(exc)
            finally:
                self.closed()

    # -- hooks -------------------------------------------------------------------------------------
    @abstractmethod
    def initialize_and_start(self) -> None:
        """Create the clients and the connector's task; ``initialize(context)``, then ``start(config)``."""

    @abstractmethod
    def execute(self) -> None:
        """The loop, until the run stops or the task's work is done, then the task's final commit."""

    @abstractmethod
    def close(self) -> None:
        """Called after :meth:`execute` returned or failed (or :meth:`initialize_and_start` failed): stop the
        connector's task if it started, abort anything open, close the clients. Must cope with a task that got
        only partly started."""

    def closed(self) -> None:
        """After :meth:`close`, whatever happened (e.g. the task's last metrics, the lag at its end). Must not
        raise."""

    def on_failure(self, exc: BaseException) -> None:
        """A step raised: by default the run fails with ``exc`` (the first failure is the run's error)."""
        self.state.fail(exc)


__all__ = ["WorkerTask"]
