"""Sinks that keep their offsets in their destination (FileSink here; SqlSink in the SQL sink tests):
their offsets are first-class (admin API) and survive a replaced offsets store, while a real zombie is
still refused at the destination.

A replaced store is what a new ``AIRFLOW_HOME`` or a move from SQLite to Kafka gives: a registry that
never saw the connector, and the same records in the topic again.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import admin
from connect_runtime.api import ConnectError, TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.files import committed_files
from connect_runtime.connectors.files.destination import PartitionDir
from connect_runtime.runtime.sink import run_sink
from tests.support import PYTHON, REPO

TOPIC = "events"


def fill(url: str, n: int) -> None:
    with open_backend(url) as backend:
        backend.create_topics({TOPIC: 1})
        producer = backend.producer()
        try:
            for start in range(0, n, 20_000):
                producer.send([ProducerRecord(TOPIC, 0, None, json.dumps({"n": i}).encode())
                               for i in range(start, min(n, start + 20_000))])
            producer.flush(60)
        finally:
            producer.close()


def config(out: Path, **extra: str) -> dict[str, Any]:
    return {"name": "archive", "connector.class": "connect_runtime.connectors.files.FileSink", "topics": TOPIC,
            "directory": str(out), **extra}


def numbers(out: Path) -> list[int]:
    return [json.loads(line)["n"] for f in committed_files(out, TOPIC, 0) for line in f.read_bytes().splitlines()]


def generation(out: Path) -> int:
    return PartitionDir(out, TopicPartition(TOPIC, 0), "jsonl", fsync=False).state().generation


def test_a_replaced_store_continues_from_the_destination(tmp_path: Path) -> None:
    out = tmp_path / "out"
    old, new = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    fill(old, 100)
    for _ in range(3):  # three runs: the destination records generation 2
        run_sink(config(out), old, until_offsets={TOPIC: {"0": 60}})
    assert numbers(out) == list(range(60)) and generation(out) == 2

    fill(new, 100)  # the store is replaced: its registry never saw the connector
    with open_backend(new) as backend:
        got = admin.get_offsets(backend, "archive", config=config(out))
        assert got["offsets"] == [{"partition": {"kafka_topic": TOPIC, "kafka_partition": 0},
                                   "offset": {"kafka_offset": 60}}]
        assert got["managed_by"] == "destination"
    result = run_sink(config(out), new)
    assert result.records == 40  # not refused as a zombie, nothing written twice
    assert numbers(out) == list(range(100))
    assert generation(out) == 3
    with open_backend(new) as backend:
        rec = admin.connector(backend, "archive")
        assert rec is not None and rec.generation == 3 and rec.owns_offsets
        assert rec.destination_offsets == [[TOPIC, 0, 100]]
        # the Connectors view's lag reads the destination's position
        assert admin.sink_lag(backend, "archive") == [{"topic": TOPIC, "partition": 0, "committed": 100, "end": 100,
                                                       "lag": 0, "in": "destination"}]


RUNNER = """
import json, sys
from connect_runtime import run_sink
from connect_runtime.api import ConnectError
try:
    r = run_sink(json.loads(sys.argv[1]), sys.argv[2])
    print(json.dumps({"ok": True, "records": r.records}))
except ConnectError as exc:
    print(json.dumps({"ok": False, "error": str(exc)}))
"""


def test_a_zombie_of_the_replaced_store_is_still_refused(tmp_path: Path) -> None:
    """A run on the old store is under way (it claimed the partition, its records are in flight); a run on
    the new store starts: it takes a generation above the destination's and claims the partition, so the old
    run's commit is refused there and publishes nothing."""
    out = tmp_path / "out"
    old, new = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    n = 300_000
    fill(old, n)
    fill(new, n)
    slow = config(out, **{"consumer.max.poll.records": "500", "offset.flush.interval.ms": "600000", "fsync": "false"})
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    zombie = subprocess.Popen([PYTHON, "-c", RUNNER, json.dumps(slow), old], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    part = out / TOPIC / "partition=0"
    deadline = time.monotonic() + 60
    while not (part.is_dir() and any(f.name.startswith(".inflight-") for f in part.iterdir())):
        assert zombie.poll() is None and time.monotonic() < deadline, "the old run never got under way"
        time.sleep(0.01)
    assert generation(out) == 0
    result = run_sink(config(out, **{"fsync": "false"}), new)
    stdout, stderr = zombie.communicate(timeout=120)
    assert zombie.returncode == 0, stderr.decode()[-2000:]
    outcome = json.loads(stdout.decode().strip().splitlines()[-1])
    assert not outcome["ok"], outcome
    assert "generation 1 of this connector claimed" in outcome["error"] and "zombie" in outcome["error"], outcome
    assert result.records == n
    assert numbers(out) == list(range(n))
    assert not [f for f in part.iterdir() if f.name.startswith(".inflight-")]


def test_altering_without_the_config_is_refused_and_changes_nothing(tmp_path: Path, sqlite_url: str) -> None:
    out = tmp_path / "out"
    fill(sqlite_url, 10)
    run_sink(config(out), sqlite_url)
    with open_backend(sqlite_url) as backend:
        change = [{"partition": {"kafka_topic": TOPIC, "kafka_partition": 0}, "offset": {"kafka_offset": 20}}]
        with pytest.raises(ConnectError, match=r"keeps its offsets in its destination .*nothing was changed"):
            admin.alter_offsets(backend, "archive", change)
        with pytest.raises(ConnectError, match="keeps its offsets in its destination"):
            admin.reset_offsets(backend, "archive")
        assert admin.get_offsets(backend, "archive", config=config(out))["offsets"][0]["offset"] == {"kafka_offset": 10}
        # with the config: moved forward in the destination, as a new generation that fences older runs
        done = admin.alter_offsets(backend, "archive", change, config=config(out))
        assert done["in"] == "destination"
        assert admin.get_offsets(backend, "archive", config=config(out))["offsets"][0]["offset"] == {"kafka_offset": 20}
        assert generation(out) == admin.connector(backend, "archive").generation == 1  # type: ignore[union-attr]
    fill(sqlite_url, 25)  # offsets 10..34: the next run starts at 20
    assert run_sink(config(out), sqlite_url).records == 15
    assert numbers(out) == list(range(10)) + list(range(10, 25))  # offsets 20..34 (10..19 skipped)
