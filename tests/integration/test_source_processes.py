"""Source runs in real subprocesses: zombie fencing between two processes, SIGKILL at random points of their work (on observed
progress, never after a fixed delay)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.backends import open_backend
from tests.support import PYTHON, REPO, slow_iterations
from tests.support.kills import kill_on_progress, kill_point
from tests.support.source_connectors import committed_offset, read_topic


def start(config: dict[str, Any], url: str, **kwargs: Any) -> subprocess.Popen[str]:
    spec = json.dumps({"config": config, "backend": url, "kwargs": kwargs})
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([PYTHON, "-m", "tests.support.source_run", spec], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str], timeout: float, what: str) -> tuple[int, dict[str, Any]]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate(timeout=10)
        pytest.fail(f"{what} did not finish within {timeout} s")
    lines = out.strip().splitlines()
    assert lines, f"{what} printed nothing; stderr:\n{err}"
    return proc.returncode, json.loads(lines[-1])


def records(url: str, topic: str) -> int:
    """The records committed to ``topic`` (its partitions' end offsets)."""
    with open_backend(url) as backend:
        if topic not in backend.list_topics():
            return 0
        consumer = backend.consumer(None)
        try:
            return sum(consumer.end_offsets(consumer.partitions([topic]), 10).values())
        finally:
            consumer.close()


def wait_until_progress(proc: subprocess.Popen[str], progress: Callable[[], int], at: int, what: str,
                        timeout: float = 120) -> None:
    """Until ``progress()`` reaches ``at`` or ``proc`` ended (bounded)."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and progress() < at:
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout} s for {what} {at} records (at {progress()})")
        time.sleep(0.01)


def wait_for(path: Path, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout} s for {what} ({path})")
        time.sleep(0.02)


def test_zombie_is_fenced_by_a_newer_process(tmp_path: Path, sqlite_url: str) -> None:
    """Process A has an open transaction when process B starts the same connector: B's
    init_transactions fences A; A's commit raises ProducerFencedError and nothing of A is visible."""
    marker = tmp_path / "a-polled"
    base = {"name": "zombie", "connector.class": "tests.support.source_connectors.ScriptedSource", "topic": "t",
            "batch": 5, "poll.idle.timeout.ms": 100}
    a = start({**base, "tag": "A", "count": -1, "poll.sleep.ms": 20, "marker.file": str(marker),
               "transaction.boundary": "interval", "transaction.boundary.interval.ms": 600000},
              sqlite_url, max_seconds=6)
    try:
        wait_for(marker, 30, "process A's first poll")
        b = start({**base, "tag": "B", "count": 20}, sqlite_url)
        rc_b, out_b = finish(b, 60, "process B")
        assert rc_b == 0, out_b
        assert out_b["records"] == 20
        rc_a, out_a = finish(a, 60, "process A")
    finally:
        if a.poll() is None:
            a.kill()
            a.communicate(timeout=10)
    assert rc_a == 2 and out_a["error"] == "ProducerFencedError", out_a
    values = read_topic(sqlite_url, "t")
    assert {v["tag"] for v in values} == {"B"}
    assert [v["n"] for v in values] == list(range(20))
    assert committed_offset(sqlite_url, "zombie", {"task": 0, "round": 1}) == {"n": 20}


def sigkill_loop(tmp_path: Path, kills: int, seed: int) -> None:
    url = f"sqlite:///{tmp_path / 'kill.db'}"
    total = 3000 * kills
    config = {"name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
              "topic": "gen", "max.records": total, "batch.size": 20, "poll.delay.ms": 10, "tasks.max": 2}
    rng = random.Random(seed)
    killed = 0
    for i in range(kills):
        # killed once the topic shows a random share of what is left written (a run cannot outpace it: its
        # tasks sleep poll.delay.ms between batches), at a random instant between two commits
        proc = start(config, url)
        at = kill_point(rng, records(url, "gen"), total)
        killed += kill_on_progress(proc, lambda: records(url, "gen"), at, rng=rng, what=f"run {i}")
        proc.communicate(timeout=30)
        assert proc.returncode in (0, -signal.SIGKILL), f"run {i} exited with {proc.returncode}"
    assert killed > 0
    rc, result = finish(start({**config, "poll.delay.ms": 0}, url), 300, "the final run")
    assert rc == 0, result
    ids = [v["id"] for v in read_topic(url, "gen")]
    assert len(ids) == total, f"{len(ids)} records for {total} ids (duplicates or gaps)"
    assert sorted(ids) == list(range(total))
    # each task's records are in order: nothing replayed, nothing skipped
    half = total // 2
    for part in ([n for n in ids if n < half], [n for n in ids if n >= half]):
        assert part == sorted(part)


def test_sigkill_at_random_instants_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    sigkill_loop(tmp_path, kills=3, seed=1)


@pytest.mark.slow
def test_sigkill_loop_long(tmp_path: Path) -> None:
    sigkill_loop(tmp_path, kills=slow_iterations(10, 40), seed=2)


def generation_kill_loop(tmp_path: Path, rounds: int, seed: int) -> dict[str, int]:
    """Each round starts a new process of the same connector with a random ``tasks.max`` (1 to 3) while the
    previous one is still running, then SIGKILLs the previous one at a random instant (or lets the newer
    generation fence it). Then one run to the end: every line of every file exactly once."""
    url = f"sqlite:///{tmp_path / 'gen.db'}"
    lines = 400 * rounds
    files = ",".join(f"f{i}:{lines}" for i in range(3))
    base = {"name": "files", "connector.class": "tests.support.source_connectors.PlanningSource", "topic": "lines",
            "files": files, "poll.sleep.ms": 5, "poll.idle.timeout.ms": 200}
    rng = random.Random(seed)
    stats = {"killed": 0, "fenced": 0, "finished": 0}
    previous: subprocess.Popen[str] | None = None
    try:
        for _ in range(rounds):
            current = start({**base, "tasks.max": rng.randint(1, 3)}, url, max_seconds=30)
            # both processes run (and commit) for a while: until the topic shows a random share of what is left
            # written (or the newest run ended), not a fixed time
            at = kill_point(rng, records(url, "lines"), 3 * lines, 0.05, 0.3)
            wait_until_progress(current, lambda: records(url, "lines"), at, "the newest run to write")
            if rng.random() < 0.5 and current.poll() is None:
                current.send_signal(signal.SIGKILL)  # the newest one dies mid-run; the next round takes over
                stats["killed"] += 1
            if previous is not None:
                out, err = previous.communicate(timeout=60)
                if previous.returncode == 2:
                    assert '"ProducerFencedError"' in out, out + err
                    stats["fenced"] += 1
                elif previous.returncode == 0:
                    stats["finished"] += 1
                else:
                    assert previous.returncode == -signal.SIGKILL, f"exit {previous.returncode}: {err[-2000:]}"
            previous = current
        assert previous is not None
        previous.send_signal(signal.SIGKILL)
        previous.communicate(timeout=60)
    finally:
        if previous is not None and previous.poll() is None:
            previous.kill()
            previous.communicate(timeout=10)
    rc, result = finish(start({**base, "poll.sleep.ms": 0, "tasks.max": 2}, url), 300, "the final run")
    assert rc == 0, result
    seen: dict[tuple[str, int], int] = {}
    for v in read_topic(url, "lines"):
        key = (v["file"], v["line"])
        seen[key] = seen.get(key, 0) + 1
    twice = [k for k, n in seen.items() if n > 1]
    assert twice == [], f"{len(twice)} lines written more than once, e.g. {twice[:5]}"
    assert set(seen) == {(f"f{i}", n) for i in range(3) for n in range(lines)}, "lines lost"
    assert stats["fenced"] + stats["killed"] > 0
    return stats


def test_overlapping_generations_with_kills_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    generation_kill_loop(tmp_path, rounds=4, seed=3)


@pytest.mark.slow
def test_overlapping_generations_with_kills_long(tmp_path: Path) -> None:
    stats = generation_kill_loop(tmp_path, rounds=slow_iterations(8, 40), seed=4)
    print(f"generation kill loop: {stats}")
