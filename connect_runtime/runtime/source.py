"""One bounded run of a source connector: ``run_source(config, backend)``.

What happens, in order (Kafka Connect's ``Worker`` + ``AbstractWorkerSourceTask``, bounded):

1. The raw config is validated against the runtime's fields (``SOURCE_CONFIG`` plus
   :data:`RUN_CONFIG` below), the connector's ``validate()`` and the transform/converter pipeline;
   every invalid field is named in one :class:`ConfigError`.
2. The connector is started with a context whose ``offset_storage_reader`` reads committed offsets
   (KIP-131), then asked for ``task_configs(tasks.max)``. Every task runs in its own thread with its
   own producer, offset store and pipeline (only the :class:`Backend` object is shared).
3. Each task loops: ``poll()`` → pipeline (transforms, converters) → ``send``. The loop is written
   once in :class:`_WorkerTask`; :class:`_ExactlyOnceTask` (a transactional producer per task,
   offsets committed in the same transaction as the records, KIP-618) and :class:`_AtLeastOnceTask`
   (flush the records, then write the offsets) differ only in their hooks.
4. The run stops when every task is idle for ``poll.idle.timeout.ms``, or at ``max_records``
   (never more are written) or ``max_seconds``; every task then commits its last boundary and is
   stopped. A connector's ``request_task_reconfiguration()`` makes the runtime plan and run tasks
   again after the current ones finished (at most :data:`MAX_REPLANS` times, within the bounds).
5. Any failure aborts the open transactions and fails the run with the first error; what was
   committed before stays committed. A :class:`ProducerFencedError` (a newer instance of a task
   started) fails the run with that error and nothing more is committed.

``commit_record`` (KIP-416) is called only on tasks whose class overrides it, and only then do
producers track per-record metadata, so the hook costs nothing when unused.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, is_, itemgetter
from typing import Any

from connect_runtime import ranges as ranges_mod
from connect_runtime.api.config import ConfigDef, Range, Type
from connect_runtime.api.connector import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
    SourceConnectorContext,
)
from connect_runtime.api.errors import (
    ConfigError,
    ConnectError,
    DataError,
    ProducerFencedError,
)
from connect_runtime.api.records import RecordMetadata, SourceRecord, TopicPartition
from connect_runtime.api.source import (
    OffsetStorageReader,
    SourceTask,
    SourceTaskContext,
    TransactionContext,
)
from connect_runtime.backends.base import (
    RANGES_STORE,
    REGISTRY_STORE,
    Backend,
    OffsetEntry,
    OffsetStore,
    Producer,
    TransactionalProducer,
    Written,
)
from connect_runtime.runtime.config import SOURCE_CONFIG
from connect_runtime.runtime.lifecycle import MAX_REPLANS, ConnectorRun
from connect_runtime.runtime.offsets import OffsetWriter, StoreOffsetReader, offset_key, parse_key
from connect_runtime.runtime.pipeline import SourcePipeline
from connect_runtime.runtime.registry import ConnectorRecord, Registry, registry_key
from connect_runtime.runtime.supervisor import RunState
from connect_runtime.runtime.task import WorkerTask
from connect_runtime.runtime.worker import (
    MAX_TASKS,
    Generation,
    check_config,
    connector_props,
    store_ride_out_s,
)
from connect_runtime.secrets import secret_values

log = logging.getLogger(__name__)

RUN_CONFIG = (
    ConfigDef()
    .define("poll.idle.timeout.ms", Type.LONG, default=500, validator=Range.at_least(0),
            doc="A task is idle once poll() returned nothing for this long; the run ends when every task is idle.")
    .define("task.shutdown.graceful.timeout.ms", Type.LONG, default=30000, validator=Range.at_least(1),
            doc="Bound on the wait for tasks to commit their last boundary and stop once the run stops.")
)
"""Source-run fields owned by this module (on top of ``SOURCE_CONFIG``)."""

_IDLE_BACKOFF = 0.005
"""Seconds an idle task waits before polling again (interrupted by the run's stop)."""


# --------------------------------------------------------------------------------------------------
# Result


@dataclass
class SourceRunResult:
    """What one source run committed. ``to_dict()`` is plain JSON (for XCom and the CLI).

    ``ranges``: per topic, per partition (string key) exactly what this run committed, in the
    :mod:`connect_runtime.ranges` form: ``[from, to]`` when the run's records are one contiguous block
    (one writer), else the sorted list of ``[from, to]`` spans that excludes other writers' records (on
    Kafka a span may also hold transaction markers; read it with ``read_committed``).
    ``interval_ranges``: with a ``ledger_key``, everything committed under that key by every run so far
    (this one included), so a rerun that wrote nothing still says what its interval holds; else ``{}``. ``source_offsets``: the latest offset this run committed per
    source partition. ``transactions``: commit points (exactly-once: committed transactions;
    at-least-once: offset flushes). ``filtered``/``skipped``: records a transform dropped or error
    tolerance skipped (their offsets are committed, the records are not written).
    """

    connector: str
    records: int = 0
    ranges: dict[str, dict[str, Any]] = field(default_factory=dict)
    source_offsets: list[dict[str, Any]] = field(default_factory=list)
    transactions: int = 0
    filtered: int = 0
    skipped: int = 0
    seconds: float = 0.0
    interval_ranges: dict[str, dict[str, Any]] = field(default_factory=dict)
    generation: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "connector": self.connector,
            "records": self.records,
            "ranges": ranges_mod.dump(ranges_mod.parse(self.ranges)),
            "source_offsets": [
                {"partition": dict(e["partition"]), "offset": None if e["offset"] is None else dict(e["offset"])}
                for e in self.source_offsets
            ],
            "transactions": self.transactions,
            "filtered": self.filtered,
            "skipped": self.skipped,
            "seconds": self.seconds,
            "interval_ranges": ranges_mod.dump(ranges_mod.parse(self.interval_ranges)),
            "generation": self.generation,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SourceRunResult:
        return cls(
            connector=data["connector"],
            records=int(data["records"]),
            ranges=ranges_mod.dump(ranges_mod.parse(data["ranges"])),
            interval_ranges=ranges_mod.dump(ranges_mod.parse(data.get("interval_ranges") or {})),
            generation=data.get("generation"),
            source_offsets=[{"partition": dict(e["partition"]),
                             "offset": None if e["offset"] is None else dict(e["offset"])}
                            for e in data["source_offsets"]],
            transactions=int(data["transactions"]),
            filtered=int(data["filtered"]),
            skipped=int(data["skipped"]),
            seconds=float(data["seconds"]),
        )

    def topic_partitions(self) -> dict[TopicPartition, list[tuple[int, int]]]:
        """``ranges`` keyed by :class:`TopicPartition`: the exact spans to read with ``Backend.read_range``."""
        return {TopicPartition(t, p): spans for t, parts in ranges_mod.parse(self.ranges).items()
                for p, spans in parts.items()}


# --------------------------------------------------------------------------------------------------
# Validation


@dataclass
class _Plan:
    """A validated run: the connector (not started yet) and the typed runtime values."""

    name: str
    props: dict[str, Any]
    values: dict[str, Any]
    connector: SourceConnector
    boundary: str
    task_class: type[SourceTask] | None = None
    """Set from ``connector.task_class()`` once the connector started."""
    scope: str = ""
    """Task identity scope (``identity``): generations and transactional ids are per (connector, scope)."""
    record: ConnectorRecord | None = None
    """This run's registry entry (its generation), once registered."""
    ledger_key: dict[str, Any] | None = None
    """Label under which committed ranges are recorded (the ranges record), e.g. a data interval."""

    def transactional_id(self, index: int, cluster_id: str | None) -> str:
        tid = f"{self.name}-{self.scope}-{index}" if self.scope else f"{self.name}-{index}"
        return f"{cluster_id}-{tid}" if cluster_id else tid


def _prepare(config: Mapping[str, Any], exactly_once: bool) -> _Plan:
    if not isinstance(config, Mapping):
        raise ConfigError(errors={"config": f"expected a mapping of config fields, got {type(config).__name__}"})
    props = connector_props(config)
    values, connector, errors = check_config(props, SOURCE_CONFIG.merge(RUN_CONFIG), SourceConnector,
                                             kind="source")
    if connector is not None:
        if "exactly.once.support" not in errors and values["exactly.once.support"] == "required":
            if not exactly_once:
                errors["exactly.once.support"] = "required, but this run is at-least-once (exactly_once=False)"
            else:
                support = connector.exactly_once_support(props)
                if support is not ExactlyOnceSupport.SUPPORTED:
                    errors["exactly.once.support"] = (
                        f"required, but {type(connector).__name__}.exactly_once_support() returned {support!r}"
                    )
        if exactly_once and values["transaction.boundary"] == "connector" and "transaction.boundary" not in errors:
            can = connector.can_define_transaction_boundaries(props)
            if can is not ConnectorTransactionBoundaries.SUPPORTED:
                errors["transaction.boundary"] = (
                    f"connector, but {type(connector).__name__}.can_define_transaction_boundaries() "
                    f"returned {can!r}"
                )
    try:
        SourcePipeline.from_config(props).close()
    except ConfigError as exc:
        for name, why in (exc.errors or {"transforms": str(exc)}).items():
            errors.setdefault(name, why)
    if errors:
        raise ConfigError(errors=errors)
    assert connector is not None
    boundary = str(values["transaction.boundary"]).lower() if exactly_once else "none"
    return _Plan(values["name"], props, values, connector, boundary)


# --------------------------------------------------------------------------------------------------
# Shared run state


class _Run(RunState):
    """State shared by the main thread and the task threads (guarded by ``lock``)."""

    def __init__(self, name: str, max_records: int | None, deadline: float | None) -> None:
        super().__init__(name, deadline)
        self.remaining = max_records
        self.idle: set[int] = set()
        self.n_tasks = 0
        # committed totals
        self.records = 0
        self.transactions = 0
        self.filtered = 0
        self.skipped = 0
        # per topic partition, per writer (task index: one transactional id), the spans it committed
        self.spans: dict[TopicPartition, dict[int, list[tuple[int, int]]]] = {}
        self.offsets: dict[bytes, tuple[Mapping[str, Any], Mapping[str, Any] | None]] = {}
        self.topics: set[str] = set()

    def budget_exhausted(self) -> bool:
        return self.remaining is not None and self.remaining <= 0

    def out_of_bounds(self) -> bool:
        return self.failed or self.budget_exhausted() or self.past_deadline()

    def begin_round(self, n_tasks: int) -> None:
        """A new set of tasks starts: forget the previous round's idleness (the run's bounds stay)."""
        with self.lock:
            self.n_tasks = n_tasks
            self.idle.clear()
            if self.stop.is_set() and not self.out_of_bounds():
                self.stop.clear()
                self.stop_reason = ""
                self.stop_at = None

    def set_idle(self, index: int, idle: bool) -> None:
        with self.lock:
            if idle:
                self.idle.add(index)
                if len(self.idle) >= self.n_tasks:
                    self._stop_locked("every task is idle")
            else:
                self.idle.discard(index)

    def reserve(self, records: list[SourceRecord]) -> list[SourceRecord]:
        """The part of a polled batch the run may still write (``max_records``)."""
        if self.remaining is None:
            return records
        with self.lock:
            n = min(len(records), max(self.remaining, 0))
            self.remaining -= n
            if self.remaining <= 0:
                self._stop_locked("max_records reached")
        return records if n == len(records) else records[:n]

    # -- accounting --------------------------------------------------------------------------------
    def committed(self, spans: Iterable[tuple[TopicPartition, tuple[int, int]]], records: int, filtered: int,
                  skipped: int, offsets: Sequence[tuple[bytes, tuple[Mapping[str, Any], Mapping[str, Any] | None]]],
                  transaction: bool, writer: int) -> None:
        """``writer``: the index of the task that committed (its producer's transactional id)."""
        with self.lock:
            self.records += records
            self.filtered += filtered
            self.skipped += skipped
            if transaction:
                self.transactions += 1
            for tp, span in spans:
                self.spans.setdefault(tp, {}).setdefault(writer, []).append(span)
                self.topics.add(tp.topic)
            for key, po in offsets:
                self.offsets[key] = po


# --------------------------------------------------------------------------------------------------
# Contexts the runtime implements


class _ConnectorContext(SourceConnectorContext):
    def __init__(self, reader: OffsetStorageReader, run: _Run) -> None:
        self._reader = reader
        self._run = run
        self._reconfigure = threading.Event()

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self._reader

    def request_task_reconfiguration(self) -> None:
        """KIP-131: the running tasks commit at their next transaction boundary and stop; the runtime then
        asks for ``task_configs`` again and goes on within the same bounded run."""
        self._reconfigure.set()
        self._run.request_stop("task reconfiguration requested")

    def raise_error(self, exc: BaseException) -> None:
        log.error("connector %s raised an error through its context: %r", self._run.name, exc)
        self._run.fail(exc)

    def take_reconfiguration(self) -> bool:
        requested = self._reconfigure.is_set()
        self._reconfigure.clear()
        return requested


class _TransactionContext(TransactionContext):
    """Collects the task's boundary requests; the worker applies them after the batch is dispatched."""

    def __init__(self) -> None:
        self.batch_action: str | None = None
        self.record_actions: dict[int, tuple[str, SourceRecord]] = {}

    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        self._request("commit", record)

    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        self._request("abort", record)

    def _request(self, action: str, record: SourceRecord | None) -> None:
        if record is None:
            if self.batch_action not in (None, action):
                raise ConnectError("both commit_transaction() and abort_transaction() were requested for the "
                                   "current batch; request one of them")
            self.batch_action = action
            return
        have = self.record_actions.get(id(record))
        if have is not None and have[0] != action:
            raise ConnectError(f"both commit_transaction() and abort_transaction() were requested for record "
                               f"{record!r}; request one of them")
        self.record_actions[id(record)] = (action, record)

    def take(self, records: Sequence[SourceRecord]) -> tuple[list[tuple[int, str]], str | None]:
        """Requests that apply to this batch: ``[(index, action)]`` in order, and the batch action."""
        cuts: list[tuple[int, str]] = []
        if self.record_actions:
            wanted = self.record_actions
            for i, r in enumerate(records):
                hit = wanted.get(id(r))
                if hit is not None and hit[1] is r:
                    cuts.append((i, hit[0]))
                    del wanted[id(r)]
        action, self.batch_action = self.batch_action, None
        return cuts, action


class _TaskContext(SourceTaskContext):
    def __init__(self, configs: dict[str, str], reader: OffsetStorageReader,
                 transactions: _TransactionContext | None) -> None:
        self._configs = configs
        self._reader = reader
        self._transactions = transactions

    @property
    def configs(self) -> dict[str, str]:
        return self._configs

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self._reader

    @property
    def transaction_context(self) -> TransactionContext | None:
        return self._transactions


# --------------------------------------------------------------------------------------------------
# The task loop, written once


_topic_of = itemgetter(0)
_source_partition_of = attrgetter("source_partition")


class _RunFailed(Exception):
    """Raised inside a task thread to unwind when another part of the run already failed."""


class _Checkpoint:
    """What a task dispatched since its last commit point (quix-streams' checkpoint): the latest source
    offset per source partition, the counts, and (only when the task overrides ``commit_record``) the
    records to report. Committing it is the task's transaction; dropping it forgets it."""

    __slots__ = ("filtered", "polled", "records", "sent", "skipped", "spans", "writer")

    def __init__(self, connector: str) -> None:
        self.writer = OffsetWriter(connector)
        self.records = self.filtered = self.skipped = 0
        self.sent: list[SourceRecord] = []    # originals of written records, send order (tracking only)
        self.polled: list[SourceRecord] = []  # every polled original, poll order (tracking only)
        self.spans: list[tuple[TopicPartition, tuple[int, int]]] = []  # at-least-once: what flushes wrote

    def __bool__(self) -> bool:
        return bool(self.records or self.filtered or self.skipped or self.writer)

    def absorb(self, other: _Checkpoint) -> None:
        """Take over ``other``'s content (at-least-once: flushed records move to the offsets to write)."""
        for p, o in other.writer.snapshot():
            self.writer.record(p, o)
        self.records += other.records
        self.filtered += other.filtered
        self.skipped += other.skipped
        self.sent.extend(other.sent)
        self.polled.extend(other.polled)
        self.spans.extend(other.spans)
        other.clear()

    def offsets(self) -> tuple[list[OffsetEntry], list[Any]]:
        """The offset entries to write, and per entry its (partition, offset) for the result."""
        entries = self.writer.entries()
        return entries, [(e[0], po) for e, po in zip(entries, self.writer.snapshot(), strict=True)]

    def clear(self) -> None:
        self.writer.clear()
        self.records = self.filtered = self.skipped = 0
        self.sent = []
        self.polled = []
        self.spans = []


class _Boundary:
    """When a task commits: ``transaction.boundary`` (exactly-once) or ``offset.flush.interval.ms``
    (at-least-once), as a strategy (Kafka Connect's ``TransactionBoundaryManager``)."""

    commit_final = True
    """Whether the run's last open checkpoint is committed when the run stops."""

    def after_batch(self, now: float, last_commit: float) -> bool:
        """Commit after a dispatched poll batch?"""
        return False

    def due(self, now: float, last_commit: float) -> bool:
        """Commit before the next poll (time-based boundaries)?"""
        return False


class _PollBoundary(_Boundary):
    """``transaction.boundary=poll``: every poll batch is one transaction."""

    def after_batch(self, now: float, last_commit: float) -> bool:
        return True


class _IntervalBoundary(_Boundary):
    """``transaction.boundary=interval`` / at-least-once offset flushes: every ``interval`` seconds."""

    def __init__(self, interval: float) -> None:
        self.interval = interval

    def after_batch(self, now: float, last_commit: float) -> bool:
        return now - last_commit >= self.interval

    def due(self, now: float, last_commit: float) -> bool:
        return now - last_commit >= self.interval


class _ConnectorBoundary(_Boundary):
    """``transaction.boundary=connector``: only where the task asks (``TransactionContext``); what it
    dispatched after its last request is dropped when the run stops, its offsets not committed."""

    commit_final = False


def _boundary(plan: _Plan, exactly_once: bool) -> _Boundary:
    v = plan.values
    if not exactly_once:
        return _IntervalBoundary(v["offset.flush.interval.ms"] / 1000)
    if plan.boundary == "poll":
        return _PollBoundary()
    if plan.boundary == "connector":
        return _ConnectorBoundary()
    interval = v["transaction.boundary.interval.ms"]
    return _IntervalBoundary((v["offset.flush.interval.ms"] if interval is None else interval) / 1000)


class _WorkerTask(WorkerTask):
    """Runs one task in its own thread (Kafka Connect's ``AbstractWorkerSourceTask``): the loop is written
    once here; :class:`_ExactlyOnceTask` and :class:`_AtLeastOnceTask` differ only in their hooks."""

    exactly_once = True
    state: _Run

    def __init__(self, run: _Run, plan: _Plan, backend: Backend, index: int, task_config: dict[str, str]) -> None:
        super().__init__(run, index)
        self.plan = plan
        self.backend = backend
        self.task_config = task_config
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
        self.store: OffsetStore | None = None
        self.reader: StoreOffsetReader | None = None
        self.pipeline: SourcePipeline | None = None
        self.known_topics: set[str] = set()
        self.txn_context: _TransactionContext | None = None
        self.boundary = _boundary(plan, self.exactly_once)
        self.fenced = False
        self.pending = _Checkpoint(plan.name)  # dispatched since the last commit point
        self.last_commit = time.monotonic()
        # the ranges record of this task under the run's ledger key (None: no ledger)
        self.ledger_entry_key: bytes | None = None
        self.ledger_spans: ranges_mod.SpanMap = {}
        self.ledger_records = 0

    @property
    def label(self) -> str:
        return f"task {self.index} of connector {self.plan.name!r}"

    # -- the WorkerTask steps ----------------------------------------------------------------------
    def initialize_and_start(self) -> None:
        self.store = self.backend.offset_store(self.offsets_name)
        self.pipeline = SourcePipeline.from_config(self.plan.props)
        self.load_ledger()
        self.setup()
        task = self.task_class()
        self.task = task
        self.reader = _reader(self.backend, self.store, self.plan)
        task.initialize(_TaskContext(dict(self.task_config), self.reader, self.txn_context))
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
        if isinstance(exc, _RunFailed):
            return  # the run's first error is already recorded; this task only unwinds
        if isinstance(exc, ProducerFencedError):
            self.fenced = True  # a fenced producer cannot abort either: the broker/store already did
            log.error("%s was fenced by a newer instance; stopping without committing", self.label)
        else:
            log.error("%s failed: %r", self.label, exc)
        self.state.fail(exc)

    def close(self) -> None:
        if self.state.failed and not self.fenced:
            self.abort_quietly()
        if self.started and self.task is not None:
            try:
                self.task.stop()
            except Exception as exc:
                log.error("%s: stop() raised %r", self.label, exc)
                self.state.fail(exc)
        self.close_clients()

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
            if self.boundary.due(now, self.last_commit) and self.pending:
                self.commit()
            if self.callbacks:
                self.settle()  # a committed transaction's commit_record / commit() come before the next poll
            records = task.poll()
            if not records:
                now = time.monotonic()
                if idle_since is None:
                    idle_since = now
                elif not is_idle and now - idle_since >= self.idle_timeout:
                    is_idle = True
                    run.set_idle(self.index, True)
                run.stop.wait(_IDLE_BACKOFF)
                continue
            if is_idle:
                is_idle = False
                run.set_idle(self.index, False)
            idle_since = None
            if type(records) is not list:
                records = list(records)
            records = run.reserve(records)
            if not records:
                break
            self.dispatch(records)

    def dispatch(self, records: list[SourceRecord]) -> None:
        ctx = self.txn_context
        if ctx is None:
            self.send(records)
            self.after_batch()
            return
        cuts, batch_action = ctx.take(records)
        start = 0
        for i, action in cuts:
            self.send(records[start:i + 1])
            start = i + 1
            if action == "commit":
                self.commit()
            else:
                self.abort()
        if start < len(records):
            self.send(records[start:])
        if batch_action == "commit":
            self.commit()
        elif batch_action == "abort":
            self.abort()

    def after_batch(self) -> None:
        if self.boundary.after_batch(time.monotonic(), self.last_commit):
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
        if batch.filtered:
            pending.filtered += len(batch.filtered)
        if batch.skipped:
            pending.skipped += len(batch.skipped)
        if self.track:
            pending.sent.extend(batch.sent)
            pending.polled.extend(records)
        self.record_offsets(records)

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

    def record_offsets(self, records: list[SourceRecord]) -> None:
        """Remember the last source offset per source partition of a batch (paid per batch, not per record:
        one identity scan, then one write per distinct partition object, in poll order)."""
        writer = self.pending.writer
        parts = list(map(_source_partition_of, records))
        if all(map(is_, parts, repeat(parts[-1]))):  # one partition object (the common case): no step per record
            picked = [records[-1]]
        else:
            last = {id(sp): i for i, sp in enumerate(parts)}
            picked = [records[i] for i in sorted(last.values())]
        for r in picked:
            try:
                writer.record(r.source_partition, r.source_offset)
            except (TypeError, ValueError) as exc:
                raise DataError(f"{self.label}: source partition {r.source_partition!r} of a record for topic "
                                f"{r.topic!r} is not JSON-serialisable: {exc}") from exc

    def report_records(self, checkpoint: _Checkpoint, metadata: list[RecordMetadata] | None) -> None:
        """KIP-416: ``commit_record`` for every record of a committed checkpoint, in poll order."""
        if not self.track:
            return
        task = self.task
        assert task is not None
        sent, polled = checkpoint.sent, checkpoint.polled
        if not sent:
            metadata = []
        if metadata is None or len(metadata) != len(sent):
            raise ConnectError(
                f"{self.label}: the backend returned {0 if metadata is None else len(metadata)} record metadata "
                f"for {len(sent)} written records; commit_record() needs one per record")
        by_id = dict(zip(map(id, sent), metadata, strict=True))
        for r in polled:
            task.commit_record(r, by_id.get(id(r)))

    # -- the ranges record ---------------------------------------------------------------------------
    def load_ledger(self) -> None:
        """Read what this task's ledger entry holds (after the generation started: nobody older writes it)."""
        key = self.plan.ledger_key
        if key is None:
            return
        self.ledger_entry_key = offset_key(self.plan.name, {**key, "task": self.index})
        store = self.backend.offset_store(RANGES_STORE)
        try:
            value = store.get([self.ledger_entry_key]).get(self.ledger_entry_key)
        finally:
            store.close()
        if value is not None:
            data = json.loads(value)
            self.ledger_spans = ranges_mod.parse(data.get("ranges") or {})
            self.ledger_records = int(data.get("records") or 0)

    def ledger_entries(self, spans: Iterable[tuple[TopicPartition, tuple[int, int]]],
                       records: int) -> dict[str, list[OffsetEntry]]:
        """The ranges record entry after this commit, for writing in the same transaction."""
        spans = list(spans)
        if self.ledger_entry_key is None or not spans:
            return {}
        for tp, span in spans:
            self.ledger_spans.setdefault(tp.topic, {}).setdefault(tp.partition, []).append(span)
        self.ledger_records += records
        assert self.plan.record is not None
        value = {"key": self.plan.ledger_key, "task": self.index, "ranges": ranges_mod.dump(self.ledger_spans),
                 "records": self.ledger_records, "generation": self.plan.record.generation,
                 "updated": int(time.time() * 1000)}
        return {RANGES_STORE: [(self.ledger_entry_key, json.dumps(value, separators=(",", ":")).encode())]}

    # -- hooks -------------------------------------------------------------------------------------
    def setup(self) -> None:
        """Create the producer (and fence older instances)."""
        raise ConnectError("subclass responsibility")  # pragma: no cover

    def producer_for_send(self) -> Producer:
        """The producer to send a batch with (exactly-once: begins the transaction)."""
        raise ConnectError("subclass responsibility")  # pragma: no cover

    def commit(self) -> None:
        """Commit everything dispatched since the last commit point."""
        raise ConnectError("subclass responsibility")  # pragma: no cover

    def abort(self) -> None:
        """``TransactionContext.abort_transaction()`` (exactly-once only)."""
        raise ConnectError(f"{self.label}: abort_transaction() needs exactly-once (transaction.boundary=connector)")

    def drop_final(self) -> None:
        """The run stops and the boundary does not commit its last checkpoint: drop it."""
        raise ConnectError("subclass responsibility")  # pragma: no cover

    def settle(self) -> None:
        """Wait until every commit started has completed (and its callbacks ran)."""

    def abort_quietly(self) -> None:
        """After a failure: drop what is open, never raising."""
        self.pending.clear()

    def close_clients(self) -> None:
        closers = (("producer", getattr(self, "producer", None)), ("pipeline", self.pipeline),
                   ("offset reader", self.reader), ("offset store", self.store))
        for what, closer in closers:
            if closer is not None:
                try:
                    closer.close()
                except Exception as exc:
                    log.warning("%s: closing the %s raised %r", self.label, what, exc)


class _ExactlyOnceTask(_WorkerTask):
    """KIP-618: records and source offsets of a transaction become visible together or never.

    A transaction's commit runs on this task's committer thread while the task polls and converts its
    next batch (which is sent only after that commit completed: one open transaction per producer).
    The callbacks of a transaction (every ``commit_record``, then ``commit()``) run in the task's thread
    once its commit completed, before the task's next ``poll`` (Kafka Connect calls them right after
    ``commitTransaction``), and also when the run ends by another task's failure or fencing: a committed
    transaction is always reported. A task that overrides neither lets the commit overlap its next poll.
    """

    producer: TransactionalProducer

    def setup(self) -> None:
        if self.plan.boundary == "connector":
            self.txn_context = _TransactionContext()
        tid = self.plan.transactional_id(self.index, self.backend.cluster_id)
        self.txn_open = False
        self.inflight: tuple[Future[Written], _Checkpoint, list[Any]] | None = None
        self.committer = ThreadPoolExecutor(1, thread_name_prefix=f"{self.plan.name}-task-{self.index}-commit")
        # overlapping pays where a commit waits on the network with the GIL released (Kafka); SQLite's
        # commit is CPU work under the GIL, so it stays in line with the task's loop
        self.overlap = self.backend.capabilities.commit_waits_on_io
        self.producer = self.backend.transactional_producer(tid, self.offsets_name, track_metadata=self.track)
        if self.plan.record is not None:
            self.producer.generation_guard = (REGISTRY_STORE, registry_key(self.plan.name, self.plan.scope),
                                              self.plan.record.generation)
        self.producer.init_transactions(self.timeout)
        if not self.backend.capabilities.commits_check_generation:
            self.check_generation()

    def check_generation(self) -> None:
        """KIP-618 zombie fencing where commits cannot check the generation (Kafka): after ``init_transactions``,
        this task's generation must still be the newest, else it is a zombie and commits nothing.

        A newer generation first writes the registry, then initialises every transactional id of the older one
        (``_begin_generation``); this task first initialises its producer, then reads the registry. So either
        the newer generation's fencing came after this ``init_transactions`` (and this producer is fenced: its
        first commit raises), or the newer generation was in the registry before this read (seen here). Without
        this read, a task whose ``init_transactions`` came after the fencing (it passed its start-up check
        before the newer generation began, and was slow to start) would hold the newest epoch of its id, which a
        newer plan with fewer tasks never initialises again, and commit on beside it."""
        record = self.plan.record
        if record is None:
            return
        newest = Registry(self.backend).get(self.plan.name, self.plan.scope)
        if newest is None or newest.generation != record.generation:
            raise ProducerFencedError(
                f"{self.label} belongs to generation {record.generation}, but generation "
                f"{None if newest is None else newest.generation} started before its producer was initialised: "
                f"a newer plan or run fenced it; it commits nothing")

    def producer_for_send(self) -> Producer:
        if not self.txn_open:
            self.settle()
            self.producer.begin_transaction()
            self.txn_open = True
        return self.producer

    def commit(self) -> None:
        self.last_commit = time.monotonic()
        if not self.txn_open and not self.pending.writer:
            return
        if self.state.failed:
            raise _RunFailed
        self.settle()
        cp = self.pending
        entries, offsets = cp.offsets()
        if not self.txn_open:  # offsets only (every record of the batch was filtered, or it was aborted)
            self.producer.begin_transaction()
            self.txn_open = True
        records = cp.records
        extra = None if self.ledger_entry_key is None else (lambda w: self.ledger_entries(w.ranges.items(), records))
        self.pending = _Checkpoint(self.plan.name)
        self.txn_open = False  # this transaction is committing; the next one begins after it completed
        if self.overlap:
            started = threading.Event()
            producer, timeout = self.producer, self.commit_timeout

            def commit_transaction() -> Written:
                started.set()
                return producer.commit_transaction(entries, timeout, extra)

            future = self.committer.submit(commit_transaction)
            # Wait (GIL released) until the committer runs: it then holds the GIL only until its commit enters
            # the client's C code. Without this wait it would start only when this thread next blocks or after
            # the interpreter's switch interval (5 ms), and the commit would hardly overlap the next poll.
            started.wait(timeout)
        else:
            future = Future()
            try:
                future.set_result(self.producer.commit_transaction(entries, self.commit_timeout, extra))
            except BaseException as exc:
                future.set_exception(exc)
        self.inflight = (future, cp, offsets)
        if not self.overlap:
            self.settle()

    def settle(self) -> None:
        inflight, self.inflight = getattr(self, "inflight", None), None
        if inflight is None:
            return
        future, cp, offsets = inflight
        written = future.result()  # fenced, unavailable, ...: raised here, in the task's thread
        self.state.committed(written.ranges.items(), cp.records, cp.filtered, cp.skipped, offsets, transaction=True,
                           writer=self.index)
        # Kafka Connect's order (ExactlyOnceWorkerSourceTask.commitTransaction): every commit_record of the
        # transaction, then commit()
        self.report_records(cp, written.metadata)
        assert self.task is not None
        self.task.commit()

    def abort(self) -> None:
        """``TransactionContext.abort_transaction()``: the records since the last boundary are dropped, but
        their source offsets are committed (in a transaction of their own), so the next poll, or the next
        run, does not see the same records again (Kafka Connect's connector-defined boundary manager)."""
        self.settle()
        if self.txn_open:
            self.producer.abort_transaction(self.timeout)
            self.txn_open = False
        cp = self.pending
        if cp.records:
            log.info("%s: aborted a transaction of %d records as requested by the connector", self.label, cp.records)
        if self.track:  # the aborted records were not written: KIP-416 reports them with None
            assert self.task is not None
            for r in cp.polled:
                self.task.commit_record(r, None)
            cp.polled, cp.sent = [], []
        cp.records = 0
        self.commit()

    def drop_final(self) -> None:
        # Connector-defined boundaries: the final transaction commits only if the connector asked for it;
        # what it dispatched after its last commit request is dropped and its offsets are not committed,
        # so the next run polls those records again (ExactlyOnceWorkerSourceTask.finalOffsetCommit).
        self.settle()
        if self.pending:
            log.info("%s: the run ends with %d records after the connector's last commit request; they are not "
                     "committed (transaction.boundary=connector) and will be polled again",
                     self.label, self.pending.records)
        if self.txn_open:
            self.producer.abort_transaction(self.timeout)
            self.txn_open = False
        self.pending.clear()

    def abort_quietly(self) -> None:
        inflight, self.inflight = getattr(self, "inflight", None), None
        if inflight is not None:
            future, cp, offsets = inflight
            try:
                written = future.result()
            except Exception as exc:  # already the run's failure, or a consequence of it
                log.debug("%s: the commit in flight ended with %r", self.label, exc)
            else:
                # the run fails (another task failed or was fenced), but this transaction DID commit: its records
                # and offsets are stored, so the task hears every commit_record and commit() for it all the same
                try:
                    self.state.committed(written.ranges.items(), cp.records, cp.filtered, cp.skipped, offsets,
                                       transaction=True, writer=self.index)
                    self.report_records(cp, written.metadata)
                    if self.task is not None:
                        self.task.commit()
                except Exception as exc:
                    log.warning("%s: reporting a committed transaction after the run failed raised %r",
                                self.label, exc)
        if getattr(self, "txn_open", False):
            try:
                self.producer.abort_transaction(self.timeout)
            except Exception as exc:  # fenced or broken: the transaction is never committed either way
                log.warning("%s: aborting the open transaction raised %r", self.label, exc)
            self.txn_open = False
        self.pending.clear()

    def close_clients(self) -> None:
        committer = getattr(self, "committer", None)
        if committer is not None:
            committer.shutdown(wait=True)
        super().close_clients()


class _AtLeastOnceTask(_WorkerTask):
    """Records are flushed first; then the offsets of flushed records are written to the offset store."""

    exactly_once = False
    producer: Producer

    def setup(self) -> None:
        self.flushed = _Checkpoint(self.plan.name)  # records whose flush succeeded, offsets not yet written
        self.producer = self.backend.producer(track_metadata=self.track)

    def producer_for_send(self) -> Producer:
        return self.producer

    def after_batch(self) -> None:
        if self.boundary.after_batch(time.monotonic(), self.last_commit):
            self.commit()
        elif self.pending.records >= self.max_batch:
            self.flush()

    def flush(self) -> None:
        written = self.producer.flush(self.commit_timeout) if self.pending.records else None
        cp = self.pending
        if written is not None:
            cp.spans.extend(written.ranges.items())
            self.report_records(cp, written.metadata)
        elif self.track:
            self.report_records(cp, [])
        cp.sent, cp.polled = [], []
        self.flushed.absorb(cp)

    def commit(self) -> None:
        self.last_commit = time.monotonic()
        if self.state.failed:
            raise _RunFailed
        self.flush()
        cp = self.flushed
        if not cp:
            return
        entries, offsets = cp.offsets()
        if entries:
            assert self.store is not None
            self.store.put(entries, self.timeout)
        for store_name, ledger in self.ledger_entries(cp.spans, cp.records).items():
            ledger_store = self.backend.offset_store(store_name)
            try:
                ledger_store.put(ledger, self.timeout)
            finally:
                ledger_store.close()
        self.state.committed(cp.spans, cp.records, cp.filtered, cp.skipped, offsets, transaction=True,
                           writer=self.index)
        cp.clear()
        assert self.task is not None
        self.task.commit()

    def drop_final(self) -> None:  # pragma: no cover - at-least-once always commits its last flush
        self.commit()


# --------------------------------------------------------------------------------------------------
# Entry point


def run_source(
    config: Mapping[str, Any],
    backend: str | Backend = "sqlite:///pyconnect.db",
    *,
    exactly_once: bool = True,
    max_records: int | None = None,
    max_seconds: float | None = None,
    backend_settings: Mapping[str, Any] | None = None,
    progress: Callable[[int, float], None] | None = None,
    ledger_key: Mapping[str, Any] | None = None,
    identity: str | None = None,
    stop: threading.Event | None = None,
) -> SourceRunResult:
    """Run a source connector once, bounded, and return what it committed.

    :param config: the raw connector config (``name``, ``connector.class``, ``tasks.max``, the
        connector's own fields, ...); string values or typed JSON values.
    :param backend: a backend URL (``sqlite:///path/file.db``, ``kafka://host:9092``) or an open
        :class:`Backend` (left open).
    :param exactly_once: KIP-618 transactions (default); ``False`` for at-least-once.
    :param max_records: stop after this many polled records in total (never more are written).
    :param max_seconds: stop after this many seconds (the last boundary is still committed).
    :param backend_settings: client settings for the backend opened from ``backend``.
    :param progress: ``callable(records_so_far, seconds)``, called at most every ~5 s and at the end.
    :param ledger_key: a JSON label (e.g. ``{"dag_id", "task_id", "map_index", "interval"}``): every
        commit also records what was committed under it (the ranges record), in the same transaction,
        and the result's ``interval_ranges`` says what the label holds over every run so far.
    :param identity: task identity scope: runs of one connector with different identities (e.g. data
        intervals whose source partitions are keyed by the interval) do not fence each other; a run with
        the same identity fences every task of the previous one.
    :param stop: an event another thread may set to stop the run early (Airflow's ``on_kill``): the
        tasks commit their last boundary and stop, as at ``max_seconds``.
    :raises ConfigError: naming every invalid field.
    :raises ProducerFencedError: a newer run (generation) of the connector started; nothing more was committed.
    """
    run = SourceRun(config, backend, exactly_once=exactly_once, max_records=max_records, max_seconds=max_seconds,
                    backend_settings=backend_settings, progress=progress, ledger_key=ledger_key, identity=identity,
                    stop=stop)
    result = run.execute()
    log.info("source connector %s: %d records in %d transactions (%d filtered, %d skipped) in %.2f s",
             run.p.name, result.records, result.transactions, result.filtered, result.skipped, result.seconds)
    return result


def plan_source(
    config: Mapping[str, Any],
    backend: str | Backend = "sqlite:///pyconnect.db",
    *,
    exactly_once: bool = True,
    identity: str | None = None,
    backend_settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Fan-out, step 1: start a new generation of the connector (fencing every task of the older ones),
    ask the connector for ``task_configs(tasks.max)`` and return a plain-JSON plan::

        {"connector": name, "generation": g, "identity": scope, "exactly_once": bool,
         "tasks": [{"index": 0, "config": {...}}, ...]}

    Each task then runs with :func:`run_source_task` (e.g. one Airflow mapped task instance each); a newer
    plan or run of the same connector and identity fences them all.
    """
    run = SourceRun(config, backend, exactly_once=exactly_once, identity=identity, backend_settings=backend_settings)
    configs = run.plan()
    assert run.generation is not None
    return {"connector": run.p.name, "generation": run.generation.number, "identity": run.p.scope,
            "exactly_once": exactly_once,
            "tasks": [{"index": i, "config": dict(c)} for i, c in enumerate(configs)]}


def run_source_task(
    config: Mapping[str, Any],
    backend: str | Backend,
    plan: Mapping[str, Any],
    index: int,
    *,
    max_records: int | None = None,
    max_seconds: float | None = None,
    backend_settings: Mapping[str, Any] | None = None,
    progress: Callable[[int, float], None] | None = None,
    ledger_key: Mapping[str, Any] | None = None,
    stop: threading.Event | None = None,
) -> SourceRunResult:
    """Fan-out, step 2: run task ``index`` of a :func:`plan_source` plan, bounded, as its own run.

    The task belongs to the plan's generation: if a newer plan or run of the connector (same identity)
    started, it is fenced (:class:`ProducerFencedError`, nothing committed). Its result holds its own
    ranges; merge the ranges of every task with :func:`connect_runtime.ranges.merge`.
    """
    return SourceTaskRun(config, backend, plan, index, max_records=max_records, max_seconds=max_seconds,
                         backend_settings=backend_settings, progress=progress, ledger_key=ledger_key,
                         stop=stop).execute()


class SourceRun(ConnectorRun[SourceRunResult]):
    """A bounded source run: the :class:`ConnectorRun` lifecycle with the source's hooks."""

    kind = "source"
    state: _Run

    def __init__(self, config: Mapping[str, Any], backend: str | Backend, *, exactly_once: bool = True,
                 max_records: int | None = None, max_seconds: float | None = None,
                 backend_settings: Mapping[str, Any] | None = None,
                 progress: Callable[[int, float], None] | None = None, ledger_key: Mapping[str, Any] | None = None,
                 identity: str | None = None, stop: threading.Event | None = None) -> None:
        super().__init__(backend, backend_settings, progress=progress, stop=stop)
        self.config = config
        self.exactly_once = exactly_once
        self.max_records = max_records
        self.max_seconds = max_seconds
        self.ledger_key_arg = ledger_key
        self.identity: Any = identity
        self.first_index = 0
        self.store: OffsetStore | None = None
        self.reader: StoreOffsetReader | None = None
        self.context: _ConnectorContext | None = None

    def validate(self) -> None:
        _check_bounds(self.max_records, self.max_seconds)
        p = _prepare(self.config, self.exactly_once)
        p.scope = _scope(self.identity)
        p.ledger_key = _ledger(self.ledger_key_arg)
        self.p = p
        self.state = _Run(p.name, self.max_records,
                          None if self.max_seconds is None else self.t0 + self.max_seconds)

    def begin_generation(self) -> Generation | None:
        log.info("source connector %s (%s): %s run on %s", self.p.name, type(self.p.connector).__name__,
                 "exactly-once" if self.exactly_once else "at-least-once", self.backend.url)
        return _begin_generation(self.p, self.backend)

    def start_connector(self) -> None:
        self.store = self.backend.offset_store(self.p.values["offsets.storage.topic"])
        self.reader = _reader(self.backend, self.store, self.p)
        self.context = _ConnectorContext(self.reader, self.state)
        self.p.connector.initialize(self.context)
        self.p.connector.start(self.p.props)

    def plan_tasks(self) -> list[dict[str, str]]:
        if self.p.task_class is None:
            _task_class(self.p)
        return _task_configs(self.p)

    def create_tasks(self, configs: list[dict[str, str]]) -> list[WorkerTask]:
        cls = _ExactlyOnceTask if self.exactly_once else _AtLeastOnceTask
        return [cls(self.state, self.p, self.backend, self.first_index + i, dict(cfg))
                for i, cfg in enumerate(configs)]

    def tasks_starting(self, tasks: Sequence[WorkerTask]) -> None:
        # the task count is recorded before the tasks start, so a successor can fence every one of them
        generation = self.generation
        if (generation is not None and self.first_index == 0 and len(tasks) > generation.record.tasks
                and not generation.update(tasks=len(tasks))):
            raise ProducerFencedError(f"connector {self.p.name!r}: generation {generation.number} was fenced by a "
                                      f"newer run before its tasks started")
        self.state.begin_round(len(tasks))

    def shutdown_grace(self) -> float:
        return float(self.p.values["task.shutdown.graceful.timeout.ms"]) / 1000

    def report_progress(self) -> None:
        if self.progress is not None:
            self.progress(self.state.records, time.monotonic() - self.t0)

    def topics(self) -> Sequence[str]:
        return sorted(self.state.topics)

    def reconfiguration_requested(self) -> bool:
        return self.context is not None and self.context.take_reconfiguration()

    def out_of_bounds(self) -> bool:
        return self.state.out_of_bounds()

    def stop_connector(self) -> None:
        try:
            self.p.connector.stop()
        except Exception as exc:
            log.error("connector %s: stop() raised %r", self.p.name, exc)
            self.state.fail(exc)

    def finish(self, failed: BaseException | None) -> None:
        if self.generation is not None:
            self.generation.finish(failed, sorted(self.state.topics))

    def planned(self, configs: list[dict[str, str]]) -> None:
        generation = self.generation
        assert generation is not None
        if not generation.update(tasks=max(generation.record.tasks, len(configs)), done_tasks=[]):
            raise ProducerFencedError(f"connector {self.p.name!r}: a newer generation started while planning")
        if not configs:
            generation.finish(None)

    def result(self) -> SourceRunResult:
        seconds = round(time.monotonic() - self.t0, 6)
        if self.progress is not None:
            self.progress(self.state.records, seconds)
        return _result(self.p, self.state, seconds, self.backend, self.exactly_once)

    def release(self) -> None:
        try:
            for closer in (self.reader, self.store):
                if closer is not None:
                    closer.close()
        finally:
            super().release()


class SourceTaskRun(SourceRun):
    """Fan-out, step 2: one task of a :func:`plan_source` plan, as its own run of the plan's generation (the
    connector itself is not started: the plan holds the task's config)."""

    def __init__(self, config: Mapping[str, Any], backend: str | Backend, plan: Mapping[str, Any], index: int,
                 **kwargs: Any) -> None:
        super().__init__(config, backend, **kwargs)
        self.plan_arg = plan
        self.index = index

    def validate(self) -> None:
        _check_bounds(self.max_records, self.max_seconds)
        plan, index = self.plan_arg, self.index
        try:
            tasks = plan["tasks"]
            self.generation_number = int(plan["generation"])
            self.task_config = dict(next(t["config"] for t in tasks if int(t["index"]) == int(index)))
            self.exactly_once = bool(plan.get("exactly_once", True))
        except (KeyError, TypeError, ValueError, StopIteration) as exc:
            raise ConfigError(errors={"plan": f"expected a plan from plan_source() holding task {index!r}, got "
                                              f"{str(plan)[:200]} ({exc!r})"}) from None
        self.identity = plan.get("identity")
        super().validate()
        if plan.get("connector") != self.p.name:
            raise ConfigError(errors={"plan": f"the plan is for connector {plan.get('connector')!r}, the config "
                                              f"names {self.p.name!r}"})
        self.first_index = int(index)

    def begin_generation(self) -> Generation | None:
        """Join the plan's generation: fenced if a newer plan or run started."""
        record = Registry(self.backend).get(self.p.name, self.p.scope)
        if record is None or record.generation != self.generation_number:
            raise ProducerFencedError(
                f"connector {self.p.name!r}: task {self.index} belongs to generation {self.generation_number}, but "
                f"the newest generation is {None if record is None else record.generation}: a newer plan or run "
                f"fenced it")
        self.p.record = record
        _task_class(self.p)
        return Generation(self.backend, record, None)

    def start_connector(self) -> None:
        """The connector is not started for one task of a plan."""

    def stop_connector(self) -> None:
        """Nothing started, nothing to stop."""

    def plan_tasks(self) -> list[dict[str, str]]:
        return [self.task_config]

    def finish(self, failed: BaseException | None) -> None:
        """The plan's generation stays open for its other tasks: record this task as done (or the failure)."""
        registry = Registry(self.backend)
        record = self.p.record
        assert record is not None
        if failed is not None:
            registry.update(record, state="failed", error=f"task {self.index}: {type(failed).__name__}: {failed}"[:500],
                            heartbeat=int(time.time() * 1000))
            return
        fresh = registry.get(self.p.name, self.p.scope)
        if fresh is not None and fresh.generation == self.generation_number:
            done = sorted(set(getattr(fresh, "done_tasks", []) or []) | {int(self.index)})
            changes: dict[str, Any] = {"done_tasks": done, "heartbeat": int(time.time() * 1000),
                                       "topics": sorted(set(fresh.topics) | self.state.topics)}
            if len(done) >= fresh.tasks and fresh.state == "running":
                changes.update(state="stopped", finished=int(time.time() * 1000))
            registry.update(fresh, **changes)


def _check_bounds(max_records: int | None, max_seconds: float | None) -> None:
    if max_records is not None and max_records < 0:
        raise ConfigError(errors={"max_records": f"expected a value of at least 0, got {max_records!r}"})
    if max_seconds is not None and max_seconds < 0:
        raise ConfigError(errors={"max_seconds": f"expected a value of at least 0, got {max_seconds!r}"})


def _scope(identity: Any) -> str:
    if identity is None or identity == "":
        return ""
    if not isinstance(identity, str):
        raise ConfigError(errors={"identity": f"expected a string (e.g. the data interval), got {identity!r}"})
    return identity


def _ledger(ledger_key: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if ledger_key is None:
        return None
    if not isinstance(ledger_key, Mapping) or not ledger_key:
        raise ConfigError(errors={"ledger_key": f"expected a non-empty mapping of JSON values, got {ledger_key!r}"})
    try:
        return dict(json.loads(json.dumps(dict(ledger_key), sort_keys=True)))
    except (TypeError, ValueError) as exc:
        raise ConfigError(errors={"ledger_key": f"expected JSON values, got {ledger_key!r} ({exc})"}) from None


def _reader(be: Backend, store: OffsetStore, plan: _Plan) -> StoreOffsetReader:
    """KIP-618: a connector-specific offsets store falls back to the global store for partitions it lacks."""
    if plan.values["offsets.storage.topic"] is None:
        return StoreOffsetReader(store, plan.name)
    return StoreOffsetReader(store, plan.name, fallback=be.offset_store(None))


def _begin_generation(plan: _Plan, be: Backend) -> Generation:
    """Register a new generation before any offset is read, and fence every task of the previous one."""
    generation = Generation.begin(be, plan.name, kind="source", scope=plan.scope,
                                  connector_class=str(plan.values["connector.class"]),
                                  offsets_store=plan.values["offsets.storage.topic"],
                                  secrets=secret_values(plan.props))
    plan.record = generation.record
    previous = generation.previous
    if previous is not None and previous.tasks and previous.state != "stopped" \
            and not be.capabilities.commits_check_generation:
        # Kafka: a commit cannot check the registry, so fence every transactional id the older generation
        # used (its task count is in the registry), as Kafka Connect fences zombies of the previous generation
        ids = [plan.transactional_id(i, be.cluster_id) for i in range(previous.tasks)]
        log.info("connector %s: fencing %d task(s) of generation %d (%s)", plan.name, len(ids),
                 previous.generation, previous.state)
        try:
            be.fence_transactional_ids(ids, plan.values["offset.flush.timeout.ms"] / 1000)
        except BaseException as exc:
            generation.finish(exc)
            raise
    return generation


def _task_class(plan: _Plan) -> type[SourceTask]:
    tc = plan.connector.task_class()
    if not (isinstance(tc, type) and issubclass(tc, SourceTask)):
        raise ConfigError(errors={"connector.class": (
            f"{type(plan.connector).__name__}.task_class() returned {tc!r}, which is not a SourceTask subclass")})
    plan.task_class = tc
    return tc


def _task_configs(plan: _Plan) -> list[dict[str, str]]:
    configs = plan.connector.task_configs(plan.values["tasks.max"])
    if len(configs) > plan.values["tasks.max"]:
        raise ConnectError(f"connector {plan.name!r}: task_configs({plan.values['tasks.max']}) returned "
                           f"{len(configs)} task configs (more than tasks.max)")
    return [dict(c) for c in configs]


def _exact_spans(run: _Run, join_markers: bool) -> ranges_mod.SpanMap:
    """Per topic partition the spans this run committed. On a backend with transaction markers two spans of
    one writer (a task: one transactional id) separated by exactly one offset are joined: that offset is the
    writer's own commit marker, as its next transaction's records come after its previous one's marker. Spans of
    different writers (the tasks of one run) are never joined across a gap: the offset between them may be another
    writer's record, each task's own marker lying elsewhere."""
    out: ranges_mod.SpanMap = {}
    for tp in sorted(run.spans):
        spans: list[tuple[int, int]] = []
        for written in run.spans[tp].values():
            own = ranges_mod.normalize_spans(written)
            spans.extend(_join_marker_gaps(own) if join_markers else own)
        out.setdefault(tp.topic, {})[tp.partition] = ranges_mod.normalize_spans(spans)
    return out


def _join_marker_gaps(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted spans of ONE writer with each gap of exactly one offset (its commit marker) closed."""
    if len(spans) < 2:
        return spans
    joined = [spans[0]]
    for first, nxt in spans[1:]:
        if first - joined[-1][1] == 1:
            joined[-1] = (joined[-1][0], nxt)
        else:
            joined.append((first, nxt))
    return joined


def interval_ranges(backend: Backend, connector: str, ledger_key: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """What the ranges record holds for ``(connector, ledger_key)`` over every task and run: (ranges, records)."""
    want = _ledger(ledger_key)
    store = backend.offset_store(RANGES_STORE)
    try:
        values = store.read_all()
    finally:
        store.close()
    found: list[dict[str, Any]] = []
    records = 0
    for key, value in values.items():
        parsed = parse_key(key)
        if parsed is None or parsed[0] != connector:
            continue
        label = dict(parsed[1])
        label.pop("task", None)
        if label != want:
            continue
        data = json.loads(value)
        found.append(data.get("ranges") or {})
        records += int(data.get("records") or 0)
    return ranges_mod.merge(*found), records


def _result(plan: _Plan, run: _Run, seconds: float, be: Backend, exactly_once: bool) -> SourceRunResult:
    spans = _exact_spans(run, join_markers=exactly_once and be.capabilities.transaction_markers)
    offsets = [{"partition": json.loads(json.dumps(p)), "offset": None if o is None else json.loads(json.dumps(o))}
               for _, (p, o) in sorted(run.offsets.items())]
    held: dict[str, Any] = {}
    if plan.ledger_key is not None:
        held, _ = interval_ranges(be, plan.name, plan.ledger_key)
    return SourceRunResult(connector=plan.name, records=run.records, ranges=ranges_mod.dump(spans),
                           source_offsets=offsets, transactions=run.transactions, filtered=run.filtered,
                           skipped=run.skipped, seconds=seconds, interval_ranges=held,
                           generation=None if plan.record is None else plan.record.generation)


__all__ = ["MAX_REPLANS", "MAX_TASKS", "RUN_CONFIG", "SourceRunResult", "interval_ranges", "plan_source", "run_source",
           "run_source_task"]
