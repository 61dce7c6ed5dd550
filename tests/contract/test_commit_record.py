"""Contract: when a source task hears about a committed transaction (KIP-416, KIP-618).

Promise (``connect_runtime.backends.base``, "commit_record"): every ``commit_record(record, metadata)`` of a
committed transaction, then ``commit()``, before the task's next ``poll`` — on every backend, whether the
commit overlaps the task's work (Kafka) or not (SQLite); and a run that ends because another task failed
or was fenced still reports every record of every transaction that committed, and none of one that did not.
"""

from __future__ import annotations

from typing import Any

import pytest

from connect_runtime import run_source
from connect_runtime.api.errors import ConnectError
from tests.support.source_connectors import PROBES, probe, read_topic


def scripted(probe_name: str, **extra: Any) -> dict[str, Any]:
    return {"name": f"cr-{probe_name}", "connector.class": "tests.support.source_connectors.ScriptedSource",
            "topic": f"t-{probe_name}", "poll.idle.timeout.ms": 200, "probe": probe_name, "track.records": True,
            **extra}


def test_commit_record_comes_before_the_next_poll(any_backend_url: str) -> None:
    """A slow poll (as a task waiting on its source): the records of the transaction that just committed are
    reported before the task polls again, not one poll later."""
    name = "before-poll"
    PROBES.pop(name, None)
    result = run_source(scripted(name, count=20, batch=5, **{"poll.sleep.ms": 300}), any_backend_url)
    assert result.records == 20
    events = probe(name)["events"]
    polls = [i for i, e in enumerate(events) if e[0] == "poll"]
    for k, at in enumerate(polls):
        n = events[at][2]  # the task had returned records 0..n-1 before this poll
        reported = {e[1] for e in events[:at] if e[0] == "record"}
        assert reported == set(range(n)), f"poll #{k} (after {n} records) came before commit_record of " \
                                          f"{sorted(set(range(n)) - reported)}"
        commits_before = sum(1 for e in events[:at] if e[0] == "commit")
        assert commits_before == n // 5, f"poll #{k}: commit() of the committed transactions did not all come first"
    assert sorted(n for n, _ in probe(name)["commit_record"]) == list(range(20))
    assert all(meta is not None for _, meta in probe(name)["commit_record"])


def test_a_run_failed_by_another_task_still_reports_every_committed_record(any_backend_url: str) -> None:
    """Task 1 fails after some records; task 0 keeps committing until the run stops. Every record of task 0
    that is in the topic (a committed transaction) got commit_record with its metadata, and no other did."""
    name = "failed-run"
    PROBES.pop(name, None)
    with pytest.raises(ConnectError, match="failed on purpose"):
        run_source(scripted(name, count=-1, batch=7, **{"tasks.max": 2, "poll.sleep.ms": 30,
                                                         "fail.after": 1000}), any_backend_url)
    committed = {(v["task"], v["n"]) for v in read_topic(any_backend_url, f"t-{name}")}
    assert committed, "nothing was committed before the failure"
    reported = set()
    for e in probe(name)["events"]:
        if e[0] == "record":
            reported.add((0, e[1]) if len(e) == 2 else (e[1], e[2]))
    assert reported == committed, (f"not reported: {sorted(committed - reported)[:10]}; reported but not committed: "
                                   f"{sorted(reported - committed)[:10]}")
