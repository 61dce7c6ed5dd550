"""The same source runs on both backends: a fresh SQLite file and a fresh Apache Kafka broker."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

import pytest

from connect_runtime import ProducerFencedError, SourceRunResult, open_backend, run_source
from connect_runtime.connectors.datagen import generate_value
from tests.support.source_connectors import committed_offset, probe, read_topic


def in_ranges(url: str, result: SourceRunResult) -> dict[int, object]:
    """offset -> value of every committed record inside the run's ranges (Kafka's transaction markers take
    offsets too, so a range [from, to) may hold fewer records than to - from)."""
    out: dict[int, object] = {}
    with open_backend(url) as be:
        for tp, spans in result.topic_partitions().items():
            for first, nxt in spans:
                out.update({r.offset: json.loads(r.value) for r in be.read_range(tp, first, nxt)})
    return out


def datagen(**extra: object) -> dict[str, object]:
    return {"name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource", "topic": "gen",
            "max.records": 300, "batch.size": 40, "seed": 3, "poll.idle.timeout.ms": 200, **extra}


def test_exactly_once_run_resumes_from_committed_offsets(any_backend_url: str) -> None:
    first = run_source(datagen(), any_backend_url, max_records=100)
    assert first.records == 100 and list(first.ranges) == ["gen"] and first.ranges["gen"]["0"][0] == 0
    assert first.source_offsets == [{"partition": {"task": 0}, "offset": {"position": 100}}]
    assert list(in_ranges(any_backend_url, first).values()) == [generate_value(3, n) for n in range(100)]
    second = run_source(datagen(), any_backend_url)
    assert second.records == 200 and second.ranges["gen"]["0"][0] >= first.ranges["gen"]["0"][1]
    assert list(in_ranges(any_backend_url, second).values()) == [generate_value(3, n) for n in range(100, 300)]
    assert read_topic(any_backend_url, "gen") == [generate_value(3, n) for n in range(300)]
    assert committed_offset(any_backend_url, "gen", {"task": 0}) == {"position": 300}


def test_at_least_once_run_writes_records_then_offsets(any_backend_url: str) -> None:
    result = run_source(datagen(**{"tasks.max": 2}), any_backend_url, exactly_once=False)
    assert result.records == 300
    assert sorted(v["id"] for v in read_topic(any_backend_url, "gen")) == list(range(300))
    assert committed_offset(any_backend_url, "gen", {"task": 0}) == {"position": 150}
    assert committed_offset(any_backend_url, "gen", {"task": 1}) == {"position": 300}


def test_commit_record_metadata_matches_the_topic(any_backend_url: str) -> None:
    key = uuid.uuid4().hex
    config = {"name": "scripted", "connector.class": "tests.support.source_connectors.ScriptedSource", "topic": "t",
              "probe": key, "count": 25, "batch": 10, "track.records": True, "poll.idle.timeout.ms": 200}
    result = run_source(config, any_backend_url)
    written = in_ranges(any_backend_url, result)
    calls = probe(key)["commit_record"]
    assert [n for n, _ in calls] == list(range(25))
    for n, md in calls:  # each record's metadata points at that very record
        assert (md.topic, md.partition) == ("t", 0)
        assert written[md.offset]["n"] == n  # type: ignore[index]
    assert len(written) == 25


@pytest.mark.parametrize("url_fixture", [
    "sqlite_url",
    pytest.param("fresh_kafka_url", marks=pytest.mark.kafka),
])
def test_a_newer_run_fences_an_older_one_of_the_same_connector(
        url_fixture: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Run A (a thread) has a transaction open when run B of the same connector starts: B's producer init
    fences A, whose commit fails with ProducerFencedError; B commits normally. Only B's offsets and records
    are checked here; the SQLite process test checks that nothing of A is readable. A's own bound (12 s) ends it
    on SQLite, where the fence shows at its commit; it leaves B's start room on a loaded machine (4 s once did
    not, under a load of 15 on 2 cores)."""
    any_backend_url: str = request.getfixturevalue(url_fixture)
    marker = tmp_path / "a-polled"
    base = {"name": "zombie", "connector.class": "tests.support.source_connectors.ScriptedSource", "topic": "t",
            "batch": 5, "poll.idle.timeout.ms": 100, "task.shutdown.graceful.timeout.ms": 3000}
    outcome: dict[str, BaseException | SourceRunResult] = {}

    def run_a() -> None:
        try:
            outcome["a"] = run_source({**base, "tag": "A", "count": -1, "poll.sleep.ms": 20,
                                       "marker.file": str(marker), "transaction.boundary": "interval",
                                       "transaction.boundary.interval.ms": 600000}, any_backend_url, max_seconds=12)
        except BaseException as exc:
            outcome["a"] = exc

    a = threading.Thread(target=run_a)
    a.start()
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert time.monotonic() < deadline, "waited 30 s for run A's first poll"
            time.sleep(0.02)
        b = run_source({**base, "tag": "B", "count": 20}, any_backend_url)
    finally:
        a.join(60)
    assert not a.is_alive(), "run A did not end within 60 s of its 12 s bound"
    assert isinstance(outcome["a"], ProducerFencedError), outcome["a"]
    assert b.records == 20
    assert committed_offset(any_backend_url, "zombie", {"task": 0, "round": 1}) == {"n": 20}
    assert [v["n"] for v in in_ranges(any_backend_url, b).values()] == list(range(20))
