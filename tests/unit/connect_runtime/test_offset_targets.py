"""The one parser of offset targets (connect_runtime.ranges): every shape the runtime, the CLI and the
provider accept gives the same targets, and bad input one error naming the field and the part."""

from __future__ import annotations

import pytest

from connect_runtime.api.records import TopicPartition
from connect_runtime.ranges import RangesFormatError, offset_targets, offset_targets_json, source_targets

SOURCE_RESULT = {
    "connector": "src", "records": 10,
    "ranges": {"a": {"0": [0, 10]}},
    "interval_ranges": {"a": {"0": [0, 10], "1": [[0, 5], [9, 25]]}},
    "source_offsets": [{"partition": {"f": "x"}, "offset": {"position": 3}}],
}
WANT = {TopicPartition("a", 0): 10, TopicPartition("a", 1): 25}


class _Result:
    def to_dict(self) -> dict[str, object]:
        return SOURCE_RESULT


@pytest.mark.parametrize("value", [
    {"a": {0: 10, "1": 25}},
    '{"a": {"0": 10, "1": 25}}',
    SOURCE_RESULT,
    str(SOURCE_RESULT),  # a rendered xcom_pull without native rendering
    _Result(),
    {"a": {"0": [0, 10], "1": [[0, 5], [20, 25]]}},  # source.output["ranges"]
    {"connector": "sink", "committed": {"a": {"0": 10, "1": 25}}},
])
def test_every_accepted_shape_gives_the_same_targets(value: object) -> None:
    assert offset_targets(value, "until_offsets") == WANT
    assert offset_targets_json(WANT) == {"a": {"0": 10, "1": 25}}


def test_a_topic_named_ranges_is_a_topic() -> None:
    assert offset_targets({"ranges": {"0": 4}}) == {TopicPartition("ranges", 0): 4}


@pytest.mark.parametrize(("value", "names"), [
    ({"t": {"zero": 1, "1": "x"}, "u": 3}, ["'t' partition 'zero'", "'t' partition '1'", "'u'"]),
    ({"t": {"0": -1}}, ["'t' partition '0'", ">= 0"]),
    ({"t": {"0": True}}, ["'t' partition '0'", "True"]),
    ([1, 2], ["expected a mapping", "list"]),
    ("", ["empty string"]),
    ("{not json", ["neither JSON nor a Python literal"]),
    ({"connector": "s", "ranges": {"t": {"0": [5, 1]}}}, ["topic 't' partition 0", "[5, 1]"]),
])
def test_bad_targets_name_the_field_and_every_bad_part(value: object, names: list[str]) -> None:
    with pytest.raises(RangesFormatError) as info:
        offset_targets(value, "until_offsets")
    message = str(info.value)
    assert message.startswith("until_offsets")
    for name in names:
        assert name in message


def test_source_targets() -> None:
    assert source_targets(SOURCE_RESULT) == SOURCE_RESULT["source_offsets"]
    assert source_targets(_Result()) == SOURCE_RESULT["source_offsets"]
    with pytest.raises(RangesFormatError, match="source_offsets"):
        source_targets({"ranges": {}}, "target_offsets")
    with pytest.raises(RangesFormatError, match="target_offsets: the source run result lists only 1"):
        source_targets({**SOURCE_RESULT, "source_offsets_truncated": True, "source_offsets_total": 9},
                       "target_offsets")
