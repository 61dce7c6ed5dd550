"""run_source on real SQLite files: planning, bounds, transaction boundaries, KIP-131/416/618."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import run_source
from connect_runtime.api import ConfigError, ConnectError, DataError, RecordMetadata
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import open_backend
from connect_runtime.connectors.datagen import DataGenSource, generate_value
from connect_runtime.runtime.source import SourceRunResult
from tests.support.source_connectors import committed_offset, probe, read_topic

SCRIPTED = "tests.support.source_connectors.ScriptedSource"


def scripted(name: str = "scripted", **extra: Any) -> tuple[dict[str, Any], str]:
    """A ScriptedSource config with a fresh probe key."""
    key = uuid.uuid4().hex
    config = {"name": name, "connector.class": SCRIPTED, "topic": "t", "probe": key,
              "poll.idle.timeout.ms": 100, **extra}
    return config, key


def ns(values: list[Any], **match: Any) -> list[int]:
    return [v["n"] for v in values if all(v.get(k) == m for k, m in match.items())]


# -- planning and config ---------------------------------------------------------------------------


def test_no_task_configs_is_an_empty_successful_run(sqlite_url: str) -> None:
    config = {"name": "plan", "connector.class": "tests.support.source_connectors.PlanningSource", "topic": "t",
              "files": "a:0,b:0"}
    result = run_source(config, sqlite_url)
    assert result.to_dict() | {"seconds": 0} == {
        "connector": "plan", "records": 0, "ranges": {}, "source_offsets": [], "transactions": 0,
        "filtered": 0, "skipped": 0, "seconds": 0, "interval_ranges": {}, "generation": 0,
        "empty": {"reason": "unknown", "looked_at": [],
                  "message": "the source returned no records (the connector does not say where it looked)"},
        "bytes": 0}


def test_one_config_error_names_every_bad_field(sqlite_url: str) -> None:
    with pytest.raises(ConfigError) as err:
        run_source({"connector.class": SCRIPTED, "tasks.max": "zero", "batch": 0}, sqlite_url)
    assert set(err.value.errors) == {"name", "tasks.max", "topic", "batch"}
    assert "integer" in err.value.errors["tasks.max"] and "topic" in str(err.value)


def test_unknown_connector_class_is_named_with_the_other_errors(sqlite_url: str) -> None:
    with pytest.raises(ConfigError) as err:
        run_source({"name": "x", "connector.class": "no_such_pkg.Connector", "tasks.max": 0}, sqlite_url)
    assert set(err.value.errors) == {"connector.class", "tasks.max"}
    assert "no_such_pkg" in err.value.errors["connector.class"]
    with pytest.raises(ConfigError) as err:
        run_source({"name": "x", "connector.class": "tests.support.source_connectors.PlanningTask"}, sqlite_url)
    assert "not a SourceConnector" in err.value.errors["connector.class"]


def test_transform_config_errors_join_the_same_error(sqlite_url: str) -> None:
    config, _ = scripted(transforms="drop", **{"tasks.max": -1})
    with pytest.raises(ConfigError) as err:
        run_source(config, sqlite_url)
    assert "tasks.max" in err.value.errors
    assert any("drop" in name for name in err.value.errors), err.value.errors


def test_exactly_once_required_fails_fast(sqlite_url: str) -> None:
    config, _ = scripted(**{"exactly.once.support": "required"})
    with pytest.raises(ConfigError) as err:
        run_source(config, sqlite_url, exactly_once=False)
    assert set(err.value.errors) == {"exactly.once.support"} and "at-least-once" in str(err.value)
    for support in ("unsupported", "none"):
        config, key = scripted(**{"exactly.once.support": "required", "eos.support": support})
        with pytest.raises(ConfigError, match=r"exactly\.once\.support"):
            run_source(config, sqlite_url)
        assert "connector.start" not in probe(key)  # failed before starting anything
    config, _ = scripted(count=3, **{"exactly.once.support": "required"})
    assert run_source(config, sqlite_url).records == 3


def test_connector_boundaries_need_a_connector_that_supports_them(sqlite_url: str) -> None:
    config, _ = scripted(boundaries="unsupported", **{"transaction.boundary": "connector"})
    with pytest.raises(ConfigError) as err:
        run_source(config, sqlite_url)
    assert set(err.value.errors) == {"transaction.boundary"}
    config, _ = scripted(boundaries="unsupported", count=5, **{"transaction.boundary": "connector"})
    assert run_source(config, sqlite_url, exactly_once=False).records == 5  # boundaries are an EOS matter


# -- exactly-once ----------------------------------------------------------------------------------


def test_each_poll_commits_records_and_offsets_together(sqlite_url: str) -> None:
    config, key = scripted(count=25, batch=10, **{"check.url": sqlite_url})
    result = run_source(config, sqlite_url)
    assert result.records == 25 and result.transactions == 3
    assert result.ranges == {"t": {"0": [0, 25]}}
    assert result.source_offsets == [{"partition": {"round": 1, "task": 0}, "offset": {"n": 25}}]
    assert ns(read_topic(sqlite_url, "t")) == list(range(25))
    # at every task.commit() the records and the offset of that transaction were visible together
    assert probe(key)["visible.at.commit"] == [(10, {"n": 10}), (20, {"n": 20}), (25, {"n": 25})]
    assert probe(key)["task.stop"] == [0] and probe(key)["connector.stop"] == [True]


def test_a_failing_poll_keeps_what_was_committed_and_nothing_after(sqlite_url: str) -> None:
    config, key = scripted(count=100, batch=10, **{"fail.after": 30})
    with pytest.raises(ConnectError, match="failed on purpose after 30"):
        run_source(config, sqlite_url)
    assert ns(read_topic(sqlite_url, "t")) == list(range(30))
    assert committed_offset(sqlite_url, "scripted", {"task": 0, "round": 1}) == {"n": 30}
    assert probe(key)["task.stop"] == [0] and probe(key)["connector.stop"] == [True]
    # the next run resumes from the committed offset: every record exactly once
    config["fail.after"] = -1
    assert run_source(config, sqlite_url).ranges == {"t": {"0": [30, 100]}}
    assert ns(read_topic(sqlite_url, "t")) == list(range(100))


def test_a_failure_inside_an_open_transaction_commits_none_of_it(sqlite_url: str) -> None:
    config, _ = scripted(count=100, batch=10, **{"fail.after": 30, "transaction.boundary": "interval",
                                                 "transaction.boundary.interval.ms": 60000})
    with pytest.raises(ConnectError, match="on purpose"):
        run_source(config, sqlite_url)
    assert read_topic(sqlite_url, "t") == []
    assert committed_offset(sqlite_url, "scripted", {"task": 0, "round": 1}) is None


def test_commit_record_gets_the_written_offsets(sqlite_url: str) -> None:
    other, _ = scripted(name="other", count=5)
    run_source(other, sqlite_url)  # the topic already holds 5 records
    config, key = scripted(count=12, batch=5, **{"track.records": True})
    result = run_source(config, sqlite_url)
    assert result.ranges == {"t": {"0": [5, 17]}}
    calls = probe(key)["commit_record"]
    assert [n for n, _ in calls] == list(range(12))
    for n, md in calls:
        assert isinstance(md, RecordMetadata)
        assert (md.topic, md.partition, md.offset) == ("t", 0, 5 + n)


def test_filtered_records_reach_commit_record_with_none(sqlite_url: str) -> None:
    config, key = scripted(count=20, batch=6, **{
        "track.records": True, "header.every": 3,
        "transforms": "drop", "transforms.drop.type": "connect_runtime.transforms.Filter",
        "transforms.drop.predicate": "marked",
        "predicates": "marked", "predicates.marked.type": "connect_runtime.transforms.predicates.HasHeaderKey",
        "predicates.marked.name": "drop"})
    result = run_source(config, sqlite_url)
    dropped = [n for n in range(20) if n % 3 == 0]
    kept = [n for n in range(20) if n % 3]
    assert (result.records, result.filtered) == (len(kept), len(dropped))
    assert ns(read_topic(sqlite_url, "t")) == kept
    calls = dict(probe(key)["commit_record"])
    assert sorted(calls) == list(range(20))  # every polled record, written or filtered
    assert all(calls[n] is None for n in dropped)
    assert [calls[n].offset for n in kept] == list(range(len(kept)))  # type: ignore[union-attr]
    # a filtered record's offset is committed too: the last one (n=18) would otherwise be replayed
    assert result.source_offsets == [{"partition": {"round": 1, "task": 0}, "offset": {"n": 20}}]


def test_records_that_fail_conversion_are_skipped_under_tolerance_all(sqlite_url: str) -> None:
    config, key = scripted(count=20, batch=6, **{"bad.every": 5, "errors.tolerance": "all", "track.records": True})
    result = run_source(config, sqlite_url)
    bad = [4, 9, 14, 19]
    assert (result.records, result.skipped, result.filtered) == (16, 4, 0)
    assert ns(read_topic(sqlite_url, "t")) == [n for n in range(20) if n not in bad]
    calls = dict(probe(key)["commit_record"])
    assert sorted(calls) == list(range(20)) and all(calls[n] is None for n in bad)
    assert result.source_offsets[0]["offset"] == {"n": 20}


def test_a_record_that_fails_conversion_fails_the_run_naming_it(sqlite_url: str) -> None:
    config, _ = scripted(count=20, batch=6, **{"bad.every": 10})
    with pytest.raises(DataError, match="topic 't'") as err:
        run_source(config, sqlite_url)
    assert "source offset {'n': 10}" in str(err.value)  # record n=9, named by its source offset
    assert ns(read_topic(sqlite_url, "t")) == list(range(6))  # the failing batch 6..11 committed nothing
    assert committed_offset(sqlite_url, "scripted", {"task": 0, "round": 1}) == {"n": 6}


def test_transactional_ids_carry_the_cluster_id(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    config, _ = scripted(count=3, **{"tasks.max": 2})
    run_source(config, f"sqlite:///{db}", backend_settings={"cluster.id": "east"})
    with sqlite3.connect(db) as conn:
        ids = sorted(r[0] for r in conn.execute("SELECT transactional_id FROM producer_epochs"))
    assert ids == ["east-scripted-0", "east-scripted-1"]


def test_interval_boundary_groups_polls_into_fewer_transactions(sqlite_url: str) -> None:
    config, _ = scripted(count=60, batch=5, **{"poll.sleep.ms": 10, "transaction.boundary": "interval",
                                               "transaction.boundary.interval.ms": 100})
    result = run_source(config, sqlite_url)
    assert result.records == 60
    assert 1 < result.transactions < 12, result.transactions  # 12 polls
    assert ns(read_topic(sqlite_url, "t")) == list(range(60))


def test_connector_boundaries_commit_and_abort_where_the_task_says(sqlite_url: str) -> None:
    config, key = scripted(count=30, batch=10, **{
        "transaction.boundary": "connector", "commit.every": 7, "abort.ids": "15", "track.records": True})
    result = run_source(config, sqlite_url)
    # commits after n=6, 13, 20, 27; n=14..15 aborted, but their offsets committed (Kafka Connect:
    # "commit offsets so that the task doesn't see the same records all over again"); 28, 29 came after the
    # last commit request: never committed, offsets included, so the next run polls them again
    assert ns(read_topic(sqlite_url, "t")) == [n for n in range(28) if n not in (14, 15)]
    assert result.records == 26 and result.transactions == 5
    assert result.source_offsets[0]["offset"] == {"n": 28}
    assert committed_offset(sqlite_url, "scripted", {"task": 0, "round": 1}) == {"n": 28}
    reported = dict(probe(key)["commit_record"])
    assert reported[14] is None and reported[15] is None  # KIP-416: not written, reported with None
    assert 28 not in reported and 29 not in reported


def test_connector_abort_without_a_record_drops_the_whole_open_transaction(sqlite_url: str) -> None:
    config, _ = scripted(count=30, batch=10, **{"transaction.boundary": "connector", "abort.batch.ids": "12"})
    result = run_source(config, sqlite_url)
    # nothing committed 0..9, so the abort after the batch 10..19 drops 0..19 and commits their offsets;
    # 20..29 are never asked to commit: dropped at the end of the run, offsets not committed
    assert ns(read_topic(sqlite_url, "t")) == []
    assert result.records == 0 and result.transactions == 1
    assert committed_offset(sqlite_url, "scripted", {"task": 0, "round": 1}) == {"n": 20}


def test_records_after_the_last_commit_request_are_polled_again_by_the_next_run(sqlite_url: str) -> None:
    config, _ = scripted(count=30, batch=10, **{"transaction.boundary": "connector", "commit.every": 7})
    first = run_source(config, sqlite_url)
    assert first.records == 28 and first.source_offsets[0]["offset"] == {"n": 28}
    config["count"] = 40
    config["commit.every"] = 1
    second = run_source(config, sqlite_url)
    assert ns(read_topic(sqlite_url, "t")) == list(range(40))  # 28, 29 again, nothing twice
    assert second.records == 12


@pytest.mark.parametrize("exactly_once", [True, False])
def test_offsets_of_records_the_backend_refused_are_never_committed(sqlite_url: str, exactly_once: bool) -> None:
    config, _ = scripted(count=40, batch=10, **{"bad.partition.at": 15, "offset.flush.interval.ms": 0})
    with pytest.raises(DataError, match="partition"):
        run_source(config, sqlite_url, exactly_once=exactly_once)
    assert ns(read_topic(sqlite_url, "t")) == list(range(10))
    assert committed_offset(sqlite_url, "scripted", {"task": 0, "round": 1}) == {"n": 10}


def test_offsets_storage_topic_keeps_offsets_apart(sqlite_url: str) -> None:
    config, _ = scripted(count=4, **{"offsets.storage.topic": "my-offsets"})
    run_source(config, sqlite_url)
    assert committed_offset(sqlite_url, "scripted", {"task": 0, "round": 1}, "my-offsets") == {"n": 4}
    # KIP-618: mirrored to the global store in the same transaction, so a switch back to it resumes
    assert committed_offset(sqlite_url, "scripted", {"task": 0, "round": 1}) == {"n": 4}


def test_topics_are_created_with_the_default_partitions(sqlite_url: str) -> None:
    from connect_runtime.backends import open_backend

    config, _ = scripted(count=4, **{"topic.creation.default.partitions": 3})
    run_source(config, sqlite_url)
    with open_backend(sqlite_url) as be:
        assert be.list_topics()["t"] == 3


# -- result ----------------------------------------------------------------------------------------


def test_result_to_dict_is_plain_json_and_round_trips(sqlite_url: str) -> None:
    config, _ = scripted(count=12, batch=5, **{"tasks.max": 2})
    result = run_source(config, sqlite_url)
    data = result.to_dict()
    assert list(data) == ["connector", "records", "ranges", "source_offsets", "transactions", "filtered",
                          "skipped", "seconds", "interval_ranges", "generation", "empty", "bytes"]
    assert json.loads(json.dumps(data)) == data
    assert data["ranges"] == {"t": {"0": [0, 24]}} and data["records"] == 24
    with open_backend(sqlite_url) as be:  # bytes: the keys and values the topic received, as converted
        stored = be.read_range(TopicPartition("t", 0), 0, 24)
        assert data["bytes"] == sum(len(r.key or b"") + len(r.value or b"") for r in stored) > 24
    assert data["source_offsets"] == [{"partition": {"round": 1, "task": 0}, "offset": {"n": 12}},
                                      {"partition": {"round": 1, "task": 1}, "offset": {"n": 12}}]
    assert data["transactions"] == 6 and isinstance(data["seconds"], float)
    assert SourceRunResult.from_dict(data) == result


# -- datagen ---------------------------------------------------------------------------------------


def test_datagen_values_are_deterministic_and_small() -> None:
    assert generate_value(7, 123) == generate_value(7, 123)
    assert generate_value(7, 123) != generate_value(8, 123)
    sizes = [len(json.dumps(generate_value(0, n), separators=(",", ":"))) for n in range(0, 1_000_000, 9973)]
    assert 45 <= sum(sizes) / len(sizes) <= 75
    plan = DataGenSource()
    plan.start({"topic": "x", "max.records": "10", "seed": "1"})
    configs = plan.task_configs(3)
    assert [(c["task.start"], c["task.end"]) for c in configs] == [("0", "3"), ("3", "6"), ("6", "10")]


def test_datagen_resumes_from_its_committed_offset(sqlite_url: str) -> None:
    config = {"name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
              "topic": "gen", "max.records": 250, "batch.size": 100, "seed": 5}
    assert run_source(config, sqlite_url, max_records=120).records == 120
    assert run_source(config, sqlite_url).records == 130
    assert read_topic(sqlite_url, "gen") == [generate_value(5, n) for n in range(250)]


def test_unbounded_datagen_interleaves_ids_across_tasks(sqlite_url: str) -> None:
    config = {"name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
              "topic": "gen", "max.records": -1, "batch.size": 50, "poll.delay.ms": 5, "tasks.max": 2}
    result = run_source(config, sqlite_url, max_seconds=0.3)
    ids = [v["id"] for v in read_topic(sqlite_url, "gen")]
    assert result.records == len(ids) > 0
    for task in (0, 1):
        mine = [n for n in ids if n % 2 == task]
        assert mine == list(range(task, 2 * len(mine), 2))
    offsets = {o["partition"]["task"]: o["offset"]["position"] for o in result.source_offsets}
    assert all(offsets[t] == 2 * len([n for n in ids if n % 2 == t]) + t for t in offsets)
