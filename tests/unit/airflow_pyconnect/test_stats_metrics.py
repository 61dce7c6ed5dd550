"""StatsMetrics: the runtime's metrics as Airflow sends its own (a tagged name, and the legacy name with the tags as
segments while ``[metrics] legacy_names_on``), into Airflow's Stats."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_pyconnect.metrics import StatsMetrics, legacy_name, tagged_name


class FakeStats:
    """Airflow's Stats calls, kept (the same signatures as ``airflow.sdk.observability.stats.Stats``)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def incr(self, stat: str, count: int | None = None, rate: float | None = None, *,
             tags: dict[str, Any] | None = None) -> None:
        self.calls.append(("incr", stat, count, tags))

    def gauge(self, stat: str, value: float, rate: float | None = None, delta: bool | None = None, *,
              tags: dict[str, Any] | None = None) -> None:
        self.calls.append(("gauge", stat, value, tags))

    def timing(self, stat: str, dt: float, *, tags: dict[str, Any] | None = None) -> None:
        self.calls.append(("timing", stat, dt, tags))


TAGS = {"connector": "orders", "task": "0"}


def test_each_metric_goes_out_tagged_and_with_its_legacy_name() -> None:
    stats = FakeStats()
    m = StatsMetrics({"dag_id": "d", "task_id": "t"}, stats=stats, legacy_names=True)
    m.incr("source-record-write-total", 41, {**TAGS, "topic": "orders.v1"})
    m.gauge("sink-record-lag", 3, {**TAGS, "topic": "t", "partition": "2"})
    m.timing("example-time", 1.5, TAGS)
    assert stats.calls == [
        ("incr", "pyconnect.source-record-write-total", 41,
         {"dag_id": "d", "task_id": "t", "connector": "orders", "task": "0", "topic": "orders.v1"}),
        ("incr", "pyconnect.source-record-write-total.orders.0.orders__v1", 41, None),
        ("gauge", "pyconnect.sink-record-lag", 3,
         {"dag_id": "d", "task_id": "t", "connector": "orders", "task": "0", "topic": "t", "partition": "2"}),
        ("gauge", "pyconnect.sink-record-lag.orders.0.t.2", 3, None),
        ("timing", "pyconnect.example-time", 1.5, {"dag_id": "d", "task_id": "t", **TAGS}),
        ("timing", "pyconnect.example-time.orders.0", 1.5, None),
    ]


def test_no_legacy_names_when_airflow_exports_none() -> None:
    stats = FakeStats()
    StatsMetrics(stats=stats, legacy_names=False).incr("total-retries", 2, TAGS)
    assert stats.calls == [("incr", "pyconnect.total-retries", 2, TAGS)]


@pytest.mark.parametrize(("connector", "segment"), [
    ("orders", "orders"),
    ("my.connector", "my__connector"),   # a dot would add a level to the StatsD hierarchy (Airflow's rule)
    ("sales eu/1:x", "sales_eu_1_x"),      # characters StatsD names do not allow
    ("a-b_c", "a-b_c"),
])
def test_legacy_segments_keep_the_hierarchy(connector: str, segment: str) -> None:
    assert legacy_name("total-retries", {"connector": connector, "task": "3"}) == \
        f"pyconnect.total-retries.{segment}.3"
    assert tagged_name("total-retries") == "pyconnect.total-retries"


def test_airflows_own_stats_by_default() -> None:
    """Without arguments: the task SDK's Stats (what the task runner initialises from [metrics]) and
    ``[metrics] legacy_names_on`` (True by default); with no backend configured the calls do nothing."""
    from airflow.sdk.observability.stats import Stats

    m = StatsMetrics()
    assert m.stats is Stats and m.legacy_names is True
    m.incr("total-retries", 1, TAGS)
    m.gauge("sink-record-lag-max", 0, TAGS)
    m.timing("example-time", 2.0, TAGS)
