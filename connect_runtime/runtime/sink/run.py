"""A sink run: the run's shared state (:class:`SinkRunState`) and :func:`run_sink`, which validates, begins a
generation, starts the connector, plans and starts the tasks, supervises them, stops and records the end of the
generation in the registry (the order is the package docstring's)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config import Password
from connect_runtime.api.connector import DestinationOffsets, SinkConnector
from connect_runtime.api.errors import ConfigError, ConnectError
from connect_runtime.api.records import TopicPartition
from connect_runtime.api.sink import SinkTask
from connect_runtime.backends import open_backend
from connect_runtime.backends.base import Backend
from connect_runtime.runtime.errors import RetryPolicy
from connect_runtime.runtime.pipeline import SinkPipeline
from connect_runtime.runtime.sink.commits import SinkCommitFence
from connect_runtime.runtime.sink.config import validate
from connect_runtime.runtime.sink.contexts import ConnectorContext
from connect_runtime.runtime.sink.planning import assign, plan, until_targets
from connect_runtime.runtime.sink.result import ProgressCallback, SinkRunResult
from connect_runtime.runtime.sink.task import SinkWorkerTask
from connect_runtime.runtime.worker import Generation, RunState, connector_props, supervise
from connect_runtime.secrets import secret_values

log = logging.getLogger(__name__)


class Budget:
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


class SinkRunState(RunState):
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
        self.budget = Budget(max_records)
        self.generation = generation
        self.shutdown_grace_s = values["task.shutdown.graceful.timeout.ms"] / 1000
        self.flush_interval_s = values["offset.flush.interval.ms"] / 1000
        self.flush_timeout_s = values["offset.flush.timeout.ms"] / 1000
        self.retry = RetryPolicy(values, self.deadline, max_seconds)
        self.fence = SinkCommitFence(backend, name, generation, self.flush_timeout_s)
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
    values, connector, first_pipeline = validate(config)
    name = str(values["name"])
    targets_given = None if until_offsets is None else until_targets(until_offsets, name)
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
        dest = connector.read_offsets(connector_props(config))
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
        dest = connector.read_offsets(connector_props(config))
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
    props = connector_props(config)
    run = SinkRunState(name, values, backend, max_records, max_seconds, 0 if generation is None else generation.number)
    run.external_stop = stop
    connector.initialize(ConnectorContext(run))
    try:
        connector.start(props)
    except Exception as exc:
        for p in pipelines:
            p.close()
        raise ConnectError(f"sink connector {name!r} failed to start: {type(exc).__name__}: {exc}") from exc
    workers: list[SinkWorkerTask] = []
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
        partitions = plan(run, values, targets_given)
        if generation is not None:  # the registry (Connectors view, admin) shows how many tasks this run has
            generation.update(tasks=len(task_configs))
        while len(pipelines) < len(task_configs):
            pipelines.append(SinkPipeline.from_config(config, task_id=len(pipelines)))
        for i, tc in enumerate(task_configs):
            workers.append(SinkWorkerTask(run, i, {str(k): v if isinstance(v, Password) else str(v)
                                                   for k, v in tc.items()},
                                          assign(partitions, len(task_configs), i), pipelines[i]))
        for p in pipelines[len(task_configs):]:
            p.close()
        del pipelines[len(task_configs):]
        _drive(run, workers, progress, generation)
    finally:
        run.fence.close()
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
        for tp, off in sorted(w.commits.committed.items()):
            committed.setdefault(tp.topic, {})[str(tp.partition)] = off
    seconds = round(time.monotonic() - run.started, 3)
    result = SinkRunResult(
        connector=name,
        records=sum(w.records for w in workers),
        committed=committed,
        dead_lettered=sum(w.dead_letters.dead_lettered for w in workers),
        retries=sum(w.retries for w in workers),
        seconds=seconds,
        skipped=sum(w.dead_letters.skipped for w in workers),
    )
    if result.skipped:
        log.warning("sink connector %r skipped %d failed records (errors.tolerance=all, no dead letter topic)",
                    name, result.skipped)
    return result


def _drive(run: SinkRunState, workers: list[SinkWorkerTask], progress: ProgressCallback | None,
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


__all__ = ["Budget", "SinkRunState", "destination_mirror", "run_sink"]
