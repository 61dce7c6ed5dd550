"""One sink task in its own thread (Kafka Connect's ``WorkerSinkTask``): create, ``initialize``, ``start``,
``open(partitions)``, then the poll → convert/transform → ``put`` loop up to each partition's target, commit
points in between (:mod:`~connect_runtime.runtime.sink.commits`), and at the end the final commit,
``close(partitions)`` and ``stop()``. Retries and dead letters are :mod:`connect_runtime.runtime.errors`'.

Commit points: every ``offset.flush.interval.ms`` (``0``: after every ``put``), after a ``put`` during which the
task called ``context.request_commit()``, and once at the end of the run. A rewind (``context.offset``) asked for
in ``pre_commit`` takes effect before the next poll, the final commit's too: the loop goes on from there when it
is below the partition's target (KIP-275's ``is_closing()`` is then true again at the next final commit).

Pause: ``context.pause(tp)`` stops polling ``tp`` until ``context.resume(tp)``. While every partition a task
still has to read is paused, the task gets ``put([])`` about every 50 ms (as Kafka Connect delivers empty
batches) so it can resume them; if they stay paused longer than ``pause.timeout.ms`` (default 5 min) the run
fails with a :class:`WaitTimeoutError` naming them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from connect_runtime.api.errors import BackendUnavailableError, ConnectError, WaitTimeoutError
from connect_runtime.api.records import SinkRecord, TopicPartition
from connect_runtime.api.sink import SinkTask
from connect_runtime.backends.base import ConsumedRecord, Consumer
from connect_runtime.metrics import (
    SINK_RECORD_READ_TOTAL,
    SINK_RECORD_SEND_TOTAL,
    TOTAL_RETRIES,
    TaskMetrics,
)
from connect_runtime.runtime.errors import DeadLetters, ErrantReporter, Stopped, put_with_retries
from connect_runtime.runtime.pipeline import SinkPipeline, gc_paused
from connect_runtime.runtime.sink.commits import TaskCommits
from connect_runtime.runtime.sink.contexts import TaskContext
from connect_runtime.runtime.sink.planning import TaskPositions
from connect_runtime.runtime.task import WorkerTask
from connect_runtime.runtime.worker import record_bytes

if TYPE_CHECKING:
    from connect_runtime.runtime.sink.run import SinkRunState

log = logging.getLogger(__name__)

_POLL_TIMEOUT_S = 1.0
_PAUSED_IDLE_S = 0.05
_JOIN_LOG_S = 30.0


def _account(task: SinkWorkerTask, batch: list[ConsumedRecord], processed: Any) -> None:
    """A delivered batch in the task's totals: its records, their bytes (keys and values as stored in the topics,
    dead letters not counted) and the value schema of its last record per topic (the run's lineage)."""
    task.records += len(processed.records)
    task.bytes += record_bytes(batch, 3, 4) - record_bytes([r for r, _ in processed.dead], 3, 4)
    newest = processed.records[-1] if processed.records else None
    if newest is not None and newest.value_schema is not None:
        task.schemas[newest.topic] = newest.value_schema


class SinkWorkerTask(WorkerTask):
    """Runs one sink task in its own thread (see the module docstring for the loop)."""

    state: SinkRunState

    def __init__(self, run: SinkRunState, task_id: int, task_config: dict[str, str],
                 partitions: list[TopicPartition], pipeline: SinkPipeline) -> None:
        super().__init__(run, task_id)
        self.task_id = task_id
        self.task_config = task_config
        self.assigned = partitions
        self.assigned_set = set(partitions)
        self.pipeline = pipeline
        self.label = f"sink connector {run.name!r} task {task_id}"
        self.records = self.bytes = self.retries = 0  # bytes: see _account
        self.schemas: dict[str, Any] = {}  # per topic, the value schema of the last record delivered with one
        self.consumer: Consumer | None = None
        self.task: SinkTask | None = None
        self.metrics = TaskMetrics(run.metrics, run.name, task_id)
        self.dead_letters = DeadLetters(
            run.backend, pipeline, topic=run.dlq_topic, tolerate_all=run.tolerate_all, log_errors=run.log_errors,
            log_messages=run.log_messages, flush_timeout_s=run.flush_timeout_s, label=self.label,
            metrics=self.metrics)
        self.commits = TaskCommits(self)
        self.ctx = TaskContext(self, task_config, ErrantReporter(self.dead_letters))
        self.positions = TaskPositions(partitions, self.label)
        self.pos = self.positions.pos
        self._target = self.positions.target
        self.ran = False
        """Whether the thread ran (a task never started leaves its pipeline to the run to close)."""
        self._started = False
        self._opened = False
        self._ok = False

    @property
    def thread_name(self) -> str:
        return f"sink-{self.state.name}-{self.task_id}"

    @property
    def stuck_name(self) -> str:
        return str(self.task_id)

    # ---- the WorkerTask steps ----------------------------------------------------------------

    def initialize_and_start(self) -> None:
        """Create the task, ``initialize`` and ``start`` it; then its consumer at the start positions, and
        ``open(partitions)``."""
        self.ran = True
        state = self.state
        assert state.task_class is not None
        task = self._call("creation", state.task_class)
        self.task = task
        self._call("initialize", task.initialize, self.ctx)
        self._call("start", task.start, self.task_config)
        self._started = True
        self.consumer = state.backend.consumer(state.group)
        self._setup_positions()
        self._call("open", task.open, list(self.assigned))
        self._opened = True

    def execute(self) -> None:
        """The loop up to the targets (or a bound), then the final commit; again after a failed final commit
        (rewound to the last committed offsets) or one in which the task rewound a partition below its target
        with ``context.offset`` (a sink that found its destination moved on under it: the records from there
        are delivered again)."""
        assert self.consumer is not None
        self.positions.begin(self.ctx, self.consumer, self.commits.last_committed)
        while True:
            self._loop()
            if self.commits.commit(closing=True) and not self._rewound_below_target():
                break
        self._ok = True

    def _rewound_below_target(self) -> bool:
        target = self._target
        return any(off < target[tp] for tp, off in self.ctx.rewinds.items() if tp in self.assigned_set)

    def on_failure(self, exc: BaseException) -> None:
        if isinstance(exc, Stopped):
            log.info("%s stopped without a final commit: the run failed in another task", self.label)
        elif isinstance(exc, ConnectError):
            self.state.fail(exc, exc.__cause__)
        else:
            self.state.fail(ConnectError(f"{self.label} failed: {type(exc).__name__}: {exc}"), exc)

    def closed(self) -> None:
        """The task's last metrics, the lag at its end included."""
        if self._started:
            self.metrics.send_lag(self.commits.lag(self._target))
        self.metrics.flush(force=True)

    def close(self) -> None:
        """``close(partitions)`` if opened, ``stop()``, then the clients; a task that did not start only closes
        its pipeline. A failing ``close``/``stop`` fails a run that was otherwise ending well."""
        if not self._started:
            self.pipeline.close()
            return
        task = self.task
        assert task is not None
        ok = self._ok
        steps: list[tuple[str, Callable[[], Any]]] = []
        if self._opened:
            steps.append(("close", lambda: task.close(list(self.assigned))))
        steps.append(("stop", task.stop))
        steps.append(("pipeline close", self.pipeline.close))
        if self.dead_letters.producer is not None:
            steps.append(("dead letter producer close", self.dead_letters.producer.close))
        if self.consumer is not None:
            steps.append(("consumer close", self.consumer.close))
        first: BaseException | None = None
        for what, step in steps:
            try:
                step()
            except Exception as exc:
                if ok and first is None and what in ("close", "stop"):
                    first = exc
                log.warning("%s: %s raised %s: %s", self.label, what, type(exc).__name__, exc)
        if first is not None:
            raise ConnectError(f"{self.label} failed: {type(first).__name__}: {first}") from first

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            raise ConnectError(f"{self.label} failed in {what}: {type(exc).__name__}: {exc}") from exc

    # ---- positions ---------------------------------------------------------------------------

    def _setup_positions(self) -> None:
        run = self.state
        assert self.consumer is not None
        run.fence.arm(self.consumer)
        self.positions.start(run.start_positions, run.targets)
        self.commits.start({tp: run.group_committed.get(tp) for tp in self.assigned}, self.pos)
        self.consumer.assign(dict(self.pos))

    # ---- the loop ----------------------------------------------------------------------------

    def _loop(self) -> None:
        run = self.state
        ctx = self.ctx
        commit = self.commits.commit
        positions = self.positions
        consumer = self.consumer
        assert consumer is not None
        interval = run.flush_interval_s
        next_commit = time.monotonic() + interval
        ctx.pause_changed = True
        max_poll = run.max_poll_records
        pos = self.pos
        target = self._target
        paused_since: float | None = None
        ends_failing_since: float | None = None  # the end-of-partition check failing for want of the cluster
        paused_logged = 0.0
        while True:
            if run.stop.is_set():
                raise Stopped
            positions.apply(ctx, consumer, self.commits.last_committed)
            remaining = [tp for tp in self.assigned if pos[tp] < target[tp]]
            if not remaining:
                return
            now = time.monotonic()
            if run.deadline is not None and now >= run.deadline:
                log.info("%s: max_seconds reached", self.label)
                return
            if run.budget.exhausted():
                return
            if all(tp in ctx.paused for tp in remaining):
                # everything left is paused by the task: give it the chance to resume
                if paused_since is None:
                    paused_since = paused_logged = time.monotonic()
                elif time.monotonic() - paused_since >= run.pause_timeout_s:
                    raise WaitTimeoutError(
                        f"{self.label}: waited {run.pause_timeout_s:.0f} s (pause.timeout.ms) for the task to "
                        f"resume {', '.join(f'{t}-{p}' for t, p in sorted(remaining))}: every partition it "
                        "still has to read stayed paused")
                elif time.monotonic() - paused_logged >= _JOIN_LOG_S:
                    paused_logged = time.monotonic()
                    log.warning("%s: waiting %.0f s so far for the task to resume %s (every partition it "
                                "still has to read is paused; the run fails at pause.timeout.ms)", self.label,
                                paused_logged - paused_since, sorted(remaining))
                self._put([])
                if interval == 0 or ctx.commit_requested or time.monotonic() >= next_commit:
                    commit(closing=False)
                    next_commit = time.monotonic() + interval
                run.stop.wait(_PAUSED_IDLE_S)
                continue
            paused_since = None
            timeout = _POLL_TIMEOUT_S
            if run.deadline is not None:
                timeout = max(0.0, min(timeout, run.deadline - now))
            if not self._poll_and_deliver(max_poll, timeout):
                ends_failing_since = _check_ends(run, self.label, positions, consumer, remaining, ctx,
                                                 ends_failing_since)
                if interval != 0 and time.monotonic() >= next_commit:
                    commit(closing=False)
                    next_commit = time.monotonic() + interval
                continue
            if interval == 0 or ctx.commit_requested or time.monotonic() >= next_commit:
                commit(closing=False)
                next_commit = time.monotonic() + interval

    def _poll_and_deliver(self, max_poll: int, timeout: float) -> bool:
        """One poll and the put of what it gave (False: nothing to deliver), with the cyclic garbage collector
        paused for the whole batch (see :func:`~connect_runtime.runtime.pipeline.gc_paused`, which then pauses
        nothing more): the batch's records are released before it runs again, so it never walks them (about
        15% of a small-record sink's time otherwise)."""
        consumer = self.consumer
        assert consumer is not None
        with gc_paused():
            batch = consumer.poll(max_poll, timeout)
            if batch:
                batch, last = self.positions.bound(batch, self.state.budget, self.ctx)
            if not batch:
                return False
            self.metrics.add(SINK_RECORD_READ_TOTAL, len(batch))
            self._deliver(batch, last)
            del batch  # released before the collector resumes
            return True

    def _deliver(self, batch: list[ConsumedRecord], last: dict[tuple[str, int], int]) -> None:
        try:
            processed = self.pipeline.process(batch)
        except Exception as exc:
            raise ConnectError(f"{self.label} failed converting records: {type(exc).__name__}: {exc}") from exc
        dead_letters = self.dead_letters
        if processed.dead:
            for rec, error in processed.dead:
                dead_letters.send(rec, error)
        dead_letters.begin_put(batch)
        delivered = False
        try:
            self._put(processed.records)
            delivered = True
        finally:
            dead_letters.end_put(delivered)
        pos = self.pos
        for key, off in last.items():
            pos[key] = off + 1  # type: ignore[index]  # keeps the existing TopicPartition key
        _account(self, batch, processed)
        self.metrics.add(SINK_RECORD_SEND_TOTAL, len(processed.records))

    def _put(self, records: list[SinkRecord]) -> None:
        task = self.task
        assert task is not None
        put_with_retries(task.put, records, policy=self.state.retry, stop=self.state.stop, label=self.label,
                         take_timeout=self.ctx.take_timeout, dead_letters=self.dead_letters,
                         on_retry=self._count_retry)

    def _count_retry(self) -> None:
        self.retries += 1
        self.metrics.add(TOTAL_RETRIES, 1)


def _check_ends(run: SinkRunState, label: str, positions: TaskPositions, consumer: Consumer,
                remaining: list[TopicPartition], ctx: TaskContext, failing_since: float | None) -> float | None:
    """The end-of-partition check of an empty poll. An empty poll is also what a broker that is restarting
    gives: the check's query failing for want of the cluster is asked again at the next empty poll, until
    the store ride-out bound (errors.retry.timeout) runs out; then its error fails the run. Returns since
    when it has been failing (None once it answered)."""
    try:
        positions.check_ends(consumer, remaining, ctx, run.flush_timeout_s)
    except BackendUnavailableError as exc:
        now = time.monotonic()
        since = now if failing_since is None else failing_since
        if run.retry.store_bound_reached(since, now) is not None:
            raise
        log.info("%s: the end of its partitions could not be read (%s); asking again at the next empty poll",
                 label, exc)
        return since
    return None


__all__ = ["SinkWorkerTask"]
