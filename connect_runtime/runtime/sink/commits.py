"""Sink commits (Kafka Connect's ``WorkerSinkTask.commitOffsets``): at each commit point the dead letters are
flushed, ``pre_commit(current_offsets)`` runs and exactly what it returns is committed for the group,
through the run's commit fence; a failed ``pre_commit`` rewinds the task to its last committed offsets.

- current offsets: per assigned partition, the next offset after the last record delivered;
- committable offsets (:meth:`TaskCommits.committable`): what ``pre_commit`` returned, less what the runtime
  cannot commit: an offset past what the task was given, or for a partition not assigned to it, is ignored
  with a warning (as Kafka Connect does); offsets already committed are left out; ``{}`` commits nothing;
- the group commit (:func:`commit_group`) is fenced by the run's generation
  (:class:`~connect_runtime.runtime.fencing.SinkCommitFence`) and rides out a store that blinks, within the
  retry policy's store bound;
- rewind on failure (:meth:`TaskCommits.rewind_after_failure`): every partition of the task goes back to its
  last committed offset (the start of the run, a task's rewind, or the last group commit) and those records
  are delivered again, within the redelivery bound (:mod:`connect_runtime.runtime.errors`).

KIP-275 ``context.is_closing()`` is true only while ``pre_commit`` runs for the run's final commit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from connect_runtime.api.errors import (
    BackendUnavailableError,
    ConfigError,
    ConnectError,
    DataError,
    ProducerFencedError,
    WaitTimeoutError,
)
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends.base import Consumer
from connect_runtime.runtime.errors import Stopped

if TYPE_CHECKING:
    from connect_runtime.runtime.sink.run import SinkRunState
    from connect_runtime.runtime.sink.task import SinkWorkerTask

log = logging.getLogger(__name__)

def show(offsets: Mapping[TopicPartition, int | None]) -> str:
    return "{" + ", ".join(f"{t}-{p}: {o}" for (t, p), o in sorted(offsets.items())) + "}"


class TaskCommits:
    """One task's commit points: ``pre_commit``, the committable offsets, the group commit and the rewind
    after a failed ``pre_commit``. Called from the task's own thread only."""

    def __init__(self, worker: SinkWorkerTask) -> None:
        self.worker = worker
        self.group: dict[TopicPartition, int | None] = {}
        """What the group has committed per assigned partition (None: nothing yet)."""
        self.last_committed: dict[TopicPartition, int] = {}
        """Per partition where a rewind after a failed ``pre_commit`` goes (WorkerSinkTask's
        ``lastCommittedOffsets``): the start position, a task's rewind, or the last group commit."""
        self.committed: dict[TopicPartition, int] = {}
        """What this run committed (the result's ``committed``)."""
        self.acked: dict[TopicPartition, int] = {}
        """Per partition what is committed, for the lag at the end: the group's offset, or for a sink that commits
        nothing to the group (``pre_commit`` returned ``{}``: it keeps its offsets in its destination) the offsets
        its last ``pre_commit`` that succeeded was given."""
        self.failures = 0
        self._failing_since: float | None = None
        self._failed_at: dict[TopicPartition, int] = {}
        """Where the first ``pre_commit`` of the current failure streak failed: the streak ends (and its retry
        bound with it) only when a ``pre_commit`` succeeds at or past it, not at a commit point before it that the
        rewind brought back (which would make a commit point that always fails unbounded)."""

    def start(self, group: Mapping[TopicPartition, int | None], positions: Mapping[TopicPartition, int]) -> None:
        self.group.update(group)
        self.last_committed = dict(positions)
        self.acked = {tp: positions[tp] if off is None else off for tp, off in group.items() if tp in positions}

    def commit(self, closing: bool) -> bool:
        """One commit point. Returns False when ``pre_commit`` failed and the task was rewound to its
        last committed offsets (the records are delivered again), True otherwise."""
        w = self.worker
        task = w.task
        consumer = w.consumer
        run = w.state
        assert task is not None and consumer is not None
        if run.stop.is_set():
            raise Stopped
        w.ctx.commit_requested = False
        w.dead_letters.flush()
        current = {tp: w.pos[tp] for tp in w.assigned}
        w.ctx.closing = closing
        metrics = w.metrics
        try:
            offsets = task.pre_commit(current)
        except Exception as exc:
            metrics.commit_failed()
            self.rewind_after_failure(exc, closing)
            return False
        finally:
            w.ctx.closing = False
        w.dead_letters.flush()
        metrics.flush()  # what the task counted since the last commit point, its dead letters included
        if self._failing_since is not None and all(current[tp] >= off for tp, off in self._failed_at.items()):
            self._failing_since = None
        if not offsets:
            self.acked.update(current)  # a sink that keeps its offsets in its destination stored them there
            metrics.commit_skipped()
            return True
        commit = self.committable(offsets, current)
        if not commit:
            metrics.commit_skipped()
            return True
        if run.stop.is_set():
            raise Stopped
        t0 = time.perf_counter()
        try:
            commit_group(run, w.label, w.task_id, consumer, commit)
        except ProducerFencedError as exc:
            metrics.commit_failed()
            raise ProducerFencedError(f"{w.label}: {exc}") from exc
        except Stopped:
            raise
        except Exception:
            metrics.commit_failed()
            raise
        metrics.commit_done(time.perf_counter() - t0)
        self.group.update(commit)
        self.last_committed.update(commit)
        self.committed.update(commit)
        self.acked.update(commit)
        return True

    def lag(self, target: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Per assigned partition: the run's ``target`` minus what is committed (:attr:`acked`)."""
        acked = self.acked
        return {tp: max(0, target[tp] - acked[tp]) for tp in self.worker.assigned if tp in acked and tp in target}

    def committable(self, offsets: Mapping[TopicPartition, int],
                    current: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """What ``pre_commit`` returned, less what the runtime cannot commit (as WorkerSinkTask): an
        offset past what the task was given, or for a partition not assigned to it, is ignored with a
        warning; offsets already committed are left out."""
        label = self.worker.label
        assigned = self.worker.assigned_set
        commit: dict[TopicPartition, int] = {}
        for tp, off in offsets.items():
            key = TopicPartition(tp[0], int(tp[1]))
            if key not in assigned:
                log.warning("%s: pre_commit returned offset %s for %s-%d, a partition not assigned to it: ignored",
                            label, off, key.topic, key.partition)
                continue
            if isinstance(off, bool) or not isinstance(off, int) or off < 0:
                log.warning("%s: pre_commit returned %r for %s-%d, not an offset: ignored", label, off,
                            key.topic, key.partition)
                continue
            if off > current[key]:
                log.warning("%s: pre_commit returned offset %d for %s-%d, past the %d the task was given (not "
                            "consumed yet): ignored", label, off, key.topic, key.partition, current[key])
                continue
            if self.group.get(key) != off:
                commit[key] = off
        return commit

    def rewind_after_failure(self, exc: Exception, closing: bool) -> None:
        """WorkerSinkTask: a failed ``pre_commit`` rewinds to the last committed offsets and the records
        are delivered again; here within the run's retry bound, and only while the run may deliver."""
        w = self.worker
        run = w.state
        policy = run.retry
        now = time.monotonic()
        if self._failing_since is None:
            self._failing_since = now
            self._failed_at = {tp: w.pos[tp] for tp in w.assigned}
        self.failures += 1
        why = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, (DataError, ConfigError, ProducerFencedError)):
            # Kafka Connect redelivers after any pre_commit exception; these say the same records will fail
            # the same way (bad data, bad config) or that a newer run owns the partitions: fail at once
            raise ConnectError(
                f"{w.label} failed: pre_commit raised {why}; not delivered again (nothing more "
                f"was committed; the group keeps {show(self.group)})") from exc
        ran_out = policy.retry_bound_reached(self._failing_since, now)
        if ran_out is None and closing and run.budget.exhausted():
            ran_out = "the run's max_records were consumed (nothing can be delivered again)"
        if ran_out is not None:
            raise ConnectError(
                f"{w.label} failed: pre_commit raised {self.failures} times over "
                f"{now - self._failing_since:.1f} s; waited until {ran_out}; nothing more was committed "
                f"(the group keeps {show(self.group)}): {why}") from exc
        consumer = w.consumer
        assert consumer is not None
        for tp in w.assigned:
            back = self.last_committed[tp]
            if w.pos[tp] != back:
                consumer.seek(tp, back)
                w.pos[tp] = back
        w.ctx.pause_changed = True
        asked = w.ctx.take_timeout()  # the task's backoff (context.timeout), else an exponential one
        wait = policy.retry_wait(self._failing_since, now,
                                 asked if asked is not None else policy.failure_delay(self.failures))
        log.error("%s: pre_commit failed (%s); rewound to the last committed offsets %s, delivering again in "
                  "%.3f s", w.label, why, show(self.last_committed), wait)
        if run.stop.wait(wait):
            raise Stopped from exc


def commit_group(run: SinkRunState, label: str, task_id: int, consumer: Consumer,
                 offsets: Mapping[TopicPartition, int]) -> None:
    """Commit group offsets for one task, fenced by the generation
    (:class:`~connect_runtime.runtime.fencing.SinkCommitFence`): inside its commit fence's transaction where the
    backend commits group offsets in transactions (Kafka), else through the consumer once the fence let it.

    A store that cannot be reached for a moment (a broker restart, a write lock held) is ridden out: the
    commit is tried again (one log line per backoff: 300 ms doubling, capped by ``errors.retry.delay.max.ms``)
    within ``errors.retry.timeout`` (else ``max_seconds``, else the default ride-out). Committing the same
    offsets again is harmless. A commit-fence producer whose transaction failed is replaced; before it is,
    the registry is read, and a newer generation fails this run as fenced, as at its start."""
    policy = run.retry
    started = time.monotonic()
    delay = policy.first_delay()
    attempts = 0
    while True:
        attempts += 1
        try:
            if not run.fence.commit(task_id, offsets, consumer):
                consumer.commit(offsets, run.flush_timeout_s)
            return
        except (ProducerFencedError, ConfigError):
            raise
        except (BackendUnavailableError, WaitTimeoutError) as exc:
            now = time.monotonic()
            ran_out = policy.store_bound_reached(started, now)
            if ran_out is not None:
                raise BackendUnavailableError(
                    f"{label}: committing offsets {show(offsets)} failed {attempts} times over "
                    f"{now - started:.1f} s; waited until {ran_out}: {exc}") from exc
            wait = policy.store_wait(started, now, delay)
            log.warning("%s: committing offsets failed (%s: %s); trying again in %.3f s", label,
                        type(exc).__name__, exc, wait)
            delay = policy.next_delay(delay)
            if run.stop.wait(wait):
                raise Stopped from exc


__all__ = ["TaskCommits", "commit_group", "show"]
