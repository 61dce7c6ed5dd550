"""FileSink exactly-once across crashes: ``pyconnect run sink.json`` is SIGKILLed mid-run (a real
subprocess, killed on observed progress at a random point of its work), restarted, killed again, then run to the end: every record is in the files exactly once,
in offset order, and the group never committed anything (the manifests are the offsets)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from connect_runtime.api import TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.files import FileSink, committed_files
from tests.support.kills import kill_loop, run_killed_on_progress

PYCONNECT = str(Path(sys.executable).with_name("pyconnect"))
PARTS = 3


def fill(url: str, n: int, start: int = 0) -> None:
    with open_backend(url) as backend:
        backend.create_topics({"in": PARTS})
        producer = backend.producer()
        try:
            for first in range(start, start + n, 20_000):
                producer.send([ProducerRecord("in", i % PARTS, None, json.dumps({"i": i}).encode())
                               for i in range(first, min(start + n, first + 20_000))])
                producer.flush(60)
        finally:
            producer.close()


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
    total = [n]

    def committed() -> int:  # the records the manifests and published files say are committed
        return sum(FileSink().read_offsets({"name": "archive", "directory": str(out), "topics": "in"})
                   .offsets.values())

    def grow() -> None:  # a run ended before its kill: half as many records more
        fill(sqlite_url, total[0] // 2, start=total[0])
        total[0] += total[0] // 2

    # each kill lands mid-run, at a random point of the run's work (tests/support/kills.py)
    kill_loop(lambda: run_killed_on_progress([PYCONNECT, "--backend", sqlite_url, "run", str(cfg)], committed,
                                             total[0], rng=rng, what="pyconnect run (FileSink)"),
              grow, kills=2, what="pyconnect run (FileSink)")
    n = total[0]
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
