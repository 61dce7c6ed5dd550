"""Operator and sensor construction: template fields are real attributes, __init__ validates only."""

from __future__ import annotations

from datetime import datetime

import pytest
from airflow.sdk import DAG, Asset, AssetAlias

from airflow_pyconnect.assets import pyconnect_asset
from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.operators.source import PyConnectSourceOperator, xcom_result
from airflow_pyconnect.sensors.offsets import PyConnectCommittedOffsetsSensor
from airflow_pyconnect.triggers.offsets import CommittedOffsetsTrigger

CFG = {"name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource", "topic": "events"}


def _dag() -> DAG:
    return DAG(dag_id="shape", schedule=None, start_date=datetime(2026, 1, 1))


def test_template_fields_name_real_attributes() -> None:
    with _dag():
        ops = [
            PyConnectSourceOperator(task_id="s", connector_config=CFG),
            PyConnectSinkOperator(task_id="k", connector_config={"name": "k"}, until_offsets="{{ x }}"),
            PyConnectCommittedOffsetsSensor(task_id="w", connector_name="k", target_offsets={}),
        ]
    for op in ops:
        assert op.template_fields
        for name in op.template_fields:
            assert hasattr(op, name), (type(op).__name__, name)
    assert PyConnectSinkOperator.template_fields == ("connector_config", "until_offsets")
    assert PyConnectSourceOperator.template_fields == ("connector_config", "identity")


def test_every_init_argument_is_documented() -> None:
    import inspect

    for cls in (PyConnectSourceOperator, PyConnectSinkOperator, PyConnectCommittedOffsetsSensor,
                CommittedOffsetsTrigger):
        doc = cls.__doc__ or ""
        for name in inspect.signature(cls.__init__).parameters:
            if name not in ("self", "kwargs"):
                assert f":param {name}:" in doc, (cls.__name__, name)


def test_literal_topic_becomes_an_outlet_asset_and_alias_outlets_are_kept() -> None:
    with _dag():
        op = PyConnectSourceOperator(task_id="s", connector_config=CFG, pyconnect_conn_id="pc",
                                     outlets=[AssetAlias("a")])
        templated = PyConnectSourceOperator(task_id="t", connector_config={**CFG, "topic": "e-{{ ds }}"})
        quiet = PyConnectSourceOperator(task_id="q", connector_config=CFG, emit_asset_events=False)
    assert pyconnect_asset("events", "pc") == Asset("pyconnect://pc/events")
    assert op.outlets == [AssetAlias("a"), Asset(name="pyconnect://pc/events", uri="pyconnect://pc/events")]
    assert templated.outlets == [] and quiet.outlets == []


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_records": -1}, "max_records must be"),
    ({"max_records": 1.5}, "max_records must be"),
    ({"max_seconds": "10"}, "max_seconds must be"),
    ({"connector_config": 42}, "connector_config must be a mapping"),
])
def test_init_rejects_bad_arguments(kwargs: dict, message: str) -> None:
    with _dag(), pytest.raises((TypeError, ValueError), match=message):
        PyConnectSourceOperator(task_id="s", **{"connector_config": CFG, **kwargs})


def test_sensor_rejects_an_unknown_kind() -> None:
    with _dag(), pytest.raises(ValueError, match="connector_kind must be one of sink, source"):
        PyConnectCommittedOffsetsSensor(task_id="w", connector_name="k", target_offsets={}, connector_kind="x")


def test_sensor_deferrable_defaults_from_config(monkeypatch: pytest.MonkeyPatch) -> None:
    import inspect

    default = inspect.signature(PyConnectCommittedOffsetsSensor.__init__).parameters["deferrable"].default
    from airflow.sdk.configuration import conf

    assert default == conf.getboolean("operators", "default_deferrable", fallback=False)


def test_sink_until_offsets_parses_rendered_text() -> None:
    with _dag():
        op = PyConnectSinkOperator(task_id="k", connector_config={"name": "k"},
                                   until_offsets=str({"connector": "g", "ranges": {"e": {"0": [3, 9]}}}))
        none = PyConnectSinkOperator(task_id="n", connector_config={"name": "k"})
    assert op._until() == {"e": {"0": 9}}
    assert none._until() is None


def test_xcom_result_says_what_this_attempt_wrote_and_bounds_source_offsets() -> None:
    offsets = [{"partition": {"file": f"f{i:03d}"}, "offset": {"position": i}} for i in range(150, 0, -1)]
    data = {"connector": "g", "records": 0, "ranges": {}, "interval_ranges": {"e": {"0": [[0, 4], [6, 9]]}},
            "source_offsets": offsets, "transactions": 0, "filtered": 0, "skipped": 0, "seconds": 0.1}
    out = xcom_result(data, max_source_offsets=100)
    assert out["records"] == 0 and out["ranges"] == {} and out["interval_records"] == 7
    assert out["source_offsets_total"] == 150 and out["source_offsets_truncated"] is True
    assert [e["partition"]["file"] for e in out["source_offsets"]] == [f"f{i:03d}" for i in range(1, 101)]
    assert xcom_result({**data, "source_offsets": offsets[:3]})["source_offsets_truncated"] is False


def test_runtime_errors_become_airflow_exceptions_with_the_same_message_chained() -> None:
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    from connect_runtime.api.errors import ConfigError, ProducerFencedError

    with _dag():
        op = PyConnectSourceOperator(task_id="s", connector_config=CFG)
    config_error = ConfigError(errors={"topic": "missing required field"})
    with pytest.raises(AirflowFailException) as failed:  # no retry can fix a bad config
        op._fail(config_error, "source connector 'gen'")
    assert str(failed.value) == str(config_error) and failed.value.__cause__ is config_error
    fenced = ProducerFencedError("task gen-0 was fenced by a newer instance")
    with pytest.raises(AirflowException) as raised:
        op._fail(fenced, "source connector 'gen'")
    assert type(raised.value) is AirflowException
    assert str(raised.value) == str(fenced) and raised.value.__cause__ is fenced
