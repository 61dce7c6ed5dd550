"""FileSink exactly-once across crashes: ``pyconnect run sink.json`` is SIGKILLed mid-run (a real
subprocess), restarted, killed again, then run to the end: every record is in the files exactly once,
in offset order, and the group never committed anything (the manifests are the offsets)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from connect_runtime.api import TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.files import committed_files

PYCONNECT = str(Path(sys.executable).with_name("pyconnect"))
PARTS = 3


def fill(url: str, n: int) -> None:
    with open_backend(url) as backend:
        backend.create_topics({"in": PARTS})
        producer = backend.producer()
        try:
            for start in range(0, n, 20_000):
                producer.send([ProducerRecord("in", i % PARTS, None, json.dumps({"i": i}).encode())
                               for i in range(start, min(n, start + 20_000))])
                producer.flush(60)
        finally:
            producer.close()


def data_bytes(out: Path) -> int:
    """Bytes in published files (a commit point publishes whole files)."""
    total = 0
    for f in out.glob("in/partition=*/in+*.jsonl"):
        try:
            total += f.stat().st_size
        except FileNotFoundError:  # pragma: no cover - files are never removed while a run goes on
            pass
    return total


def data_files(out: Path, p: int) -> list[Path]:
    """The partition's committed files in offset order."""
    return committed_files(out, "in", p)


@pytest.mark.parametrize("max_bytes", [0, 100_000], ids=["one-file", "segments"])
def test_file_sink_via_cli_is_exactly_once_across_sigkills(tmp_path: Path, sqlite_url: str, max_bytes: int) -> None:
    n = 150_000
    fill(sqlite_url, n)
    out = tmp_path / "out"
    cfg = tmp_path / "sink.properties"
    cfg.write_text("name=archive\nconnector.class=connect_runtime.connectors.files.FileSink\ntopics=in\n"
                   f"tasks.max=2\ndirectory={out}\nconsumer.max.poll.records=500\noffset.flush.interval.ms=30\n"
                   f"file.max.bytes={max_bytes}\n")
    rng = random.Random(7)
    killed = 0
    for attempt in range(3):
        before = data_bytes(out)
        proc = subprocess.Popen([PYCONNECT, "--backend", sqlite_url, "run", str(cfg)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while data_bytes(out) <= before and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.15))
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                killed += 1
        finally:
            proc.communicate(timeout=60)
        assert proc.returncode in (0, -signal.SIGKILL), (attempt, proc.returncode)
    assert killed >= 1, "the sink finished before any kill: make the topic bigger"
    final = subprocess.run([PYCONNECT, "--backend", sqlite_url, "run", str(cfg)],
                           capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr

    seen: list[int] = []
    for p in range(PARTS):
        files = data_files(out, p)
        assert files == sorted((out / "in" / f"partition={p}").glob("*.jsonl")), "a file a reader sees is not committed"
        values = [json.loads(line)["i"] for f in files for line in f.open()]
        assert values == list(range(p, n, PARTS)), f"partition {p}: duplicates, gaps or disorder"
        seen.extend(values)
        manifest = json.loads((out / "in" / f"partition={p}" / "_manifest.json").read_text())
        assert manifest["next_offset"] == len(values)
        assert int(files[-1].stem.split("+")[3]) == len(values) - 1  # the last file ends at the last offset
        assert not [f for f in (out / "in" / f"partition={p}").iterdir() if f.name.startswith(".inflight-")]
    assert len(seen) == n
    with open_backend(sqlite_url) as backend:
        consumer = backend.consumer("connect-archive")
        try:
            committed = consumer.committed([TopicPartition("in", p) for p in range(PARTS)], 10)
        finally:
            consumer.close()
    assert set(committed.values()) == {None}
