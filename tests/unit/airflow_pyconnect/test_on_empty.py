"""``on_empty`` of the source operator: the values Airflow users get, checked when the DAG file is parsed (the runs
themselves: tests/integration/test_airflow_first_day.py)."""

from __future__ import annotations

import pytest

from airflow_pyconnect.operators.fanout import PyConnectSourceTaskOperator
from airflow_pyconnect.operators.source import ON_EMPTY, PyConnectSourceOperator

CONFIG = {"name": "c", "connector.class": "connect_runtime.connectors.datagen.DataGenSource", "topic": "t"}


def test_on_empty_defaults_to_warn_and_takes_each_documented_value() -> None:
    assert ON_EMPTY == ("warn", "fail", "skip", "ignore")
    assert PyConnectSourceOperator(task_id="a", connector_config=CONFIG).on_empty == "warn"
    for value in ON_EMPTY:
        assert PyConnectSourceOperator(task_id=f"t_{value}", connector_config=CONFIG, on_empty=value).on_empty == value
    mapped = PyConnectSourceTaskOperator(task_id="m", plan={}, task_index=0, connector_config=CONFIG, on_empty="fail")
    assert mapped.on_empty == "fail"


def test_an_unknown_on_empty_is_refused_at_parse_time_naming_the_values() -> None:
    with pytest.raises(ValueError, match="on_empty must be one of 'warn', 'fail', 'skip', 'ignore', got 'error'"):
        PyConnectSourceOperator(task_id="bad", connector_config=CONFIG, on_empty="error")


def test_a_scheduled_run_with_an_empty_interval_gets_the_daily_hint() -> None:
    """Only a scheduled run whose interval is empty (Airflow 3's "@daily") is told it ran at the start of its day."""
    from dataclasses import dataclass
    from datetime import UTC, datetime

    from airflow.utils.types import DagRunType

    from airflow_pyconnect.operators.source import live_hint

    @dataclass
    class Run:  # the attribute the task context's dag_run carries
        run_type: DagRunType

    day = datetime(2026, 11, 28, tzinfo=UTC)
    hint = live_hint({"data_interval_start": day, "data_interval_end": day, "dag_run": Run(DagRunType.SCHEDULED)})
    assert "this scheduled run of 2026-11-28 started at 2026-11-28T00:00:00+00:00" in hint
    assert "{{ macros.ds_add(ds, -1) }}" in hint and "CronDataIntervalTimetable" in hint
    assert live_hint({"data_interval_start": day, "data_interval_end": day, "dag_run": Run(DagRunType.MANUAL)}) == ""
    assert live_hint({"data_interval_start": day, "data_interval_end": day, "dag_run": Run(DagRunType.BACKFILL_JOB)}) == ""
    later = datetime(2026, 11, 29, tzinfo=UTC)
    assert live_hint({"data_interval_start": day, "data_interval_end": later,
                      "dag_run": Run(DagRunType.SCHEDULED)}) == ""
