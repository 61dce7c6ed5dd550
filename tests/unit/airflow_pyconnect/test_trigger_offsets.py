"""CommittedOffsetsTrigger: exact serialize() output, round trip, and real runs on a SQLite backend."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from airflow_pyconnect.triggers.offsets import CommittedOffsetsTrigger

SOURCE_RESULT = {
    "connector": "gen", "records": 7, "ranges": {"events": {"0": [0, 7]}},
    "source_offsets": [{"partition": {"task": 0}, "offset": {"position": 7}}],
    "transactions": 1, "filtered": 0, "skipped": 0, "seconds": 0.1,
}


def test_serialize_exact_output() -> None:
    trigger = CommittedOffsetsTrigger(connector_name="archive", target=SOURCE_RESULT,
                                      pyconnect_conn_id="pc", poll_interval=2, deadline=1_900_000_000.5)
    assert trigger.serialize() == (
        "airflow_pyconnect.triggers.offsets.CommittedOffsetsTrigger",
        {
            "connector_name": "archive",
            "target": {"events": {"0": 7}},
            "connector_kind": "sink",
            "pyconnect_conn_id": "pc",
            "offsets_storage_topic": None,
            "poll_interval": 2.0,
            "deadline": 1_900_000_000.5,
        },
    )


def test_serialize_round_trips_through_json() -> None:
    trigger = CommittedOffsetsTrigger(connector_name="gen", target=SOURCE_RESULT, connector_kind="source",
                                      offsets_storage_topic="my-offsets")
    path, kwargs = trigger.serialize()
    assert path == "airflow_pyconnect.triggers.offsets.CommittedOffsetsTrigger"
    again = CommittedOffsetsTrigger(**json.loads(json.dumps(kwargs)))
    assert again.serialize() == (path, kwargs)
    assert kwargs["target"] == [{"partition": {"task": 0}, "offset": {"position": 7}}]


@pytest.fixture
def backend_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'trig.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_PC_TRIGGER", json.dumps({"conn_type": "pyconnect", "host": url}))
    from connect_runtime.backends import open_backend

    with open_backend(url) as be:
        be.create_topics({"events": 1})
    return url


def _commit_group(url: str, group: str, offset: int) -> None:
    from connect_runtime.api.records import TopicPartition
    from connect_runtime.backends import open_backend

    with open_backend(url) as be:
        consumer = be.consumer(group)
        try:
            consumer.commit({TopicPartition("events", 0): offset}, 10)
        finally:
            consumer.close()


async def _first_event(trigger: CommittedOffsetsTrigger, bound: float) -> dict:
    return (await asyncio.wait_for(anext(trigger.run()), bound)).payload


def test_run_yields_success_once_the_group_commits_and_never_blocks_the_loop(backend_url: str) -> None:
    trigger = CommittedOffsetsTrigger(connector_name="archive", target={"events": {"0": 7}},
                                      pyconnect_conn_id="pc_trigger", poll_interval=0.2,
                                      deadline=time.time() + 30)

    async def scenario() -> tuple[dict, int]:
        ticks = 0
        task = asyncio.create_task(_first_event(trigger, 30))

        async def ticker() -> None:
            nonlocal ticks
            while not task.done():
                ticks += 1
                await asyncio.sleep(0.01)

        tick_task = asyncio.create_task(ticker())
        await asyncio.sleep(0.5)
        assert not task.done(), "the target cannot be reached before the group commits"
        await asyncio.to_thread(_commit_group, backend_url, "connect-archive", 5)
        await asyncio.sleep(0.5)
        assert not task.done(), "5 < 7: still short"
        await asyncio.to_thread(_commit_group, backend_url, "connect-archive", 7)
        event = await task
        await tick_task
        return event, ticks

    event, ticks = asyncio.run(scenario())
    assert event["status"] == "success"
    assert event["committed"] == {"events": {"0": 7}} and event["target"] == {"events": {"0": 7}}
    assert event["polls"] >= 3
    # the loop kept running while the trigger polled (~1 s of waiting at 10 ms per tick)
    assert ticks >= 50


def test_run_reports_a_timeout_with_reached_and_target_offsets(backend_url: str) -> None:
    _commit_group(backend_url, "connect-slow", 3)
    trigger = CommittedOffsetsTrigger(connector_name="slow", target={"events": {"0": 9}},
                                      pyconnect_conn_id="pc_trigger", poll_interval=0.2, deadline=time.time() + 0.7)
    event = asyncio.run(_first_event(trigger, 20))
    assert event["status"] == "timeout"
    assert event["committed"] == {"events": {"0": 3}}
    assert "timed out waiting for the committed offsets of sink connector 'slow'" in event["message"]
    assert event["message"].endswith("short: events[0]: committed 3, target 9")


def test_run_waits_for_source_offsets(backend_url: str) -> None:
    from connect_runtime.backends import open_backend
    from connect_runtime.runtime.offsets import offset_key, offset_value

    trigger = CommittedOffsetsTrigger(connector_name="gen", target=SOURCE_RESULT, connector_kind="source",
                                      pyconnect_conn_id="pc_trigger", poll_interval=0.1, deadline=time.time() + 20)
    with open_backend(backend_url) as be:
        store = be.offset_store(None)
        store.put([(offset_key("gen", {"task": 0}), offset_value({"position": 9}))], 10)
        store.close()
    event = asyncio.run(_first_event(trigger, 20))
    assert event["status"] == "success"
    assert event["committed"] == [{"partition": {"task": 0}, "offset": {"position": 9}}]


def test_run_reports_an_undefined_connection_as_an_error_naming_it(backend_url: str) -> None:
    trigger = CommittedOffsetsTrigger(connector_name="x", target={"events": {"0": 1}},
                                      pyconnect_conn_id="no_such_conn", poll_interval=0.1, deadline=time.time() + 10)
    event = asyncio.run(_first_event(trigger, 20))
    assert event["status"] == "error"
    assert "'no_such_conn' is not defined" in event["message"]
