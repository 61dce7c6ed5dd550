"""Overlapping runs of ONE FileSink connector, as a backfill or a manual rerun beside a scheduled run makes
them: several ``run_sink`` processes with different targets (a quarter, half, three quarters, all of a
partition), started at several spacings, on the embedded store, committing often. Whatever each run
reports (done, or refused as fenced by a newer run), after every round:

- the committed data in the directory is exactly the first N records of the partition, each once, where N
  is the manifest's committed position (no loss, no duplicate, no NUL byte, no broken line);
- a reader polling the directory during the round never saw anything but whole, committed files under a
  data file's name, and never a record twice;
- a later run to the end leaves every record exactly once (later runs can go on).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.api import TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.files import committed_files
from connect_runtime.connectors.files.destination import PartitionDir
from tests.support import PYTHON, REPO, slow_iterations

TOPIC = "orders"
RECORDS = 200_000

RUNNER = """
import json, sys
from connect_runtime import run_sink
from connect_runtime.api import ConnectError, ProducerFencedError
config, url, target = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
try:
    r = run_sink(config, url, until_offsets={config["topics"]: {"0": target}})
    print(json.dumps({"ok": True, "records": r.records}))
except ConnectError as exc:
    fenced = isinstance(exc, ProducerFencedError) or isinstance(exc.__cause__, ProducerFencedError) \\
        or "fenced" in str(exc) or "zombie" in str(exc)
    print(json.dumps({"ok": False, "fenced": fenced, "error": str(exc)[:500]}))
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('overlap') / 'store.db'}"
    with open_backend(url) as backend:
        backend.create_topics({TOPIC: 1})
        producer = backend.producer()
        try:
            for start in range(0, RECORDS, 20_000):
                producer.send([ProducerRecord(TOPIC, 0, None, json.dumps({"n": i, "pad": "x" * 20}).encode())
                               for i in range(start, min(RECORDS, start + 20_000))])
            producer.flush(60)
        finally:
            producer.close()
    return url


def config(name: str, out: Path) -> dict[str, Any]:
    return {"name": name, "connector.class": "connect_runtime.connectors.files.FileSink", "topics": TOPIC,
            "directory": str(out), "offset.flush.interval.ms": "30", "consumer.max.poll.records": "5000",
            "fsync": "false"}


def committed_numbers(out: Path) -> list[int]:
    """The records in the committed files, in order; fails on a broken line or a NUL byte."""
    got = []
    for f in committed_files(out, TOPIC, 0):
        data = f.read_bytes()
        assert b"\0" not in data, f"NUL bytes in {f}"
        assert data.endswith(b"\n"), f"{f} does not end with a whole line"
        got += [json.loads(line)["n"] for line in data.splitlines()]
    return got


class Reader(threading.Thread):
    """Polls the directory as a downstream reader would (every *.jsonl file), checking each file it reads."""

    def __init__(self, out: Path) -> None:
        super().__init__(daemon=True)
        self.out = out
        self.stop = threading.Event()
        self.problems: list[str] = []
        self.reads = 0

    def run(self) -> None:
        part = self.out / TOPIC / "partition=0"
        while not self.stop.is_set():
            seen: list[int] = []
            for f in sorted(part.glob("*.jsonl")) if part.is_dir() else []:
                try:
                    data = f.read_bytes()
                except FileNotFoundError:
                    continue
                first, last = (int(x) for x in f.stem.split("+")[2:])
                lines = data.splitlines()
                if b"\0" in data or not data.endswith(b"\n") or len(lines) != last - first + 1:
                    self.problems.append(f"{f.name}: {len(data)} bytes, {len(lines)} lines, not whole")
                    continue
                seen += [json.loads(x)["n"] for x in lines]
            if len(seen) != len(set(seen)):
                self.problems.append(f"a reader saw {len(seen) - len(set(seen))} records twice")
            self.reads += 1
            time.sleep(0.005)


def run_round(url: str, out: Path, name: str, spacing: float, targets: list[int]) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = []
    for target in targets:
        procs.append(subprocess.Popen([PYTHON, "-c", RUNNER, json.dumps(config(name, out)), url, str(target)],
                                      cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        time.sleep(spacing)
    results = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=180)
        assert p.returncode == 0, stderr.decode()[-2000:]
        results.append(json.loads(stdout.decode().strip().splitlines()[-1]))
    return results


def check_exact(out: Path) -> int:
    got = committed_numbers(out)
    st = PartitionDir(out, TopicPartition(TOPIC, 0), "jsonl", fsync=False).state()
    assert got == list(range(len(got))), "the committed files are not exactly a prefix of the partition"
    assert st.next_offset == len(got), f"the committed position {st.next_offset} is not the {len(got)} records written"
    assert not [f for f in (out / TOPIC / "partition=0").iterdir() if f.name.startswith(".inflight-")
                and not f.name.endswith(".tmp")]
    return len(got)


@pytest.mark.parametrize("spacing", [0.0, 0.05, 0.15, 0.3])
def test_overlapping_runs_of_one_file_sink_leave_the_directory_exact(tmp_path: Path, store: str,
                                                                      spacing: float) -> None:
    rounds = slow_iterations(1, 2)
    rng = random.Random(int(spacing * 1000))
    for i in range(rounds):
        out = tmp_path / f"round-{i}"
        name = f"archive-{int(spacing * 1000)}-{i}"
        targets = [RECORDS // 4, RECORDS // 2, 3 * RECORDS // 4, RECORDS]
        rng.shuffle(targets)
        reader = Reader(out)
        reader.start()
        try:
            results = run_round(store, out, name, spacing, targets)
        finally:
            reader.stop.set()
            reader.join(10)
        for target, r in zip(targets, results, strict=True):
            assert r["ok"] or r["fenced"], f"run to {target} failed without being fenced: {r['error']}"
        assert not reader.problems, reader.problems[:5]
        assert reader.reads > 0
        n = check_exact(out)
        # the newest generation is never fenced, and whatever a run reported done holds
        done = [t for t, r in zip(targets, results, strict=True) if r["ok"]]
        assert done, results
        assert n >= max(done)
        # a later run goes on from there, to the end: every record exactly once
        later = run_round(store, out, name, 0, [RECORDS])[0]
        assert later["ok"] and later["records"] == RECORDS - n, later
        assert check_exact(out) == RECORDS
