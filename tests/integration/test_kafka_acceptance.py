"""Acceptance: a source run feeds a sink run, on both backends (a fresh SQLite file / a fresh Apache Kafka
broker). DataGenSource writes exactly-once; FileSink reads what the source run committed
(``until_offsets`` = the source run's ranges) and keeps its offsets in its destination."""

from __future__ import annotations

import json
from pathlib import Path

from connect_runtime import ranges
from connect_runtime.connectors.datagen import generate_value
from connect_runtime.runtime.sink import run_sink
from connect_runtime.runtime.source import run_source


def _sink_values(directory: Path, topic: str) -> list[dict]:
    out: list[dict] = []
    for path in sorted((directory / topic).glob("partition=*/*.jsonl")):
        out.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return out


def _source(topic: str, records: int, tasks: int = 2) -> dict:
    return {"name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
            "topic": topic, "max.records": records, "batch.size": 100, "tasks.max": tasks,
            "topic.creation.default.partitions": 2, "poll.idle.timeout.ms": 200}


def _sink(topic: str, directory: Path) -> dict:
    return {"name": "files", "connector.class": "connect_runtime.connectors.files.FileSink",
            "topics": topic, "directory": str(directory), "format": "jsonl"}


def test_source_run_then_sink_run_round_trip(any_backend_url: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = run_source(_source("orders", 800), any_backend_url, max_records=500)  # stops part-way
    assert first.records == 500
    assert ranges.count(first.ranges) >= 500  # span lists on Kafka: transaction markers are not records
    sunk = run_sink(_sink("orders", out), any_backend_url, until_offsets=first)
    assert sunk.records == 500
    values = _sink_values(out, "orders")
    assert len(values) == 500
    assert all(v == generate_value(0, v["id"]) for v in values)

    # the next source run resumes from the committed source offsets: nothing is generated twice
    again = run_source(_source("orders", 800), any_backend_url)
    assert again.records == 300
    second = run_sink(_sink("orders", out), any_backend_url, until_offsets=again)
    assert second.records == 300
    ids = sorted(v["id"] for v in _sink_values(out, "orders"))
    assert ids == list(range(800)), "records lost or written twice"
    assert run_source(_source("orders", 800), any_backend_url).records == 0


def test_sink_reads_to_the_end_without_targets(any_backend_url: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_source(_source("events", 300, tasks=1), any_backend_url)
    sunk = run_sink(_sink("events", out), any_backend_url)  # no until_offsets: to the partition ends
    assert sunk.records == 300
    assert sorted(v["id"] for v in _sink_values(out, "events")) == list(range(300))
    # nothing new: the next run reads nothing and ends (the end is after the last record, not after a
    # transaction marker, so the sink does not wait for records that will never come)
    assert run_sink(_sink("events", out), any_backend_url, max_seconds=30).records == 0
