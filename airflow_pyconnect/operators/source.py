"""PyConnectSourceOperator: one bounded run of a source connector, its committed ranges as XCom.

The operator renders ``connector_config`` (Jinja: ``{{ ds }}``, ``{{ data_interval_start }}``, ...),
opens the backend of its ``pyconnect`` connection, calls ``connect_runtime.run_source`` and returns
(XCom ``return_value``)::

    {"connector": "orders",
     "records": 1000,                                  # records THIS attempt committed (0 on a rerun)
     "ranges": {"orders": {"0": [0, 1000]}},           # what THIS attempt committed (may be {})
     "interval_ranges": {"orders": {"0": [0, 1000]}},  # what the data interval holds, every attempt
     "interval_records": 1000,                          # offsets interval_ranges spans
     "source_offsets": [{"partition": {...}, "offset": {...}}],   # this attempt's, at most 100
     "source_offsets_total": 1, "source_offsets_truncated": false,
     "generation": 3, "transactions": 1, "filtered": 0, "skipped": 0, "seconds": 0.4,
     "empty": None}                                     # or why nothing was written (below)

Ranges use the shared format of :mod:`connect_runtime.ranges` (a ``[from, to]`` pair or exact spans
per partition). ``ranges`` and ``interval_ranges`` are also pushed under their own XCom keys, so
``ingest.output["interval_ranges"]`` is the interval's ranges as a mapping. ``source_offsets`` lists
the latest source offset this attempt committed per source partition, bounded to
``max_source_offsets`` entries (sorted by partition); ``source_offsets_truncated`` says when some were
left out (a sensor target then needs the full list, e.g. from the connector's own planning task).

Reruns (retries, clears, backfills)
-----------------------------------
A run resumes from the connector's committed source offsets, so a rerun of a finished slice writes
nothing: ``records`` 0, ``ranges`` ``{}``. What the interval holds is recorded by the runtime in its
ranges record under ``ledger_key`` = ``{"dag_id", "task_id", "map_index", "interval"}`` (``interval``
is the data interval, or ``run:<run id>`` without one), **in the same transaction as each commit**,
so no interval is ever committed but unrecorded; ``interval_ranges`` is that record after the run.
Downstream tasks (the sink's ``until_offsets``, Spark) use ``interval_ranges``: a rerun reads the
same records. ``connect_runtime.admin.run_ranges`` (and the ``pyconnect`` CLI) read the record.

A run that read nothing says why (``empty``)
--------------------------------------------
``empty`` is ``None`` when this attempt committed records; else ``{"reason", "message", "looked_at"}``
(:mod:`connect_runtime.runtime.source.empty`): ``committed_before`` (a rerun: the interval, or every input the
source found, was committed before), ``filtered`` (read, and every record dropped by a transform),
``no_input`` (the source found nothing where it looked: ``looked_at`` names the folder, table, ...), or
``unknown`` (the connector does not say). ``no_input`` and ``unknown`` are an **empty interval**, which
``on_empty`` handles: ``"warn"`` (default) logs a warning naming where the source looked, ``"fail"`` fails
the task (an ``AirflowException``: ``retries`` apply, so a retry can find files that arrived late),
``"skip"`` marks it skipped (Airflow's ``AirflowSkipException``; downstream tasks skip by their trigger
rule), ``"ignore"`` logs it at INFO. A rerun (``committed_before``) is never an empty interval.

Asset events: only an attempt that committed new records (``records`` > 0) emits events, one per
topic written, with ``extra`` ``{"connector", "topic", "ranges", "records"}`` (this attempt's). A
rerun that wrote nothing emits none, so an asset-scheduled DAG never processes an interval twice.

Exactly-once, retries and parallel intervals: each connector task has its own transactional
producer, id ``<cluster>-<connector>[-<identity>]-<task>``; a retry fences the previous attempt,
whose next commit then fails and writes nothing. With ``identity`` (e.g. :data:`INTERVAL_IDENTITY`,
for a connector whose source partitions are keyed by the interval) runs of different intervals do
not fence each other and may run at the same time; retries of the same interval still do. A failed
or fenced run fails the task with the runtime's message (an ``AirflowException`` chained to the
runtime error). ``on_kill`` stops the run.

Overlapping runs (backfills, catch-up, a manual run beside a scheduled one): without ``identity`` every run of
the connector is the same identity, so the operator defaults ``max_active_tis_per_dag=1`` and Airflow runs this
task's intervals one after the other; with ``identity`` it is left unset and intervals run at the same time. The
rule, how the wait shows and what bounds it: :mod:`airflow_pyconnect.operators._base` ("Runs of one connector
must not overlap") and docs/delivery.md.

Schedules: a ``connector_config`` or ``identity`` that uses ``data_interval_start`` /
``data_interval_end`` (:data:`INTERVAL_IDENTITY`, the SQL source's ``interval.start`` /
``interval.end``) needs a schedule whose runs have a data interval: with Airflow 3's
``schedule="@daily"`` (a ``CronTriggerTimetable``, empty intervals), ``None``, ``"@once"`` or an asset
schedule, parsing the DAG file fails with an error naming the task, the schedule and the fix
(``schedule=CronDataIntervalTimetable("@daily", timezone="UTC")``); see
:mod:`airflow_pyconnect.operators._base`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_pyconnect.assets import TOPIC_RULE, legal_topic, pyconnect_asset, topic_of
from airflow_pyconnect.hooks.pyconnect import DEFAULT_CONN_ID
from airflow_pyconnect.operators._base import (
    _ConnectorOperator,
    check_schedule,
    interval_fields,
    serialised_runs,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

INTERVAL_IDENTITY = "{{ data_interval_start.isoformat() }}/{{ data_interval_end.isoformat() }}"
"""A task identity per data interval (pass as ``identity=``): intervals of one connector do not fence
each other; retries of one interval do."""

MAX_SOURCE_OFFSETS = 100
"""Default bound on the ``source_offsets`` entries of the XCom result."""

ON_EMPTY = ("warn", "fail", "skip", "ignore")
"""The values of ``on_empty``: what an empty interval (no input where the source looked) does."""


def ledger_key(context: Context) -> dict[str, Any]:
    """The ranges-record label of this task instance and data interval."""
    start, end = context.get("data_interval_start"), context.get("data_interval_end")
    ti = context["ti"]
    interval = f"{start.isoformat()}/{end.isoformat()}" if start is not None and end is not None else None
    map_index = getattr(ti, "map_index", -1)
    return {
        "dag_id": ti.dag_id,
        "task_id": ti.task_id,
        "map_index": -1 if map_index is None else int(map_index),
        "interval": interval if interval is not None else f"run:{ti.run_id}",
    }


def live_hint(context: Mapping[str, Any]) -> str:
    """For a scheduled run whose data interval is empty (Airflow 3's ``"@daily"``, a ``CronTriggerTimetable``):
    a note that the run starts at the beginning of the period it names, so ``{{ ds }}``'s input may not exist
    yet; ``""`` otherwise (a manual run, a backfill, a schedule with data intervals)."""
    start, end, dag_run = context.get("data_interval_start"), context.get("data_interval_end"), context.get("dag_run")
    run_type = str(getattr(dag_run, "run_type", "") or "").lower()
    if start is None or start != end or not run_type.endswith("scheduled"):
        return ""
    return (f"; this scheduled run of {start.date().isoformat()} started at {start.isoformat()}, at the start of the "
            f"day it names (its data interval is empty): read the day before ({{{{ macros.ds_add(ds, -1) }}}}) or "
            f"schedule with CronDataIntervalTimetable; see docs/running.md, 'A daily DAG over a folder per day'")


def xcom_result(data: Mapping[str, Any], max_source_offsets: int = MAX_SOURCE_OFFSETS) -> dict[str, Any]:
    """The operator's XCom from ``SourceRunResult.to_dict()`` (see the module docstring)."""
    from connect_runtime import ranges as ranges_mod

    out = dict(data)
    offsets = sorted(data.get("source_offsets") or [],
                     key=lambda e: json.dumps(e.get("partition"), sort_keys=True))
    out["source_offsets"] = offsets[:max_source_offsets]
    out["source_offsets_total"] = len(offsets)
    out["source_offsets_truncated"] = len(offsets) > max_source_offsets
    interval = data.get("interval_ranges") or {}
    out["interval_ranges"] = interval
    out["interval_records"] = ranges_mod.count(interval) if interval else 0
    return out


class PyConnectSourceOperator(_ConnectorOperator):
    """Runs a source connector once, bounded, and returns what it committed.

    :param connector_config: the connector config (templated): ``name``, ``connector.class``,
        ``tasks.max``, the connector's fields and the runtime's (``transaction.boundary``, ...). A
        string is parsed as JSON or a Python literal after rendering. Secret-looking fields are
        masked in logs and in the rendered-template view.
    :param pyconnect_conn_id: the ``pyconnect`` connection naming the backend (default
        ``pyconnect_default``; the embedded ``$AIRFLOW_HOME/pyconnect/pyconnect.db`` when undefined).
    :param exactly_once: KIP-618 transactions (default); ``False`` for at-least-once.
    :param max_records: stop after this many records (never more are written); ``None``: no bound.
    :param max_seconds: stop after this many seconds (the last boundary is still committed);
        ``None``: no bound. Without either bound the run ends when the source is idle.
    :param identity: task identity scope (templated), e.g. :data:`INTERVAL_IDENTITY`: runs with
        different identities do not fence each other (parallel intervals); ``None``: one identity, and
        runs of this task wait for each other (``max_active_tis_per_dag`` defaults to 1).
    :param max_source_offsets: bound on the ``source_offsets`` entries of the XCom result.
    :param emit_asset_events: when this attempt committed new records, attach its ranges of each
        topic written to its outlet's Asset event. A literal ``topic`` in ``connector_config`` adds
        its asset (``pyconnect://<conn id>/<topic>``) to ``outlets`` by itself.
    :param on_empty: what an empty interval does (the source found no input where it looked, see the
        module docstring): ``"warn"`` (default), ``"fail"``, ``"skip"`` or ``"ignore"``. A rerun of a
        committed interval is never empty.
    :param max_active_tis_per_dag: (``BaseOperator``) default 1 when ``identity`` is ``None`` (runs of
        one identity fence each other: Airflow runs them one at a time), unset otherwise.
    """

    template_fields: Sequence[str] = ("connector_config", "identity")
    interval_args = ("connector_config", "identity")
    ui_color = "#e8f4d9"
    lineage_kind = "source"
    serialise_runs_without_identity = True
    """Whether ``max_active_tis_per_dag`` defaults to 1 without ``identity`` (not for the fan-out's
    mapped connector tasks, which are one generation and run in parallel)."""

    def __init__(
        self,
        *,
        connector_config: Mapping[str, Any] | str,
        pyconnect_conn_id: str = DEFAULT_CONN_ID,
        exactly_once: bool = True,
        max_records: int | None = None,
        max_seconds: float | None = None,
        identity: str | None = None,
        max_source_offsets: int = MAX_SOURCE_OFFSETS,
        emit_asset_events: bool = True,
        on_empty: str = "warn",
        **kwargs: Any,
    ) -> None:
        if on_empty not in ON_EMPTY:
            raise ValueError(f"on_empty must be one of {', '.join(map(repr, ON_EMPTY))}, got {on_empty!r}")
        if emit_asset_events and isinstance(connector_config, Mapping):
            topic = connector_config.get("topic")
            if isinstance(topic, str) and topic and "{{" not in topic and "{%" not in topic:
                outlets = list(kwargs.get("outlets") or [])
                asset = pyconnect_asset(topic, pyconnect_conn_id)
                if asset not in outlets:
                    outlets.append(asset)
                kwargs["outlets"] = outlets
        if identity is not None and not isinstance(identity, str):
            raise TypeError(f"identity must be a string (a template such as INTERVAL_IDENTITY) or None, "
                            f"got {type(identity).__name__}")
        kwargs = serialised_runs(kwargs, self.serialise_runs_without_identity and not identity)
        super().__init__(connector_config=connector_config, pyconnect_conn_id=pyconnect_conn_id,
                         max_records=max_records, max_seconds=max_seconds, **kwargs)
        self.exactly_once = bool(exactly_once)
        if isinstance(max_source_offsets, bool) or not isinstance(max_source_offsets, int) or max_source_offsets < 0:
            raise ValueError(f"max_source_offsets must be an int >= 0, got {max_source_offsets!r}")
        self.identity = identity
        self.max_source_offsets = max_source_offsets
        self.emit_asset_events = bool(emit_asset_events)
        self.on_empty = on_empty
        self._interval_fields = interval_fields(connector_config=connector_config, identity=identity)
        check_schedule(self, self._interval_fields)

    def execute(self, context: Context) -> dict[str, Any]:
        from connect_runtime import run_source

        self._note_host(context)
        self._check_interval(context, getattr(self, "_interval_fields", []))
        config = self._config()
        name = str(config.get("name", ""))
        identity = self.identity or None
        key = ledger_key(context)
        self.log.info("Source connector %s on %s (%s%s): %s", name or "?", self.hook.describe()["url"],
                      "exactly-once" if self.exactly_once else "at-least-once",
                      f", identity {identity}" if identity else "", self._masked(config))
        try:
            self._check_paths(config)
            with self.hook.get_backend() as backend:
                result = run_source(config, backend, exactly_once=self.exactly_once, max_records=self.max_records,
                                    max_seconds=self.max_seconds, metrics=self._metrics(),
                                    ledger_key=key, identity=identity, stop=self._stop)
        except Exception as exc:  # a connector's own error too: its text may quote secrets
            self._fail(exc, f"source connector {name!r}")
        self._lineage_schemas = result.value_schemas
        return self._finish(context, xcom_result(result.to_dict(), self.max_source_offsets), key)

    def _finish(self, context: Context, data: dict[str, Any], key: Mapping[str, Any]) -> dict[str, Any]:
        """Log, push the ``ranges`` / ``interval_ranges`` XCom keys, emit asset events; the XCom result."""
        self.log.info(
            "Source connector %s committed %d records in %d transactions (%d filtered, %d skipped) in %.2f s; "
            "this attempt's ranges %s; the interval %s holds %s", data["connector"], data["records"],
            data["transactions"], data["filtered"], data["skipped"], data["seconds"], json.dumps(data["ranges"]),
            key["interval"], json.dumps(data["interval_ranges"]))
        self._lineage_result = data
        ti = context["ti"]
        ti.xcom_push(key="ranges", value=data["ranges"])
        ti.xcom_push(key="interval_ranges", value=data["interval_ranges"])
        self._report_empty(data, key, live_hint(context))
        if self.emit_asset_events:
            self._emit_asset_events(context, data)
        return data

    def _report_empty(self, data: Mapping[str, Any], key: Mapping[str, Any], hint: str = "") -> None:
        """Say why this attempt wrote nothing; an empty interval as ``on_empty`` says (module docstring)."""
        from airflow.sdk.exceptions import AirflowException, AirflowSkipException

        from connect_runtime.api import NO_INPUT

        empty = data.get("empty")
        if data["records"] or not empty:
            return
        if empty.get("reason") not in (NO_INPUT, "unknown"):  # runtime/source/empty.py: EMPTY_INTERVAL
            self.log.info("This attempt wrote nothing new: %s", empty.get("message"))
            return
        message = (f"Source connector {data['connector']}: the interval {key['interval']} is empty: "
                   f"{empty.get('message')}{hint}")
        if self.on_empty == "fail":
            raise AirflowException(f"{message} (on_empty='fail')")
        if self.on_empty == "skip":
            raise AirflowSkipException(f"{message} (on_empty='skip')")
        if self.on_empty == "warn":
            self.log.warning("%s (on_empty='warn'; 'fail' or 'skip' to stop here)", message)
        else:
            self.log.info("%s", message)

    # -- asset events --------------------------------------------------------------------------------
    def _emit_asset_events(self, context: Context, data: dict[str, Any]) -> None:
        """One event per topic this attempt wrote; none for a topic it did not write.

        Airflow records an event for every ``Asset`` in a successful task's ``outlets``: so, for this
        attempt only (the worker's copy of the task), the pyconnect assets of topics it did not write
        are taken out of ``outlets``. Asset events through an ``AssetAlias`` are only added for the
        topics written."""
        from airflow.sdk import Asset, AssetAlias

        written = {t for t, parts in data["ranges"].items() if parts} if data["records"] else set()
        events = context["outlet_events"]
        by_topic = {}
        aliases = []
        kept = []
        for outlet in self.outlets or []:
            topic = topic_of(outlet, self.pyconnect_conn_id) if isinstance(outlet, Asset) else None
            if topic is not None:
                by_topic[topic] = outlet
                if topic not in written:
                    self.log.info("Topic %s: this attempt committed nothing new to it: no asset event", topic)
                    continue
            elif isinstance(outlet, AssetAlias):
                aliases.append(outlet)
            kept.append(outlet)
        self.outlets = kept
        for topic in sorted(written):
            parts = data["ranges"][topic]
            extra = {"connector": data["connector"], "topic": topic, "ranges": parts,
                     "records": self._topic_records(parts)}
            if topic in by_topic:
                events[by_topic[topic]].extra.update(extra)
            elif aliases and not legal_topic(topic):
                self.log.warning("Topic %r is not a Kafka topic name (%s): it has no asset, no asset event for it",
                                 topic, TOPIC_RULE)
            elif aliases:
                for alias in aliases:
                    events[alias].add(pyconnect_asset(topic, self.pyconnect_conn_id), extra=extra)
            else:
                self.log.info("Topic %s has no outlet asset or alias on this task: no asset event for it", topic)

    @staticmethod
    def _topic_records(parts: Mapping[str, Any]) -> int:
        from connect_runtime import ranges as ranges_mod

        return ranges_mod.count({"t": parts})


__all__ = ["INTERVAL_IDENTITY", "MAX_SOURCE_OFFSETS", "ON_EMPTY", "PyConnectSourceOperator", "ledger_key", "live_hint", "xcom_result"]
