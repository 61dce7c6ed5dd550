"""Supervision of one run's task threads (Kafka Connect's ``Worker`` watching its ``WorkerTask`` threads).

- :class:`RunState` is the stop/fail/deadline state every run and its task threads share; the first failure
  is the run's error, later ones are logged;
- :func:`supervise` waits for the task threads, enforcing ``max_seconds`` and an external stop, reporting
  progress, writing the generation's heartbeat, and failing the run with :class:`TasksStuck` when tasks do
  not stop within ``task.shutdown.graceful.timeout.ms`` after the run stopped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from connect_runtime.api.errors import WaitTimeoutError
from connect_runtime.runtime.registry import HEARTBEAT_SECONDS

log = logging.getLogger(__name__)

PROGRESS_EVERY = 5.0
"""Seconds between two ``progress`` callbacks (plus one at the end)."""


class RunState:
    """Stop, failure and deadline of one run, shared by the main thread and the task threads."""

    deadline_stops = True
    """Whether passing the deadline stops the run through :meth:`request_stop` (a source run: its tasks
    then commit their last boundary). A sink run's tasks watch the deadline themselves and make their
    final commit; its ``stop`` event means "abort", so it sets this to False."""

    def __init__(self, name: str, deadline: float | None) -> None:
        self.name = name
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.stop_reason = ""
        self.stop_at: float | None = None
        self.deadline = deadline
        self.error: BaseException | None = None
        self.external_stop: threading.Event | None = None

    def request_stop(self, reason: str) -> None:
        with self.lock:
            self._stop_locked(reason)

    def _stop_locked(self, reason: str) -> None:
        if not self.stop.is_set():
            self.stop_reason = reason
            self.stop_at = time.monotonic()
            self.stop.set()

    def fail(self, exc: BaseException) -> None:
        with self.lock:
            if self.error is None:
                self.error = exc
            elif exc is not self.error:
                log.warning("connector %s: a further failure after the first one: %r", self.name, exc)
            self._stop_locked(f"failure: {exc!r}")

    @property
    def failed(self) -> bool:
        return self.error is not None

    def past_deadline(self, now: float | None = None) -> bool:
        return self.deadline is not None and (time.monotonic() if now is None else now) >= self.deadline


class Heartbeat(Protocol):
    """What :func:`supervise` needs of a run's generation (:class:`~connect_runtime.runtime.worker.Generation`)."""

    def heartbeat(self, topics: Sequence[str] = ()) -> None: ...


class TasksStuck(WaitTimeoutError):
    """Tasks did not stop within ``task.shutdown.graceful.timeout.ms`` after the run stopped."""


def supervise(state: RunState, threads: Sequence[threading.Thread], grace: float, *, kind: str,
              progress: Callable[[], None] | None = None, generation: Heartbeat | None = None,
              topics: Callable[[], Sequence[str]] | None = None,
              names_of: Callable[[threading.Thread], str] = lambda t: t.name,
              tick: Callable[[float], None] | None = None) -> None:
    """Wait for the task threads. Meanwhile: ``max_seconds`` (the state's deadline) and an external stop
    stop the run; ``progress()`` every :data:`PROGRESS_EVERY` s; the registry heartbeat every
    :data:`HEARTBEAT_SECONDS` s; ``tick(now)`` at every turn of the loop (the progress lines,
    :class:`~connect_runtime.runtime.progress.ProgressLog`); and once the run stopped, tasks that do not finish within ``grace``
    seconds fail it with :class:`TasksStuck` naming them (they are abandoned and can commit nothing:
    a later run fences them)."""
    next_progress = time.monotonic() + PROGRESS_EVERY
    next_heartbeat = time.monotonic() + HEARTBEAT_SECONDS
    beating: threading.Thread | None = None
    while True:
        alive = [t for t in threads if t.is_alive()]
        if not alive:
            return
        alive[0].join(0.05)
        now = time.monotonic()
        if state.deadline_stops and state.past_deadline(now):
            state.request_stop("max_seconds reached")
        if state.external_stop is not None and state.external_stop.is_set():
            state.request_stop("stop requested (e.g. the Airflow task was killed)")
        if tick is not None:
            try:
                tick(now)
            except Exception as exc:  # a progress line is for the log: it never fails the run
                log.warning("connector %s: a progress line failed: %r", state.name, exc)
                tick = None
        if progress is not None and now >= next_progress:
            next_progress = now + PROGRESS_EVERY
            try:
                progress()
            except Exception as exc:
                state.fail(exc)
        # once the run failed its tasks only unwind: a heartbeat would wait on the store that may have failed it.
        # A heartbeat runs on a thread of its own, one at a time: a store that does not answer (a broker
        # restarting) holds that thread for its read bound, never this loop (max_seconds, stop, stuck tasks)
        if generation is not None and now >= next_heartbeat and not state.failed and (
                beating is None or not beating.is_alive()):
            next_heartbeat = now + HEARTBEAT_SECONDS
            beating = threading.Thread(target=generation.heartbeat, args=(topics() if topics is not None else (),),
                                       name=f"{state.name}-heartbeat", daemon=True)
            beating.start()
        stop_at, reason = state.stop_at, state.stop_reason
        if state.deadline is not None and state.deadline <= now and (stop_at is None or state.deadline < stop_at):
            stop_at, reason = state.deadline, "max_seconds reached"
        if stop_at is not None and now - stop_at > grace:
            names = ", ".join(names_of(t) for t in threads if t.is_alive())
            stuck = TasksStuck(
                f"{kind} connector {state.name!r}: tasks {names} did not commit and stop within "
                f"task.shutdown.graceful.timeout.ms={grace * 1000:.0f} after the run stopped ({reason}); "
                f"they were abandoned and can commit nothing more")
            state.fail(stuck)
            raise stuck


__all__ = ["PROGRESS_EVERY", "Heartbeat", "RunState", "TasksStuck", "supervise"]
