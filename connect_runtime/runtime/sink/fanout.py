"""A sink connector's tasks fanned out (e.g. as Airflow mapped task instances over the workers): :func:`plan_sink`
fixes a generation and the partition assignment, :func:`run_sink_task` runs one task of it as its own run.

The plan (:class:`SinkPlanRun`, the :meth:`ConnectorRun.plan` half of the lifecycle): begins a new generation of
the connector, which fences every task of every older run or plan (SQLite: the registry guard inside each group
commit; Kafka: it initialises the commit fence of a single run and every task id of an older plan), asks the
connector for ``task_configs(tasks.max)``, reads the partitions of ``topics`` / ``topics.regex`` and their targets
(``until_offsets`` as :func:`~connect_runtime.runtime.sink.run_sink` takes it, else the ends as the plan ran), and
deals the sorted partitions round-robin over the task configs. Its plain-JSON result::

    {"connector": name, "kind": "sink", "generation": g,
     "tasks": [{"index": 0, "config": {...}, "partitions": [[topic, partition, target or null], ...]}, ...]}

A target ``null`` is a partition ``until_offsets`` did not name: the task opens it and reads nothing of it.

A task (:class:`SinkTaskRun`) joins the plan's generation (fenced at once if a newer plan or run began), takes
its own fence key (``SinkCommitFence(task=k)``: a later try of the same task fences this one, no sibling is
touched), then reads the group's committed offsets of **its partitions only** (so a retry starts where its
predecessor's last commit left them), consumes them up to the plan's targets and commits only their offsets.
Each partition belongs to exactly one task of a plan, so its offsets are committed by one task only (as a
consumer group's assignment gives each partition to one member). A task with no partitions (``tasks.max``
above the partition count) is started, gets ``open([])``, a final ``pre_commit({})``, ``close([])`` and
``stop()``, and ends with an empty result (Kafka Connect's task with an empty assignment idles until the next
rebalance; a bounded run has none to wait for). The connector itself is not started in a task (the plan holds
the task's config). The generation ends once every task of the plan finished (``done_tasks``).

The tasks' results hold ``committed`` and ``ranges`` of their own partitions only; the provider's fan-out merges
them (``airflow_pyconnect.operators.fanout_sink.merge_sink_results``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from connect_runtime.api.errors import (
    BackendUnavailableError,
    ConfigError,
    ProducerFencedError,
    WaitTimeoutError,
)
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends.base import Backend
from connect_runtime.metrics import Metrics
from connect_runtime.ranges import merge as merge_ranges
from connect_runtime.runtime.fencing import fenced_by_newer, join_generation
from connect_runtime.runtime.registry import ConnectorRecord, Registry
from connect_runtime.runtime.sink.planning import assign, plan, plan_task
from connect_runtime.runtime.sink.result import ProgressCallback, SinkRunResult
from connect_runtime.runtime.sink.run import SinkRun, _mirror, end_lag
from connect_runtime.runtime.task import WorkerTask
from connect_runtime.runtime.worker import Generation

log = logging.getLogger(__name__)


def plan_sink(config: Mapping[str, Any], backend: str | Backend = "sqlite:///pyconnect.db", *,
              until_offsets: Any = None, backend_settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Fan-out, step 1: a new generation of the sink connector (fencing every older run and plan), its task configs
    and each task's partitions and targets, as a plain-JSON plan (see the module docstring).

    :param until_offsets: as for :func:`~connect_runtime.runtime.sink.run_sink` (e.g. an upstream source result).
    :raises ConfigError: naming every invalid field.
    """
    run = SinkPlanRun(config, backend, until_offsets=until_offsets, backend_settings=backend_settings)
    configs = run.plan()
    assert run.generation is not None
    return {"connector": run.name, "kind": "sink", "generation": run.generation.number,
            "tasks": [{"index": i, "config": dict(c), "partitions": run.assignment[i]} for i, c in enumerate(configs)]}


def run_sink_task(config: Mapping[str, Any], backend: str | Backend, plan: Mapping[str, Any], index: int, *,
                  max_records: int | None = None, max_seconds: float | None = None,
                  backend_settings: Mapping[str, Any] | None = None, progress: ProgressCallback | None = None,
                  stop: threading.Event | None = None, metrics: Metrics | None = None) -> SinkRunResult:
    """Fan-out, step 2: run task ``index`` of a :func:`plan_sink` plan, bounded, as its own run.

    It belongs to the plan's generation: once a newer plan or run of the connector began it is fenced
    (:class:`ProducerFencedError`, nothing more committed); a later try of the same task fences this one.
    Each partition is one task's: the results of every task merge without overlap.
    """
    return SinkTaskRun(config, backend, plan, index, max_records=max_records, max_seconds=max_seconds,
                       backend_settings=backend_settings, progress=progress, stop=stop, metrics=metrics).execute()


class SinkPlanRun(SinkRun):
    """Fan-out, step 1 (:func:`plan_sink`): the sink lifecycle up to the task configs, plus the assignment."""

    def __init__(self, config: Mapping[str, Any], backend: str | Backend, **kwargs: Any) -> None:
        super().__init__(config, backend, **kwargs)
        self.assignment: list[list[list[Any]]] = []

    def plan_tasks(self) -> list[dict[str, str]]:
        configs = super().plan_tasks()
        state = self.state
        if state.dlq_topic:
            self.backend.create_topics({state.dlq_topic: int(self.values["errors.deadletterqueue.topic.partitions"])})
        partitions = plan(state, self.values, self.targets_given)
        given = self.targets_given
        self.assignment = [[[tp.topic, tp.partition, None if given is not None and tp not in given
                             else state.targets[tp]] for tp in assign(partitions, len(configs), i)]
                           for i in range(len(configs))]
        return configs

    def planned(self, configs: list[dict[str, str]]) -> None:
        generation = self.generation
        assert generation is not None
        if not generation.update(tasks=len(configs), done_tasks=[]):
            raise ProducerFencedError(f"sink connector {self.name!r}: a newer generation started while planning")
        if not configs:
            generation.finish(None)


class SinkTaskRun(SinkRun):
    """Fan-out, step 2 (:func:`run_sink_task`): one task of a plan as its own run of the plan's generation."""

    def __init__(self, config: Mapping[str, Any], backend: str | Backend, plan: Mapping[str, Any], index: int,
                 **kwargs: Any) -> None:
        super().__init__(config, backend, **kwargs)
        self.plan_arg = plan
        self.index = index
        self.record: ConnectorRecord | None = None
        self.started = 0
        """When this try joined the generation (its ``workers`` entry), epoch ms."""

    def validate(self) -> None:
        plan, index = self.plan_arg, self.index
        try:
            task = next(t for t in plan["tasks"] if int(t["index"]) == int(index))
            self.generation_number = int(plan["generation"])
            self.task_config = {str(k): v for k, v in dict(task["config"]).items()}
            self.task_targets: dict[TopicPartition, int | None] = {
                TopicPartition(str(t), int(p)): None if target is None else int(target)
                for t, p, target in task["partitions"]}
        except (KeyError, TypeError, ValueError, StopIteration) as exc:
            raise ConfigError(errors={"plan": f"expected a plan from plan_sink() holding task {index!r}, got "
                                              f"{str(plan)[:200]} ({exc!r})"}) from None
        super().validate()
        if plan.get("connector") != self.name or plan.get("kind", "sink") != "sink":
            raise ConfigError(errors={"plan": f"the plan is for {plan.get('kind', 'sink')} connector "
                                              f"{plan.get('connector')!r}, the config names sink connector "
                                              f"{self.name!r}"})

    def begin_generation(self) -> Generation:
        """Join the plan's generation (fenced if a newer plan or run began); the task's fence begins with its
        partitions' start positions (:meth:`create_tasks`)."""
        self.record = join_generation(self.backend, self.name, "", self.generation_number, int(self.index))
        self.started = max((int(w.get("started") or 0) for w in self.record.workers
                            if w.get("task") == int(self.index)), default=0)
        self.state.begin(self.backend, self.generation_number, int(self.index))
        mine = [w for w in self.record.workers if w.get("task") == int(self.index)]
        self.state.fence.try_start = mine[-1] if mine else None  # this try's start (join_generation recorded it)
        return Generation(self.backend, self.record, None)

    def start_connector(self) -> None:
        """The connector is not started for one task of a plan."""

    def plan_tasks(self) -> list[dict[str, str]]:
        task_class = self.connector.task_class()
        from connect_runtime.api.sink import SinkTask

        if not (isinstance(task_class, type) and issubclass(task_class, SinkTask)):
            raise ConfigError(errors={"connector.class": f"task_class() of {self.values['connector.class']!r} "
                                                         f"is {task_class!r}, not a SinkTask subclass"})
        self.state.task_class = task_class
        return [self.task_config]

    def create_tasks(self, configs: list[dict[str, str]]) -> list[WorkerTask]:
        from connect_runtime.api.config import Password
        from connect_runtime.runtime.sink.task import SinkWorkerTask

        partitions = plan_task(self.state, self.task_targets)
        pipeline = self.pipelines[0]
        pipeline.task_id = int(self.index)
        self.workers = [SinkWorkerTask(self.state, int(self.index),
                                       {str(k): v if isinstance(v, Password) else str(v) for k, v in configs[0].items()},
                                       partitions, pipeline)]
        return list(self.workers)

    def tasks_starting(self, tasks: Sequence[WorkerTask]) -> None:
        """The plan recorded the task count."""

    def stop_connector(self) -> None:
        """Nothing was started but the task's clients: the fence and the pipelines."""
        self.state.fence.close()
        for p in self.pipelines if not self.workers else [w.pipeline for w in self.workers if not w.ran]:
            p.close()

    def explain(self, exc: BaseException) -> BaseException:
        if isinstance(exc, ProducerFencedError) and self.record is not None:
            return fenced_by_newer(self.backend, self.record, exc, f"sink connector {self.name!r} task {self.index}")
        return exc

    def finish(self, failed: BaseException | None) -> None:
        """The plan's generation stays open for its other tasks: record this task as done (its records added), or
        the failure, in one atomic registry update."""
        record = self.record
        assert record is not None
        if isinstance(failed, (BackendUnavailableError, WaitTimeoutError)):
            log.warning("%s: the failure is not recorded: the store could not be reached", self.name)
            return
        registry = Registry(self.backend)
        now = int(time.time() * 1000)
        if failed is not None:
            # a fenced try, or one a later try of the same task replaced (refused by the destination, which is the
            # fence of a sink that keeps its offsets there), leaves its successor's entry alone
            if not isinstance(failed, ProducerFencedError) and not self._replaced(registry):
                registry.update(record, state="failed", heartbeat=now,
                                error=f"task {self.index}: {type(failed).__name__}: {failed}"[:500])
            return
        result = self.result()
        index, topics = int(self.index), set(result.committed) | set(result.ranges)
        mirror = _mirror(self.connector, self.config, 0)  # {} for a sink that keeps no offsets in its destination
        lag = end_lag(self.workers, mirror)

        def done(have: ConnectorRecord) -> None:
            if index not in (have.done_tasks or []):
                have.records = (have.records or 0) + result.records
            have.done_tasks = sorted(set(have.done_tasks or []) | {index})
            have.heartbeat = now
            have.topics = sorted(set(have.topics) | topics)
            have.ranges = merge_ranges(have.ranges or {}, result.ranges)  # the plan's tasks read disjoint partitions
            have.end_lag = dict(have.end_lag or {})
            for topic, parts in lag.items():
                have.end_lag[topic] = {**have.end_lag.get(topic, {}), **parts}
            for k, v in mirror.items():
                setattr(have, k, v)
            if len(have.done_tasks) >= have.tasks and have.state == "running":
                have.state, have.finished = "stopped", now

        registry.modify(record, done)

    def _replaced(self, registry: Registry) -> bool:
        """Whether a later try of this task started (the registry's ``workers``)."""
        newest = registry.get(self.name)
        return newest is not None and any(w.get("task") == int(self.index) and int(w.get("started") or 0) > self.started
                                          for w in newest.workers)


__all__ = ["SinkPlanRun", "SinkTaskRun", "plan_sink", "run_sink_task"]
