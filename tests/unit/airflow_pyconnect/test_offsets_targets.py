"""Target shapes accepted by the sensor, trigger and sink operator, and when a target is reached."""

from __future__ import annotations

import pytest

from airflow_pyconnect._offsets import missing, normalise_target, source_targets, structured, topic_targets

SOURCE_RESULT = {
    "connector": "gen", "records": 30, "ranges": {"a": {"0": [0, 10], "1": [5, 25]}},
    "source_offsets": [{"partition": {"task": 0}, "offset": {"position": 10}}],
    "transactions": 1, "filtered": 0, "skipped": 0, "seconds": 0.1,
}


def test_topic_targets_from_every_accepted_shape() -> None:
    want = {"a": {"0": 10, "1": 25}}
    assert topic_targets(SOURCE_RESULT) == want
    assert topic_targets(str(SOURCE_RESULT)) == want  # a rendered xcom_pull without native rendering
    assert topic_targets('{"a": {"0": 10, "1": 25}}') == want
    assert topic_targets({"a": {0: 10, 1: "25"}}) == want
    assert topic_targets({"connector": "s", "committed": {"a": {"0": 10, "1": 25}}}) == want
    # a sink result (or a sink fan-out's merge) also says what it read: the target is what it committed
    assert topic_targets({"connector": "s", "committed": {"a": {"0": 10, "1": 25}},
                          "ranges": {"a": {"0": [0, 12], "1": [0, 30]}}}) == want


@pytest.mark.parametrize("bad", ["", "not json {", ["a"], {"a": 3}, {"a": {"x": 1}}, {"a": {"0": -1}}])
def test_topic_targets_reject_bad_input_naming_it(bad: object) -> None:
    with pytest.raises(ValueError, match="target"):
        topic_targets(bad)


def test_source_targets() -> None:
    assert source_targets(SOURCE_RESULT) == SOURCE_RESULT["source_offsets"]
    assert source_targets(str(SOURCE_RESULT["source_offsets"])) == SOURCE_RESULT["source_offsets"]
    with pytest.raises(ValueError, match="source_offsets"):
        source_targets({"ranges": {}})
    with pytest.raises(ValueError, match="partition"):
        source_targets([{"offset": {}}])
    with pytest.raises(ValueError, match="connector_kind"):
        normalise_target("both", {})


def test_structured_passes_non_strings_through() -> None:
    obj = {"a": 1}
    assert structured(obj, "x") is obj


def test_missing_for_sink_targets() -> None:
    target = {"a": {"0": 10, "1": 25}}
    assert missing("sink", target, {"a": {"0": 10, "1": 30}}) == []
    assert missing("sink", target, {"a": {"0": 9, "1": None}}) == [
        "a[0]: committed 9, target 10", "a[1]: committed nothing, target 25"]


def test_missing_for_source_targets_compares_numbers_and_equals_the_rest() -> None:
    target = [{"partition": {"file": "x"}, "offset": {"position": 100, "done": True}}]
    assert missing("source", target, [{"partition": {"file": "x"}, "offset": {"position": 120, "done": True}}]) == []
    short = missing("source", target, [{"partition": {"file": "x"}, "offset": {"position": 120, "done": False}}])
    assert short == ['{"file":"x"}: committed {"position": 120, "done": false}, target {"position": 100, "done": true}']
    assert missing("source", target, []) == ['{"file":"x"}: committed null, target {"position": 100, "done": true}']
