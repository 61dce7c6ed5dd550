"""The same sink runs on both backends: a fresh SQLite file and a fresh Apache Kafka broker."""

from __future__ import annotations

import json
from pathlib import Path

from connect_runtime import TopicPartition, open_backend, run_sink
from connect_runtime.backends import ProducerRecord
from tests.support.sink_helpers import read_log


def fill(url: str, topic: str, values: list[bytes], partitions: int) -> None:
    with open_backend(url) as backend:
        backend.create_topics({topic: partitions})
        producer = backend.producer()
        try:
            producer.send([ProducerRecord(topic, i % partitions, None, v) for i, v in enumerate(values)])
            producer.flush(30)
        finally:
            producer.close()


def test_sink_runs_commit_what_pre_commit_returns_and_dead_letter(any_backend_url: str, tmp_path: Path) -> None:
    values = [json.dumps(i).encode() for i in range(30)]
    values[7] = b"{not json"
    fill(any_backend_url, "in", values, partitions=2)
    calls = tmp_path / "calls.jsonl"
    cfg = {"name": "both", "connector.class": "tests.support.sink_helpers.RecordingSinkConnector", "topics": "in",
           "tasks.max": "2", "log.path": str(calls), "offset.flush.interval.ms": "0",
           "consumer.max.poll.records": "4", "errors.tolerance": "all",
           "errors.deadletterqueue.topic.name": "both-dlq"}
    first = run_sink(cfg, any_backend_url, until_offsets={"in": {"0": 10, "1": 15}})
    assert first.committed == {"in": {"0": 10, "1": 15}}
    assert (first.records, first.dead_lettered) == (24, 1)
    got = sorted(r[3] for e in read_log(calls) if e["call"] == "put" for r in e["records"])
    assert got == sorted({*range(0, 20, 2), *range(1, 30, 2)} - {7})
    closing = [e for e in read_log(calls) if e["closing"]]
    assert sorted(e["task"] for e in closing) == ["0", "1"]  # one final commit per task
    with open_backend(any_backend_url) as backend:
        dead = list(backend.read_range(TopicPartition("both-dlq", 0), 0, 1))
    assert [d.value for d in dead] == [b"{not json"]
    rest = run_sink(cfg, any_backend_url)
    assert rest.committed == {"in": {"0": 15}} and rest.records == 5
    empty = run_sink({**cfg, "precommit.empty": "true"}, any_backend_url)
    assert (empty.records, empty.committed) == (0, {})
