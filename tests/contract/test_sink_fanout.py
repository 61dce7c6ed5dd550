"""A sink connector fanned out (``plan_sink`` / ``run_sink_task``, :mod:`connect_runtime.runtime.sink.fanout`), on
every backend: each task consumes only the partitions the plan gave it up to the plan's targets and commits only
their offsets; each record lands once in a FileSink destination with 2, 4 and 8 tasks over 6 partitions (8: two
tasks with no partition end empty); a retry of one task fences its own stuck try (SQLite: the task's try checked
inside each group commit; Kafka: the task's commit-fence producer) and no sibling; a newer plan with fewer tasks
fences every task of the older plan, including one the new plan no longer has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import plan_sink, run_sink_task
from connect_runtime import ranges as ranges_mod
from connect_runtime.api.errors import ProducerFencedError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.files import committed_files
from connect_runtime.runtime.registry import Registry
from tests.support.contract import in_thread, uid, wait_until
from tests.support.sink_helpers import read_log

SINKS_UNFAITHFUL = ("a sink starts a partition without committed offset at beginning_offsets, and Tansu's "
                    "ListOffsets (EARLIEST) is not faithful")
PARTITIONS = 6
PER_PARTITION = 40


def _fill(url: str, topic: str, partitions: int = PARTITIONS, per_partition: int = PER_PARTITION) -> dict[str, Any]:
    """``per_partition`` records in each partition (value ``p * 1000 + i``); the ``until_offsets`` of them."""
    with open_backend(url) as be:
        be.create_topics({topic: partitions})
        producer = be.producer()
        try:
            producer.send([ProducerRecord(topic, p, None, json.dumps(p * 1000 + i).encode())
                           for p in range(partitions) for i in range(per_partition)])
            producer.flush(60)
        finally:
            producer.close()
    return {topic: {str(p): per_partition for p in range(partitions)}}


def _committed(url: str, name: str, topic: str, partitions: int = PARTITIONS) -> dict[int, int | None]:
    with open_backend(url) as be:
        c = be.consumer(f"connect-{name}")
        try:
            got = c.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
        finally:
            c.close()
    return {tp.partition: off for tp, off in got.items()}


def _file_values(directory: Path, topic: str, partitions: int = PARTITIONS) -> list[Any]:
    out: list[Any] = []
    for p in range(partitions):
        for f in committed_files(directory, topic, p):
            out.extend(json.loads(line) for line in f.read_text().splitlines() if line)
    return out


@pytest.mark.not_on_tansu(SINKS_UNFAITHFUL)
@pytest.mark.parametrize("tasks", [2, 4, 8])
def test_fanned_out_tasks_put_each_record_once_into_a_file_sink(backend_url: str, tmp_path: Path, tasks: int) -> None:
    """2, 4 and 8 tasks over 6 partitions (8: tasks 6 and 7 get none, open nothing and end empty); each partition is
    one task's; the merged result has every record and each partition's range; a second plan finds nothing."""
    topic, name = uid("fan-in"), uid("fan-file")
    until = _fill(backend_url, topic)
    config = {"name": name, "connector.class": "connect_runtime.connectors.files.FileSink", "topics": topic,
              "tasks.max": str(tasks), "directory": str(tmp_path / "out"), "fsync": "false",
              "consumer.max.poll.records": "7"}
    plan = plan_sink(config, backend_url, until_offsets=until)
    assert [t["index"] for t in plan["tasks"]] == list(range(tasks))
    owned = [tuple(p[:2]) for t in plan["tasks"] for p in t["partitions"]]
    assert sorted(owned) == [(topic, p) for p in range(PARTITIONS)], "each partition is exactly one task's"
    assert all(p[2] == PER_PARTITION for t in plan["tasks"] for p in t["partitions"])
    results = [run_sink_task(config, backend_url, plan, i, max_seconds=120).to_dict() for i in range(tasks)]
    for i, r in enumerate(results):
        mine = {str(p) for _t, p, _target in plan["tasks"][i]["partitions"]}
        assert set(r["ranges"].get(topic, {})) == mine, f"task {i} read only its own partitions"
        if not mine:
            assert r["records"] == 0 and r["ranges"] == {} and r["committed"] == {}
    assert sum(r["records"] for r in results) == PARTITIONS * PER_PARTITION
    merged = ranges_mod.merge(*(r["ranges"] for r in results))
    assert merged == {topic: {str(p): [0, PER_PARTITION] for p in range(PARTITIONS)}}
    want = sorted(p * 1000 + i for p in range(PARTITIONS) for i in range(PER_PARTITION))
    assert sorted(_file_values(tmp_path / "out", topic)) == want
    again = plan_sink(config, backend_url, until_offsets=until)
    assert sum(run_sink_task(config, backend_url, again, i).records for i in range(tasks)) == 0
    assert sorted(_file_values(tmp_path / "out", topic)) == want


def _recording(name: str, topic: str, log: Path, tasks: int) -> dict[str, Any]:
    return {"name": name, "connector.class": "tests.support.sink_helpers.RecordingSinkConnector", "topics": topic,
            "tasks.max": str(tasks), "log.path": str(log), "consumer.max.poll.records": "5",
            "offset.flush.interval.ms": "0"}


def _stuck(plan: dict[str, Any], index: int, block: Path) -> dict[str, Any]:
    """The plan with task ``index``'s config blocking at its 2nd put until ``block`` exists (a try that hangs after
    its first commit: a zombie once another try of the task started)."""
    stuck = json.loads(json.dumps(plan))
    for t in stuck["tasks"]:
        if t["index"] == index:
            t["config"].update({"put.block.at": "2", "put.block.file": str(block)})
    return stuck


def _blocked(log: Path, task: int) -> bool:
    return any(e["call"] == "blocked" and e.get("task") == str(task) for e in read_log(log)) if log.exists() else False


@pytest.mark.not_on_tansu(SINKS_UNFAITHFUL)
def test_a_retry_of_one_task_fences_its_stuck_try_and_no_sibling(backend_url: str, tmp_path: Path) -> None:
    """Try 1 of task 1 commits its first batch and hangs; try 2 of task 1 runs to the target; task 0 runs while
    try 1 still hangs. Released, try 1's next commit is refused (ProducerFencedError): the group keeps try 2's
    offsets; task 0 (a sibling) was not fenced."""
    topic, name = uid("fan-retry"), uid("fan-retry")
    until = _fill(backend_url, topic, partitions=2)
    log, block = tmp_path / "calls.jsonl", tmp_path / "release"
    config = _recording(name, topic, log, 2)
    plan = plan_sink(config, backend_url, until_offsets=until)
    zombie, out = in_thread(run_sink_task, config, backend_url, _stuck(plan, 1, block), 1, max_seconds=120)
    wait_until("try 1 of task 1 to commit once and hang", lambda: _blocked(log, 1) or "error" in out, 60)
    assert "error" not in out, out
    assert _committed(backend_url, name, topic, 2)[1] == 5
    retry = run_sink_task(config, backend_url, plan, 1, max_seconds=120)
    assert retry.committed == {topic: {"1": PER_PARTITION}} and retry.ranges == {topic: {"1": [5, PER_PARTITION]}}
    sibling = run_sink_task(config, backend_url, plan, 0, max_seconds=120)
    assert sibling.committed == {topic: {"0": PER_PARTITION}}
    block.touch()
    zombie.join(60)
    assert not zombie.is_alive(), "try 1 still runs 60 s after it was released"
    assert isinstance(out.get("error"), ProducerFencedError), out
    assert _committed(backend_url, name, topic, 2) == {0: PER_PARTITION, 1: PER_PARTITION}
    with open_backend(backend_url) as be:
        entry = Registry(be).get(name)
    assert entry is not None and entry.state == "stopped" and entry.done_tasks == [0, 1], entry
    assert [w["task"] for w in entry.workers] == [1, 1, 0], "each try's start is in the registry"


@pytest.mark.not_on_tansu(SINKS_UNFAITHFUL)
def test_a_newer_plan_with_fewer_tasks_fences_every_task_of_the_older_plan(backend_url: str, tmp_path: Path) -> None:
    """An older plan of 3 tasks: task 2 hangs after its first commit. A newer plan of 1 task (which has no task 2)
    runs to the end. Task 2 of the older plan is refused at its next commit, and a task of the older plan started
    afterwards is refused at once; the group holds the newer plan's offsets."""
    topic, name = uid("fan-fewer"), uid("fan-fewer")
    until = _fill(backend_url, topic, partitions=3)
    log, block = tmp_path / "calls.jsonl", tmp_path / "release"
    old = plan_sink(_recording(name, topic, log, 3), backend_url, until_offsets=until)
    zombie, out = in_thread(run_sink_task, _recording(name, topic, log, 3), backend_url, _stuck(old, 2, block), 2,
                            max_seconds=120)
    wait_until("task 2 of the older plan to commit once and hang", lambda: _blocked(log, 2) or "error" in out, 60)
    new = plan_sink(_recording(name, topic, log, 1), backend_url, until_offsets=until)
    assert new["generation"] > old["generation"] and len(new["tasks"]) == 1
    assert len(new["tasks"][0]["partitions"]) == 3
    result = run_sink_task(_recording(name, topic, log, 1), backend_url, new, 0, max_seconds=120)
    assert result.committed == {topic: {str(p): PER_PARTITION for p in range(3)}}
    block.touch()
    zombie.join(60)
    assert not zombie.is_alive(), "task 2 of the older plan still runs 60 s after it was released"
    assert isinstance(out.get("error"), ProducerFencedError), out
    with pytest.raises(ProducerFencedError):
        run_sink_task(_recording(name, topic, log, 3), backend_url, old, 1, max_seconds=30)
    assert _committed(backend_url, name, topic, 3) == {p: PER_PARTITION for p in range(3)}


@pytest.mark.not_on_tansu(SINKS_UNFAITHFUL)
def test_a_sink_run_after_a_fan_out_fences_its_tasks_and_a_plan_fences_a_sink_run(backend_url: str,
                                                                                  tmp_path: Path) -> None:
    """Across the two ways to run a sink: ``run_sink`` of the connector fences a stuck task of an older plan (Kafka:
    the new generation initialises the plan's task fence ids), and a newer plan fences a stuck ``run_sink``."""
    from connect_runtime import run_sink

    topic, name = uid("fan-mixed"), uid("fan-mixed")
    until = _fill(backend_url, topic, partitions=2)
    log, block = tmp_path / "calls.jsonl", tmp_path / "release"
    plan = plan_sink(_recording(name, topic, log, 2), backend_url, until_offsets=until)
    stuck, out = in_thread(run_sink_task, _recording(name, topic, log, 2), backend_url, _stuck(plan, 0, block), 0,
                           max_seconds=120)
    wait_until("task 0 of the plan to commit once and hang", lambda: _blocked(log, 0) or "error" in out, 60)
    whole = run_sink(_recording(name, topic, log, 1), backend_url, until_offsets=until, max_seconds=120)
    assert whole.committed == {topic: {"0": PER_PARTITION, "1": PER_PARTITION}}
    block.touch()
    stuck.join(60)
    assert not stuck.is_alive() and isinstance(out.get("error"), ProducerFencedError), out

    _fill(backend_url, topic, partitions=2)  # another PER_PARTITION per partition
    block2 = tmp_path / "release2"
    running, out2 = in_thread(run_sink, {**_recording(name, topic, log, 1), "put.block.at": "2",
                                         "put.block.file": str(block2)}, backend_url, max_seconds=120)
    wait_until("the sink run to hang after its first put", lambda: sum(
        e["call"] == "blocked" for e in read_log(log)) >= 2 or "error" in out2, 60)
    newer = plan_sink(_recording(name, topic, log, 2), backend_url)
    results = [run_sink_task(_recording(name, topic, log, 2), backend_url, newer, i, max_seconds=120)
               for i in range(2)]
    assert {p for r in results for p in r.committed.get(topic, {})} == {"0", "1"}
    assert _committed(backend_url, name, topic, 2) == {0: 2 * PER_PARTITION, 1: 2 * PER_PARTITION}
    block2.touch()
    running.join(60)
    assert not running.is_alive() and isinstance(out2.get("error"), ProducerFencedError), out2
    assert _committed(backend_url, name, topic, 2) == {0: 2 * PER_PARTITION, 1: 2 * PER_PARTITION}


def test_a_task_refuses_a_plan_of_another_connector_or_without_its_index(backend_url: str, tmp_path: Path) -> None:
    from connect_runtime.api.errors import ConfigError

    topic, name = uid("fan-bad"), uid("fan-bad")
    _fill(backend_url, topic, partitions=1, per_partition=1)
    config = _recording(name, topic, tmp_path / "calls.jsonl", 1)
    plan = plan_sink(config, backend_url)
    with pytest.raises(ConfigError, match="holding task 3"):
        run_sink_task(config, backend_url, plan, 3)
    with pytest.raises(ConfigError, match="the config names sink connector"):
        run_sink_task({**config, "name": name + "-other"}, backend_url, plan, 0)
