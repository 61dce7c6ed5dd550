"""Kafka Connect's own offsets through ``pyconnect offsets``: one offsets topic, two runtimes (issue 32).

Kafka Connect 4.3.1's distributed worker (``tests/support/kafka_connect.py``, jars from
``scripts/fetch_connect_worker.sh``) runs its FileStreamSourceConnector over a file of lines into a topic, and its
FileStreamSinkConnector from that topic into a file, on an Apache Kafka 4.4.0 broker with
``offset.storage.topic=connect-offsets``: the topic our Kafka backend keeps source offsets in by default
(``docs/kafka.md``), so nothing is configured to share it; the sink's offsets are its group ``connect-<name>``'s,
as ours. No run of ours ever registers either connector. Then:

1. ``pyconnect offsets get <name>`` shows exactly the offsets Kafka Connect wrote (the source: ``{"position": N}``
   under ``["<name>", {"filename": ...}]``, N the file's length; the sink: ``{"kafka_offset": 200}``) and exactly
   what Kafka Connect's own ``GET /connectors/<name>/offsets`` (KIP-875) answers;
2. the worker stops; ``pyconnect offsets set <config file>`` (``connector.class`` is Kafka Connect's Java class,
   not importable here) writes the source's position of line K and the sink's offset K;
3. the worker starts again and both resume from exactly there: the records the source adds to the topic are lines
   K.. of the file, each once, and nothing else (checked once Kafka Connect has committed the file's end again,
   which it does only after those records were acknowledged); the sink's file gets records K.. of the topic again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from connect_runtime import admin
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import open_backend
from tests.support.kafka_connect import ConnectWorker

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]
FILE_STREAM_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_STREAM_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
LINES = 200
RESUME_AT = 150
WAIT_S = 180.0
T = TypeVar("T")


def pyconnect(url: str, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYCONNECT_BACKEND", None)
    done = subprocess.run([sys.executable, "-m", "connect_runtime.cli", "--backend", url, *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=REPO, check=False)
    return done.returncode, done.stdout, done.stderr


def wait_for(what: str, read: Callable[[], T], done: Callable[[T], bool], worker: ConnectWorker) -> T:
    """``read()`` once ``done`` holds of it, polled for at most :data:`WAIT_S` seconds; else fail naming ``what``."""
    deadline = time.monotonic() + WAIT_S
    while True:
        got = read()
        if done(got):
            return got
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {WAIT_S} s for {what}; last seen {got!r}; worker log:\n{worker.tail()}")
        assert worker.proc is not None and worker.proc.poll() is None, f"the worker died:\n{worker.tail()}"
        time.sleep(0.5)


def stored_offsets(url: str, name: str) -> list[dict[str, Any]]:
    with open_backend(url, read_only=True) as backend:
        try:
            return list(admin.get_offsets(backend, name)["offsets"])
        except admin.ConnectorNotFound:
            return []


def topic_values(url: str, topic: str) -> list[str]:
    tp = TopicPartition(topic, 0)
    with open_backend(url, read_only=True) as backend:
        consumer = backend.consumer(None)
        try:
            end = consumer.end_offsets([tp], 30.0)[tp]
        finally:
            consumer.close()
        return [(r.value or b"").decode() for r in backend.read_range(tp, 0, end)]


def properties(path: Path, config: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
    return path


def test_pyconnect_reads_and_sets_the_offsets_kafka_connect_resumes_from(kafka_url: str, kafka_bootstrap: str,
                                                                          tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    name, sink_name, topic = f"kc-file-source-{tag}", f"kc-file-sink-{tag}", f"kc-lines-{tag}"
    lines = [f"line {i:04d} of the file" for i in range(LINES)]
    data, out_file = tmp_path / "input.txt", tmp_path / "output.txt"
    data.write_text("".join(f"{line}\n" for line in lines))
    size = data.stat().st_size
    resume_at = sum(len(line) + 1 for line in lines[:RESUME_AT])  # the byte where line RESUME_AT starts
    config = {"name": name, "connector.class": FILE_STREAM_SOURCE, "tasks.max": "1", "file": str(data),
              "topic": topic}
    sink_config = {"name": sink_name, "connector.class": FILE_STREAM_SINK, "tasks.max": "1", "file": str(out_file),
                   "topics": topic}
    config_file = properties(tmp_path / f"{name}.properties", config)
    sink_config_file = properties(tmp_path / f"{sink_name}.properties", sink_config)
    with open_backend(kafka_url) as backend:
        backend.create_topics({topic: 1})
    partition = {"filename": str(data)}
    sink_partition = {"kafka_topic": topic, "kafka_partition": 0}

    def committed(offset: dict[str, int]) -> Callable[[list[dict[str, Any]]], bool]:
        """Whether the offsets read are exactly ``offset`` on the source's file or the sink's partition."""
        return lambda got: got == [{"partition": sink_partition if "kafka_offset" in offset else partition,
                                    "offset": offset}]

    worker = ConnectWorker(tmp_path / "connect", kafka_bootstrap, f"kc-{tag}")
    try:
        worker.start()
        for c in (config, sink_config):
            worker.rest("POST", "/connectors", {"name": c["name"], "config": {k: v for k, v in c.items() if k != "name"}})
        # Kafka Connect reads the file to its end and commits its position (every 500 ms, after the records); its
        # sink commits its group's offsets after writing the lines to its file
        wait_for("Kafka Connect's source to commit the file's end", lambda: stored_offsets(kafka_url, name),
                 committed({"position": size}), worker)
        wait_for("Kafka Connect's sink to commit the topic's end", lambda: stored_offsets(kafka_url, sink_name),
                 committed({"kafka_offset": LINES}), worker)
        assert topic_values(kafka_url, topic) == lines

        # 1. what pyconnect shows is what Kafka Connect wrote and what its own REST API answers (KIP-875)
        for connector, offset in ((name, {"position": size}), (sink_name, {"kafka_offset": LINES})):
            rc, out, err = pyconnect(kafka_url, "offsets", "get", connector)
            assert (rc, err) == (0, ""), err
            assert committed(offset)(json.loads(out)["offsets"]), out
            assert json.loads(out) == worker.rest("GET", f"/connectors/{connector}/offsets")
        raw = raw_offset_records(kafka_url, name)
        assert raw and raw[-1] == (json.dumps([name, partition], separators=(",", ":")),
                                   json.dumps({"position": size}, separators=(",", ":")))
        worker.stop()

        # 2. set the source's position to line RESUME_AT and the sink's group to record RESUME_AT, each from the
        # connector's config file (a Java class: offsets are data)
        for file, part, offset in ((config_file, partition, {"position": resume_at}),
                                   (sink_config_file, sink_partition, {"kafka_offset": RESUME_AT})):
            rc, out, err = pyconnect(kafka_url, "offsets", "set", str(file), "--partition", json.dumps(part),
                                     "--offset", json.dumps(offset))
            assert (rc, err) == (0, ""), err
            assert json.loads(out)["offset"] == offset
        for connector, offset in ((name, {"position": resume_at}), (sink_name, {"kafka_offset": RESUME_AT})):
            rc, out, err = pyconnect(kafka_url, "offsets", "get", connector)
            assert committed(offset)(json.loads(out)["offsets"]), (out, err)

        # 3. Kafka Connect restarted resumes from exactly there: the source sends lines RESUME_AT.. again, each
        # once, nothing else; the sink writes records RESUME_AT.. of the topic again (old and new lines)
        worker.start()
        wait_for("Kafka Connect's source to resume and commit the file's end again",
                 lambda: stored_offsets(kafka_url, name), committed({"position": size}), worker)
        values = topic_values(kafka_url, topic)
        assert values[:LINES] == lines
        assert values[LINES:] == lines[RESUME_AT:], (len(values), values[LINES:LINES + 3])
        wait_for("Kafka Connect's sink to resume and commit the topic's new end",
                 lambda: stored_offsets(kafka_url, sink_name), committed({"kafka_offset": len(values)}),
                 worker)
        assert worker.rest("GET", f"/connectors/{name}/offsets") == {
            "offsets": [{"partition": partition, "offset": {"position": size}}]}
        assert out_file.read_text().splitlines() == lines + values[RESUME_AT:]
    finally:
        worker.stop()


def raw_offset_records(url: str, name: str) -> list[tuple[str, str]]:
    """The records of ``name`` in ``connect-offsets`` as written (key and value text), in the order of their
    partition: what Kafka Connect reads back at start."""
    with open_backend(url, read_only=True) as backend:
        parts = backend.list_topics()["connect-offsets"]
        tps = [TopicPartition("connect-offsets", p) for p in range(parts)]
        consumer = backend.consumer(None)
        try:
            ends = consumer.end_offsets(tps, 30.0)
        finally:
            consumer.close()
        out = []
        for tp in tps:
            for r in backend.read_range(tp, 0, ends[tp]):
                key = (r.key or b"").decode()
                if key.startswith(json.dumps([name])[:-1]):
                    out.append((key, (r.value or b"").decode()))
        return out
