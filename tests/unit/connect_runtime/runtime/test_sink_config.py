"""run_sink's config validation, until_offsets shapes and the result's XCom shape."""

from __future__ import annotations

from typing import Any

import pytest

from connect_runtime.api import ConfigError, TopicPartition
from connect_runtime.runtime.sink import SinkRunResult, run_sink
from connect_runtime.runtime.sink.planning import until_targets

SINK = "tests.support.sink_helpers.RecordingSinkConnector"
NEVER_OPENED = "sqlite:///never/opened/because/the/config/is/bad.db"


def errors_of(config: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        run_sink(config, NEVER_OPENED)
    return err.value


def test_one_error_names_every_bad_field() -> None:
    err = errors_of({
        "connector.class": SINK, "tasks.max": "many", "errors.tolerance": "some",
        "offset.flush.interval.ms": "-5", "int.field": "x", "required.field": "missing",
    })
    assert set(err.errors) == {
        "name", "tasks.max", "errors.tolerance", "offset.flush.interval.ms", "topics", "topics.regex",
        "int.field", "required.field",
    }
    for field in err.errors:
        assert field in str(err)


@pytest.mark.parametrize(("extra", "why"), [
    ({}, "neither"),
    ({"topics": "a", "topics.regex": "a.*"}, "both"),
    ({"topics": []}, "neither"),
])
def test_exactly_one_of_topics_and_topics_regex(extra: dict[str, Any], why: str) -> None:
    err = errors_of({"name": "n", "connector.class": SINK, **extra})
    assert set(err.errors) == {"topics", "topics.regex"}
    assert "'topics'" in err.errors["topics"] and "'topics.regex'" in err.errors["topics"]
    assert why in err.errors["topics"]


def test_bad_regex_and_bad_connector_class() -> None:
    err = errors_of({"name": "n", "connector.class": "no.such.module.Sink", "topics.regex": "(["})
    assert set(err.errors) == {"connector.class", "topics.regex"}
    assert "cannot be imported" in err.errors["connector.class"]
    err = errors_of({"name": "n", "connector.class": "tests.support.sink_helpers.LedgerSinkTask", "topics": "t"})
    assert "not a SinkConnector" in err.errors["connector.class"]
    err = errors_of({"name": "n", "connector.class": "tests.support.sink_helpers.LedgerSinkConnector", "topics": "t"})
    assert set(err.errors) == {"ledger.path"}
    assert "'n'" in str(err)


def test_until_offsets_shapes() -> None:
    assert until_targets({"t": {0: 5, "1": 7}}, "n") == {TopicPartition("t", 0): 5, TopicPartition("t", 1): 7}
    src = {"connector": "s", "records": 3, "ranges": {"t": {"0": [2, 5]}, "u": {"3": (0, 1)}}}
    assert until_targets(src, "n") == {TopicPartition("t", 0): 5, TopicPartition("u", 3): 1}
    # a topic named "ranges" in the plain shape stays a topic
    assert until_targets({"ranges": {"0": 4}}, "n") == {TopicPartition("ranges", 0): 4}

    class Result:
        def to_dict(self) -> dict[str, Any]:
            return src

    assert until_targets(Result(), "n") == {TopicPartition("t", 0): 5, TopicPartition("u", 3): 1}
    with pytest.raises(ConfigError, match="until_offsets") as err:
        until_targets({"t": {"zero": 1, "1": "x"}, "u": 3}, "n")
    assert set(err.value.errors) == {"until_offsets"}


def test_result_dict_is_exactly_the_xcom_shape() -> None:
    r = SinkRunResult("c", records=5, committed={"t": {"0": 5}}, dead_lettered=1, retries=2, seconds=0.5,
                      skipped=3, ranges={"t": {"0": [0, 5]}}, bytes=40)
    d = r.to_dict()
    assert d == {"connector": "c", "records": 5, "committed": {"t": {"0": 5}}, "dead_lettered": 1,
                 "retries": 2, "seconds": 0.5, "ranges": {"t": {"0": [0, 5]}}, "bytes": 40}
    assert SinkRunResult.from_dict(d).to_dict() == d
