"""One source task's thread (Kafka Connect's ``AbstractWorkerSourceTask``): ``poll()`` -> pipeline (transforms,
converters) -> ``send``, bounded by the run, with commits where the task's boundary strategy
(:mod:`~connect_runtime.runtime.source.boundaries`) puts them. The loop is written once here;
:class:`~connect_runtime.runtime.source.exactly_once.ExactlyOnceTask` and
:class:`~connect_runtime.runtime.source.at_least_once.AtLeastOnceTask` differ only in their hooks (producer,
commit, settle, abort). A commit is a :class:`~connect_runtime.runtime.source.checkpoint.Checkpoint`.

``commit_record`` (KIP-416) is called only on tasks whose class overrides it, and only then do producers track
per-record metadata, so the hook costs nothing when unused.
"""

from __future__ import annotations

import logging
import time
from abc import abstractmethod
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from connect_runtime.api.errors import ConnectError, DataError, ProducerFencedError
from connect_runtime.api.records import RecordMetadata, SourceRecord
from connect_runtime.api.source import SourceTask
from connect_runtime.backends.base import Backend, OffsetStore, Producer
from connect_runtime.metrics import (
    SOURCE_RECORD_POLL_TOTAL,
    TOTAL_RECORD_ERRORS,
    TOTAL_RECORDS_SKIPPED,
    Metrics,
    TaskMetrics,
)
from connect_runtime.runtime.offsets import StoreOffsetReader
from connect_runtime.runtime.pipeline import SourcePipeline, gc_paused
from connect_runtime.runtime.source.boundaries import boundary_for
from connect_runtime.runtime.source.checkpoint import Checkpoint
from connect_runtime.runtime.source.config import SourcePlan
from connect_runtime.runtime.source.contexts import TaskContext, offset_reader
from connect_runtime.runtime.source.ledger import TaskLedger
from connect_runtime.runtime.source.state import SourceRunState
from connect_runtime.runtime.task import WorkerTask
from connect_runtime.runtime.worker import record_bytes, store_ride_out_s

log = logging.getLogger(__name__)

IDLE_BACKOFF = 0.005
"""Seconds an idle task waits before polling again (interrupted by the run's stop)."""

_topic_of = itemgetter(0)


class RunFailed(Exception):
    """Raised inside a task thread to unwind when another part of the run already failed."""


class SourceWorkerTask(WorkerTask):
    """Runs one source task in its own thread; subclasses fill in the delivery hooks."""

    exactly_once = True
    state: SourceRunState

    def __init__(self, run: SourceRunState, plan: SourcePlan, backend: Backend, index: int,
                 task_config: dict[str, str], metrics: Metrics | None = None) -> None:
        super().__init__(run, index)
        self.metrics = TaskMetrics(metrics, plan.name, index)
        self.polled_records = 0  # within max_records (the progress lines read it)
        self.plan = plan
        self.backend = backend
        self.task_config = task_config
        self.label = f"task {index} of connector {plan.name!r}"
        v = plan.values
        self.timeout = v["offset.flush.timeout.ms"] / 1000
        # a commit (or flush) waits out a store that cannot be reached for a moment (a broker restart), as Kafka
        # Connect's producer does (its commitTransaction blocks up to max.block.ms): errors.retry.timeout bounds it
        self.commit_timeout = max(self.timeout, store_ride_out_s(v))
        self.idle_timeout = v["poll.idle.timeout.ms"] / 1000
        self.max_batch = v["producer.max.batch.records"]
        self.partitions = v["topic.creation.default.partitions"]
        rf = v["topic.creation.default.replication.factor"]
        self.replication = rf if rf and rf > 0 else None
        self.offsets_name: str | None = v["offsets.storage.topic"]
        assert plan.task_class is not None, "the connector's task_class() is read before tasks are made"
        self.task_class = plan.task_class
        self.track = plan.task_class.commit_record is not SourceTask.commit_record
        # whether the task hears about commits at all (commit_record or commit overridden): then they are
        # delivered before its next poll; a task that does not listen lets a commit overlap its next poll
        self.callbacks = self.track or plan.task_class.commit is not SourceTask.commit
        self.task: SourceTask | None = None
        self.started = False
        self.polled = False  # whether any poll of this run returned records
        self.store: OffsetStore | None = None
        self.reader: StoreOffsetReader | None = None
        self.pipeline: SourcePipeline | None = None
        self.known_topics: set[str] = set()
        self.boundary = boundary_for(plan, self.exactly_once)
        self.fenced = False
        self.pending = Checkpoint(plan.name)  # dispatched since the last commit point
        self.ledger = TaskLedger(backend, plan, index)  # the ranges record of this task under the run's ledger key

    # -- the WorkerTask steps ----------------------------------------------------------------------
    def initialize_and_start(self) -> None:
        self.store = self.backend.offset_store(self.offsets_name)
        self.pipeline = SourcePipeline.from_config(self.plan.props)
        self.ledger.load()
        self.setup()
        task = self.task_class()
        self.task = task
        self.reader = offset_reader(self.backend, self.store, self.plan)
        task.initialize(TaskContext(dict(self.task_config), self.reader, self.boundary.transaction_context))
        task.start(self.task_config)
        self.started = True

    def execute(self) -> None:
        self.loop()
        if not self.state.failed:
            if self.boundary.commit_final:
                self.commit()
            else:
                self.drop_final()
            self.settle()

    def on_failure(self, exc: BaseException) -> None:
        if isinstance(exc, RunFailed):
            return  # the run's first error is already recorded; this task only unwinds
        if isinstance(exc, ProducerFencedError):
            self.fenced = True  # a fenced producer cannot abort either: the broker/store already did
            log.error("%s was fenced by a newer instance; stopping without committing", self.label)
        else:
            log.error("%s failed: %r", self.label, exc)
        self.state.fail(exc)

    def closed(self) -> None:
        """The task's last counts and the sizes of its transactions."""
        self.metrics.flush(force=True)
        self.metrics.send_transaction_sizes()

    def close(self) -> None:
        if self.state.failed and not self.fenced:
            self.abort_quietly()
        if self.started and self.task is not None:
            if not self.polled and not self.state.failed:
                self.ask_nothing_read(self.task)
            try:
                self.task.stop()
            except Exception as exc:
                log.error("%s: stop() raised %r", self.label, exc)
                self.state.fail(exc)
        self.close_clients()

    def ask_nothing_read(self, task: SourceTask) -> None:
        """Every poll returned nothing: keep the task's :meth:`~SourceTask.nothing_read` for the result."""
        try:
            self.state.report_nothing_read(self.index, task.nothing_read())
        except Exception as exc:  # a report is for the log: it never fails a run that succeeded
            log.warning("%s: nothing_read() raised %r", self.label, exc)

    def close_clients(self) -> None:
        closers = (("producer", getattr(self, "producer", None)), ("pipeline", self.pipeline),
                   ("offset reader", self.reader), ("offset store", self.store))
        for what, closer in closers:
            if closer is not None:
                try:
                    closer.close()
                except Exception as exc:
                    log.warning("%s: closing the %s raised %r", self.label, what, exc)

    # -- the loop ----------------------------------------------------------------------------------
    def loop(self) -> None:
        run, task = self.state, self.task
        assert task is not None
        idle_since: float | None = None
        is_idle = False
        while not run.stop.is_set():
            if run.remaining is not None and run.remaining <= 0:
                break
            now = time.monotonic()
            if run.past_deadline(now):
                run.request_stop("max_seconds reached")
                break
            if self.boundary.due(now) and self.pending:
                self.commit()
            if self.callbacks:
                self.settle()  # a committed transaction's commit_record / commit() come before the next poll
            polled = self.poll_and_dispatch()
            if polled is None:
                now = time.monotonic()
                if idle_since is None:
                    idle_since = now
                if not is_idle and now - idle_since >= self.idle_timeout:
                    is_idle = True
                    run.set_idle(self.index, True)
                run.stop.wait(IDLE_BACKOFF)
                continue
            if is_idle:
                is_idle = False
                run.set_idle(self.index, False)
            idle_since = None
            if not polled:
                break

    def poll_and_dispatch(self) -> bool | None:
        """One ``poll()`` and the dispatch of what it gave: None when it gave nothing, False when the run's
        record budget had no room left for it, True once dispatched. The cyclic garbage collector is paused
        for the whole batch (:func:`~connect_runtime.runtime.pipeline.gc_paused`, as the sink's poll and put
        are): the batch's records, their offsets and their producer records are all alive until it is sent,
        and the collector's passes over them cost about a third of a small-record source's time (measured:
        1M text lines, ``bench/bench_source_kafka.py``); they are released before it resumes."""
        task, run = self.task, self.state
        assert task is not None
        with gc_paused():
            records = task.poll()
            if not records:
                return None
            self.polled = True
            if type(records) is not list:
                records = list(records)
            records = run.reserve(records)
            if not records:
                return False
            self.polled_records += len(records)
            self.metrics.add(SOURCE_RECORD_POLL_TOTAL, len(records))
            self.boundary.dispatch(records, self)
            del records  # released before the collector resumes
            return True

    def after_batch(self) -> None:
        if self.boundary.after_batch(time.monotonic()):
            self.commit()

    def send(self, records: list[SourceRecord]) -> None:
        if not records:
            return
        assert self.pipeline is not None
        batch = self.pipeline.process(records)
        out = batch.out
        pending = self.pending
        if out:
            topics = set(map(_topic_of, out))
            if not topics <= self.known_topics:
                self.check_topics(topics, out, batch.sent)
                self.backend.create_topics({t: self.partitions for t in topics - self.known_topics}, exist_ok=True,
                                           replication=self.replication)
                self.known_topics |= topics
            producer = self.producer_for_send()
            if len(out) <= self.max_batch:
                producer.send(out)
            else:
                for i in range(0, len(out), self.max_batch):
                    producer.send(out[i:i + self.max_batch])
            pending.records += len(out)
            pending.bytes += record_bytes(out, 2, 3)  # ProducerRecord's key and value
            if batch.schema is not None:
                pending.schemas[batch.schema[0]] = batch.schema[1]
        if batch.filtered:
            pending.filtered += len(batch.filtered)
        if batch.skipped:
            pending.skipped += len(batch.skipped)
            self.metrics.add(TOTAL_RECORD_ERRORS, len(batch.skipped))
            self.metrics.add(TOTAL_RECORDS_SKIPPED, len(batch.skipped))
        if self.track:
            pending.sent.extend(batch.sent)
            pending.polled.extend(records)
        pending.record_offsets(records, self.label)

    def check_topics(self, topics: set[Any], out: Sequence[Any], sent: Sequence[SourceRecord]) -> None:
        """A record without a usable topic is a data error naming the record (not a config error, which
        would tell Airflow not to retry)."""
        bad = {t for t in topics if not isinstance(t, str) or not t}
        if not bad:
            return
        for i, rec in enumerate(out):
            if rec[0] in bad:
                original = sent[i] if i < len(sent) else rec
                raise DataError(
                    f"{self.label}: record {original!r} has topic {rec[0]!r}; expected a non-empty topic name "
                    f"(set SourceRecord.topic, or route it with a transform)")

    def report_records(self, checkpoint: Checkpoint, metadata: list[RecordMetadata] | None) -> None:
        """Step 4 of a commit (KIP-416): ``commit_record`` for every record of a committed checkpoint."""
        if self.track:
            assert self.task is not None
            checkpoint.report(self.task, metadata, self.label)

    # -- hooks -------------------------------------------------------------------------------------
    @abstractmethod
    def setup(self) -> None:
        """Create the producer (and fence older instances)."""

    @abstractmethod
    def producer_for_send(self) -> Producer:
        """The producer to send a batch with (exactly-once: begins the transaction)."""

    @abstractmethod
    def commit(self) -> None:
        """Commit everything dispatched since the last commit point (:mod:`~.checkpoint`)."""

    def abort(self) -> None:
        """``TransactionContext.abort_transaction()`` (exactly-once only)."""
        raise ConnectError(f"{self.label}: abort_transaction() needs exactly-once (transaction.boundary=connector)")

    @abstractmethod
    def drop_final(self) -> None:
        """The run stops and the boundary does not commit its last checkpoint: drop it."""

    def settle(self) -> None:
        """Wait until every commit started has completed (and its callbacks ran)."""

    def abort_quietly(self) -> None:
        """After a failure: drop what is open, never raising."""
        self.pending.clear()


__all__ = ["IDLE_BACKOFF", "RunFailed", "SourceWorkerTask"]
