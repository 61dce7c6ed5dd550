"""Fan-out: one connector's tasks as Airflow mapped task instances, across the workers.

:func:`fan_out_source` adds three tasks to the DAG and returns the last one::

    <task_id>_plan ─▶ <task_id> [0..n-1] (mapped) ─▶ <task_id>_merge

- ``<task_id>_plan`` (:class:`PyConnectPlanSourceOperator`): starts a new generation of the connector
  (fencing every task of the older ones) and asks it for ``task_configs(tasks.max)``
  (``connect_runtime.plan_source``). Its XCom ``return_value`` is the list of task indexes (what the
  mapped task expands over); the plan itself is under the key ``plan``, with every secret value of
  the connector config replaced by a placeholder (XCom never holds a secret).
- ``<task_id>`` (:class:`PyConnectSourceTaskOperator`, ``.partial(...).expand(task_index=...)``):
  one mapped task instance per connector task (``connect_runtime.run_source_task``), each with its
  own transactional producer, all of one generation: a retry of the plan (a newer generation) fences
  them all. Each records its ranges under its own ``map_index`` in the ranges record, in the same
  transaction as its commits. Its XCom is a source run result (see
  :mod:`airflow_pyconnect.operators.source`).
- ``<task_id>_merge`` (:class:`PyConnectMergeSourceResultsOperator`): merges the mapped results with
  ``connect_runtime.ranges.merge``: ``{"connector", "records", "ranges", "interval_ranges",
  "interval_records", "tasks"}``. Feed it to a sink (``until_offsets=merge.output``) or to Spark
  (``spark_submit_kwargs(merge.output, backend=...)``).

On the embedded SQLite backend the mapped instances share the file (LocalExecutor, one machine); on
Kafka they run on any worker. The DAG needs nothing else: ``max_active_tis_per_dag`` /
``max_active_tis_per_dagrun`` bound how many run at once (default: all). Unlike
``PyConnectSourceOperator`` without ``identity``, the mapped task does not default
``max_active_tis_per_dag`` to 1: its instances are the tasks of one generation and run in parallel.

Overlapping DAG runs: the plan of a later run starts a newer generation, which fences the mapped
instances of an earlier run of the same identity that are still running (they fail, and a retry of
them stays fenced: clear the whole run; a cleared instance of a finished fan-out commits only while no newer plan
began). Airflow's task concurrency cannot hold a later plan back
until an earlier run's mapped instances finished, so when runs may overlap (``airflow backfill
create``, catch-up with ``max_active_runs`` > 1) give the fan-out ``identity=INTERVAL_IDENTITY``
(with source partitions keyed by the interval), or keep its runs from overlapping (``max_active_runs=1``
and ``airflow backfill create ... --max-active-runs 1``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from airflow.sdk import BaseOperator

from airflow_pyconnect.hooks.pyconnect import DEFAULT_CONN_ID
from airflow_pyconnect.operators._base import (
    MaskedConfig,
    _ConnectorOperator,
    check_schedule,
    interval_fields,
)
from airflow_pyconnect.operators.source import (
    MAX_SOURCE_OFFSETS,
    PyConnectSourceOperator,
    ledger_key,
    xcom_result,
)

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.sdk.definitions.xcom_arg import PlainXComArg

_PLACEHOLDER = "[hidden:{}]"


def _hide(value: Any, secrets: Mapping[str, str]) -> Any:
    """``value`` with every secret value (whole or inside a string) replaced by its placeholder."""
    if isinstance(value, str):
        for field, secret in sorted(secrets.items(), key=lambda kv: -len(kv[1])):
            value = value.replace(secret, _PLACEHOLDER.format(field))
        return value
    if isinstance(value, Mapping):
        return {k: _hide(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_hide(v, secrets) for v in value]
    return value


def _restore(value: Any, secrets: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        for field, secret in secrets.items():
            value = value.replace(_PLACEHOLDER.format(field), secret)
        return value
    if isinstance(value, Mapping):
        return {k: _restore(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v, secrets) for v in value]
    return value


def _secrets(config: MaskedConfig) -> dict[str, str]:
    return {k: str(config[k]) for k in config.secret if config[k] not in (None, "")}


def task_plan(plan: Any, config: MaskedConfig) -> Mapping[str, Any]:
    """A mapped instance's ``plan`` argument (the plan task's ``output["plan"]``) with the config's secrets put back."""
    from airflow_pyconnect._offsets import structured

    value = structured(plan, "plan")
    if not isinstance(value, Mapping):
        raise TypeError(f"plan must be the plan task's output['plan'] (a mapping), got {type(value).__name__}")
    restored: Mapping[str, Any] = _restore(value, _secrets(config))
    return restored


class _PlanOperator(_ConnectorOperator):
    """Base of the fan-out plan tasks (not for direct use): plan with :meth:`_plan` (a new generation of the
    connector), hide the config's secrets in the plan, push it under the XCom key ``plan`` and return the task
    indexes to expand over."""

    kind = ""
    """``source`` or ``sink``: in the log line and the error."""

    _plan: Callable[[MaskedConfig, Any], dict[str, Any]]
    """The plan (``connect_runtime.plan_source`` / ``plan_sink``) of the config on the open backend."""
    _describe: Callable[[list[Mapping[str, Any]]], str]
    """The planned tasks as the log line shows them."""

    def execute(self, context: Context) -> list[int]:
        self._note_host(context)
        self._check_interval(context, getattr(self, "_interval_fields", []))
        config = self._config()
        name = str(config.get("name", ""))
        try:
            self._check_paths(config)
            with self.hook.get_backend() as backend:
                plan = self._plan(config, backend)
        except Exception as exc:  # a connector's own error too: its text may quote secrets
            self._fail(exc, f"planning {self.kind} connector {name!r}")
        plan = _hide(plan, _secrets(config))
        indexes = [int(t["index"]) for t in plan["tasks"]]
        self.log.info("%s connector %s: generation %s, %d task(s) to run as mapped task instances: %s",
                      self.kind.capitalize(), name, plan.get("generation"), len(indexes),
                      self._describe(plan["tasks"])[:2000])
        context["ti"].xcom_push(key="plan", value=plan)
        return indexes


class PyConnectPlanSourceOperator(_PlanOperator):
    """Plans a fanned-out source run: a new generation and the connector's task configs.

    Returns the list of task indexes (to expand over) and pushes the plan under the XCom key
    ``plan`` (secret values replaced by placeholders).

    :param connector_config: the connector config (templated), as for ``PyConnectSourceOperator``.
    :param pyconnect_conn_id: the ``pyconnect`` connection naming the backend.
    :param identity: task identity scope (templated), e.g. ``INTERVAL_IDENTITY``; ``None``: one identity.
    :param exactly_once: KIP-618 transactions (default); ``False`` for at-least-once.
    """

    template_fields: Sequence[str] = ("connector_config", "identity")
    interval_args = ("connector_config", "identity")
    ui_color = "#e8f4d9"

    def __init__(self, *, connector_config: Mapping[str, Any] | str, pyconnect_conn_id: str = DEFAULT_CONN_ID,
                 identity: str | None = None, exactly_once: bool = True, **kwargs: Any) -> None:
        super().__init__(connector_config=connector_config, pyconnect_conn_id=pyconnect_conn_id, **kwargs)
        self.identity = identity
        self.exactly_once = bool(exactly_once)
        self._interval_fields = interval_fields(connector_config=connector_config, identity=identity)
        check_schedule(self, self._interval_fields)

    kind = "source"

    def _plan(self, config: MaskedConfig, backend: Any) -> dict[str, Any]:
        from connect_runtime import plan_source

        return plan_source(config, backend, identity=self.identity or None, exactly_once=self.exactly_once)

    def _describe(self, tasks: list[Mapping[str, Any]]) -> str:
        return json.dumps(tasks)


class PyConnectSourceTaskOperator(PyConnectSourceOperator):
    """Runs one task of a planned source connector (expand it over ``task_index``).

    :param plan: the plan (templated): ``plan_task.output["plan"]``.
    :param task_index: the connector task to run (expanded from the plan task's ``return_value``).
    :param connector_config: the connector config (templated), the same as the plan task's.
    :param pyconnect_conn_id: the ``pyconnect`` connection naming the backend.
    :param max_records: stop after this many records; ``None``: no bound.
    :param max_seconds: stop after this many seconds; ``None``: no bound.
    :param max_source_offsets: bound on the ``source_offsets`` entries of the XCom result.
    :param emit_asset_events: as for ``PyConnectSourceOperator`` (per mapped instance).
    """

    template_fields: Sequence[str] = ("connector_config", "plan")
    serialise_runs_without_identity = False  # the instances of one generation run in parallel

    def __init__(self, *, plan: Any, task_index: int, connector_config: Mapping[str, Any] | str,
                 pyconnect_conn_id: str = DEFAULT_CONN_ID, max_records: int | None = None,
                 max_seconds: float | None = None, max_source_offsets: int = MAX_SOURCE_OFFSETS,
                 emit_asset_events: bool = True, **kwargs: Any) -> None:
        super().__init__(connector_config=connector_config, pyconnect_conn_id=pyconnect_conn_id,
                         max_records=max_records, max_seconds=max_seconds, max_source_offsets=max_source_offsets,
                         emit_asset_events=emit_asset_events, **kwargs)
        self.plan = plan
        self.task_index = task_index

    def execute(self, context: Context) -> dict[str, Any]:
        from connect_runtime import run_source_task

        self._note_host(context)
        config = self._config()
        name = str(config.get("name", ""))
        plan = task_plan(self.plan, config)
        key = ledger_key(context)
        self.log.info("Source connector %s, task %s of generation %s on %s", name, self.task_index,
                      plan.get("generation"), self.hook.describe()["url"])
        try:
            self._check_paths(config)
            with self.hook.get_backend() as backend:
                result = run_source_task(config, backend, plan, int(self.task_index), max_records=self.max_records,
                                         max_seconds=self.max_seconds, metrics=self._metrics(),
                                         ledger_key=key, stop=self._stop)
        except Exception as exc:  # a connector's own error too: its text may quote secrets
            self._fail(exc, f"source connector {name!r} task {self.task_index}")
        self._lineage_schemas = result.value_schemas
        return self._finish(context, xcom_result(result.to_dict(), self.max_source_offsets), key)


def merge_source_results(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One result from the results of every mapped task instance (ranges merged, records summed)."""
    from connect_runtime import ranges as ranges_mod

    results, connector = one_connector(results)
    ranges = ranges_mod.merge(*(r.get("ranges") or {} for r in results))
    interval = ranges_mod.merge(*(r.get("interval_ranges") or {} for r in results))
    return {
        "connector": connector,
        "tasks": len(results),
        "records": sum(int(r.get("records") or 0) for r in results),
        "bytes": sum(int(r.get("bytes") or 0) for r in results),
        "ranges": ranges,
        "interval_ranges": interval,
        "interval_records": ranges_mod.count(interval) if interval else 0,
        "generation": max((r.get("generation") or 0 for r in results), default=None),
    }


def one_connector(results: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], str | None]:
    """The non-empty results of a fan-out's mapped instances and the connector they all belong to (a
    ``ValueError`` when they name several)."""
    kept = [r for r in results if r]
    connectors = sorted({str(r.get("connector")) for r in kept})
    if len(connectors) > 1:
        raise ValueError(f"results of different connectors cannot be merged: {connectors}")
    return kept, connectors[0] if connectors else None


class MergeResultsOperator(BaseOperator):
    """Base of the fan-out merge tasks (not for direct use).

    :param results: the mapped task's output (templated; ``mapped.output``, all instances).
    """

    template_fields: Sequence[str] = ("results",)

    def __init__(self, *, results: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.results = results


class PyConnectMergeSourceResultsOperator(MergeResultsOperator):
    """Merges the results of a fanned-out source run's mapped task instances.

    :param results: the mapped task's output (templated; ``mapped.output``, all instances).
    """

    ui_color = "#e8f4d9"

    def execute(self, context: Context) -> dict[str, Any]:
        merged = merge_source_results(list(self.results or []))
        self.log.info("Source connector %s: %d task(s) committed %d records; ranges %s; the interval holds %s",
                      merged["connector"], merged["tasks"], merged["records"], json.dumps(merged["ranges"]),
                      json.dumps(merged["interval_ranges"]))
        context["ti"].xcom_push(key="ranges", value=merged["ranges"])
        context["ti"].xcom_push(key="interval_ranges", value=merged["interval_ranges"])
        return merged


def fan_out_source(
    task_id: str,
    connector_config: Mapping[str, Any] | str,
    *,
    pyconnect_conn_id: str = DEFAULT_CONN_ID,
    identity: str | None = None,
    exactly_once: bool = True,
    max_records: int | None = None,
    max_seconds: float | None = None,
    emit_asset_events: bool = True,
    **task_kwargs: Any,
) -> PyConnectMergeSourceResultsOperator:
    """Plan, run each connector task as a mapped task instance, merge (see the module docstring).

    :param task_id: the mapped task's id; the plan and merge tasks are ``<task_id>_plan`` and
        ``<task_id>_merge``.
    :param connector_config: the connector config (templated).
    :param pyconnect_conn_id: the ``pyconnect`` connection naming the backend.
    :param identity: task identity scope (templated), e.g. ``INTERVAL_IDENTITY``.
    :param exactly_once: KIP-618 transactions (default).
    :param max_records: per mapped task, stop after this many records.
    :param max_seconds: per mapped task, stop after this many seconds.
    :param emit_asset_events: each mapped instance emits events for the topics it wrote.
    :param task_kwargs: more ``BaseOperator`` arguments for the mapped task (``retries``, ``pool``,
        ``max_active_tis_per_dagrun``, ``outlets``, ...).
    :return: the merge task (use ``.output`` downstream).
    """
    plan = PyConnectPlanSourceOperator(task_id=f"{task_id}_plan", connector_config=connector_config,
                                       pyconnect_conn_id=pyconnect_conn_id, identity=identity,
                                       exactly_once=exactly_once)
    mapped = PyConnectSourceTaskOperator.partial(
        task_id=task_id, plan=cast("PlainXComArg", plan.output)["plan"], connector_config=connector_config,
        pyconnect_conn_id=pyconnect_conn_id, max_records=max_records, max_seconds=max_seconds,
        emit_asset_events=emit_asset_events, **task_kwargs,
    ).expand(task_index=plan.output)
    return PyConnectMergeSourceResultsOperator(task_id=f"{task_id}_merge", results=mapped.output)


__all__ = ["MergeResultsOperator", "PyConnectMergeSourceResultsOperator", "PyConnectPlanSourceOperator", "PyConnectSourceTaskOperator",
           "fan_out_source", "merge_source_results", "one_connector", "task_plan"]
