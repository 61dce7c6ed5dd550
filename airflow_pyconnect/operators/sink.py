"""PyConnectSinkOperator: one bounded run of a sink connector, returning what it committed.

The operator renders ``connector_config`` and ``until_offsets``, opens the backend of its
``pyconnect`` connection, calls ``connect_runtime.run_sink`` and returns ``SinkRunResult.to_dict()``::

    {"connector": "archive", "records": 1000, "committed": {"orders": {"0": 1000}},
     "dead_lettered": 0, "retries": 0, "seconds": 0.3}

``until_offsets`` bounds the run to what an upstream source run committed. Pass that task's output,
``until_offsets=ingest.output`` (the XCom is resolved when the sink runs, and the dependency
``ingest >> sink`` is set by itself): the target is the end of the interval's ranges
(``interval_ranges``, so a rerun of the interval targets the same records). ``ingest.output["ranges"]``
(a ranges mapping), a ``{topic: {partition: next offset}}`` mapping, or a template rendering to one
of these (JSON) work too. As in the runtime, a partition the target does not name has nothing to
read in this run. ``on_kill`` stops the run at once: nothing more is committed, and the next run delivers again
what this one consumed after its last commit.

Overlapping runs: a sink connector has one identity, so the operator defaults ``max_active_tis_per_dag=1``
and Airflow runs this task's intervals one after the other (the rule, how the wait shows and what bounds it:
:mod:`airflow_pyconnect.operators._base`, "Runs of one connector must not overlap", and docs/delivery.md). Each
run consumes from the sink's committed offsets up to its ``until_offsets``; a run whose target lies behind them
(a later interval's run went first) delivers nothing, so every record is delivered once whatever the order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_pyconnect._offsets import check_target_type, structured, topic_targets
from airflow_pyconnect.hooks.pyconnect import DEFAULT_CONN_ID
from airflow_pyconnect.operators._base import (
    _ConnectorOperator,
    check_schedule,
    interval_fields,
    serialised_runs,
)

if TYPE_CHECKING:
    from airflow.sdk import Context


class PyConnectSinkOperator(_ConnectorOperator):
    """Runs a sink connector once, bounded, and returns what it committed.

    :param connector_config: the connector config (templated): ``name``, ``connector.class``,
        ``topics`` or ``topics.regex``, the connector's fields and the runtime's. A string is parsed
        as JSON or a Python literal after rendering. Secret-looking fields are masked.
    :param pyconnect_conn_id: the ``pyconnect`` connection naming the backend (default
        ``pyconnect_default``; the embedded ``$AIRFLOW_HOME/pyconnect/pyconnect.db`` when undefined).
    :param until_offsets: where the run stops (templated): an ``XComArg`` of an upstream source task
        (``ingest.output``: the ends of its interval's ranges; ``ingest.output["ranges"]``), a
        ``{topic: {partition: next offset}}`` or ranges mapping, or a template rendering to one of
        them (JSON). ``None``: the ends of the topics when the run starts.
    :param max_records: stop after this many records consumed; ``None``: no bound.
    :param max_seconds: stop after this many seconds (the final commit still happens); ``None``:
        no bound.
    :param max_active_tis_per_dag: (``BaseOperator``) default 1: runs of one sink connector fence
        each other, so Airflow runs them one at a time.
    """

    template_fields: Sequence[str] = ("connector_config", "until_offsets")
    interval_args = ("connector_config", "until_offsets")
    template_fields_renderers = {"connector_config": "json", "until_offsets": "json"}
    ui_color = "#f4e4d9"
    lineage_kind = "sink"

    def __init__(
        self,
        *,
        connector_config: Mapping[str, Any] | str,
        pyconnect_conn_id: str = DEFAULT_CONN_ID,
        until_offsets: Any = None,
        max_records: int | None = None,
        max_seconds: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(connector_config=connector_config, pyconnect_conn_id=pyconnect_conn_id,
                         max_records=max_records, max_seconds=max_seconds, **serialised_runs(kwargs, True))
        check_target_type(until_offsets, "until_offsets")
        self.until_offsets = until_offsets
        self._interval_fields = interval_fields(connector_config=connector_config, until_offsets=until_offsets)
        check_schedule(self, self._interval_fields)

    def _until(self) -> dict[str, dict[str, int]] | None:
        if self.until_offsets is None:
            return None
        value = structured(self.until_offsets, "until_offsets")
        if value is None:
            return None
        return topic_targets(value, "until_offsets")

    def execute(self, context: Context) -> dict[str, Any]:
        from connect_runtime import run_sink

        self._note_host(context)
        self._check_interval(context, getattr(self, "_interval_fields", []))
        config = self._config()
        until = self._until()
        name = str(config.get("name", ""))
        self.log.info("Sink connector %s on %s until %s: %s", name or "?", self.hook.describe()["url"],
                      json.dumps(until) if until is not None else "the ends of its topics at start",
                      self._masked(config))
        try:
            self._check_paths(config)
            with self.hook.get_backend() as backend:
                result = run_sink(config, backend, until_offsets=until, max_records=self.max_records,
                                  max_seconds=self.max_seconds, metrics=self._metrics(),
                                  stop=self._stop)
        except Exception as exc:  # a connector's own error too: its text may quote secrets
            self._fail(exc, f"sink connector {name!r}")
        data = self._lineage_result = result.to_dict()
        self._lineage_schemas = result.value_schemas
        self.log.info("Sink connector %s delivered %d records (%d dead-lettered, %d retries) in %.2f s; committed %s",
                      data["connector"], data["records"], data["dead_lettered"], data["retries"], data["seconds"],
                      json.dumps(data["committed"]))
        return data


__all__ = ["PyConnectSinkOperator"]
