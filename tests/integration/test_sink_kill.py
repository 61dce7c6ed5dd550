"""A sink run SIGKILLed at any instant and started again: at-least-once for a plain sink,
exactly-once for sinks that keep their offsets in the destination. Real subprocesses."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.api import TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.files import committed_files
from tests.support import PYTHON, REPO, slow_iterations
from tests.support.kills import kill_loop as shared_kill_loop
from tests.support.kills import kill_on_progress, kill_point
from tests.support.sink_helpers import read_ledger, read_log


def fill(url: str, topic: str, n: int, partitions: int, start: int = 0) -> None:
    """Records ``start`` .. ``start + n - 1`` (the value is the number; partition: number % ``partitions``)."""
    with open_backend(url) as backend:
        backend.create_topics({topic: partitions})
        producer = backend.producer()
        try:
            for first in range(start, start + n, 10_000):
                producer.send([ProducerRecord(topic, i % partitions, None, json.dumps(i).encode())
                               for i in range(first, min(start + n, first + 10_000))])
            producer.flush(60)
        finally:
            producer.close()


def grown(url: str, topic: str, total: int, partitions: int) -> int:
    """A run ended before its kill: half as many records more (numbered on); the new total."""
    fill(url, topic, total // 2, partitions, start=total)
    return total + total // 2


def committed(url: str, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    with open_backend(url) as backend:
        consumer = backend.consumer(group)
        try:
            got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 10)
        finally:
            consumer.close()
    return {tp.partition: off for tp, off in got.items()}


def start(config: dict[str, Any], url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with open(log, "ab") as out:
        return subprocess.Popen([PYTHON, "-m", "tests.support.sink_helpers", json.dumps(config), url],
                                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)


def wait_for(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(0.02)


def finish(proc: subprocess.Popen[bytes], log: Path, timeout: float = 180) -> None:
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        raise AssertionError(f"sink run did not finish within {timeout:.0f} s: {log.read_text()[-2000:]}") from None
    assert rc == 0, log.read_text()[-3000:]


def kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)


def test_plain_sink_sees_every_record_at_least_once_after_sigkill(tmp_path: Path, sqlite_url: str) -> None:
    n, parts = 3000, 2
    fill(sqlite_url, "in", n, parts)
    calls = tmp_path / "calls.jsonl"
    cfg = {"name": "alo", "connector.class": "tests.support.sink_helpers.RecordingSinkConnector", "topics": "in",
           "tasks.max": "2", "log.path": str(calls), "consumer.max.poll.records": "20",
           "put.sleep.ms": "30", "offset.flush.interval.ms": "100"}
    proc = start(cfg, sqlite_url, tmp_path / "run1.log")

    def progress() -> int:  # the records the group committed
        return sum(o or 0 for o in committed(sqlite_url, "connect-alo", "in", parts).values())

    # killed at a random point of its work (it cannot outpace the check: every put sleeps), never a fixed delay
    assert kill_on_progress(proc, progress, kill_point(random.Random(), 0, n), rng=random.Random()), \
        "the first run ended before its kill"
    assert progress() < n, "the kill came after the run finished"
    finish(start(cfg, sqlite_url, tmp_path / "run2.log"), tmp_path / "run2.log")
    seen = Counter(r[3] for e in read_log(calls) if e["call"] == "put" for r in e["records"])
    assert set(seen) == set(range(n))
    assert committed(sqlite_url, "connect-alo", "in", parts) == {0: n // 2, 1: n // 2}


def kill_loop(tmp_path: Path, url: str, cfg: dict[str, Any], kills: int, progress: Callable[[], int],
              total: int, grow: Callable[[int], int],
              launch: Callable[[Path], subprocess.Popen[bytes]] | None = None) -> int:
    """Start the run and SIGKILL it mid-run until ``kills`` kills landed; then run it to its end. Returns the
    work's final ``total``.

    Each kill lands once ``progress()`` (what the destination shows written) reaches a random point of what was
    left (tests/support/kills.py), so a fast run is still killed mid-run, at a different point each time, and the
    kill's instant relative to the sink's commit points is arbitrary. A kill counts when it landed mid-run (the
    process alive, some but not all of ``total`` written); a run that ended first does not, and ``grow(total)``
    adds work and returns the new total (the loop fails only when the kill never lands after growing the work
    six times in a row). A run that exits on its own with an error fails the test with its log. ``launch(log)``
    starts a run (default: a sink run of ``cfg`` on ``url``)."""
    if launch is None:
        def launch(log: Path) -> subprocess.Popen[bytes]:
            return start(cfg, url, log)

    seed = os.environ.get("PYCONNECT_SEED", str(time.time()))
    rng = random.Random(seed)
    work = [total]
    runs = [0]

    def attempt() -> bool:
        i = runs[0] = runs[0] + 1
        log = tmp_path / f"run{i}.log"
        at = kill_point(rng, progress(), work[0], 0.05, 0.8)
        proc = launch(log)
        landed = kill_on_progress(proc, progress, at, rng=rng, what=f"run {i} (PYCONNECT_SEED={seed})")
        if not landed and proc.returncode != 0:
            raise AssertionError(f"run {i} exited with {proc.returncode} before it was killed: "
                                 f"{log.read_text()[-3000:]}")
        return landed and progress() < work[0]

    def more() -> None:
        work[0] = grow(work[0])

    shared_kill_loop(attempt, more, kills=kills, what=f"the run (PYCONNECT_SEED={seed})")
    finish(launch(tmp_path / "final.log"), tmp_path / "final.log")
    return work[0]


def test_ledger_sink_holds_each_record_exactly_once_after_sigkills(tmp_path: Path, sqlite_url: str) -> None:
    n, parts = 4000, 2
    fill(sqlite_url, "in", n, parts)
    ledger = tmp_path / "ledger.tsv"
    cfg = {"name": "eos", "connector.class": "tests.support.sink_helpers.LedgerSinkConnector", "topics": "in",
           "tasks.max": "2", "ledger.path": str(ledger), "consumer.max.poll.records": "40",
           "put.sleep.ms": "20", "offset.flush.interval.ms": "0"}
    n = kill_loop(tmp_path, sqlite_url, cfg, kills=3, progress=lambda: len(read_ledger(ledger)), total=n,
                  grow=lambda total: grown(sqlite_url, "in", total, parts))
    values = Counter(json.loads(v) for _, _, _, v in read_ledger(ledger))
    assert values == Counter(range(n))
    assert committed(sqlite_url, "connect-eos", "in", parts) == {0: None, 1: None}  # offsets live in the ledger


def file_sink_loop(tmp_path: Path, url: str, kills: int, n: int) -> None:
    parts = 3
    fill(url, "in", n, parts)
    out = tmp_path / "out"
    # a commit point (data fsync, manifest replace) every 100 records: kills land in commits too
    cfg = {"name": "files", "connector.class": "connect_runtime.connectors.files.FileSink", "topics": "in",
           "tasks.max": "2", "directory": str(out), "consumer.max.poll.records": "100",
           "offset.flush.interval.ms": "0"}
    n = kill_loop(tmp_path, url, cfg, kills=kills, total=n, grow=lambda total: grown(url, "in", total, parts),
                  progress=lambda: sum(len(f.read_bytes().splitlines()) for f in out.glob("in/partition=*/*.jsonl")))
    values: Counter[int] = Counter()
    for p in range(parts):
        files = committed_files(out, "in", p)
        assert files == sorted((out / "in" / f"partition={p}").glob("*.jsonl")), "a file a reader sees is not committed"
        data = [line for f in files for line in f.read_text().splitlines()]
        assert [json.loads(v) % parts for v in data] == [p] * len(data)
        assert [json.loads(v) for v in data] == sorted(json.loads(v) for v in data)  # in offset order
        values.update(json.loads(v) for v in data)
    assert values == Counter(range(n))


def test_file_sink_holds_each_record_exactly_once_after_sigkills(tmp_path: Path, sqlite_url: str) -> None:
    file_sink_loop(tmp_path, sqlite_url, kills=3, n=30_000)


@pytest.mark.slow
def test_file_sink_sigkill_loop_long(tmp_path: Path, sqlite_url: str) -> None:
    file_sink_loop(tmp_path, sqlite_url, kills=slow_iterations(10, 50), n=200_000)
