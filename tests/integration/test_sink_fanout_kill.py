"""One task of a fanned-out FileSink SIGKILLed at random points of its work and retried (a mapped task instance's
worker lost, Airflow running its next try), on the embedded SQLite store: each try of task 1 takes the task's
fence key and claims its partitions, so what a killed try left (in-flight files) never becomes visible; the sibling
task 0 runs once, untouched; at the end every record is in the destination exactly once, and each partition's
committed position is the plan's target."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from connect_runtime import plan_sink, run_sink_task
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.files import committed_files
from connect_runtime.connectors.files.destination import PartitionDir
from tests.support import REPO
from tests.support.kills import kill_loop, run_killed_on_progress

TOPIC = "fan-kill"
PARTITIONS = 4
PER_PARTITION = 20_000
KILLS = 3
"""Each kill lands at 10-90% of what is left: three leave a few thousand records for the last try."""

RUNNER = """
import json, sys
from connect_runtime import run_sink_task
config, url, plan = json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
run_sink_task(config, url, plan, 1, max_seconds=300)
"""


def _fill(url: str, partitions: Iterable[int], start: int, count: int) -> None:
    """``count`` records more in each of ``partitions``, record ``i`` of partition ``p`` being ``p * 100_000 + i``."""
    with open_backend(url) as be:
        producer = be.producer()
        try:
            producer.send([ProducerRecord(TOPIC, p, None, json.dumps(p * 100_000 + i).encode())
                           for p in partitions for i in range(start, start + count)])
            producer.flush(60)
        finally:
            producer.close()


def _committed(directory: Path, partitions: list[int]) -> int:
    """How many records of ``partitions`` the destination's manifests say are committed (cheap to read)."""
    total = 0
    for p in partitions:
        st = PartitionDir(directory, TopicPartition(TOPIC, p), "jsonl", fsync=False).state()
        total += st.next_offset or 0
    return total


def _lines(directory: Path, partitions: list[int]) -> list[int]:
    return [int(line) for p in partitions for f in committed_files(directory, TOPIC, p)
            for line in f.read_text().splitlines() if line]


@pytest.mark.slow
def test_a_killed_task_retried_puts_each_record_once_and_leaves_its_sibling_alone(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_backend(url) as be:
        be.create_topics({TOPIC: PARTITIONS})
    _fill(url, range(PARTITIONS), 0, PER_PARTITION)
    out = tmp_path / "out"
    config = {"name": "fan-kill", "connector.class": "connect_runtime.connectors.files.FileSink", "topics": TOPIC,
              "tasks.max": "2", "directory": str(out), "fsync": "false", "consumer.max.poll.records": "20",
              "offset.flush.interval.ms": "0"}
    plan = plan_sink(config, url)
    mine = sorted(p for _t, p, _target in plan["tasks"][1]["partitions"])
    sibling = sorted(p for _t, p, _target in plan["tasks"][0]["partitions"])
    assert mine == [1, 3] and sibling == [0, 2]
    per_partition = {p: PER_PARTITION for p in range(PARTITIONS)}
    rng = random.Random()
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    state = {"plan": plan}

    def attempt() -> bool:
        argv = [sys.executable, "-c", RUNNER, json.dumps(config), url, json.dumps(state["plan"])]
        return run_killed_on_progress(argv, lambda: _committed(out, mine), sum(per_partition[p] for p in mine),
                                      rng=rng, env=env, cwd=REPO, what="task 1")

    def grow() -> None:
        # A try ended before its kill (a slow observer on a loaded machine): task 1's partitions get half as many
        # records more and the next try runs the next run's plan (same assignment, later targets), so the kill
        # has work to land in; the sibling's partitions keep their targets.
        extra = PER_PARTITION // 2
        for p in mine:
            _fill(url, [p], per_partition[p], extra)
            per_partition[p] += extra
        state["plan"] = plan_sink(config, url)
        assert sorted(p for _t, p, _target in state["plan"]["tasks"][1]["partitions"]) == mine

    first = run_sink_task(config, url, plan, 0, max_seconds=300)  # the sibling, between kills of task 1
    kill_loop(attempt, grow, kills=KILLS, what="task 1")
    plan = state["plan"]
    total = sum(per_partition[p] for p in mine)
    retry = run_sink_task(config, url, plan, 1, max_seconds=300)
    assert first.records == PER_PARTITION * len(sibling) and first.ranges == {
        TOPIC: {str(p): [0, PER_PARTITION] for p in sibling}}
    assert 0 < retry.records < total, "the last try resumed where the killed tries' commits left the destination"
    want = sorted(p * 100_000 + i for p in range(PARTITIONS) for i in range(per_partition[p]))
    assert sorted(_lines(out, list(range(PARTITIONS)))) == want
    again = plan_sink(config, url)
    assert sum(run_sink_task(config, url, again, i).records for i in range(2)) == 0
