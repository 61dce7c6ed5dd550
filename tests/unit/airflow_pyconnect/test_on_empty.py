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
