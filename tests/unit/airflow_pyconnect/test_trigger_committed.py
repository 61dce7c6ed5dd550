"""CommittedRecordsTrigger: exact serialize() output, and real polls of a SQLite store written by
``run_source`` (DataGenSource): start_from end/beginning, restarts, Airflow's shared-stream ack channel
(commit only once the event is stored), an unreachable store, secrets kept out of log lines."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_pyconnect.triggers.committed import (
    CommittedRecordsProducer,
    CommittedRecordsTrigger,
    committed_ranges,
    default_watcher_group,
)

TOPIC = "events"
LOGGER = "airflow_pyconnect.triggers.committed"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A SQLite store behind the connection ``pc_watch``, with the topic created (one partition)."""
    url = f"sqlite:///{tmp_path / 'watch.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_PC_WATCH", json.dumps({"conn_type": "pyconnect", "host": url}))
    from connect_runtime.backends import open_backend

    with open_backend(url) as be:
        be.create_topics({TOPIC: 1})
    return url


def _generate(url: str, total: int) -> None:
    """Commit DataGen records until ``total`` exist (a run resumes at its committed source offset)."""
    from connect_runtime import run_source

    run_source({"name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                "topic": TOPIC, "max.records": str(total), "batch.size": "4"}, url)


def _group_offset(url: str, group: str = "airflow-watch-events") -> int | None:
    from connect_runtime.api.records import TopicPartition
    from connect_runtime.backends import open_backend

    with open_backend(url) as be:
        consumer = be.consumer(group)
        try:
            return consumer.committed([TopicPartition(TOPIC, 0)], 10)[TopicPartition(TOPIC, 0)]
        finally:
            consumer.close()


def _trigger(**kwargs: Any) -> CommittedRecordsTrigger:
    return CommittedRecordsTrigger(**{"topics": [TOPIC], "pyconnect_conn_id": "pc_watch", "poll_interval": 0.1,
                                      **kwargs})


async def _cancel(task: asyncio.Future[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _next(gen: AsyncIterator[Any], bound: float = 20) -> dict[str, Any]:
    return (await asyncio.wait_for(anext(gen), bound)).payload


# -- shape ---------------------------------------------------------------------------------------------
def test_serialize_exact_output_and_defaults() -> None:
    trigger = CommittedRecordsTrigger(topics=["orders", "audit", "orders"])
    assert trigger.serialize() == (
        "airflow_pyconnect.triggers.committed.CommittedRecordsTrigger",
        {
            "topics": ["audit", "orders"],
            "pyconnect_conn_id": "pyconnect_default",
            "watcher_group": "airflow-watch-audit+orders",
            "start_from": "end",
            "poll_interval": 5.0,
            "max_retry_delay": 60.0,
        },
    )
    assert default_watcher_group(["b", "a"]) == "airflow-watch-a+b"
    assert CommittedRecordsTrigger(topics="orders").topics == ["orders"]


def test_serialize_round_trips_and_the_hash_is_stable() -> None:
    from airflow.triggers.base import BaseEventTrigger

    trigger = CommittedRecordsTrigger(topics=["orders"], pyconnect_conn_id="pc", watcher_group="mine",
                                      start_from="beginning", poll_interval=2, max_retry_delay=30)
    path, kwargs = trigger.serialize()
    again = CommittedRecordsTrigger(**json.loads(json.dumps(kwargs)))
    assert again.serialize() == (path, kwargs)
    assert isinstance(again, BaseEventTrigger)
    assert BaseEventTrigger.hash(path, kwargs) == BaseEventTrigger.hash(*again.serialize())
    assert again.shared_stream_key() == ("airflow_pyconnect.committed", "pc", "mine", ("orders",))
    producer = CommittedRecordsTrigger.create_shared_stream_producer(kwargs)
    assert isinstance(producer, CommittedRecordsProducer) and producer.group == "mine"


def test_an_asset_watcher_takes_it() -> None:
    from airflow.sdk import Asset, AssetWatcher

    asset = Asset("watched", watchers=[AssetWatcher(name="w", trigger=CommittedRecordsTrigger(topics=["t"]))])
    assert isinstance(asset.watchers[0].trigger, CommittedRecordsTrigger)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"topics": []}, "topics must be a non-empty list"),
    ({"topics": ["a", ""]}, "topics must be a non-empty list"),
    ({"topics": ["a"], "start_from": "latest"}, "start_from must be one of end, beginning"),
    ({"topics": ["a"], "poll_interval": 0}, "must be positive"),
])
def test_bad_arguments_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CommittedRecordsTrigger(**kwargs)


# -- polls of a real store ---------------------------------------------------------------------------------
def test_start_from_end_fires_only_for_records_committed_afterwards(store: str) -> None:
    from airflow_pyconnect._offsets import topic_targets

    _generate(store, 5)

    async def scenario() -> tuple[dict[str, Any], int | None, int | None, int | None]:
        gen = _trigger().run()
        first = asyncio.ensure_future(_next(gen))
        for _ in range(100):  # the watcher committed its starting position: the end, 5
            await asyncio.sleep(0.05)
            if await asyncio.to_thread(_group_offset, store) is not None:
                break
        await asyncio.sleep(0.3)
        assert not first.done(), "records committed before the watcher started must not fire"
        baseline = await asyncio.to_thread(_group_offset, store)
        await asyncio.to_thread(_generate, store, 12)
        payload = await first
        before_next = await asyncio.to_thread(_group_offset, store)
        second = asyncio.ensure_future(_next(gen))  # asking for the next event commits the last one
        await asyncio.sleep(0.3)
        after = await asyncio.to_thread(_group_offset, store)
        await _cancel(second)
        await gen.aclose()
        return payload, baseline, before_next, after

    payload, baseline, before_next, after = asyncio.run(scenario())
    assert payload == {"topics": [TOPIC], "ranges": {TOPIC: {"0": [5, 12]}}, "records_upper_bound": 7,
                       "watcher_group": "airflow-watch-events", "pyconnect_conn_id": "pc_watch"}
    assert (baseline, before_next, after) == (5, 5, 12)
    # the ranges are a sink operator's until_offsets as they are
    assert topic_targets(payload["ranges"], "until_offsets") == {TOPIC: {"0": 12}}


def test_start_from_beginning_fires_for_what_is_already_there(store: str) -> None:
    _generate(store, 5)

    async def scenario() -> dict[str, Any]:
        gen = _trigger(start_from="beginning").run()
        try:
            return await _next(gen)
        finally:
            await gen.aclose()

    assert asyncio.run(scenario())["ranges"] == {TOPIC: {"0": [0, 5]}}


def test_a_restart_goes_on_from_the_last_commit_and_repeats_only_an_uncommitted_event(store: str) -> None:
    _generate(store, 5)

    async def two_events(start_from: str, then: int) -> list[dict[str, Any]]:
        """First event, ask for the next (commits the first), commit more, second event, then stop
        without asking for a third (the second's ends stay uncommitted: a crash after the event)."""
        gen = _trigger(start_from=start_from).run()
        try:
            got = [await _next(gen)]
            second = asyncio.ensure_future(_next(gen))
            await asyncio.sleep(0.3)
            await asyncio.to_thread(_generate, store, then)
            got.append(await second)
            return got
        finally:
            await gen.aclose()

    first = asyncio.run(two_events("beginning", 9))
    assert [e["ranges"][TOPIC]["0"] for e in first] == [[0, 5], [5, 9]]
    assert _group_offset(store) == 5  # the second event's ends were never committed

    # a new instance with the same kwargs (a restarted triggerer): start_from no longer applies, the
    # uncommitted range fires again (at least once), joined with what came since
    again = asyncio.run(two_events("end", 14))
    assert [e["ranges"][TOPIC]["0"] for e in again] == [[5, 9], [9, 14]]
    assert _group_offset(store) == 9


def test_partitions_that_appear_later_are_watched_from_their_beginning(store: str) -> None:
    from connect_runtime import run_source

    async def scenario() -> dict[str, Any]:
        gen = CommittedRecordsTrigger(topics=[TOPIC, "late"], pyconnect_conn_id="pc_watch",
                                      poll_interval=0.1).run()
        try:
            task = asyncio.ensure_future(_next(gen))
            await asyncio.sleep(0.5)
            await asyncio.to_thread(run_source, {
                "name": "gen-late", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                "topic": "late", "max.records": "3"}, store)
            return await task
        finally:
            await gen.aclose()

    payload = asyncio.run(scenario())
    assert payload["ranges"] == {"late": {"0": [0, 3]}}
    assert payload["watcher_group"] == "airflow-watch-events+late"


# -- the triggerer's ack channel ------------------------------------------------------------------------------
def test_in_ack_mode_the_group_moves_only_once_airflow_stored_the_event(store: str) -> None:
    """Driven by Airflow's own SharedStreamManager, as the triggerer drives it."""
    from airflow.triggers.shared_stream import SharedStreamManager

    _generate(store, 6)

    async def scenario() -> tuple[dict[str, Any], int | None, int | None]:
        manager = SharedStreamManager(ack_timeout=60)
        trigger = _trigger(start_from="beginning")
        key = trigger.shared_stream_key()
        events = trigger.filter_shared_stream(manager.subscribe(trigger_id=1, trigger=trigger, key=key))
        try:
            payload = (await asyncio.wait_for(anext(events), 20)).payload
            seq = manager.bind_pending_event(trigger_id=1, key=key)
            assert seq is not None, "the event must be bound to the ack channel"
            waiting = asyncio.ensure_future(anext(events))  # the trigger moved past the event
            await asyncio.sleep(0.5)
            unstored = await asyncio.to_thread(_group_offset, store)
            manager.confirm_persisted([seq])  # the supervisor stored the event
            stored = None
            for _ in range(100):
                await asyncio.sleep(0.05)
                stored = await asyncio.to_thread(_group_offset, store)
                if stored == 6:
                    break
            await _cancel(waiting)
            return payload, unstored, stored
        finally:
            await manager.unsubscribe(1, key)

    payload, unstored, stored = asyncio.run(scenario())
    assert payload["ranges"] == {TOPIC: {"0": [0, 6]}}
    assert unstored == 0 and stored == 6


def test_an_event_airflow_did_not_store_is_fired_again_and_never_committed_past(store: str) -> None:
    from airflow.triggers.shared_stream import AdvanceItem, AdvanceOutcome

    _generate(store, 4)

    async def scenario() -> tuple[list[list[int]], list[int | None]]:
        producer = CommittedRecordsProducer(topics=[TOPIC], pyconnect_conn_id="pc_watch", start_from="beginning",
                                            poll_interval=0.1)
        stream = producer.open_stream()
        seen, committed = [], []
        try:
            _, e1 = await asyncio.wait_for(anext(stream), 20)             # [0, 4)
            await asyncio.to_thread(_generate, store, 7)
            _, e2 = await asyncio.wait_for(anext(stream), 20)             # [4, 7), fired before e1 resolved
            await producer.advance([AdvanceItem(e1, AdvanceOutcome(acked=0, failed=1))])  # e1 timed out
            await producer.advance([AdvanceItem(e2, AdvanceOutcome(acked=1, failed=0))])
            committed.append(await asyncio.to_thread(_group_offset, store))  # held at e1's start
            _, e3 = await asyncio.wait_for(anext(stream), 20)             # e1's range again, with e2's
            await producer.advance([AdvanceItem(e3, AdvanceOutcome(acked=1, failed=0))])
            committed.append(await asyncio.to_thread(_group_offset, store))
            seen = [e.payload["ranges"][TOPIC]["0"] for e in (e1, e2, e3)]
        finally:
            await stream.aclose()
            await producer.aclose()
        return seen, committed

    seen, committed = asyncio.run(scenario())
    assert seen == [[0, 4], [4, 7], [0, 7]]
    assert committed == [0, 7]


# -- failures -------------------------------------------------------------------------------------------------
async def _no_event_for(trigger: CommittedRecordsTrigger, seconds: float) -> None:
    gen = trigger.run()
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(gen), seconds)
    finally:
        await gen.aclose()


def _failure_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_an_unreachable_store_fires_nothing_and_logs_one_line_per_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("AIRFLOW_CONN_PC_GONE", json.dumps(
        {"conn_type": "pyconnect", "host": f"sqlite:///{tmp_path / 'a-file' / 'store.db'}"}))
    caplog.set_level(logging.INFO, logger=LOGGER)
    asyncio.run(_no_event_for(CommittedRecordsTrigger(topics=[TOPIC], pyconnect_conn_id="pc_gone",
                                                      poll_interval=0.05, max_retry_delay=0.2), 1.5))
    lines = _failure_lines(caplog)
    numbers = [int(m.group(1)) for line in lines if (m := re.search(r"\(failure (\d+), next try in", line))]
    assert len(numbers) >= 4 and numbers == list(range(1, len(numbers) + 1)), lines
    assert len(lines) == len(numbers), "one log line per failure, nothing else"
    assert "the store cannot be reached" in lines[0] and "BackendUnavailableError" in lines[0]
    # the backoff doubles from poll_interval and stops at max_retry_delay
    delays = [float(re.search(r"next try in ([\d.]+) s", line).group(1)) for line in lines]  # type: ignore[union-attr]
    assert delays[:3] == [0.05, 0.1, 0.2], delays
    assert max(delays) == 0.2


@pytest.mark.parametrize("conn", [
    {"conn_type": "pyconnect", "host": "kafka://watcher:s3cret-in-url@127.0.0.1:1"},
    {"conn_type": "pyconnect", "host": "kafka://127.0.0.1:1", "login": "watcher", "password": "s3cret-sasl",
     "extra": json.dumps({"security.protocol": "SASL_PLAINTEXT", "connect.timeout.ms": "200"})},
])
def test_secrets_never_reach_a_log_line(conn: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                                        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_PC_SECRET", json.dumps(conn))
    caplog.set_level(logging.DEBUG)
    asyncio.run(_no_event_for(CommittedRecordsTrigger(topics=[TOPIC], pyconnect_conn_id="pc_secret",
                                                      poll_interval=0.1, max_retry_delay=0.2), 1.5))
    lines = _failure_lines(caplog)
    assert lines and all("reading the store failed" in line for line in lines), lines
    assert "s3cret" not in caplog.text


# -- the triggered DAG's side --------------------------------------------------------------------------------
def test_committed_ranges_merges_the_events_of_a_dag_run() -> None:
    def event(ranges: dict[str, Any]) -> SimpleNamespace:
        return SimpleNamespace(extra={"from_trigger": True, "payload": {"topics": ["a"], "ranges": ranges}})

    triggering = {
        "asset-1": [event({"a": {"0": [5, 9], "1": [0, 2]}}), event({"a": {"0": [9, 12]}})],
        "asset-2": [SimpleNamespace(extra={"connector": "x", "topic": "a", "ranges": {"0": [0, 1]}})],
    }
    assert committed_ranges(triggering) == {"a": {"0": [5, 12], "1": [0, 2]}}
    assert committed_ranges(triggering["asset-1"][1]) == {"a": {"0": [9, 12]}}
    assert committed_ranges({"ranges": {"a": {"0": [1, 2]}}}) == {"a": {"0": [1, 2]}}
    assert committed_ranges(None) == {} and committed_ranges({}) == {}
