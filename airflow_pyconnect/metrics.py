"""The runtime's metrics through Airflow's own ``Stats``, so they go wherever the user configured Airflow's metrics
(``[metrics] statsd_on``, ``statsd_datadog_enabled`` or ``otel_on``; nowhere when none is on).

The runtime names its metrics as Kafka Connect does (:mod:`connect_runtime.metrics`, docs/operations.md) and tags
them ``connector``, ``task`` (the connector's task id), and ``topic`` / ``partition`` where they are per topic or
partition. :class:`StatsMetrics` sends each one as Airflow sends its own (``ti.finish``):

- the **tagged name** ``pyconnect.<metric>`` with those tags plus the Airflow task's ``dag_id`` and ``task_id``
  (DogStatsD and OpenTelemetry keep the tags; StatsD with ``statsd_influxdb_enabled`` appends them to the name);
- while ``[metrics] legacy_names_on`` is true (Airflow's default), also the **legacy name**, the tags as name
  segments for plain StatsD, which has no tags: ``pyconnect.<metric>.<connector>.<task>[.<topic>[.<partition>]]``,
  with a dot inside a value written ``__`` and any other character StatsD does not allow written ``_``, as Airflow
  writes ``ti.finish.<dag_id>.<task_id>.<state>``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

PREFIX = "pyconnect"
"""The first segment of every metric name (Airflow's ``[metrics] statsd_prefix`` comes before it)."""

LEGACY_SEGMENTS = ("connector", "task", "topic", "partition")
"""The tags that become segments of the legacy name, in this order (those the metric has)."""

_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def _segment(value: str) -> str:
    return _INVALID.sub("_", str(value).replace(".", "__"))


def tagged_name(metric: str) -> str:
    """``pyconnect.<metric>``."""
    return f"{PREFIX}.{metric}"


def legacy_name(metric: str, tags: Mapping[str, str]) -> str:
    """``pyconnect.<metric>.<connector>.<task>[.<topic>[.<partition>]]`` (see the module docstring)."""
    return ".".join([PREFIX, metric, *(_segment(tags[k]) for k in LEGACY_SEGMENTS if k in tags)])


def _airflow_stats() -> Any:
    from airflow.sdk.observability.stats import Stats

    return Stats


def _legacy_names_on() -> bool:
    from airflow.sdk.configuration import conf

    return bool(conf.getboolean("metrics", "legacy_names_on", fallback=True))


class StatsMetrics:
    """A :class:`connect_runtime.metrics.Metrics` that forwards to Airflow's ``Stats`` (the task SDK's, which the
    task runner initialises from ``[metrics]``). ``tags`` are added to every tagged name (the operator gives its
    ``dag_id`` and ``task_id``); ``stats`` and ``legacy_names`` default to Airflow's."""

    def __init__(self, tags: Mapping[str, str] | None = None, *, stats: Any = None,
                 legacy_names: bool | None = None) -> None:
        self.stats = _airflow_stats() if stats is None else stats
        self.legacy_names = _legacy_names_on() if legacy_names is None else legacy_names
        self.tags = dict(tags or {})

    def incr(self, name: str, count: int, tags: Mapping[str, str]) -> None:
        self.stats.incr(tagged_name(name), count, tags={**self.tags, **tags})
        if self.legacy_names:
            self.stats.incr(legacy_name(name, tags), count)

    def gauge(self, name: str, value: float, tags: Mapping[str, str]) -> None:
        self.stats.gauge(tagged_name(name), value, tags={**self.tags, **tags})
        if self.legacy_names:
            self.stats.gauge(legacy_name(name, tags), value)

    def timing(self, name: str, ms: float, tags: Mapping[str, str]) -> None:
        self.stats.timing(tagged_name(name), ms, tags={**self.tags, **tags})
        if self.legacy_names:
            self.stats.timing(legacy_name(name, tags), ms)


__all__ = ["LEGACY_SEGMENTS", "PREFIX", "StatsMetrics", "legacy_name", "tagged_name"]
