"""The source direction's lifecycle: :class:`SourceRun` fills in the hooks of
:class:`~connect_runtime.runtime.lifecycle.ConnectorRun` (validate, begin the generation and fence the previous
one's producers, start the connector with its offset reader, plan tasks, run them, replan on request, stop,
record the generation's end, the result); :class:`SourceTaskRun` is one task of a :func:`plan_source` plan as its
own run. The entry points :func:`run_source`, :func:`plan_source` and :func:`run_source_task` are thin."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from connect_runtime.api.errors import (
    BackendUnavailableError,
    ConfigError,
    ProducerFencedError,
    WaitTimeoutError,
)
from connect_runtime.backends.base import Backend, OffsetStore
from connect_runtime.metrics import Metrics
from connect_runtime.runtime.fencing import begin_generation, fenced_by_newer, join_generation
from connect_runtime.runtime.lifecycle import ConnectorRun
from connect_runtime.runtime.offsets import StoreOffsetReader
from connect_runtime.runtime.registry import ConnectorRecord, Registry
from connect_runtime.runtime.source.at_least_once import AtLeastOnceTask
from connect_runtime.runtime.source.config import (
    SourcePlan,
    check_bounds,
    parse_ledger_key,
    parse_scope,
    prepare,
)
from connect_runtime.runtime.source.contexts import ConnectorContext, offset_reader
from connect_runtime.runtime.source.exactly_once import ExactlyOnceTask
from connect_runtime.runtime.source.result import SourceRunResult, build_result
from connect_runtime.runtime.source.state import SourceRunState
from connect_runtime.runtime.source.task import SourceWorkerTask
from connect_runtime.runtime.task import WorkerTask
from connect_runtime.runtime.worker import Generation
from connect_runtime.secrets import secret_values

log = logging.getLogger(__name__)


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
    metrics: Metrics | None = None,
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
    :param metrics: where the tasks send Kafka Connect's task metrics (:mod:`connect_runtime.metrics`);
        ``None``: nowhere. Progress lines are logged every ``progress.interval.ms`` either way.
    :raises ConfigError: naming every invalid field.
    :raises ProducerFencedError: a newer run (generation) of the connector started; nothing more was committed.
    """
    run = SourceRun(config, backend, exactly_once=exactly_once, max_records=max_records, max_seconds=max_seconds,
                    backend_settings=backend_settings, progress=progress, ledger_key=ledger_key, identity=identity,
                    stop=stop, metrics=metrics)
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
    metrics: Metrics | None = None,
) -> SourceRunResult:
    """Fan-out, step 2: run task ``index`` of a :func:`plan_source` plan, bounded, as its own run.

    The task belongs to the plan's generation: if a newer plan or run of the connector (same identity)
    started, it is fenced (:class:`ProducerFencedError`, nothing committed). Its result holds its own
    ranges; merge the ranges of every task with :func:`connect_runtime.ranges.merge`.
    """
    return SourceTaskRun(config, backend, plan, index, max_records=max_records, max_seconds=max_seconds,
                         backend_settings=backend_settings, progress=progress, ledger_key=ledger_key,
                         stop=stop, metrics=metrics).execute()


class SourceRun(ConnectorRun[SourceRunResult]):
    """A bounded source run: the :class:`ConnectorRun` lifecycle with the source's hooks."""

    kind = "source"
    state: SourceRunState
    p: SourcePlan
    """Set by :meth:`validate`: the validated config and connector, the identity scope and ledger key."""

    def __init__(self, config: Mapping[str, Any], backend: str | Backend, *, exactly_once: bool = True,
                 max_records: int | None = None, max_seconds: float | None = None,
                 backend_settings: Mapping[str, Any] | None = None,
                 progress: Callable[[int, float], None] | None = None, ledger_key: Mapping[str, Any] | None = None,
                 identity: str | None = None, stop: threading.Event | None = None,
                 metrics: Metrics | None = None) -> None:
        super().__init__(backend, backend_settings, progress=progress, stop=stop, metrics=metrics)
        self.config = config
        self.exactly_once = exactly_once
        self.max_records = max_records
        self.max_seconds = max_seconds
        self.ledger_key_arg = ledger_key
        self.identity: Any = identity
        self.first_index = 0
        self.store: OffsetStore | None = None
        self.reader: StoreOffsetReader | None = None
        self.context: ConnectorContext | None = None
        self.workers: list[SourceWorkerTask] = []
        self.earlier_polled = 0  # records polled by the tasks of earlier rounds (a replan)

    def validate(self) -> None:
        check_bounds(self.max_records, self.max_seconds)
        p = prepare(self.config, self.exactly_once)
        p.scope = parse_scope(self.identity)
        p.ledger_key = parse_ledger_key(self.ledger_key_arg)
        self.p = p
        self.state = SourceRunState(p.name, self.max_records,
                          None if self.max_seconds is None else self.t0 + self.max_seconds)

    def begin_generation(self) -> Generation | None:
        log.info("source connector %s (%s): %s run on %s", self.p.name, type(self.p.connector).__name__,
                 "exactly-once" if self.exactly_once else "at-least-once", self.backend.url)
        p = self.p
        generation = begin_generation(self.backend, p.name, kind="source", scope=p.scope,
                                connector_class=str(p.values["connector.class"]),
                                offsets_store=p.values["offsets.storage.topic"], secrets=secret_values(p.props),
                                task_ids=lambda i: p.transactional_id(i, self.backend.cluster_id),
                                fence_timeout=p.values["offset.flush.timeout.ms"] / 1000,
                                transactional=self.exactly_once)
        p.record = generation.record
        return generation

    def start_connector(self) -> None:
        self.store = self.backend.offset_store(self.p.values["offsets.storage.topic"])
        self.reader = offset_reader(self.backend, self.store, self.p)
        self.context = ConnectorContext(self.reader, self.state)
        self.p.connector.initialize(self.context)
        self.p.connector.start(self.p.props)

    def plan_tasks(self) -> list[dict[str, str]]:
        if self.p.task_class is None:
            self.p.load_task_class()
        return self.p.task_configs()

    def create_tasks(self, configs: list[dict[str, str]]) -> list[WorkerTask]:
        cls: type[SourceWorkerTask] = ExactlyOnceTask if self.exactly_once else AtLeastOnceTask
        self.earlier_polled += sum(w.polled_records for w in self.workers)
        self.workers = [cls(self.state, self.p, self.backend, self.first_index + i, dict(cfg), metrics=self.metrics)
                        for i, cfg in enumerate(configs)]
        return list(self.workers)

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

    def progress_interval_s(self) -> float:
        return float(self.p.values["progress.interval.ms"]) / 1000

    def records_so_far(self) -> int:
        return self.earlier_polled + sum(w.polled_records for w in self.workers)

    def progress_detail(self) -> str:
        return f"{self.state.records} committed"

    def topics(self) -> Sequence[str]:
        return sorted(self.state.topics)

    def reconfiguration_requested(self) -> bool:
        return self.context is not None and self.context.take_reconfiguration()

    def out_of_bounds(self) -> bool:
        return self.state.out_of_bounds()

    def stop_connector(self) -> None:
        if self.state.records == 0 and not self.state.failed:
            try:
                self.state.report_nothing_read("connector", self.p.connector.nothing_read())
            except Exception as exc:  # a report is for the log: it never fails a run that succeeded
                log.warning("connector %s: nothing_read() raised %r", self.p.name, exc)
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

    def explain(self, exc: BaseException) -> BaseException:
        record = getattr(getattr(self, "p", None), "record", None)
        if isinstance(exc, ProducerFencedError) and record is not None:
            return fenced_by_newer(self.backend, record, exc, self.fenced_label())
        return exc

    def fenced_label(self) -> str:
        return f"source connector {self.p.name!r}"

    def result(self) -> SourceRunResult:
        seconds = round(time.monotonic() - self.t0, 6)
        if self.progress is not None:
            self.progress(self.state.records, seconds)
        return build_result(self.p, self.state, seconds, self.backend, self.exactly_once)

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
        check_bounds(self.max_records, self.max_seconds)
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
        record = join_generation(self.backend, self.p.name, self.p.scope, self.generation_number, self.index)
        self.p.record = record
        self.p.load_task_class()
        return Generation(self.backend, record, None)

    def start_connector(self) -> None:
        """The connector is not started for one task of a plan."""

    def stop_connector(self) -> None:
        """Nothing started, nothing to stop."""

    def plan_tasks(self) -> list[dict[str, str]]:
        return [self.task_config]

    def fenced_label(self) -> str:
        return f"source connector {self.p.name!r} task {self.index}"

    def finish(self, failed: BaseException | None) -> None:
        """The plan's generation stays open for its other tasks: record this task as done (or the failure), in one
        atomic registry update (tasks of the plan that end at once each keep their own done task)."""
        registry = Registry(self.backend)
        record = self.p.record
        assert record is not None
        if isinstance(failed, (BackendUnavailableError, WaitTimeoutError)):
            log.warning("%s: the failure is not recorded: the store could not be reached", self.p.name)
            return  # the registry is in the store that failed the run (see Generation.finish)
        now = int(time.time() * 1000)
        if failed is not None:
            registry.update(record, state="failed", error=f"task {self.index}: {type(failed).__name__}: {failed}"[:500],
                            heartbeat=now)
            return
        index, topics = int(self.index), set(self.state.topics)

        def done(have: ConnectorRecord) -> None:
            have.done_tasks = sorted(set(have.done_tasks or []) | {index})
            have.heartbeat = now
            have.topics = sorted(set(have.topics) | topics)
            if len(have.done_tasks) >= have.tasks and have.state == "running":
                have.state, have.finished = "stopped", now

        registry.modify(record, done)


__all__ = ["SourceRun", "SourceTaskRun", "plan_source", "run_source", "run_source_task"]
