"""Issue 10, section 1: the promise off the happy path (source side), on real SQLite files and Tansu.

Each test sets up the case that broke on the earlier main: a retry that plans fewer tasks, connectors
that ask for boundaries, two writers on one topic partition, a reconfiguration while tasks are busy,
offsets altered while (or just before) a run holds the connector, a switch to a connector's own
offsets store.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from typing import Any

import pytest

from connect_runtime import admin, open_backend, plan_source, run_source, run_source_task
from connect_runtime.api.errors import (
    ConfigError,
    ConnectorRunningError,
    DataError,
    ProducerFencedError,
)
from connect_runtime.runtime.registry import Registry
from connect_runtime.runtime.source import SourceRunResult
from tests.support.source_connectors import PROBES, committed_offset, probe, read_topic


def _in_thread(fn: Any, *args: Any, **kwargs: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def body() -> None:
        try:
            out["result"] = fn(*args, **kwargs)
        except BaseException as exc:
            out["error"] = exc

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, out


def _wait(what: str, check: Any, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"waited {seconds:g} s for {what}"
        time.sleep(0.02)


def _records_in(url: str, result: SourceRunResult) -> list[dict[str, Any]]:
    """The values a reader of the result's ranges gets (each exact span, nothing else)."""
    out = []
    with open_backend(url) as be:
        for tp, spans in result.topic_partitions().items():
            for first, nxt in spans:
                out.extend(json.loads(r.value) for r in be.read_range(tp, first, nxt))
    return out


def planning(files: str, tasks: int, sleep_ms: int = 0, **extra: Any) -> dict[str, Any]:
    return {"name": "files", "connector.class": "tests.support.source_connectors.PlanningSource", "topic": "lines",
            "files": files, "tasks.max": tasks, "poll.sleep.ms": sleep_ms, "poll.idle.timeout.ms": 200, **extra}


def scripted(**extra: Any) -> dict[str, Any]:
    return {"name": "scripted", "connector.class": "tests.support.source_connectors.ScriptedSource", "topic": "t",
            "poll.idle.timeout.ms": 200, **extra}


# -- 1. a retry fences every task of the older generation ---------------------------------------------


def test_a_retry_with_fewer_tasks_fences_every_task_of_the_running_generation(sqlite_url: str) -> None:
    """Run A has 2 tasks (file a, file b); its retry B plans 1 task for both files while A still runs.
    Before generations, B fenced only transactional id files-0: A's task 1 kept committing file b and
    those lines were written twice."""
    a, out_a = _in_thread(run_source, planning("a:300,b:300", 2, sleep_ms=40), sqlite_url, max_seconds=25)
    _wait("run A to commit lines of both files",
          lambda: {v["file"] for v in read_topic(sqlite_url, "lines")} == {"a", "b"})
    b = run_source(planning("a:300,b:300", 1), sqlite_url)
    a.join(30)
    assert not a.is_alive(), "run A did not end within 30 s after it was fenced"
    lines = Counter((v["file"], v["line"]) for v in read_topic(sqlite_url, "lines"))
    assert [k for k, n in lines.items() if n > 1] == []  # nothing twice
    assert set(lines) == {(f, i) for f in "ab" for i in range(300)}  # nothing lost
    assert isinstance(out_a.get("error"), ProducerFencedError), out_a
    assert "generation" in str(out_a["error"])
    assert b.generation == 1


def test_a_retry_fences_the_older_generation_on_kafka(fresh_kafka_url: str) -> None:
    """On Kafka the commit cannot read the registry: the new generation initialises every transactional id
    the older one used (its task count is in the registry). Tansu shows aborted records to read_committed
    readers, so this test checks the fencing itself, not the topic's contents."""
    a, out_a = _in_thread(run_source, planning("a:400,b:400", 2, sleep_ms=60), fresh_kafka_url, max_seconds=40)
    with open_backend(fresh_kafka_url) as be:
        _wait("run A to register its 2 tasks",
              lambda: (r := Registry(be).get("files")) is not None and r.tasks == 2, 60)
    _wait("run A to commit", lambda: committed_offset(fresh_kafka_url, "files", {"file": "b"}) is not None, 60)
    run_source(planning("a:400,b:400", 1), fresh_kafka_url)
    a.join(60)
    assert not a.is_alive()
    assert isinstance(out_a.get("error"), ProducerFencedError), out_a
    assert committed_offset(fresh_kafka_url, "files", {"file": "b"}) == {"line": 400}


def test_fan_out_tasks_of_an_older_plan_are_fenced_by_a_newer_plan(sqlite_url: str) -> None:
    config = planning("a:40,b:40", 2)
    old = plan_source(config, sqlite_url)
    assert [t["index"] for t in old["tasks"]] == [0, 1] and old["generation"] == 0
    first = run_source_task(config, sqlite_url, old, 0)
    assert first.records == 40
    new = plan_source(config, sqlite_url)  # e.g. the planning task was retried
    assert new["generation"] == 1 and len(new["tasks"]) == 1  # file a is done: one task left
    with pytest.raises(ProducerFencedError, match="generation"):
        run_source_task(config, sqlite_url, old, 1)
    second = run_source_task(config, sqlite_url, new, 0)
    assert second.records == 40
    lines = Counter((v["file"], v["line"]) for v in read_topic(sqlite_url, "lines"))
    assert set(lines) == {(f, i) for f in "ab" for i in range(40)} and max(lines.values()) == 1
    with open_backend(sqlite_url) as be:
        rec = admin.connector(be, "files")
        assert rec is not None and rec.state == "stopped" and rec.done_tasks == [0]


def test_different_identities_do_not_fence_each_other_but_a_retry_of_one_does(sqlite_url: str) -> None:
    """Source partitions keyed by the interval (here: one file per day), identity = the interval."""
    day1, out1 = _in_thread(run_source, planning("day1:5000", 1, sleep_ms=20), sqlite_url,
                            identity="2024-01-01", max_seconds=3)
    _wait("day 1 to commit", lambda: committed_offset(sqlite_url, "files", {"file": "day1"}) is not None)
    day2 = run_source(planning("day2:50", 1), sqlite_url, identity="2024-01-02")
    day1.join(20)
    assert "error" not in out1, out1  # another interval does not fence it
    assert day2.records == 50
    retry, out_r = _in_thread(run_source, planning("day1:5000", 1, sleep_ms=20), sqlite_url,
                              identity="2024-01-01", max_seconds=10)
    _wait("the retry of day 1 to start", lambda: len(read_topic(sqlite_url, "lines")) > out1["result"].records + 50)
    run_source(planning("day1:5000", 1, sleep_ms=20), sqlite_url, identity="2024-01-01", max_seconds=0.5)
    retry.join(20)
    assert isinstance(out_r.get("error"), ProducerFencedError), out_r  # a retry of the same interval fences
    lines = Counter((v["file"], v["line"]) for v in read_topic(sqlite_url, "lines"))
    assert max(lines.values()) == 1


# -- 2. callback order ------------------------------------------------------------------------------


def test_every_commit_record_of_a_transaction_comes_before_commit(sqlite_url: str) -> None:
    PROBES.pop("order", None)
    run_source(scripted(count=25, batch=10, probe="order", **{"track.records": True}), sqlite_url)
    events = [e for e in probe("order")["events"] if e[0] != "poll"]
    # per transaction (poll boundary: 10, 10, 5 records): its records, then commit() (Kafka Connect's order)
    assert events[-1] == ("commit", 0)
    commits = [i for i, e in enumerate(events) if e[0] == "commit"]
    records_before = [sum(1 for e in events[:i] if e[0] == "record") for i in commits]
    assert records_before[:3] == [10, 20, 25]


# -- 6. exact ranges with another writer on the same topic partition ---------------------------------


def test_ranges_hold_only_this_runs_records_when_two_connectors_share_a_partition(sqlite_url: str) -> None:
    def writer(name: str) -> dict[str, Any]:
        return {**scripted(count=-1, batch=3, tag=name, **{"poll.sleep.ms": 5}), "name": name}

    a, out_a = _in_thread(run_source, writer("left"), sqlite_url, max_seconds=2.5)
    b, out_b = _in_thread(run_source, writer("right"), sqlite_url, max_seconds=2.5)
    a.join(30)
    b.join(30)
    left, right = out_a["result"], out_b["result"]
    for result, tag in ((left, "left"), (right, "right")):
        seen = _records_in(sqlite_url, result)
        assert len(seen) == result.records > 0
        assert {v["tag"] for v in seen} == {tag}, f"{tag}'s ranges hold another writer's records"
    spans = left.to_dict()["ranges"]["t"]["0"]
    assert isinstance(spans[0], list), "interleaved writers: the ranges are a list of exact spans"


def test_one_writer_keeps_the_plain_from_to_pair(sqlite_url: str) -> None:
    result = run_source(scripted(count=30, batch=7), sqlite_url)
    assert result.to_dict()["ranges"] == {"t": {"0": [0, 30]}}


# -- 8. offsets alter/reset only while the connector is not running (KIP-875) ------------------------


def test_offsets_cannot_be_altered_while_a_run_holds_the_connector(sqlite_url: str) -> None:
    t, out = _in_thread(run_source, scripted(count=-1, batch=5, **{"poll.sleep.ms": 20}), sqlite_url,
                        max_seconds=3)
    _wait("the run to commit", lambda: committed_offset(sqlite_url, "scripted", {"task": 0, "round": 1}))
    with open_backend(sqlite_url) as be:
        assert admin.is_running(be, "scripted")
        with pytest.raises(ConnectorRunningError, match="running"):
            admin.alter_offsets(be, "scripted", [{"partition": {"task": 0, "round": 1}, "offset": {"n": 0}}])
        with pytest.raises(ConnectorRunningError):
            admin.reset_offsets(be, "scripted")
    t.join(20)
    assert "result" in out, out
    with open_backend(sqlite_url) as be:
        assert not admin.is_running(be, "scripted")
        admin.alter_offsets(be, "scripted", [{"partition": {"task": 0, "round": 1}, "offset": {"n": 1000}}])
        assert admin.get_offsets(be, "scripted") == {
            "offsets": [{"partition": {"round": 1, "task": 0}, "offset": {"n": 1000}}]}


def test_offsets_cannot_be_reset_while_another_identity_of_the_connector_runs(sqlite_url: str) -> None:
    """Runs under two identities (e.g. two data intervals): one finished, one running. A reset is refused
    while the second runs (KIP-875: only while the connector is stopped), naming it; once it is stale (its
    worker went silent), the reset is allowed and fences it, so it can never write over the reset."""
    run_source(scripted(count=10), sqlite_url, identity="2026-01-01")
    t, out = _in_thread(run_source, scripted(count=-1, batch=5, **{"poll.sleep.ms": 20}), sqlite_url,
                        max_seconds=6, identity="2026-01-02")
    _wait("the second identity to commit", lambda: committed_offset(sqlite_url, "scripted", {"task": 0, "round": 1})
          not in (None, {"n": 10}))
    with open_backend(sqlite_url) as be:
        with pytest.raises(ConnectorRunningError, match="identity '2026-01-02'"):
            admin.reset_offsets(be, "scripted")
        with pytest.raises(ConnectorRunningError, match="identity '2026-01-02'"):
            admin.alter_offsets(be, "scripted", [{"partition": {"task": 0, "round": 1}, "offset": {"n": 0}}])
        reg = Registry(be)
        rec = reg.get("scripted", "2026-01-02")
        assert rec is not None
        reg.update(rec, heartbeat=1)  # as if its worker had been silent for a long time
        assert admin.reset_offsets(be, "scripted")["source_partitions_reset"] >= 1
    t.join(20)
    assert isinstance(out.get("error"), ProducerFencedError), out
    with open_backend(sqlite_url) as be:
        assert admin.get_offsets(be, "scripted") == {"offsets": []}  # nothing written over the reset


def test_a_run_registered_before_an_alteration_cannot_commit_over_it(sqlite_url: str) -> None:
    """A run whose heartbeat went stale (a paused or partitioned worker) looks stopped, so the alteration is
    allowed; the alteration starts a new generation, so that run's next commit is fenced."""
    t, out = _in_thread(run_source, scripted(count=-1, batch=5, **{"poll.sleep.ms": 20}), sqlite_url,
                        max_seconds=6)
    _wait("the run to commit", lambda: committed_offset(sqlite_url, "scripted", {"task": 0, "round": 1}))
    with open_backend(sqlite_url) as be:
        reg = Registry(be)
        rec = reg.get("scripted")
        assert rec is not None
        reg.update(rec, heartbeat=1)  # as if the worker had been silent for a long time
        admin.alter_offsets(be, "scripted", [{"partition": {"task": 0, "round": 1}, "offset": {"n": 5000}}])
    t.join(20)
    assert isinstance(out.get("error"), ProducerFencedError), out
    assert committed_offset(sqlite_url, "scripted", {"task": 0, "round": 1}) == {"n": 5000}


# -- 7. a connector's own offsets store: mirrored and used as fallback (KIP-618) ---------------------


def test_switching_to_a_connector_offsets_store_does_not_reingest(sqlite_url: str) -> None:
    run_source(scripted(count=20), sqlite_url)
    again = run_source(scripted(count=30, **{"offsets.storage.topic": "scripted-offsets"}), sqlite_url)
    assert again.records == 10  # resumed from the global store
    assert [v["n"] for v in read_topic(sqlite_url, "t")] == list(range(30))
    assert committed_offset(sqlite_url, "scripted", {"task": 0, "round": 1}, "scripted-offsets") == {"n": 30}
    assert committed_offset(sqlite_url, "scripted", {"task": 0, "round": 1}) == {"n": 30}  # mirrored
    with open_backend(sqlite_url) as be:  # the admin API finds the connector's own store itself
        assert admin.get_offsets(be, "scripted")["offsets"] == [
            {"partition": {"round": 1, "task": 0}, "offset": {"n": 30}}]


# -- 9. task reconfiguration while tasks are busy -----------------------------------------------------


def test_reconfiguration_takes_effect_at_the_next_boundary_of_a_busy_run(sqlite_url: str) -> None:
    PROBES.pop("replan", None)
    result = run_source(scripted(count=-1, batch=5, probe="replan", **{"poll.sleep.ms": 10,
                                                                       "reconfigure.after.ms": 500}),
                        sqlite_url, max_seconds=4)
    assert probe("replan")["plans"] == [1, 2], "the busy run never re-planned its tasks"
    values = read_topic(sqlite_url, "t")
    assert {v["round"] for v in values} == {1, 2}
    for rnd in (1, 2):
        ns = [v["n"] for v in values if v["round"] == rnd]
        assert ns == list(range(len(ns)))  # nothing lost or twice across the re-plan
    assert result.records == len(values)


# -- bad input --------------------------------------------------------------------------------------


def test_tasks_max_beyond_the_bound_is_a_config_error_naming_it(sqlite_url: str) -> None:
    with pytest.raises(ConfigError, match=r"tasks\.max") as info:
        run_source(scripted(count=1, **{"tasks.max": 100000}), sqlite_url)
    assert "tasks.max" in info.value.errors


def test_a_record_without_a_topic_is_a_data_error_naming_the_record(sqlite_url: str) -> None:
    config = scripted(count=20, batch=5)
    config["topic"] = ""
    run_source(scripted(count=5), sqlite_url)
    with pytest.raises(DataError, match=r"topic '' ?;|has topic ''") as info:
        run_source({**config, "name": "notopic", "transforms": ""}, sqlite_url)
    assert "SourceRecord" in str(info.value) and "'n': 0" in str(info.value)


def test_a_sink_run_registers_its_kind_task_count_and_whether_it_owns_offsets(sqlite_url: str, tmp_path: Any) -> None:
    """What the Connectors view and ``admin.list_connectors`` show for a sink: its planned task count
    (not 0), ``owns_offsets`` for a FileSink, and a new generation per run."""
    from connect_runtime import run_sink

    run_source({"name": "reg-src", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                "topic": "reg", "max.records": "40", "tasks.max": "2", "topic.creation.default.partitions": "2",
                "poll.idle.timeout.ms": "200"}, sqlite_url)
    sink = {"name": "reg-archive", "connector.class": "connect_runtime.connectors.files.FileSink", "topics": "reg",
            "directory": str(tmp_path / "out"), "tasks.max": "2"}
    for _ in range(2):
        run_sink(sink, sqlite_url, max_seconds=5)
    with open_backend(sqlite_url) as be:
        by_name = {c["name"]: c for c in admin.list_connectors(be)}
    src, arch = by_name["reg-src"], by_name["reg-archive"]
    assert (src["kind"], src["tasks"], src["state"]) == ("source", 2, "stopped"), src
    assert (arch["kind"], arch["tasks"], arch["state"], arch["owns_offsets"]) == ("sink", 2, "stopped", True), arch
    assert arch["generation"] == src["generation"] + 1 and arch["topics"] == ["reg"], (src, arch)
