"""Fan-out of a sink: one sink connector's tasks as Airflow mapped task instances, across the workers.

:func:`fan_out_sink` adds three tasks to the DAG and returns the last one, as :func:`fan_out_source` does::

    <task_id>_plan ─▶ <task_id> [0..n-1] (mapped) ─▶ <task_id>_merge

- ``<task_id>_plan`` (:class:`PyConnectPlanSinkOperator`): starts a new generation of the sink connector (fencing
  every task of every older run or plan) and fixes each task's partitions and targets
  (``connect_runtime.plan_sink``: the sorted partitions of ``topics`` dealt round-robin over the connector's
  ``task_configs(tasks.max)``, each up to ``until_offsets``, e.g. an upstream source result, else the ends as the
  plan ran). Its XCom ``return_value`` is the list of task indexes; the plan is under the key ``plan``, every
  secret value of the connector config replaced by a placeholder.
- ``<task_id>`` (:class:`PyConnectSinkTaskOperator`, mapped over ``task_index``): one instance per connector task
  (``connect_runtime.run_sink_task``): it reads the group's committed offsets of its own partitions, consumes
  them up to the plan's targets and commits only their offsets. A retry of instance ``k`` fences instance
  ``k``'s earlier try (a zombie on a lost worker) and none of its siblings; a retry of the plan (a newer
  generation) fences them all. A task with no partitions (``tasks.max`` above the partitions) ends empty. Its
  XCom is a sink run result (:mod:`airflow_pyconnect.operators.sink`), with ``ranges``.
- ``<task_id>_merge`` (:class:`PyConnectMergeSinkResultsOperator`): ``{"connector", "tasks", "records",
  "bytes", "committed", "ranges", "dead_lettered", "retries"}`` (:func:`merge_sink_results`);
  it pushes ``ranges`` under its own key too.

Runs of one sink connector fence each other (one identity): as for the source fan-out, keep the DAG's runs from
overlapping (``max_active_runs=1``); a later run's plan fences the mapped instances of an earlier run still going.
The mapped task does not default ``max_active_tis_per_dag`` to 1: its instances are one generation's tasks and run
in parallel.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from airflow_pyconnect._offsets import check_target_type, structured, topic_targets
from airflow_pyconnect.hooks.pyconnect import DEFAULT_CONN_ID
from airflow_pyconnect.operators._base import (
    MaskedConfig,
    _ConnectorOperator,
    check_schedule,
    interval_fields,
)
from airflow_pyconnect.operators.fanout import MergeResultsOperator, _PlanOperator, one_connector, task_plan

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.sdk.definitions.xcom_arg import PlainXComArg


class PyConnectPlanSinkOperator(_PlanOperator):
    """Plans a fanned-out sink run: a new generation, the task configs and each task's partitions and targets.

    Returns the list of task indexes (to expand over) and pushes the plan under the XCom key ``plan`` (secret
    values replaced by placeholders).

    :param connector_config: the connector config (templated), as for ``PyConnectSinkOperator``.
    :param pyconnect_conn_id: the ``pyconnect`` connection naming the backend.
    :param until_offsets: where the tasks stop (templated), as for ``PyConnectSinkOperator`` (``ingest.output``).
    """

    template_fields: Sequence[str] = ("connector_config", "until_offsets")
    interval_args = ("connector_config", "until_offsets")
    ui_color = "#f4e4d9"

    def __init__(self, *, connector_config: Mapping[str, Any] | str, pyconnect_conn_id: str = DEFAULT_CONN_ID,
                 until_offsets: Any = None, **kwargs: Any) -> None:
        super().__init__(connector_config=connector_config, pyconnect_conn_id=pyconnect_conn_id, **kwargs)
        check_target_type(until_offsets, "until_offsets")
        self.until_offsets = until_offsets
        self._interval_fields = interval_fields(connector_config=connector_config, until_offsets=until_offsets)
        check_schedule(self, self._interval_fields)

    kind = "sink"

    def _plan(self, config: MaskedConfig, backend: Any) -> dict[str, Any]:
        from connect_runtime import plan_sink

        value = None if self.until_offsets is None else structured(self.until_offsets, "until_offsets")
        until = None if value is None else topic_targets(value, "until_offsets")
        return plan_sink(config, backend, until_offsets=until)

    def _describe(self, tasks: list[Mapping[str, Any]]) -> str:
        return "partitions " + json.dumps({t["index"]: t["partitions"] for t in tasks})


class PyConnectSinkTaskOperator(_ConnectorOperator):
    """Runs one task of a planned sink connector (expand it over ``task_index``).

    :param plan: the plan (templated): ``plan_task.output["plan"]``.
    :param task_index: the connector task to run (expanded from the plan task's ``return_value``).
    :param connector_config: the connector config (templated), the same as the plan task's.
    :param pyconnect_conn_id: the ``pyconnect`` connection naming the backend.
    :param max_records: stop after this many records; ``None``: no bound.
    :param max_seconds: stop after this many seconds (the final commit still happens); ``None``: no bound.
    """

    template_fields: Sequence[str] = ("connector_config", "plan")
    ui_color = "#f4e4d9"
    lineage_kind = "sink"

    def __init__(self, *, plan: Any, task_index: int, connector_config: Mapping[str, Any] | str,
                 pyconnect_conn_id: str = DEFAULT_CONN_ID, max_records: int | None = None,
                 max_seconds: float | None = None, **kwargs: Any) -> None:
        super().__init__(connector_config=connector_config, pyconnect_conn_id=pyconnect_conn_id,
                         max_records=max_records, max_seconds=max_seconds, **kwargs)
        self.plan = plan
        self.task_index = task_index

    def execute(self, context: Context) -> dict[str, Any]:
        from connect_runtime import run_sink_task

        self._note_host(context)
        config = self._config()
        name = str(config.get("name", ""))
        plan = task_plan(self.plan, config)
        self.log.info("Sink connector %s, task %s of generation %s on %s", name, self.task_index,
                      plan.get("generation"), self.hook.describe()["url"])
        try:
            self._check_paths(config)
            with self.hook.get_backend() as backend:
                result = run_sink_task(config, backend, plan, int(self.task_index), max_records=self.max_records,
                                       max_seconds=self.max_seconds, metrics=self._metrics(),
                                       stop=self._stop)
        except Exception as exc:  # a connector's own error too: its text may quote secrets
            self._fail(exc, f"sink connector {name!r} task {self.task_index}")
        data = self._lineage_result = result.to_dict()
        self._lineage_schemas = result.value_schemas
        self.log.info("Sink connector %s task %s delivered %d records; committed %s; ranges %s", name,
                      self.task_index, data["records"], json.dumps(data["committed"]), json.dumps(data["ranges"]))
        return data


def merge_sink_results(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One result from the results (``SinkRunResult.to_dict()``) of every mapped task instance: ``{"connector",
    "tasks", "records", "bytes", "committed", "ranges", "dead_lettered", "retries"}`` (each partition is one task's)."""
    from connect_runtime import ranges as ranges_mod

    results, connector = one_connector(results)
    committed: dict[str, dict[str, int]] = {}
    for r in results:
        for topic, parts in (r.get("committed") or {}).items():
            committed.setdefault(str(topic), {}).update({str(p): int(o) for p, o in parts.items()})
    return {
        "connector": connector,
        "tasks": len(results),
        "records": sum(int(r.get("records") or 0) for r in results),
        "bytes": sum(int(r.get("bytes") or 0) for r in results),
        "committed": committed,
        "ranges": ranges_mod.merge(*(r.get("ranges") or {} for r in results)),
        "dead_lettered": sum(int(r.get("dead_lettered") or 0) for r in results),
        "retries": sum(int(r.get("retries") or 0) for r in results),
    }


class PyConnectMergeSinkResultsOperator(MergeResultsOperator):
    """Merges the results of a fanned-out sink run's mapped task instances.

    :param results: the mapped task's output (templated; ``mapped.output``, all instances).
    """

    ui_color = "#f4e4d9"

    def execute(self, context: Context) -> dict[str, Any]:
        merged = merge_sink_results(list(self.results or []))
        self.log.info("Sink connector %s: %d task(s) delivered %d records; ranges %s", merged["connector"],
                      merged["tasks"], merged["records"], json.dumps(merged["ranges"]))
        context["ti"].xcom_push(key="ranges", value=merged["ranges"])
        return merged


def fan_out_sink(
    task_id: str,
    connector_config: Mapping[str, Any] | str,
    *,
    pyconnect_conn_id: str = DEFAULT_CONN_ID,
    until_offsets: Any = None,
    max_records: int | None = None,
    max_seconds: float | None = None,
    **task_kwargs: Any,
) -> PyConnectMergeSinkResultsOperator:
    """Plan, run each sink connector task as a mapped task instance, merge (see the module docstring).

    :param task_id: the mapped task's id; the plan and merge tasks are ``<task_id>_plan`` and ``<task_id>_merge``.
    :param connector_config: the connector config (templated).
    :param pyconnect_conn_id: the ``pyconnect`` connection naming the backend.
    :param until_offsets: where the tasks stop (templated), e.g. an upstream source (or fan-out) task's ``.output``.
    :param max_records: per mapped task, stop after this many records.
    :param max_seconds: per mapped task, stop after this many seconds.
    :param task_kwargs: more ``BaseOperator`` arguments for the mapped task (``retries``, ``pool``,
        ``max_active_tis_per_dagrun``, ...).
    :return: the merge task (use ``.output`` downstream).
    """
    plan = PyConnectPlanSinkOperator(task_id=f"{task_id}_plan", connector_config=connector_config,
                                     pyconnect_conn_id=pyconnect_conn_id, until_offsets=until_offsets)
    mapped = PyConnectSinkTaskOperator.partial(
        task_id=task_id, plan=cast("PlainXComArg", plan.output)["plan"], connector_config=connector_config,
        pyconnect_conn_id=pyconnect_conn_id, max_records=max_records, max_seconds=max_seconds, **task_kwargs,
    ).expand(task_index=plan.output)
    return PyConnectMergeSinkResultsOperator(task_id=f"{task_id}_merge", results=mapped.output)


__all__ = ["PyConnectMergeSinkResultsOperator", "PyConnectPlanSinkOperator", "PyConnectSinkTaskOperator",
           "fan_out_sink", "merge_sink_results"]
