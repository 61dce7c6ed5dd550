"""Source offsets are stored exactly as Kafka Connect stores them."""

from __future__ import annotations

import json

import pytest

from connect_runtime.api import DataError
from connect_runtime.runtime.offsets import (
    OffsetWriter,
    canonical_key,
    offset_key,
    offset_value,
    parse_key,
)


def test_key_and_value_are_kafka_connect_json() -> None:
    assert offset_key("files", {"file": "a.jsonl"}) == b'["files",{"file":"a.jsonl"}]'
    assert offset_value({"position": 10, "line": 2}) == b'{"line":2,"position":10}'
    assert offset_value(None) is None


def test_keys_from_other_writers_are_canonicalised() -> None:
    foreign = json.dumps(["c", {"b": 1, "a": 2}], indent=1).encode()
    assert canonical_key(foreign) == b'["c",{"a":2,"b":1}]'
    assert parse_key(b"not json") is None
    assert parse_key(b'{"not": "a list"}') is None
    assert canonical_key(b"garbage") == b"garbage"


def test_non_json_partition_is_a_data_error_naming_it() -> None:
    with pytest.raises(DataError, match="connector 'c'"):
        offset_key("c", {"f": object()})
    with pytest.raises(DataError, match="source offset"):
        offset_value({"pos": {1, 2}})


def test_writer_keeps_latest_per_partition() -> None:
    w = OffsetWriter("c")
    assert not w
    w.record({"f": "a"}, {"pos": 1})
    w.record({"f": "b"}, {"pos": 5})
    w.record({"f": "a"}, {"pos": 2})
    w.record(None, {"pos": 9})  # records without a source partition carry no offset
    assert sorted(w.entries()) == [
        (b'["c",{"f":"a"}]', b'{"pos":2}'),
        (b'["c",{"f":"b"}]', b'{"pos":5}'),
    ]
    w.clear()
    assert not w and w.entries() == []
