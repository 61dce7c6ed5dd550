"""PyConnectSourceOperator: one bounded run of a source connector, its committed ranges as XCom.

The operator renders ``connector_config`` (Jinja: ``{{ ds }}``, ``{{ data_interval_start }}``, ...),
opens the backend of its ``pyconnect`` connection, calls ``connect_runtime.run_source`` and returns
``SourceRunResult.to_dict()``::

    {"connector": "orders", "records": 1000, "ranges": {"orders": {"0": [0, 1000]}},
     "source_offsets": [{"partition": {...}, "offset": {...}}], "transactions": 1,
     "filtered": 0, "skipped": 0, "seconds": 0.4}

It also emits one Asset event per topic written (see :mod:`airflow_pyconnect.assets`), with the
committed ranges in the event's ``extra``.

Reruns (retries, clears, backfills)
-----------------------------------
A run resumes from the connector's committed source offsets, so a rerun of a finished slice of data
writes nothing. Its own result would then have empty ``ranges``, and the downstream tasks of a
cleared run would lose the ranges they need. So, with ``remember_ranges=True`` (default), the
operator records what each run committed in the backend, in the offset store
``pyconnect-airflow-ranges`` (Kafka Connect's key/value format, key ``["<connector>", {"dag_id",
"task_id", "map_index", "interval"}]`` where ``interval`` is the data interval, or the run id when
the run has none), merged over the runs of the same task and interval. The returned ``ranges`` are
that merge: a rerun that wrote nothing returns exactly the ranges its interval committed before
(its ``records`` stays 0), one that finished an interrupted slice returns the whole slice.
The ranges are written right after the run committed, not in the same transaction: a worker that
dies in between leaves that interval unrecorded (the next rerun logs a warning and returns the
empty ranges).

Exactly-once and retries: each connector task has its own transactional producer with id
``<cluster>-<connector>-<task>``; a retry's producer init fences the previous attempt, whose next
commit then fails with ``ProducerFencedError`` and writes nothing. A failed or fenced run fails the
task with the runtime's message (an ``AirflowException`` chained to the runtime error).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_pyconnect.assets import pyconnect_asset, topic_of
from airflow_pyconnect.hooks.pyconnect import DEFAULT_CONN_ID
from airflow_pyconnect.operators._base import _ConnectorOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from connect_runtime.backends.base import Backend

RANGES_STORE = "pyconnect-airflow-ranges"
"""The offset store where the operator remembers the ranges each task and interval committed."""


def merge_ranges(*all_ranges: Mapping[str, Mapping[str, Sequence[int]]]) -> dict[str, dict[str, list[int]]]:
    """Per topic partition ``[min from, max to]`` over several ``ranges`` dicts."""
    out: dict[str, dict[str, list[int]]] = {}
    for ranges in all_ranges:
        for topic, parts in ranges.items():
            for p, (first, nxt) in parts.items():
                have = out.setdefault(topic, {}).get(str(p))
                if have is None:
                    out[topic][str(p)] = [int(first), int(nxt)]
                else:
                    have[0], have[1] = min(have[0], int(first)), max(have[1], int(nxt))
    return {t: dict(sorted(parts.items(), key=lambda kv: int(kv[0]))) for t, parts in sorted(out.items())}


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
    :param remember_ranges: record the committed ranges per task and data interval in the backend
        and return their merge, so a rerun that writes nothing still returns the interval's ranges.
    :param emit_asset_events: attach the committed ranges of each topic written to its outlet's
        Asset event. A literal ``topic`` in ``connector_config`` adds its asset
        (``pyconnect://<conn id>/<topic>``) to ``outlets`` by itself.
    """

    template_fields: Sequence[str] = ("connector_config",)
    ui_color = "#e8f4d9"

    def __init__(
        self,
        *,
        connector_config: Mapping[str, Any] | str,
        pyconnect_conn_id: str = DEFAULT_CONN_ID,
        exactly_once: bool = True,
        max_records: int | None = None,
        max_seconds: float | None = None,
        remember_ranges: bool = True,
        emit_asset_events: bool = True,
        **kwargs: Any,
    ) -> None:
        if emit_asset_events and isinstance(connector_config, Mapping):
            topic = connector_config.get("topic")
            if isinstance(topic, str) and topic and "{{" not in topic and "{%" not in topic:
                outlets = list(kwargs.get("outlets") or [])
                asset = pyconnect_asset(topic, pyconnect_conn_id)
                if asset not in outlets:
                    outlets.append(asset)
                kwargs["outlets"] = outlets
        super().__init__(connector_config=connector_config, pyconnect_conn_id=pyconnect_conn_id,
                         max_records=max_records, max_seconds=max_seconds, **kwargs)
        self.exactly_once = bool(exactly_once)
        self.remember_ranges = bool(remember_ranges)
        self.emit_asset_events = bool(emit_asset_events)

    def execute(self, context: Context) -> dict[str, Any]:
        from connect_runtime import run_source
        from connect_runtime.api.errors import ConnectError

        config = self._config()
        name = str(config.get("name", ""))
        self.log.info("Source connector %s on %s (%s): %s", name or "?", self.hook.describe()["url"],
                      "exactly-once" if self.exactly_once else "at-least-once", self._masked(config))
        try:
            with self.hook.get_backend() as backend:
                result = run_source(config, backend, exactly_once=self.exactly_once, max_records=self.max_records,
                                    max_seconds=self.max_seconds, progress=self._progress("source", name))
                data = result.to_dict()
                if self.remember_ranges:
                    data["ranges"] = self._remembered_ranges(backend, data, context)
        except ConnectError as exc:
            self._fail(exc, f"source connector {name!r}")
        self.log.info(
            "Source connector %s committed %d records in %d transactions (%d filtered, %d skipped) in %.2f s; "
            "ranges %s", data["connector"], data["records"], data["transactions"], data["filtered"],
            data["skipped"], data["seconds"], json.dumps(data["ranges"]))
        if self.emit_asset_events:
            self._emit_asset_events(context, data)
        return data

    # -- remembered ranges ---------------------------------------------------------------------------
    def _ledger_partition(self, context: Context) -> dict[str, Any]:
        start, end = context.get("data_interval_start"), context.get("data_interval_end")
        interval = f"{start.isoformat()}/{end.isoformat()}" if start is not None and end is not None else None
        ti = context["ti"]
        return {
            "dag_id": ti.dag_id,
            "task_id": ti.task_id,
            "map_index": getattr(ti, "map_index", -1),
            "interval": interval if interval is not None else f"run:{ti.run_id}",
        }

    def _remembered_ranges(self, backend: Backend, data: dict[str, Any], context: Context) -> dict[str, Any]:
        from connect_runtime.runtime.offsets import offset_key, offset_value

        partition = self._ledger_partition(context)
        key = offset_key(data["connector"], partition)
        store = backend.offset_store(RANGES_STORE)
        try:
            found = store.get([key]).get(key)
            before = json.loads(found)["ranges"] if found else {}
            merged = merge_ranges(before, data["ranges"])
            if data["ranges"] and merged != before:
                store.put([(key, offset_value({"ranges": merged, "run_id": context["ti"].run_id}))], 30.0)
        finally:
            store.close()
        if not data["ranges"]:
            if before:
                self.log.info("This run wrote nothing new (the slice was committed before); returning the ranges "
                              "this task committed for %s: %s", partition["interval"], json.dumps(before))
            else:
                self.log.warning("This run wrote nothing and no earlier ranges are recorded for %s",
                                 partition["interval"])
        return merged

    # -- asset events --------------------------------------------------------------------------------
    def _emit_asset_events(self, context: Context, data: dict[str, Any]) -> None:
        from airflow.sdk import Asset, AssetAlias

        events = context["outlet_events"]
        by_topic = {}
        aliases = []
        for outlet in self.outlets or []:
            if isinstance(outlet, Asset):
                topic = topic_of(outlet, self.pyconnect_conn_id)
                if topic is not None:
                    by_topic[topic] = outlet
            elif isinstance(outlet, AssetAlias):
                aliases.append(outlet)
        for topic, parts in data["ranges"].items():
            extra = {"connector": data["connector"], "topic": topic, "ranges": parts, "records": data["records"]}
            if topic in by_topic:
                events[by_topic[topic]].extra.update(extra)
            elif aliases:
                for alias in aliases:
                    events[alias].add(pyconnect_asset(topic, self.pyconnect_conn_id), extra=extra)
            else:
                self.log.info("Topic %s has no outlet asset or alias on this task: no asset event for it", topic)


__all__ = ["RANGES_STORE", "PyConnectSourceOperator", "merge_ranges"]
