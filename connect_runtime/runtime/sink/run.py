"""A sink run: :class:`SinkRun`, the :class:`~connect_runtime.runtime.lifecycle.ConnectorRun` lifecycle with the
sink's hooks (the order is the lifecycle's: validate, begin a generation, start the connector, plan tasks, run
and supervise them, stop, record the end in the registry, result), the state its tasks share
(:class:`SinkRunState`) and :func:`run_sink`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from connect_runtime.api.config import Password
from connect_runtime.api.connector import DestinationOffsets, SinkConnector
from connect_runtime.api.errors import ConfigError, ConnectError
from connect_runtime.api.records import TopicPartition
from connect_runtime.api.sink import SinkTask
from connect_runtime.backends.base import Backend
from connect_runtime.metrics import Metrics
from connect_runtime.runtime.errors import RetryPolicy
from connect_runtime.runtime.fencing import SinkCommitFence, begin_generation, sink_fence_id
from connect_runtime.runtime.lifecycle import ConnectorRun
from connect_runtime.runtime.pipeline import SinkPipeline
from connect_runtime.runtime.sink.config import validate
from connect_runtime.runtime.sink.contexts import ConnectorContext
from connect_runtime.runtime.sink.planning import assign, plan, until_targets
from connect_runtime.runtime.sink.result import ProgressCallback, SinkRunResult
from connect_runtime.runtime.sink.task import SinkWorkerTask
from connect_runtime.runtime.supervisor import RunState
from connect_runtime.runtime.task import WorkerTask
from connect_runtime.runtime.worker import Generation, connector_props
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
    task threads. The deadline does not set ``stop``: tasks end at it with their final commit.

    Made by validation; :meth:`begin` attaches the backend and the generation once it is registered, and the
    run's clock (``max_seconds``) starts there."""

    deadline_stops = False

    def __init__(self, name: str, values: Mapping[str, Any], max_records: int | None,
                 max_seconds: float | None) -> None:
        super().__init__(name, None)
        self.values = values
        self.group = f"connect-{name}"
        self.task_class: type[SinkTask] | None = None
        self.max_seconds = max_seconds
        self.budget = Budget(max_records)
        self.shutdown_grace_s = values["task.shutdown.graceful.timeout.ms"] / 1000
        self.flush_interval_s = values["offset.flush.interval.ms"] / 1000
        self.flush_timeout_s = values["offset.flush.timeout.ms"] / 1000
        self.tolerate_all = str(values["errors.tolerance"]).lower() == "all"
        self.dlq_topic = (values["errors.deadletterqueue.topic.name"] or "").strip() if self.tolerate_all else ""
        self.log_errors = bool(values["errors.log.enable"])
        self.log_messages = bool(values["errors.log.include.messages"])
        self.max_poll_records = int(values["consumer.max.poll.records"])
        self.pause_timeout_s = values["pause.timeout.ms"] / 1000
        self.targets: dict[TopicPartition, int] = {}
        self.start_positions: dict[TopicPartition, int] = {}
        self.group_committed: dict[TopicPartition, int | None] = {}
        self.metrics: Metrics | None = None
        """Where the tasks send their metrics (the run's)."""

    def begin(self, backend: Backend, generation: int, task: int | None = None) -> None:
        """The run's generation is registered: its backend, its commit fence (``task``: task ``k`` of a fan-out
        plan, fenced by its own later tries too) and its clock."""
        self.started = time.monotonic()
        self.deadline = None if self.max_seconds is None else self.started + self.max_seconds
        self.backend = backend
        self.group = f"{backend.group_id_prefix}{self.name}"  # admin.sink_group
        self.generation = generation
        self.retry = RetryPolicy(self.values, self.deadline, self.max_seconds)
        self.fence = SinkCommitFence(backend, self.name, generation, self.flush_timeout_s, task)

    def fail(self, exc: BaseException, cause: BaseException | None = None) -> None:
        if cause is not None and exc.__cause__ is None and exc is not cause:
            exc.__cause__ = cause
        if self.error is None:
            log.error("%s", exc)
        super().fail(exc)


class SinkRun(ConnectorRun[SinkRunResult]):
    """A bounded sink run: the :class:`ConnectorRun` lifecycle with the sink's hooks."""

    kind = "sink"
    state: SinkRunState

    def __init__(self, config: Mapping[str, Any], backend: str | Backend, *, until_offsets: Any = None,
                 max_records: int | None = None, max_seconds: float | None = None,
                 backend_settings: Mapping[str, Any] | None = None, progress: ProgressCallback | None = None,
                 stop: threading.Event | None = None, metrics: Metrics | None = None) -> None:
        super().__init__(backend, backend_settings, progress=progress, stop=stop, metrics=metrics)
        self.config = config
        self.until_offsets = until_offsets
        self.max_records = max_records
        self.max_seconds = max_seconds
        self.workers: list[SinkWorkerTask] = []
        self.pipelines: list[SinkPipeline] = []
        self.floor = -1
        self._result: SinkRunResult | None = None

    def validate(self) -> None:
        values, connector, first_pipeline = validate(self.config)
        self.values = values
        self.connector: SinkConnector = connector
        self.pipelines = [first_pipeline]
        self.name = name = str(values["name"])
        self.targets_given = None if self.until_offsets is None else until_targets(self.until_offsets, name)
        if self.max_records is not None and self.max_records < 0:
            raise ConfigError(errors={"max_records": f"expected at least 0, got {self.max_records}"})
        if self.max_seconds is not None and self.max_seconds < 0:
            raise ConfigError(errors={"max_seconds": f"expected at least 0, got {self.max_seconds}"})
        self.state = SinkRunState(name, values, self.max_records, self.max_seconds)
        self.state.metrics = self.metrics

    def begin_generation(self) -> Generation:
        self.floor = _destination_floor(self.connector, self.config, self.name)
        name, cid = self.name, self.backend.cluster_id
        generation = begin_generation(self.backend, name, kind="sink",
                                      connector_class=str(self.values["connector.class"]),
                                      floor=max(self.floor, 0), secrets=secret_values(self.config),
                                      task_ids=lambda i: sink_fence_id(name, cid, i),  # an older fan-out's tasks
                                      fence_timeout=self.state.flush_timeout_s)
        self.state.begin(self.backend, generation.number)
        return generation

    def start_connector(self) -> None:
        self.connector.initialize(ConnectorContext(self.state))
        try:
            self.connector.start(connector_props(self.config))
        except Exception as exc:
            for p in self.pipelines:
                p.close()
            raise ConnectError(f"sink connector {self.name!r} failed to start: {type(exc).__name__}: {exc}") from exc

    def plan_tasks(self) -> list[dict[str, str]]:
        values = self.values
        task_class = self.connector.task_class()
        if not (isinstance(task_class, type) and issubclass(task_class, SinkTask)):
            raise ConfigError(errors={"connector.class": f"task_class() of {values['connector.class']!r} "
                                                         f"is {task_class!r}, not a SinkTask subclass"})
        self.state.task_class = task_class
        task_configs = self.connector.task_configs(int(values["tasks.max"]))
        if len(task_configs) > int(values["tasks.max"]):
            raise ConnectError(f"sink connector {self.name!r}: task_configs({values['tasks.max']}) returned "
                               f"{len(task_configs)} task configs (more than tasks.max)")
        if not task_configs:
            log.info("sink connector %r planned no tasks: nothing to do", self.name)
        return task_configs

    def create_tasks(self, configs: list[dict[str, str]]) -> list[WorkerTask]:
        state = self.state
        if state.dlq_topic:
            self.backend.create_topics({state.dlq_topic: int(self.values["errors.deadletterqueue.topic.partitions"])})
        partitions = plan(state, self.values, self.targets_given)
        pipelines = self.pipelines
        while len(pipelines) < len(configs):
            pipelines.append(SinkPipeline.from_config(self.config, task_id=len(pipelines)))
        self.workers = [SinkWorkerTask(state, i, {str(k): v if isinstance(v, Password) else str(v)
                                                  for k, v in tc.items()},
                                       assign(partitions, len(configs), i), pipelines[i])
                        for i, tc in enumerate(configs)]
        for p in pipelines[len(configs):]:
            p.close()
        del pipelines[len(configs):]
        return list(self.workers)

    def tasks_starting(self, tasks: Sequence[WorkerTask]) -> None:
        if self.generation is not None:  # the registry (Connectors view, admin) shows how many tasks this run has
            self.generation.update(tasks=len(tasks))

    def run_tasks(self, tasks: Sequence[WorkerTask]) -> None:
        """Tasks get ``task.shutdown.graceful.timeout.ms`` to finish once the run stopped or ``max_seconds``
        passed; a last progress call once they all ended."""
        super().run_tasks(tasks)
        if self.progress is not None:
            self.report_progress()

    def interrupted(self, exc: BaseException, threads: Sequence[threading.Thread]) -> None:
        self.state.stop.set()  # the tasks abort without committing; the run ends with ``exc``

    def shutdown_grace(self) -> float:
        return float(self.state.shutdown_grace_s)

    def report_progress(self) -> None:
        if self.progress is not None:
            self.progress(sum(w.records for w in self.workers), round(time.monotonic() - self.state.started, 3))

    def progress_interval_s(self) -> float:
        return float(self.values["progress.interval.ms"]) / 1000

    def records_so_far(self) -> int:
        return sum(w.records for w in self.workers)

    def progress_detail(self) -> str:
        return f"{sum(w.positions.remaining() for w in self.workers)} records left to the target"

    def stop_connector(self) -> None:
        self.state.fence.close()
        if not self.workers:
            for p in self.pipelines:
                p.close()
        for w in self.workers:
            if not w.ran:  # never started (the run failed while its tasks were being started)
                w.pipeline.close()
        try:
            self.connector.stop()
        except Exception as exc:
            log.warning("sink connector %r: stop raised %s: %s", self.name, type(exc).__name__, exc)

    def finish(self, failed: BaseException | None) -> None:
        assert self.generation is not None
        result = None if failed is not None else self.result()
        topics = set(result.committed) if result is not None else set()
        configured = self.values.get("topics")
        if isinstance(configured, (list, tuple)):
            topics |= {str(t) for t in configured}
        mirror = _mirror(self.connector, self.config, self.floor)
        done = {} if result is None else {"records": result.records, "ranges": result.ranges,  # the run's attempt
                                          "end_lag": end_lag(self.workers, mirror)}
        self.generation.finish(failed, sorted(topics), **mirror, **done)

    def result(self) -> SinkRunResult:
        if self._result is None:
            self._result = self._build_result()
        return self._result

    def _build_result(self) -> SinkRunResult:
        workers = self.workers
        committed: dict[str, dict[str, int]] = {}
        ranges: dict[str, dict[str, list[int]]] = {}
        for w in workers:
            for tp, off in sorted(w.commits.committed.items()):
                committed.setdefault(tp.topic, {})[str(tp.partition)] = off
            for tp, (first, end) in sorted(w.positions.delivered().items()):
                ranges.setdefault(tp.topic, {})[str(tp.partition)] = [first, end]
        result = SinkRunResult(
            connector=self.name,
            records=sum(w.records for w in workers),
            committed=committed,
            dead_lettered=sum(w.dead_letters.dead_lettered for w in workers),
            retries=sum(w.retries for w in workers),
            seconds=round(time.monotonic() - self.state.started, 3),
            skipped=sum(w.dead_letters.skipped for w in workers),
            ranges=ranges,
            bytes=sum(w.bytes for w in workers),
            value_schemas={t: s for w in workers for t, s in w.schemas.items()},
        )
        if result.skipped:
            log.warning("sink connector %r skipped %d failed records (errors.tolerance=all, no dead letter topic)",
                        self.name, result.skipped)
        return result


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
    metrics: Metrics | None = None,
) -> SinkRunResult:
    """Run a sink connector once, bounded; see the package docstring for the semantics.

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
    :param metrics: where the tasks send Kafka Connect's task metrics (:mod:`connect_runtime.metrics`),
        including the lag at the end; ``None``: nowhere. Progress lines are logged every ``progress.interval.ms``.
    :raises ConfigError: one error naming every invalid field.
    :raises ConnectError: a task failed (the message names the connector, the task and the cause).
    """
    return SinkRun(config, backend, until_offsets=until_offsets, max_records=max_records, max_seconds=max_seconds,
                   backend_settings=backend_settings, progress=progress, stop=stop, metrics=metrics).execute()


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


def end_lag(workers: Sequence[SinkWorkerTask], mirror: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """The lag a run left at its end, ``{topic: {"<partition>": records}}`` per partition its tasks were assigned:
    the target (``until_offsets``, else the end as the run started; lowered where the partition ended before it)
    minus what it committed (:meth:`~connect_runtime.runtime.sink.commits.TaskCommits.lag`, the lag its metrics send), or for a sink that keeps its offsets
    in its destination, what the destination holds after the run (``mirror``: :func:`destination_mirror`). For the
    registry."""
    kept = {TopicPartition(str(t), int(p)): int(o) for t, p, o in mirror.get("destination_offsets") or ()}
    out: dict[str, dict[str, int]] = {}
    for w in workers:
        target = w.positions.target
        for tp, lag in sorted(w.commits.lag(target).items()):  # the lag the task's metrics sent
            out.setdefault(tp.topic, {})[str(tp.partition)] = max(0, target[tp] - kept[tp]) if tp in kept else lag
    return out


def destination_mirror(dest: DestinationOffsets) -> dict[str, Any]:
    """The registry fields mirroring a destination's offsets."""
    return {"owns_offsets": True, "destination": dest.where,
            "destination_offsets": [[tp.topic, tp.partition, off] for tp, off in sorted(dest.offsets.items())],
            "destination_read": int(time.time() * 1000)}


__all__ = ["Budget", "SinkRun", "SinkRunState", "destination_mirror", "end_lag", "run_sink"]
