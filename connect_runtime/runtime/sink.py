"""One bounded sink run: ``run_sink(config, backend, ...)`` → :class:`SinkRunResult`.

What a run does, in order (Kafka Connect's ``WorkerSinkTask``, bounded):

1. Validate the raw config against the runtime's sink fields (:data:`SINK_CONFIG`) and the
   connector's ``config_def()`` (through ``connector.validate``): one :class:`ConfigError` names
   every bad field. Exactly one of ``topics`` / ``topics.regex`` is required.
2. Start the connector (with a :class:`SinkConnectorContext`) and ask it for
   ``task_configs(tasks.max)``. The partitions of the topics are sorted and assigned round-robin to
   the tasks; each task runs in its own thread with its own read_committed consumer in the group
   ``connect-<name>`` and its own transform/convert pipeline.
3. Each partition starts at the group's committed offset (or the beginning of the partition),
   unless the task rewinds it with ``context.offset(...)`` in ``open()``; a rewind asked for later
   takes effect before the next poll.
4. The run reads each partition up to its target and then stops:

   - ``until_offsets={topic: {partition: offset}}`` (partition as int or str; offset = next offset
     NOT to read), or the shape of an upstream source run's ``SourceRunResult.to_dict()``,
     ``{"ranges": {topic: {"<p>": [from, to]}}}`` whose target is ``to``. With ``until_offsets``,
     **a partition it does not name has nothing to read** in this run, and a target beyond the end
     of its partition (as the run started) is lowered to that end, with a warning.
   - without it: the end offsets of the topics as they were when the run started (data committed
     while the run goes is left for the next run).
   - ``max_records`` (records consumed: delivered, filtered or dead-lettered) and ``max_seconds``
     end the run earlier; it still makes its final commit.

5. Commit points: every ``offset.flush.interval.ms`` (``0``: after every ``put``), after a ``put``
   during which the task called ``context.request_commit()``, and once at the end of the run. At
   each, dead-letter records are flushed first, then ``pre_commit(current_offsets)`` runs (current =
   next offset after the last record delivered, per assigned partition) and exactly what it returns
   is committed for the group; ``{}`` commits nothing; offsets for partitions not assigned to the
   task are ignored with a warning.
6. The end: the final commit, then ``close(partitions)``, then ``stop()``.

KIP-275 ``context.is_closing()``: true while ``pre_commit`` runs for the run's final commit (the
runtime never takes partitions away within a run, so that is the only closing commit), false at
every other moment. Kafka Connect proposed KIP-275 but never shipped it; this behaviour is
airflow-pyconnect's own.

Generations (zombie fencing): every run registers a new generation of the connector in the
registry (:mod:`connect_runtime.runtime.registry`) before it reads the group's offsets; tasks see it
as ``context.generation``. A newer run fences the older one's group-offset commits: the older run's
next commit raises :class:`ProducerFencedError` and commits nothing (Kafka Connect gets the same from
the consumer group generation). On SQLite the check runs inside the commit's write transaction
(``Consumer.generation_guard``). On Kafka each run initialises one transactional producer per sink
connector (id ``<cluster>-<connector>-sink-commits``), which fences the older run's producer
(KIP-447 style), and every group commit first commits a transaction through it (one record into the
compacted store ``pyconnect-sink-commits``); only when that succeeds are the group offsets committed.
Limitation: Kafka's atomic form, ``send_offsets_to_transaction``, is not used because the test broker
(Tansu) does not make those offsets visible; a zombie that passed its transaction a moment before the
newer run initialised can still land that one commit.

Failures (Kafka Connect's ``WorkerSinkTask`` where it defines them, bounded where it is not):

- a :class:`RetriableError` from ``put`` redelivers the same records, by default, after
  ``context.timeout(ms)`` if the task set it, else an exponential backoff (300 ms doubling, capped by
  ``errors.retry.delay.max.ms``). Kafka Connect retries forever; a run is bounded: by
  ``errors.retry.timeout`` ms when positive, else by the run's ``max_seconds``, else by
  :data:`DEFAULT_RETRY_BOUND_S`. When the bound runs out the run fails naming what it waited for.
- an exception from ``flush``/``pre_commit`` rewinds every partition of the task to its last
  committed offset (the start of the run, a rewind, or the last group commit) and delivers those
  records again (``WorkerSinkTask`` does the same), within the same bound; for the final commit too,
  as long as the run may still deliver (else it fails, nothing more committed).
- offsets ``pre_commit`` returns beyond what the task was given, or for partitions not assigned to
  it, are ignored with a warning naming the partition (as Kafka Connect does).
- any other exception from ``put`` (a conversion under ``errors.tolerance=none``, or a record
  reported through the errant record reporter under ``errors.tolerance=none``) fails the run with a
  :class:`ConnectError` naming the connector, the task and the cause (chained). A failed run makes
  no further ``pre_commit`` or commit in any of its tasks: the group keeps what was committed
  before. The tasks still get ``close`` and ``stop``.
- a task that does not return within ``task.shutdown.graceful.timeout.ms`` after the run stopped
  (its ``max_seconds`` passed, or another task failed) fails the run with a :class:`WaitTimeoutError`
  naming it; it is abandoned (a daemon thread) and can commit nothing any more, as in a source run.

Config handed to the connector and its tasks: strings, except ``Type.PASSWORD`` values, which stay
:class:`Password` objects (as in a source run). ``tasks.max`` above :data:`MAX_TASKS` is refused by
validation, and a connector that returns more task configs than ``tasks.max`` fails the run.

Error tolerance ``all``: records whose conversion or transform fails, and records a task reports
with ``context.errant_record_reporter.report(record, exc)``, are written to
``errors.deadletterqueue.topic.name`` (created at the start of the run if missing) with the original
key and value bytes; the dead-letter producer is flushed before any commit of offsets past them.
Without a dead letter topic they are skipped and counted (``SinkRunResult.skipped``, a log line).

Pause: ``context.pause(tp)`` stops polling ``tp`` until ``context.resume(tp)``. While every
partition a task still has to read is paused, the task gets ``put([])`` about every 50 ms (as Kafka
Connect delivers empty batches) so it can resume them; if they stay paused longer than
``pause.timeout.ms`` (default 5 min) the run fails with a :class:`WaitTimeoutError` naming them.

Delivery guarantee: offsets are committed only after ``pre_commit`` says the records before them
are durable, so a run killed at any instant and started again delivers every record at least once.
A connector that keeps its offsets in its destination (rewinds in ``open`` and returns ``{}`` from
``pre_commit``) gets exactly-once.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from connect_runtime import ranges as _ranges
from connect_runtime.api.config import ConfigDef, Password, Range, Type
from connect_runtime.api.connector import DestinationOffsets, SinkConnector, SinkConnectorContext
from connect_runtime.api.errors import (
    BackendUnavailableError,
    ConfigError,
    ConnectError,
    DataError,
    ProducerFencedError,
    RetriableError,
    WaitTimeoutError,
)
from connect_runtime.api.records import SinkRecord, TopicPartition
from connect_runtime.api.sink import ErrantRecordReporter, SinkTask, SinkTaskContext
from connect_runtime.backends import open_backend
from connect_runtime.backends.base import (
    REGISTRY_STORE,
    Backend,
    ConsumedRecord,
    Consumer,
    Producer,
    ProducerRecord,
    TransactionalProducer,
)
from connect_runtime.runtime.config import SINK_CONFIG
from connect_runtime.runtime.pipeline import SinkPipeline, _gc_paused
from connect_runtime.runtime.registry import registry_key
from connect_runtime.runtime.worker import (
    Generation,
    RunState,
    check_config,
    connector_props,
    store_ride_out_s,
    supervise,
)
from connect_runtime.secrets import secret_values

log = logging.getLogger(__name__)

_topic_of = itemgetter(0)
_partition_of = itemgetter(1)

PROGRESS_INTERVAL_S = 5.0
"""``progress`` is called at most this often (and once at the end)."""

_RETRY_DELAY_MIN_S = 0.3
_POLL_TIMEOUT_S = 1.0
_PAUSED_IDLE_S = 0.05
_JOIN_LOG_S = 30.0

ProgressCallback = Callable[[int, float], None]

DEFAULT_RETRY_BOUND_S = 300.0
"""Bound on redelivering after ``RetriableError`` / ``pre_commit`` failures when neither a positive
``errors.retry.timeout`` nor ``max_seconds`` gives one."""

SINK_COMMITS_STORE = "pyconnect-sink-commits"
"""Offset store the Kafka commit fence writes one entry per task into (see the module docstring)."""

SINK_RUN_CONFIG = (
    ConfigDef()
    .define("task.shutdown.graceful.timeout.ms", Type.LONG, default=30000, validator=Range.at_least(1),
            doc="Bound on the wait for tasks to make their last commit and stop once the run stopped.")
)
"""Sink-run fields owned by this module (on top of ``SINK_CONFIG``), the same as a source run's."""


@dataclass
class SinkRunResult:
    """What one sink run did. ``to_dict()`` is the XCom shape:
    ``{"connector", "records", "committed": {topic: {"<partition>": offset}}, "dead_lettered",
    "retries", "seconds"}``.

    ``records``: records passed to a successful ``put``; ``committed``: the offsets this run
    committed to the group ``connect-<connector>`` (next offset to read, last commit per
    partition); ``dead_lettered``: records written to the dead letter topic; ``retries``: ``put``
    calls redelivered after a :class:`RetriableError`. ``skipped`` (not part of the dict) counts
    records tolerated with no dead letter topic configured.
    """

    connector: str
    records: int = 0
    committed: dict[str, dict[str, int]] = field(default_factory=dict)
    dead_lettered: int = 0
    retries: int = 0
    seconds: float = 0.0
    skipped: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "connector": self.connector,
            "records": self.records,
            "committed": {t: dict(p) for t, p in self.committed.items()},
            "dead_lettered": self.dead_lettered,
            "retries": self.retries,
            "seconds": self.seconds,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SinkRunResult:
        return cls(
            connector=str(data["connector"]),
            records=int(data["records"]),
            committed={
                str(t): {str(p): int(o) for p, o in parts.items()}
                for t, parts in data.get("committed", {}).items()
            },
            dead_lettered=int(data.get("dead_lettered", 0)),
            retries=int(data.get("retries", 0)),
            seconds=float(data.get("seconds", 0.0)),
        )


# --------------------------------------------------------------------------------------------------
# config


def _string_props(config: Mapping[str, Any]) -> dict[str, Any]:
    """The raw config as connectors get it: the worker core's, the same as in a source run."""
    return connector_props(config)


def _validate(config: Mapping[str, Any]) -> tuple[dict[str, Any], SinkConnector, SinkPipeline]:
    """Typed runtime values, the connector (not yet initialised) and the first task's pipeline;
    one ConfigError naming every bad field (the worker core checks what source and sink runs share)."""
    if not isinstance(config, Mapping):
        raise ConfigError(errors={"config": f"expected a mapping of config fields, got {type(config).__name__}"})
    values, connector, errors = check_config(connector_props(config), SINK_CONFIG.merge(SINK_RUN_CONFIG),
                                             SinkConnector, kind="sink")
    if "topics" not in errors and "topics.regex" not in errors:
        has_list = bool(values.get("topics"))
        has_regex = bool(values.get("topics.regex"))
        if has_list == has_regex:
            why = (
                "exactly one of 'topics' and 'topics.regex' is required, got "
                + ("both" if has_list else "neither")
            )
            errors["topics"] = why
            errors["topics.regex"] = why
    pipeline: SinkPipeline | None = None
    if not errors:
        try:
            pipeline = SinkPipeline.from_config(config, task_id=0)
        except ConfigError as exc:
            errors.update(exc.errors or {"transforms": str(exc)})
    if errors:
        name = config.get("name")
        prefix = f"invalid configuration of sink connector {name!r}: " if name else "invalid configuration: "
        raise ConfigError(prefix + "; ".join(f"{k}: {v}" for k, v in errors.items()), errors)
    assert connector is not None and pipeline is not None
    return values, connector, pipeline


def _normalise_until(until: Any, name: str) -> dict[TopicPartition, int]:
    """``{TopicPartition: target}`` from any shape :func:`connect_runtime.ranges.offset_targets` takes
    (the one parser of offset targets, shared with the CLI and the provider)."""
    try:
        return _ranges.offset_targets(until, "until_offsets")
    except _ranges.RangesFormatError as exc:
        raise ConfigError(f"invalid until_offsets for sink connector {name!r}: {exc}",
                          {"until_offsets": str(exc)}) from None


# --------------------------------------------------------------------------------------------------
# contexts


class _ConnectorContext(SinkConnectorContext):
    def __init__(self, run: _Run) -> None:
        self._run = run

    def request_task_reconfiguration(self) -> None:
        log.info("sink connector %r asked for task reconfiguration: the next run plans its tasks again",
                 self._run.name)

    def raise_error(self, exc: BaseException) -> None:
        self._run.fail(ConnectError(f"sink connector {self._run.name!r} raised an error: {exc}"), exc)


class _Reporter(ErrantRecordReporter):
    def __init__(self, worker: _Worker) -> None:
        self._worker = worker

    def report(self, record: SinkRecord, error: BaseException) -> None:
        self._worker.report_errant(record, error)


class _TaskContext(SinkTaskContext):
    """The runtime side of one task's context. Every call comes from the task's own thread; what
    needs the consumer is queued and applied before the next poll."""

    def __init__(self, worker: _Worker, configs: dict[str, str]) -> None:
        self._worker = worker
        self._configs = configs
        self.rewinds: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()
        self.pause_changed = False
        self.commit_requested = False
        self.closing = False
        self.retry_timeout_s: float | None = None
        self._reporter = _Reporter(worker)

    @property
    def configs(self) -> dict[str, str]:
        return self._configs

    def offset(
        self, offsets: Mapping[TopicPartition, int] | TopicPartition, offset: int | None = None
    ) -> None:
        if isinstance(offsets, Mapping):
            items = list(offsets.items())
        else:
            if offset is None:
                raise ConnectError(f"offset({offsets!r}) needs the offset to rewind to")
            items = [(offsets, offset)]
        for tp, off in items:
            self.rewinds[TopicPartition(tp[0], int(tp[1]))] = int(off)

    def assignment(self) -> set[TopicPartition]:
        return set(self._worker.assigned)

    def _check(self, partitions: Sequence[TopicPartition], what: str) -> list[TopicPartition]:
        tps = [TopicPartition(tp[0], int(tp[1])) for tp in partitions]
        foreign = [tp for tp in tps if tp not in self._worker.assigned_set]
        if foreign:
            raise ConnectError(f"cannot {what} partitions not assigned to this task: {foreign}")
        return tps

    def pause(self, *partitions: TopicPartition) -> None:
        self.paused.update(self._check(partitions, "pause"))
        self.pause_changed = True

    def resume(self, *partitions: TopicPartition) -> None:
        self.paused.difference_update(self._check(partitions, "resume"))
        self.pause_changed = True

    def request_commit(self) -> None:
        self.commit_requested = True

    def is_closing(self) -> bool:
        return self.closing

    @property
    def generation(self) -> int:
        return self._worker.run.generation

    def timeout(self, timeout_ms: int) -> None:
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int):
            raise ConnectError(f"timeout(ms) needs an integer number of milliseconds, got {timeout_ms!r}")
        self.retry_timeout_s = timeout_ms / 1000 if timeout_ms > 0 else None

    def take_timeout(self) -> float | None:
        """The backoff the task asked for, once (Kafka Connect resets it after one use)."""
        t, self.retry_timeout_s = self.retry_timeout_s, None
        return t

    @property
    def errant_record_reporter(self) -> ErrantRecordReporter | None:
        return self._reporter


# --------------------------------------------------------------------------------------------------
# one task


class _Stopped(Exception):
    """Another task failed the run: stop without committing."""


class _Budget:
    """The run-wide ``max_records`` bound, shared by the task threads."""

    def __init__(self, limit: int | None) -> None:
        self._left = limit
        self._lock = threading.Lock()

    def exhausted(self) -> bool:
        return self._left is not None and self._left <= 0

    def take(self, n: int) -> int:
        if self._left is None:
            return n
        with self._lock:
            got = min(n, self._left)
            self._left -= got
            return got


class _Worker:
    """Runs one sink task in its own thread (see the module docstring for the loop)."""

    def __init__(self, run: _Run, task_id: int, task_config: dict[str, str],
                 partitions: list[TopicPartition], pipeline: SinkPipeline) -> None:
        self.run = run
        self.task_id = task_id
        self.task_config = task_config
        self.assigned = partitions
        self.assigned_set = set(partitions)
        self.pipeline = pipeline
        self.label = f"sink connector {run.name!r} task {task_id}"
        self.records = 0
        self.dead_lettered = 0
        self.skipped = 0
        self.retries = 0
        self.commit_failures = 0
        self.committed: dict[TopicPartition, int] = {}
        self._last_committed: dict[TopicPartition, int] = {}
        """Per partition where a rewind after a failed ``pre_commit`` goes (WorkerSinkTask's
        ``lastCommittedOffsets``): the start position, a task's rewind, or the last group commit."""
        self._commit_failing_since: float | None = None
        self._consumer: Consumer | None = None
        self._dlq: Producer | None = None
        self._in_put = False
        self._dlq_pending = 0
        self._task: SinkTask | None = None
        self._ctx = _TaskContext(self, task_config)
        self._pos: dict[TopicPartition, int] = {}
        self._target: dict[TopicPartition, int] = {}
        self._group: dict[TopicPartition, int | None] = {}
        self._consumer_paused: set[TopicPartition] = set()
        self._batch: list[ConsumedRecord] = []
        self._batch_index: dict[tuple[str, int, int], ConsumedRecord] | None = None
        self._report_failure: ConnectError | None = None
        self.thread = threading.Thread(target=self._main, name=f"sink-{run.name}-{task_id}", daemon=True)

    # ---- thread entry ------------------------------------------------------------------------

    def _main(self) -> None:
        try:
            self._execute()
        except _Stopped:
            log.info("%s stopped without a final commit: the run failed in another task", self.label)
        except ConnectError as exc:
            self.run.fail(exc, exc.__cause__)
        except BaseException as exc:
            self.run.fail(ConnectError(f"{self.label} failed: {type(exc).__name__}: {exc}"), exc)

    def _execute(self) -> None:
        run = self.run
        assert run.task_class is not None
        try:
            task = self._call("creation", run.task_class)
            self._task = task
            self._call("initialize", task.initialize, self._ctx)
            self._call("start", task.start, self.task_config)
        except BaseException:
            self.pipeline.close()
            raise
        opened = False
        ok = False
        try:
            self._consumer = run.backend.consumer(run.group)
            self._setup_positions()
            self._call("open", task.open, list(self.assigned))
            opened = True
            while True:
                self._loop()
                if self._commit(closing=True):
                    break
            ok = True
        finally:
            self._shutdown(task, opened, ok)

    def _shutdown(self, task: SinkTask, opened: bool, ok: bool) -> None:
        steps: list[tuple[str, Callable[[], Any]]] = []
        if opened:
            steps.append(("close", lambda: task.close(list(self.assigned))))
        steps.append(("stop", task.stop))
        steps.append(("pipeline close", self.pipeline.close))
        if self._dlq is not None:
            steps.append(("dead letter producer close", self._dlq.close))
        if self._consumer is not None:
            steps.append(("consumer close", self._consumer.close))
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
        run = self.run
        assert self._consumer is not None
        if run.generation_guard is not None:
            self._consumer.generation_guard = run.generation_guard
        for tp in self.assigned:
            self._group[tp] = run.group_committed.get(tp)
            self._pos[tp] = run.start_positions[tp]
            self._target[tp] = run.targets[tp]
        self._last_committed = dict(self._pos)
        self._consumer.assign(dict(self._pos))

    def _done(self, tp: TopicPartition) -> bool:
        return self._pos[tp] >= self._target[tp]

    def _apply_control(self) -> None:
        """Rewinds and pauses the task asked for since the last poll."""
        ctx = self._ctx
        consumer = self._consumer
        assert consumer is not None
        if ctx.rewinds:
            rewinds, ctx.rewinds = ctx.rewinds, {}
            for tp, off in rewinds.items():
                if tp not in self.assigned_set:
                    log.warning("%s: ignoring rewind of %s, a partition not assigned to it", self.label, tp)
                    continue
                consumer.seek(tp, off)
                self._pos[tp] = off
                self._last_committed[tp] = off  # as WorkerSinkTask.rewind()
            ctx.pause_changed = True
        if ctx.pause_changed:
            ctx.pause_changed = False
            want = {tp for tp in self.assigned if tp in ctx.paused or self._done(tp)}
            to_pause = sorted(want - self._consumer_paused)
            to_resume = sorted(self._consumer_paused - want)
            if to_pause:
                consumer.pause(to_pause)
            if to_resume:
                consumer.resume(to_resume)
            self._consumer_paused = want

    # ---- the loop ----------------------------------------------------------------------------

    def _loop(self) -> None:
        run = self.run
        ctx = self._ctx
        consumer = self._consumer
        task = self._task
        assert consumer is not None and task is not None
        interval = run.flush_interval_s
        next_commit = time.monotonic() + interval
        ctx.pause_changed = True
        max_poll = run.max_poll_records
        pos = self._pos
        target = self._target
        paused_since: float | None = None
        paused_logged = 0.0
        while True:
            if run.stop.is_set():
                raise _Stopped
            self._apply_control()
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
                    self._commit(closing=False)
                    next_commit = time.monotonic() + interval
                run.stop.wait(_PAUSED_IDLE_S)
                continue
            paused_since = None
            timeout = _POLL_TIMEOUT_S
            if run.deadline is not None:
                timeout = max(0.0, min(timeout, run.deadline - now))
            if not self._poll_and_deliver(max_poll, timeout):
                self._check_ends(remaining)
                if interval != 0 and time.monotonic() >= next_commit:
                    self._commit(closing=False)
                    next_commit = time.monotonic() + interval
                continue
            if interval == 0 or ctx.commit_requested or time.monotonic() >= next_commit:
                self._commit(closing=False)
                next_commit = time.monotonic() + interval

    def _poll_and_deliver(self, max_poll: int, timeout: float) -> bool:
        """One poll and the put of what it gave (False: nothing to deliver), with the cyclic garbage collector
        paused for the whole batch (see :func:`~connect_runtime.runtime.pipeline._gc_paused`, which then pauses
        nothing more): the batch's records are released before it runs again, so it never walks them (about
        15% of a small-record sink's time otherwise)."""
        consumer = self._consumer
        assert consumer is not None
        with _gc_paused():
            batch = consumer.poll(max_poll, timeout)
            if batch:
                batch, last = self._bound(batch)
            if not batch:
                return False
            self._deliver(batch, last)
            del batch  # released before the collector resumes
            return True

    def _bound(self, batch: list[ConsumedRecord]) -> tuple[list[ConsumedRecord], dict[tuple[str, int], int]]:
        """Drop records at or past their partition's target; take from the max_records budget.
        Also the last offset per partition of what is left (keys are plain tuples, which find the
        TopicPartition keys of the position dicts)."""
        last = _last_offsets(batch)
        target = self._target
        changed = False
        if any(off >= target[k] for k, off in last.items()):  # type: ignore[index]
            self._ctx.pause_changed = True  # such a partition is done after this batch
            batch = [r for r in batch if r[2] < target[r[0], r[1]]]  # type: ignore[index]
            changed = True
        granted = self.run.budget.take(len(batch))
        if granted < len(batch):
            batch = batch[:granted]
            changed = True
        if changed:
            last = _last_offsets(batch)
        return batch, last

    def _check_ends(self, remaining: list[TopicPartition]) -> None:
        """An empty poll: a partition whose end is now below our position has nothing more."""
        consumer = self._consumer
        assert consumer is not None
        active = [tp for tp in remaining if tp not in self._ctx.paused]
        if not active:
            return
        ends = consumer.end_offsets(active, self.run.flush_timeout_s)
        for tp in active:
            end = ends.get(tp)
            if end is not None and end <= self._pos[tp] < self._target[tp]:
                log.warning("%s: %s ends at %d, before its target %d: nothing more to read",
                            self.label, tp, end, self._target[tp])
                self._target[tp] = self._pos[tp]
                self._ctx.pause_changed = True

    def _deliver(self, batch: list[ConsumedRecord], last: dict[tuple[str, int], int]) -> None:
        try:
            processed = self.pipeline.process(batch)
        except Exception as exc:
            raise ConnectError(f"{self.label} failed converting records: {type(exc).__name__}: {exc}") from exc
        if processed.dead:
            for rec, error in processed.dead:
                self._dead_letter(rec, error)
        self._batch = batch
        self._batch_index = None
        self._in_put = True
        try:
            self._put(processed.records)
        finally:
            self._in_put = False
        self._batch = []
        self._batch_index = None
        pos = self._pos
        for key, off in last.items():
            pos[key] = off + 1  # type: ignore[index]  # keeps the existing TopicPartition key
        self.records += len(processed.records)

    def _put(self, records: list[SinkRecord]) -> None:
        task = self._task
        assert task is not None
        run = self.run
        started = time.monotonic()
        delay = min(_RETRY_DELAY_MIN_S, run.retry_delay_max_s)
        attempts = 0
        while True:
            attempts += 1
            try:
                task.put(list(records))
                break
            except RetriableError as exc:
                now = time.monotonic()
                ran_out = run.retry_bound_reached(started, now)
                if ran_out is not None:
                    raise ConnectError(
                        f"{self.label} failed: put still raised RetriableError after {attempts} attempts "
                        f"over {(now - started) * 1000:.0f} ms, redelivering {len(records)} records; waited "
                        f"until {ran_out}: {exc}") from exc
                asked = self._ctx.take_timeout()
                wait = run.retry_wait(started, now, delay if asked is None else asked)
                log.info("%s: put raised RetriableError (%s); redelivering %d records in %.3f s",
                         self.label, exc, len(records), wait)
                self.retries += 1
                if run.stop.wait(wait):
                    raise _Stopped from exc
                if asked is None:
                    delay = min(delay * 2, run.retry_delay_max_s)
            except ConnectError as exc:
                if exc is self._report_failure:
                    raise
                raise ConnectError(f"{self.label} failed in put: {type(exc).__name__}: {exc}") from exc
            except Exception as exc:
                raise ConnectError(f"{self.label} failed in put: {type(exc).__name__}: {exc}") from exc
        if self._report_failure is not None:
            raise self._report_failure

    # ---- commits -----------------------------------------------------------------------------

    def _commit(self, closing: bool) -> bool:
        """One commit point. Returns False when ``pre_commit`` failed and the task was rewound to its
        last committed offsets (the records are delivered again), True otherwise."""
        task = self._task
        consumer = self._consumer
        run = self.run
        assert task is not None and consumer is not None
        if run.stop.is_set():
            raise _Stopped
        self._ctx.commit_requested = False
        self._flush_dlq()
        current = {tp: self._pos[tp] for tp in self.assigned}
        self._ctx.closing = closing
        try:
            offsets = task.pre_commit(current)
        except Exception as exc:
            self._rewind_after_failed_commit(exc, closing)
            return False
        finally:
            self._ctx.closing = False
        self._flush_dlq()
        self._commit_failing_since = None
        if not offsets:
            return True
        commit = self._committable(offsets, current)
        if not commit:
            return True
        if run.stop.is_set():
            raise _Stopped
        try:
            run.commit_group(self, consumer, commit)
        except ProducerFencedError as exc:
            raise ProducerFencedError(f"{self.label}: {exc}") from exc
        self._group.update(commit)
        self._last_committed.update(commit)
        self.committed.update(commit)
        return True

    def _committable(self, offsets: Mapping[TopicPartition, int],
                     current: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """What ``pre_commit`` returned, less what the runtime cannot commit (as WorkerSinkTask): an
        offset past what the task was given, or for a partition not assigned to it, is ignored with a
        warning; offsets already committed are left out."""
        commit: dict[TopicPartition, int] = {}
        for tp, off in offsets.items():
            key = TopicPartition(tp[0], int(tp[1]))
            if key not in self.assigned_set:
                log.warning("%s: pre_commit returned offset %s for %s-%d, a partition not assigned to it: ignored",
                            self.label, off, key.topic, key.partition)
                continue
            if isinstance(off, bool) or not isinstance(off, int) or off < 0:
                log.warning("%s: pre_commit returned %r for %s-%d, not an offset: ignored", self.label, off,
                            key.topic, key.partition)
                continue
            if off > current[key]:
                log.warning("%s: pre_commit returned offset %d for %s-%d, past the %d the task was given (not "
                            "consumed yet): ignored", self.label, off, key.topic, key.partition, current[key])
                continue
            if self._group.get(key) != off:
                commit[key] = off
        return commit

    def _rewind_after_failed_commit(self, exc: Exception, closing: bool) -> None:
        """WorkerSinkTask: a failed ``pre_commit`` rewinds to the last committed offsets and the records
        are delivered again; here within the run's retry bound, and only while the run may deliver."""
        run = self.run
        now = time.monotonic()
        if self._commit_failing_since is None:
            self._commit_failing_since = now
        self.commit_failures += 1
        why = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, (DataError, ConfigError, ProducerFencedError)):
            # Kafka Connect redelivers after any pre_commit exception; these say the same records will fail
            # the same way (bad data, bad config) or that a newer run owns the partitions: fail at once
            raise ConnectError(
                f"{self.label} failed: pre_commit raised {why}; not delivered again (nothing more "
                f"was committed; the group keeps {_show(self._group)})") from exc
        ran_out = run.retry_bound_reached(self._commit_failing_since, now)
        if ran_out is None and closing and run.budget.exhausted():
            ran_out = "the run's max_records were consumed (nothing can be delivered again)"
        if ran_out is not None:
            raise ConnectError(
                f"{self.label} failed: pre_commit raised {self.commit_failures} times over "
                f"{now - self._commit_failing_since:.1f} s; waited until {ran_out}; nothing more was committed "
                f"(the group keeps {_show(self._group)}): {why}") from exc
        consumer = self._consumer
        assert consumer is not None
        for tp in self.assigned:
            back = self._last_committed[tp]
            if self._pos[tp] != back:
                consumer.seek(tp, back)
                self._pos[tp] = back
        self._ctx.pause_changed = True
        asked = self._ctx.take_timeout()  # the task's backoff (context.timeout), else an exponential one
        wait = run.retry_wait(self._commit_failing_since, now, asked if asked is not None else
                              min(_RETRY_DELAY_MIN_S * 2 ** min(self.commit_failures - 1, 10), run.retry_delay_max_s))
        log.error("%s: pre_commit failed (%s); rewound to the last committed offsets %s, delivering again in "
                  "%.3f s", self.label, why, _show(self._last_committed), wait)
        if run.stop.wait(wait):
            raise _Stopped from exc

    # ---- dead letters ------------------------------------------------------------------------

    def _dead_letter(self, rec: ConsumedRecord, exc: BaseException) -> None:
        run = self.run
        if not run.dlq_topic:
            self.skipped += 1
            return
        out: ProducerRecord = self.pipeline.dead_letter(rec, exc)
        if self._dlq is None:
            self._dlq = run.backend.producer()
        self._dlq.send([out])
        self._dlq_pending += 1

    def _flush_dlq(self) -> None:
        if self._dlq is not None and self._dlq_pending:
            self._dlq.flush(self.run.flush_timeout_s)
            self.dead_lettered += self._dlq_pending
            self._dlq_pending = 0

    def report_errant(self, record: SinkRecord, error: BaseException) -> None:
        """KIP-610: dead-letter a record the task could not write (or fail, with tolerance none)."""
        if not self.run.tolerate_all:
            failure = ConnectError(
                f"{self.label} reported record {record.topic}[{record.partition}]@{record.offset} as "
                f"failed and errors.tolerance=none: {type(error).__name__}: {error}")
            failure.__cause__ = error
            self._report_failure = failure
            raise failure
        key = (record.topic, record.partition, record.offset)
        if self._batch_index is None:
            self._batch_index = {(r[0], r[1], r[2]): r for r in self._batch}
        original = self._batch_index.get(key) or _consumed_from(record, self.pipeline)
        if self.run.log_errors:  # the pipeline logs conversion and transform failures itself
            detail = f" key={record.key!r} value={record.value!r}" if self.run.log_messages else ""
            log.warning("%s: task reported record %s[%d]@%d as failed: %s: %s%s", self.label, record.topic,
                        record.partition, record.offset, type(error).__name__, error, detail)
        self._dead_letter(original, error)
        if not self._in_put:
            # reported from flush/pre_commit/close: a sink that commits its own offsets there (SqlSink,
            # FileSink) may commit right after this returns, so the dead letter must be durable first.
            # Reports from put are batched and flushed before the next pre_commit.
            self._flush_dlq()


def _last_offsets(batch: list[ConsumedRecord]) -> dict[tuple[str, int], int]:
    """The offset of the last record per partition of a batch; for a batch of one partition (the common
    case) without a step per record."""
    if not batch:
        return {}
    first, end = batch[0], batch[-1]
    if (first[1] == end[1] and first[0] == end[0] and len(set(map(_partition_of, batch))) == 1
            and len(set(map(_topic_of, batch))) == 1):
        return {(end[0], end[1]): end[2]}
    last: dict[tuple[str, int], int] = {}
    for rec in batch:
        last[rec[0], rec[1]] = rec[2]
    return last


def _show(offsets: Mapping[TopicPartition, int | None]) -> str:
    return "{" + ", ".join(f"{t}-{p}: {o}" for (t, p), o in sorted(offsets.items())) + "}"


def _to_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, separators=(",", ":"), default=str).encode()


def _consumed_from(record: SinkRecord, pipeline: SinkPipeline) -> ConsumedRecord:
    """A reported record no longer in the current batch (reported from ``flush``/``pre_commit``): its
    fields written back by the run's converters, as Kafka Connect's errant record reporter does, so a
    JSON string value is dead-lettered as JSON; a field a converter cannot write falls back to UTF-8 or
    JSON bytes (a report never fails on it)."""
    t = record.topic

    def write(converter: Any, value: Any) -> bytes | None:
        if value is None or isinstance(value, bytes):
            return value
        try:
            out = converter.from_connect(t, value, None)
        except Exception:
            return _to_bytes(value)
        return out if out is None or isinstance(out, bytes) else _to_bytes(out)

    hc = pipeline.header_converter
    headers = [(k, write(hc, v)) for k, v in record.headers] if record.headers else None
    return ConsumedRecord(t, record.partition, record.offset, write(pipeline.key_converter, record.key),
                          write(pipeline.value_converter, record.value), record.timestamp, headers)


# --------------------------------------------------------------------------------------------------
# the run


class _Run(RunState):
    """Shared state of one run: bounds, failure (``stop`` set means abort: nothing more is committed), the
    task threads. The deadline does not set ``stop``: tasks end at it with their final commit."""

    deadline_stops = False

    def __init__(self, name: str, values: Mapping[str, Any], backend: Backend,
                 max_records: int | None, max_seconds: float | None, generation: int = 0) -> None:
        started = time.monotonic()
        super().__init__(name, None if max_seconds is None else started + max_seconds)
        self.group = f"connect-{name}"
        self.backend = backend
        self.task_class: type[SinkTask] | None = None
        self.started = started
        self.max_seconds = max_seconds
        self.budget = _Budget(max_records)
        self.generation = generation
        self.generation_guard: tuple[str, bytes, int] | None = (REGISTRY_STORE, registry_key(name), generation)
        self.fence: TransactionalProducer | None = None
        self.fenced_backend = False  # group commits go through the commit fence (start_fence)
        self._fence_lock = threading.Lock()
        self.shutdown_grace_s = values["task.shutdown.graceful.timeout.ms"] / 1000
        self.flush_interval_s = values["offset.flush.interval.ms"] / 1000
        self.flush_timeout_s = values["offset.flush.timeout.ms"] / 1000
        self.retry_timeout_ms = int(values["errors.retry.timeout"])
        self.ride_out_s = store_ride_out_s(values, self.max_seconds)
        self.retry_delay_max_s = values["errors.retry.delay.max.ms"] / 1000
        self.tolerate_all = str(values["errors.tolerance"]).lower() == "all"
        self.dlq_topic = (values["errors.deadletterqueue.topic.name"] or "").strip() if self.tolerate_all else ""
        self.log_errors = bool(values["errors.log.enable"])
        self.log_messages = bool(values["errors.log.include.messages"])
        self.max_poll_records = int(values["consumer.max.poll.records"])
        self.pause_timeout_s = values["pause.timeout.ms"] / 1000
        self.targets: dict[TopicPartition, int] = {}
        self.start_positions: dict[TopicPartition, int] = {}
        self.group_committed: dict[TopicPartition, int | None] = {}

    def fail(self, exc: BaseException, cause: BaseException | None = None) -> None:
        if cause is not None and exc.__cause__ is None and exc is not cause:
            exc.__cause__ = cause
        if self.error is None:
            log.error("%s", exc)
        super().fail(exc)

    # ---- bounded redelivery (RetriableError from put, failed pre_commit) ----------------------

    def retry_bound_reached(self, since: float, now: float) -> str | None:
        """What bound a redelivery that started failing at ``since`` has reached, or None."""
        ms = self.retry_timeout_ms
        if self.deadline is not None and now >= self.deadline:
            return f"the run's max_seconds ({self.max_seconds:g} s) ran out"
        if ms > 0:
            if (now - since) * 1000 >= ms:
                return f"errors.retry.timeout={ms} ms ran out"
        elif self.deadline is None and now - since >= DEFAULT_RETRY_BOUND_S:
            return (f"the default bound of {DEFAULT_RETRY_BOUND_S:g} s ran out (errors.retry.timeout={ms} and "
                    "no max_seconds)")
        return None

    def store_bound_reached(self, since: float, now: float) -> str | None:
        """Whether riding out a store that cannot be reached, since ``since``, has reached its bound
        (:func:`~connect_runtime.runtime.worker.store_ride_out_s`, or the run's ``max_seconds``)."""
        if self.deadline is not None and now >= self.deadline:
            return f"the run's max_seconds ({self.max_seconds:g} s) ran out"
        if now - since >= self.ride_out_s:
            ms = self.retry_timeout_ms
            return (f"errors.retry.timeout={ms} ms ran out" if ms > 0 else
                    f"{self.ride_out_s:g} s ran out (errors.retry.timeout={ms}: the default ride-out)")
        return None

    def retry_wait(self, since: float, now: float, want: float) -> float:
        """``want`` seconds, cut to what is left of the bound."""
        wait = want
        if self.retry_timeout_ms > 0:
            wait = min(wait, since + self.retry_timeout_ms / 1000 - now)
        elif self.deadline is None:
            wait = min(wait, since + DEFAULT_RETRY_BOUND_S - now)
        if self.deadline is not None:
            wait = min(wait, self.deadline - now)
        return max(0.0, wait)

    # ---- generations: fencing the group commits of older runs ----------------------------------

    def start_fence(self) -> None:
        """A backend whose consumer cannot check the generation inside its commit (Kafka): initialise this
        run's commit-fence producer, which fences the one of every older run (before offsets are read)."""
        cid = self.backend.cluster_id
        tid = f"{cid}-{self.name}-sink-commits" if cid else f"{self.name}-sink-commits"
        fence = self.backend.transactional_producer(tid, SINK_COMMITS_STORE)
        try:
            fence.init_transactions(self.flush_timeout_s)
        except BaseException:
            fence.close()
            raise
        self.fence = fence
        self.fenced_backend = True

    def commit_group(self, worker: _Worker, consumer: Consumer, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit group offsets for one task, fenced by the generation (see the module docstring).

        A store that cannot be reached for a moment (a broker restart, a write lock held) is ridden out: the
        commit is tried again (one log line per backoff: 300 ms doubling, capped by ``errors.retry.delay.max.ms``)
        within ``errors.retry.timeout`` (else ``max_seconds``, else :data:`DEFAULT_RETRY_BOUND_S`). Committing
        the same offsets again is harmless. A commit-fence producer whose transaction failed is replaced; before it
        is, the registry is read, and a newer generation fails this run as fenced, as at its start."""
        started = time.monotonic()
        delay = min(_RETRY_DELAY_MIN_S, self.retry_delay_max_s)
        attempts = 0
        while True:
            attempts += 1
            try:
                self._commit_group_once(worker, consumer, offsets)
                return
            except (ProducerFencedError, ConfigError):
                raise
            except (BackendUnavailableError, WaitTimeoutError) as exc:
                now = time.monotonic()
                ran_out = self.store_bound_reached(started, now)
                if ran_out is not None:
                    raise BackendUnavailableError(
                        f"{worker.label}: committing offsets {_show(offsets)} failed {attempts} times over "
                        f"{now - started:.1f} s; waited until {ran_out}: {exc}") from exc
                wait = max(0.0, min(delay, started + self.ride_out_s - now))
                if self.deadline is not None:
                    wait = max(0.0, min(wait, self.deadline - now))
                log.warning("%s: committing offsets failed (%s: %s); trying again in %.3f s", worker.label,
                            type(exc).__name__, exc, wait)
                delay = min(delay * 2, self.retry_delay_max_s)
                if self.stop.wait(wait):
                    raise _Stopped from exc

    def _commit_group_once(self, worker: _Worker, consumer: Consumer, offsets: Mapping[TopicPartition, int]) -> None:
        if self.fenced_backend:
            key = json.dumps([self.name, {"task": worker.task_id}], separators=(",", ":")).encode()
            value = json.dumps({"generation": self.generation, "offsets": {
                f"{t}-{p}": o for (t, p), o in sorted(offsets.items())}}, separators=(",", ":")).encode()
            with self._fence_lock:
                if self.fence is None:  # the last one failed: a new one, if this run is still the newest
                    self._check_newest()
                    self.start_fence()
                    self._check_newest()
                fence = self.fence
                assert fence is not None
                try:
                    fence.begin_transaction()
                    fence.commit_transaction([], self.flush_timeout_s, extra={SINK_COMMITS_STORE: [(key, value)]})
                except (ProducerFencedError, ConfigError):
                    raise
                except Exception as exc:
                    # its transaction is in an unknown or fatal state (a broker restart under it): the next try
                    # starts a new fence (after reading the registry again)
                    self.close_fence()
                    if isinstance(exc, (BackendUnavailableError, WaitTimeoutError)):
                        raise
                    raise BackendUnavailableError(
                        f"sink connector {self.name!r}: the commit fence's transaction failed ({type(exc).__name__}: "
                        f"{exc}); a new fence is started for the next try") from exc
        consumer.commit(offsets, self.flush_timeout_s)

    def _check_newest(self) -> None:
        from connect_runtime.runtime.registry import Registry

        newest = Registry(self.backend).get(self.name)
        if newest is not None and newest.generation > self.generation:
            raise ProducerFencedError(
                f"sink connector {self.name!r}: generation {newest.generation} started while this run "
                f"(generation {self.generation}) could not reach the store, so this run commits nothing more")

    def close_fence(self) -> None:
        fence, self.fence = self.fence, None
        if fence is not None:
            try:
                fence.close()
            except Exception as exc:
                log.warning("sink connector %r: closing the commit fence raised %r", self.name, exc)


def run_sink(
    config: Mapping[str, Any],
    backend: str | Backend = "sqlite:///pyconnect.db",
    *,
    until_offsets: Any = None,
    max_records: int | None = None,
    max_seconds: float | None = None,
    backend_settings: Mapping[str, Any] | None = None,
    progress: ProgressCallback | None = None,
    stop: threading.Event | None = None,
) -> SinkRunResult:
    """Run a sink connector once, bounded; see the module docstring for the semantics.

    :param config: the raw connector config (strings or typed JSON values).
    :param backend: a backend URL (``sqlite:///file.db``, ``kafka://host:9092``) or an open
        :class:`Backend` (left open).
    :param until_offsets: targets per partition, ``{topic: {partition: next_offset}}`` or an
        upstream ``SourceRunResult`` (or its ``to_dict()``); partitions it does not name are not read.
    :param max_records: stop after this many records were consumed (run-wide).
    :param max_seconds: stop after this many seconds (the final commit still happens).
    :param backend_settings: client settings for a backend opened from a URL.
    :param progress: ``progress(records_so_far, seconds)``, called at most every ~5 s and at the end.
    :param stop: an event another thread may set (Airflow's ``on_kill``): the tasks stop at once and commit
        nothing more; what they consumed since the last commit is delivered again by the next run.
    :raises ConfigError: one error naming every invalid field.
    :raises ConnectError: a task failed (the message names the connector, the task and the cause).
    """
    values, connector, first_pipeline = _validate(config)
    name = str(values["name"])
    targets_given = None if until_offsets is None else _normalise_until(until_offsets, name)
    if max_records is not None and max_records < 0:
        raise ConfigError(errors={"max_records": f"expected at least 0, got {max_records}"})
    if max_seconds is not None and max_seconds < 0:
        raise ConfigError(errors={"max_seconds": f"expected at least 0, got {max_seconds}"})
    owned = not isinstance(backend, Backend)
    store = open_backend(backend, backend_settings)
    pipelines: list[SinkPipeline] = [first_pipeline]
    try:
        floor = _destination_floor(connector, config, name)
        generation = Generation.begin(store, name, kind="sink", connector_class=str(values["connector.class"]),
                                      floor=max(floor, 0), secrets=secret_values(config))
        try:
            result = _run(config, values, connector, store, pipelines, targets_given,
                          max_records, max_seconds, progress, generation, stop)
        except BaseException as exc:
            _finish_registration(generation, exc, None, values.get("topics"), _mirror(connector, config, floor))
            raise
        _finish_registration(generation, None, result, values.get("topics"), _mirror(connector, config, floor))
        return result
    finally:
        if owned:
            store.close()


def _destination_floor(connector: SinkConnector, config: Mapping[str, Any], name: str) -> int:
    """The lowest generation this run may take: above the newest one recorded in the destination of a sink
    that keeps its offsets there (``read_offsets``), so a replaced offsets store (a new ``AIRFLOW_HOME``,
    SQLite to Kafka) continues from the destination instead of being refused there as a zombie."""
    try:
        dest = connector.read_offsets(_string_props(config))
    except (ConfigError, ConnectError):
        raise
    except Exception as exc:
        raise ConnectError(f"sink connector {name!r}: reading the offsets it keeps in its destination failed: "
                           f"{type(exc).__name__}: {exc}") from exc
    if dest is None:
        return -1  # keeps no offsets in its destination
    return dest.generation + 1


def _mirror(connector: SinkConnector, config: Mapping[str, Any], floor: int) -> dict[str, Any]:
    """After a run of a sink that keeps its offsets in its destination (``floor`` >= 0): those offsets, for the
    registry (what the Connectors view and ``offsets get`` without a config show). Bookkeeping only."""
    if floor < 0:
        return {}
    try:
        dest = connector.read_offsets(_string_props(config))
    except Exception as exc:
        log.warning("sink connector %r: reading its destination's offsets after the run failed: %s: %s",
                    config.get("name"), type(exc).__name__, exc)
        return {"owns_offsets": True}
    if dest is None:
        return {}
    return destination_mirror(dest)


def destination_mirror(dest: DestinationOffsets) -> dict[str, Any]:
    """The registry fields mirroring a destination's offsets."""
    return {"owns_offsets": True, "destination": dest.where,
            "destination_offsets": [[tp.topic, tp.partition, off] for tp, off in sorted(dest.offsets.items())],
            "destination_read": int(time.time() * 1000)}


def _finish_registration(generation: Generation, exc: BaseException | None, result: SinkRunResult | None,
                         configured: Any, mirror: Mapping[str, Any]) -> None:
    """Record the end of this sink generation; a sink that keeps its offsets in its destination is shown as
    such, with those offsets (``mirror``)."""
    topics = set(result.committed) if result is not None else set()
    if isinstance(configured, (list, tuple)):
        topics |= {str(t) for t in configured}
    records = {} if result is None else {"records": result.records}  # the run's attempt in the registry
    generation.finish(exc, sorted(topics), **mirror, **records)


def _run(config: Mapping[str, Any], values: dict[str, Any], connector: SinkConnector, backend: Backend,
         pipelines: list[SinkPipeline], targets_given: dict[TopicPartition, int] | None,
         max_records: int | None, max_seconds: float | None,
         progress: ProgressCallback | None, generation: Generation | None = None,
         stop: threading.Event | None = None) -> SinkRunResult:
    name = str(values["name"])
    props = _string_props(config)
    run = _Run(name, values, backend, max_records, max_seconds, 0 if generation is None else generation.number)
    run.external_stop = stop
    connector.initialize(_ConnectorContext(run))
    try:
        connector.start(props)
    except Exception as exc:
        for p in pipelines:
            p.close()
        raise ConnectError(f"sink connector {name!r} failed to start: {type(exc).__name__}: {exc}") from exc
    workers: list[_Worker] = []
    try:
        task_class = connector.task_class()
        if not (isinstance(task_class, type) and issubclass(task_class, SinkTask)):
            raise ConfigError(errors={"connector.class": f"task_class() of {values['connector.class']!r} "
                                                         f"is {task_class!r}, not a SinkTask subclass"})
        run.task_class = task_class
        task_configs = connector.task_configs(int(values["tasks.max"]))
        if len(task_configs) > int(values["tasks.max"]):
            raise ConnectError(f"sink connector {name!r}: task_configs({values['tasks.max']}) returned "
                               f"{len(task_configs)} task configs (more than tasks.max)")
        if not task_configs:
            log.info("sink connector %r planned no tasks: nothing to do", name)
            return SinkRunResult(connector=name, seconds=round(time.monotonic() - run.started, 3))
        if run.dlq_topic:
            backend.create_topics({run.dlq_topic: int(values["errors.deadletterqueue.topic.partitions"])})
        partitions = _plan(run, values, targets_given)
        if generation is not None:  # the registry (Connectors view, admin) shows how many tasks this run has
            generation.update(tasks=len(task_configs))
        while len(pipelines) < len(task_configs):
            pipelines.append(SinkPipeline.from_config(config, task_id=len(pipelines)))
        for i, tc in enumerate(task_configs):
            workers.append(_Worker(run, i, {str(k): v if isinstance(v, Password) else str(v)
                                            for k, v in tc.items()},
                                   partitions[i :: len(task_configs)], pipelines[i]))
        for p in pipelines[len(task_configs):]:
            p.close()
        del pipelines[len(task_configs):]
        _drive(run, workers, progress, generation)
    finally:
        run.close_fence()
        if not workers:
            for p in pipelines:
                p.close()
        try:
            connector.stop()
        except Exception as exc:
            log.warning("sink connector %r: stop raised %s: %s", name, type(exc).__name__, exc)
    if run.error is not None:
        raise run.error
    committed: dict[str, dict[str, int]] = {}
    for w in workers:
        for tp, off in sorted(w.committed.items()):
            committed.setdefault(tp.topic, {})[str(tp.partition)] = off
    seconds = round(time.monotonic() - run.started, 3)
    result = SinkRunResult(
        connector=name,
        records=sum(w.records for w in workers),
        committed=committed,
        dead_lettered=sum(w.dead_lettered for w in workers),
        retries=sum(w.retries for w in workers),
        seconds=seconds,
        skipped=sum(w.skipped for w in workers),
    )
    if result.skipped:
        log.warning("sink connector %r skipped %d failed records (errors.tolerance=all, no dead letter topic)",
                    name, result.skipped)
    return result


def _plan(run: _Run, values: Mapping[str, Any],
          targets_given: dict[TopicPartition, int] | None) -> list[TopicPartition]:
    """Partitions to read (sorted), with their start positions and targets set on ``run``."""
    consumer = run.backend.consumer(run.group)
    try:
        if run.backend.capabilities.commits_check_generation:
            pass  # the consumer checks run.generation_guard inside each commit
        else:
            run.generation_guard = None
            run.start_fence()  # before the group's offsets are read
        if values.get("topics"):
            partitions = consumer.partitions(list(values["topics"]))
        else:
            partitions = consumer.partitions(pattern=values["topics.regex"])
        if run.dlq_topic:
            partitions = [tp for tp in partitions if tp.topic != run.dlq_topic]
        partitions = sorted(set(partitions))
        if not partitions:
            return []
        timeout = run.flush_timeout_s
        committed = consumer.committed(partitions, timeout)
        beginning = consumer.beginning_offsets(partitions, timeout)
        ends = consumer.end_offsets(partitions, timeout)
    finally:
        consumer.close()
    if targets_given is not None:
        unknown = sorted(set(targets_given) - set(partitions))
        if unknown:
            log.warning("sink connector %r: until_offsets names partitions not consumed by this run: %s",
                        run.name, unknown)
    for tp in partitions:
        c = committed.get(tp)
        run.group_committed[tp] = c
        start = c if c is not None else beginning[tp]
        run.start_positions[tp] = start
        if targets_given is None:
            target = ends[tp]
        else:
            target = targets_given.get(tp, start)
            if target > ends[tp]:
                log.warning("sink connector %r: until_offsets target %d of %s is past its end %d: "
                            "reading to the end", run.name, target, tp, ends[tp])
                target = ends[tp]
        run.targets[tp] = target
    return partitions


def _drive(run: _Run, workers: list[_Worker], progress: ProgressCallback | None,
           generation: Generation | None = None) -> None:
    """Start the task threads and let the worker core supervise them (progress every ~5 s, registry
    heartbeat, bounded like a source run: once the run stopped or ``max_seconds`` passed, tasks get
    ``task.shutdown.graceful.timeout.ms`` to finish, then the run fails naming them)."""
    for w in workers:
        w.thread.start()
    by_thread = {id(w.thread): str(w.task_id) for w in workers}

    def report() -> None:
        assert progress is not None
        progress(sum(x.records for x in workers), round(time.monotonic() - run.started, 3))

    try:
        supervise(run, [w.thread for w in workers], run.shutdown_grace_s, kind="sink",
                  progress=None if progress is None else report, generation=generation,
                  names_of=lambda t: by_thread.get(id(t), t.name))
    except BaseException:
        run.stop.set()
        raise
    if progress is not None:
        report()


__all__ = ["DEFAULT_RETRY_BOUND_S", "PROGRESS_INTERVAL_S", "SINK_COMMITS_STORE", "SINK_RUN_CONFIG", "SinkRunResult",
           "run_sink"]
