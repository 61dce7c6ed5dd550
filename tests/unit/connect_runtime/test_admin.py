"""The runtime's admin API (``connect_runtime.admin``): connectors, KIP-875 offsets of sources and sinks, lag
and run attempts, on an SQLite store in a temporary file (connectors are registered through the registry, as a
run registers them; one FileSink keeps its offsets in a directory of ``tmp_path``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import admin
from connect_runtime.api.errors import ConfigError, ConnectError, ConnectorRunningError, ProducerFencedError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.backends.base import RANGES_STORE, REGISTRY_STORE, Backend
from connect_runtime.runtime.offsets import offset_key, offset_value
from connect_runtime.runtime.registry import STALE_SECONDS, ConnectorRecord, Registry, registry_key

SOURCE = "connect_runtime.connectors.datagen.DataGenSource"
FILE_SINK = "connect_runtime.connectors.files.FileSink"
TOPIC = "events"
P0, P1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)


@pytest.fixture(autouse=True)
def _outside_airflow(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AIRFLOW_CTX_DAG_ID", "AIRFLOW_CTX_TASK_ID", "AIRFLOW_CTX_DAG_RUN_ID", "AIRFLOW_CTX_TRY_NUMBER"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[Backend]:
    with open_backend(f"sqlite:///{tmp_path}/store.db") as b:
        b.create_topics({TOPIC: 2})
        yield b


def registry(backend: Backend) -> Registry:
    return Registry(backend, timeout=5.0)


def register(backend: Backend, name: str, *, kind: str = "source", offsets_store: str | None = None,
             topics: tuple[str, ...] = (), finish: bool = True, scope: str = "") -> ConnectorRecord:
    """Register ``name`` as a run does (``begin``; ``finish`` unless ``finish=False``: still running)."""
    reg = registry(backend)
    rec, _ = reg.begin(name, scope=scope, kind=kind, connector_class=SOURCE if kind == "source" else FILE_SINK,
                       offsets_store=offsets_store)
    if finish:
        assert reg.finish(rec, topics=topics)
    elif topics:
        assert reg.heartbeat(rec, topics)
    return rec


def put_source_offsets(backend: Backend, store_name: str | None, name: str,
                       offsets: Mapping[str, int | None]) -> None:
    """Source offsets ``{"file": f} -> {"position": n}`` (``None`` deletes) of ``name`` in one store."""
    store = backend.offset_store(store_name)
    try:
        store.put([(offset_key(name, {"file": f}), offset_value(None if n is None else {"position": n}))
                   for f, n in offsets.items()], 5.0)
    finally:
        store.close()


def read_source_offsets(backend: Backend, store_name: str | None, name: str) -> dict[str, int]:
    store = backend.offset_store(store_name)
    try:
        keys = [offset_key(name, {"file": f}) for f in ("a", "b", "c")]
        got = store.get(keys)
    finally:
        store.close()
    return {f: int(json.loads(got[k])["position"]) for f, k in zip("abc", keys, strict=True) if k in got}


def commit_group(backend: Backend, name: str, offsets: Mapping[TopicPartition, int]) -> None:
    consumer = backend.consumer(admin.sink_group(name))
    try:
        consumer.commit(offsets, 5.0)
    finally:
        consumer.close()


def group_offsets(backend: Backend, name: str) -> dict[TopicPartition, int | None]:
    consumer = backend.consumer(admin.sink_group(name))
    try:
        return consumer.committed([P0, P1], 5.0)
    finally:
        consumer.close()


def produce(backend: Backend, counts: Mapping[int, int]) -> None:
    producer = backend.producer()
    try:
        producer.send([ProducerRecord(TOPIC, p, None, b"{}") for p, n in counts.items() for _ in range(n)])
        producer.flush(5.0)
    finally:
        producer.close()


def generation(backend: Backend, name: str, scope: str = "") -> int:
    rec = registry(backend).get(name, scope)
    assert rec is not None
    return rec.generation


def sink_entry(partition: int, offset: int) -> dict[str, Any]:
    return {"partition": {"kafka_topic": TOPIC, "kafka_partition": partition}, "offset": {"kafka_offset": offset}}


def source_entry(file: str, position: int | None) -> dict[str, Any]:
    return {"partition": {"file": file}, "offset": None if position is None else {"position": position}}


def file_sink_config(tmp_path: Path, name: str = "archive") -> dict[str, Any]:
    return {"name": name, "connector.class": FILE_SINK, "topics": TOPIC, "directory": str(tmp_path / "out")}


# -- connectors ------------------------------------------------------------------------------------


def test_list_connectors(backend: Backend) -> None:
    assert admin.list_connectors(backend) == []
    register(backend, "gen", topics=(TOPIC,))
    register(backend, "archive", kind="sink", finish=False)
    listed = admin.list_connectors(backend)
    assert [(c["name"], c["kind"], c["generation"], c["state"], c["running"], c["topics"]) for c in listed] == [
        ("archive", "sink", 0, "running", True, []), ("gen", "source", 0, "stopped", False, [TOPIC])]
    assert "heartbeat" not in listed[0] and "attempts" not in listed[0]
    assert admin.is_running(backend, "archive") and not admin.is_running(backend, "gen")
    assert admin.sink_group("archive") == "connect-archive"


# -- get_offsets -----------------------------------------------------------------------------------


def test_source_offsets_own_store_first_then_the_global_store(backend: Backend) -> None:
    register(backend, "gen", offsets_store="gen-offsets")
    put_source_offsets(backend, "gen-offsets", "gen", {"a": 5})
    put_source_offsets(backend, None, "gen", {"a": 1, "b": 2})  # ``a`` is stale in the global store
    put_source_offsets(backend, None, "other", {"c": 9})  # another connector's
    expected = [source_entry("a", 5), source_entry("b", 2)]
    assert admin.get_offsets(backend, "gen") == {"offsets": expected}
    assert admin.get_offsets(backend, "gen", kind="source") == {"offsets": expected}
    assert admin.source_offsets(backend, "gen") == expected
    # the store named by the caller wins over the registry's
    assert admin.get_offsets(backend, "gen", offsets_store="elsewhere") == {"offsets": [source_entry("a", 1),
                                                                                         source_entry("b", 2)]}


def test_sink_offsets_are_the_groups_committed_offsets(backend: Backend) -> None:
    register(backend, "archive", kind="sink", topics=(TOPIC,))
    assert admin.get_offsets(backend, "archive") == {"offsets": []}
    commit_group(backend, "archive", {P0: 7})
    commit_group(backend, "other", {P1: 3})  # another sink's group
    assert admin.get_offsets(backend, "archive") == {"offsets": [sink_entry(0, 7)]}
    assert admin.sink_offsets(backend, "archive") == {P0: 7}


def test_offsets_of_an_unknown_connector_are_not_found(backend: Backend) -> None:
    register(backend, "archive", kind="sink")
    with pytest.raises(admin.ConnectorNotFound) as info:
        admin.get_offsets(backend, "archiv")
    assert str(info.value) == ("connector 'archiv' not found: no run of it is registered in this store and no "
                               "offsets are stored under that name (did you mean 'archive'?)")
    assert isinstance(info.value, LookupError) and isinstance(info.value, ConnectError) and info.value.name == "archiv"
    with pytest.raises(admin.ConnectorNotFound, match=r"^connector 'zzz' not found: no run of it is registered in "
                                                      r"this store and no offsets are stored under that name$"):
        admin.get_offsets(backend, "zzz")
    with pytest.raises(admin.ConnectorNotFound, match="did you mean 'archive'"):
        admin.alter_offsets(backend, "archiv", [source_entry("a", 1)])
    with pytest.raises(admin.ConnectorNotFound):
        admin.reset_offsets(backend, "archiv")
    assert [c["name"] for c in admin.list_connectors(backend)] == ["archive"]  # nothing written
    assert read_source_offsets(backend, None, "archiv") == {}


# -- alter_offsets / reset_offsets ------------------------------------------------------------------


def test_alter_source_offsets_sets_and_deletes_in_both_stores(backend: Backend) -> None:
    register(backend, "gen", offsets_store="gen-offsets")
    put_source_offsets(backend, "gen-offsets", "gen", {"a": 5, "b": 6})
    put_source_offsets(backend, None, "gen", {"a": 5, "b": 6})
    done = admin.alter_offsets(backend, "gen", [source_entry("a", 50), source_entry("b", None), source_entry("c", 1)])
    assert done == {"connector": "gen", "altered": 3}
    assert read_source_offsets(backend, "gen-offsets", "gen") == {"a": 50, "c": 1}
    assert read_source_offsets(backend, None, "gen") == {"a": 50, "c": 1}  # no fallback resurrects ``b``
    assert admin.get_offsets(backend, "gen") == {"offsets": [source_entry("a", 50), source_entry("c", 1)]}
    assert generation(backend, "gen") == 1


def test_alter_fences_an_older_run(backend: Backend) -> None:
    """A run whose heartbeat stopped (a zombie) does not hold the connector: the change goes through and starts a
    new generation, so the zombie's bookkeeping and its transactional commits are refused."""
    reg = registry(backend)
    rec, _ = reg.begin("gen", kind="source", connector_class=SOURCE)
    producer = backend.transactional_producer("gen-0")
    producer.generation_guard = (REGISTRY_STORE, registry_key("gen"), rec.generation)
    producer.init_transactions(5.0)
    assert reg.update(rec, heartbeat=int(time.time() * 1000) - int(STALE_SECONDS * 1000) - 5_000)

    assert admin.alter_offsets(backend, "gen", [source_entry("a", 10)]) == {"connector": "gen", "altered": 1}
    assert generation(backend, "gen") == 1
    assert not reg.update(rec, tasks=1)
    producer.begin_transaction()
    producer.send([ProducerRecord(TOPIC, 0, None, b"{}")])
    with pytest.raises(ProducerFencedError):
        producer.commit_transaction([(offset_key("gen", {"file": "a"}), offset_value({"position": 99}))], 5.0)
    producer.close()
    assert read_source_offsets(backend, None, "gen") == {"a": 10}


def test_alter_every_identity_gets_a_new_generation(backend: Backend) -> None:
    register(backend, "gen", scope="2024-01-01")
    register(backend, "gen", scope="2024-01-02")
    admin.alter_offsets(backend, "gen", [source_entry("a", 1)])
    assert (generation(backend, "gen", "2024-01-01"), generation(backend, "gen", "2024-01-02")) == (1, 1)


def test_alter_is_refused_while_a_run_holds_the_connector(backend: Backend) -> None:
    register(backend, "gen")
    register(backend, "gen", scope="2024-01-02", finish=False)  # another identity of it is running
    put_source_offsets(backend, None, "gen", {"a": 5})
    with pytest.raises(ConnectorRunningError, match=r"connector 'gen' is running \(identity '2024-01-02'\), "
                                                    r"generation 0, started by .*before altering"):
        admin.alter_offsets(backend, "gen", [source_entry("a", 1)])
    with pytest.raises(ConnectorRunningError):
        admin.reset_offsets(backend, "gen")
    assert read_source_offsets(backend, None, "gen") == {"a": 5}
    assert (generation(backend, "gen"), generation(backend, "gen", "2024-01-02")) == (0, 0)


@pytest.mark.parametrize(("offsets", "field", "why"), [
    ([source_entry("a", 1), {"offset": {"position": 1}}], "offsets[1]", "expected {\"partition\""),
    ([{"partition": {"file": "a"}, "offset": 5}], "offsets[0]", "got {'partition'"),
    (["a"], "offsets[0]", "got 'a'"),
    ("a", "offsets", "expected a list"),
])
def test_alter_names_a_bad_entry_and_writes_nothing(backend: Backend, offsets: Any, field: str, why: str) -> None:
    register(backend, "gen")
    with pytest.raises(ConfigError) as info:
        admin.alter_offsets(backend, "gen", offsets)
    assert list(info.value.errors) == [field] and why in info.value.errors[field]
    assert generation(backend, "gen") == 0 and read_source_offsets(backend, None, "gen") == {}


def test_alter_refuses_partitions_of_the_other_kind(backend: Backend) -> None:
    register(backend, "gen")
    register(backend, "archive", kind="sink", topics=(TOPIC,))
    with pytest.raises(ConfigError) as info:
        admin.alter_offsets(backend, "gen", [sink_entry(0, 1)])
    assert list(info.value.errors) == ["offsets"] and "is a source" in info.value.errors["offsets"]
    with pytest.raises(ConfigError) as info:
        admin.alter_offsets(backend, "archive", [source_entry("a", 1)])
    assert list(info.value.errors) == ["offsets"] and "is a sink" in info.value.errors["offsets"]
    with pytest.raises(ConfigError) as info:
        admin.alter_offsets(backend, "archive", [{"partition": {"kafka_topic": TOPIC, "kafka_partition": 0},
                                                  "offset": {"kafka_offset": -1}}])
    assert list(info.value.errors) == ["offsets[0]"] and "N >= 0" in info.value.errors["offsets[0]"]
    with pytest.raises(ConfigError) as info:
        admin.get_offsets(backend, "gen", kind="both")
    assert list(info.value.errors) == ["kind"]
    assert (generation(backend, "gen"), generation(backend, "archive")) == (0, 0)


@pytest.mark.parametrize(("partition", "offset"), [("x", 1), (0.5, 1), (-1, 1), (0, True)])
def test_alter_names_a_bad_sink_entry_and_writes_nothing(backend: Backend, partition: Any, offset: Any) -> None:
    register(backend, "archive", kind="sink", topics=(TOPIC,))
    entry = {"partition": {"kafka_topic": TOPIC, "kafka_partition": partition}, "offset": {"kafka_offset": offset}}
    with pytest.raises(ConfigError) as info:
        admin.alter_offsets(backend, "archive", [sink_entry(1, 0), entry])
    assert list(info.value.errors) == ["offsets[1]"]
    assert generation(backend, "archive") == 0 and group_offsets(backend, "archive") == {P0: None, P1: None}


def test_alter_sink_offsets_commits_the_group(backend: Backend) -> None:
    register(backend, "archive", kind="sink", topics=(TOPIC,))
    produce(backend, {0: 4, 1: 4})
    commit_group(backend, "archive", {P0: 4, P1: 4})
    done = admin.alter_offsets(backend, "archive", [sink_entry(0, 2), {**sink_entry(1, 0), "offset": None}])
    assert done == {"connector": "archive", "altered": 2}
    assert group_offsets(backend, "archive") == {P0: 2, P1: 0}  # ``None``: back to the partition's beginning
    assert generation(backend, "archive") == 1


def test_reset_offsets_counts_what_it_reset(backend: Backend) -> None:
    register(backend, "gen", offsets_store="gen-offsets")
    put_source_offsets(backend, "gen-offsets", "gen", {"a": 5})
    put_source_offsets(backend, None, "gen", {"b": 6})
    assert admin.reset_offsets(backend, "gen") == {"connector": "gen", "source_partitions_reset": 2,
                                                   "sink_partitions_reset": 0}
    assert admin.get_offsets(backend, "gen") == {"offsets": []}
    assert generation(backend, "gen") == 1

    register(backend, "archive", kind="sink", topics=(TOPIC,))
    produce(backend, {0: 3, 1: 3})
    commit_group(backend, "archive", {P0: 3, P1: 1})
    assert admin.reset_offsets(backend, "archive") == {"connector": "archive", "source_partitions_reset": 0,
                                                       "sink_partitions_reset": 2}
    assert group_offsets(backend, "archive") == {P0: 0, P1: 0}

    # nothing to reset: still a new generation (an older run is fenced all the same)
    assert admin.reset_offsets(backend, "gen") == {"connector": "gen", "source_partitions_reset": 0,
                                                   "sink_partitions_reset": 0}
    assert generation(backend, "gen") == 2


def test_alter_with_a_config_registers_a_connector_no_run_registered(backend: Backend) -> None:
    config = {"name": "fresh", "connector.class": SOURCE, "topic": TOPIC, "offsets.storage.topic": "fresh-offsets"}
    assert admin.get_offsets(backend, "fresh", config=config) == {"offsets": []}
    assert admin.alter_offsets(backend, "fresh", [source_entry("a", 3)], config=config) == {"connector": "fresh",
                                                                                          "altered": 1}
    [listed] = admin.list_connectors(backend)
    assert (listed["name"], listed["kind"], listed["state"], listed["offsets_store"], listed["generation"]) == (
        "fresh", "source", "stopped", "fresh-offsets", 1)
    # it exists from now on; its first run reads the offset (own store first, then the global one)
    assert admin.get_offsets(backend, "fresh") == {"offsets": [source_entry("a", 3)]}


# -- sinks that keep their offsets in their destination ----------------------------------------------


def test_offsets_in_destination_are_refused_without_the_config(backend: Backend) -> None:
    reg = registry(backend)
    rec, _ = reg.begin("archive", kind="sink", connector_class=FILE_SINK, owns_offsets=True)
    assert reg.finish(rec, topics=[TOPIC])
    assert reg.update(rec, destination="files under /data", destination_offsets=[[TOPIC, 0, 8]],
                      destination_read=1234)
    commit_group(backend, "archive", {P0: 1})  # unused by such a sink: never what is shown or changed

    assert admin.get_offsets(backend, "archive") == {"offsets": [sink_entry(0, 8)], "managed_by": "destination",
                                                     "where": "files under /data", "as_of": 1234}
    with pytest.raises(admin.OffsetsInDestination) as info:
        admin.alter_offsets(backend, "archive", [sink_entry(0, 20)])
    assert str(info.value).startswith("sink connector 'archive' keeps its offsets in its destination "
                                      "(files under /data), not in its consumer group: pass the connector's config")
    assert str(info.value).endswith("nothing was changed") and isinstance(info.value, ConnectError)
    with pytest.raises(admin.OffsetsInDestination):
        admin.reset_offsets(backend, "archive")
    assert group_offsets(backend, "archive") == {P0: 1, P1: None}
    assert generation(backend, "archive") == 0


def test_offsets_in_destination_are_altered_there_with_the_config(backend: Backend, tmp_path: Path) -> None:
    config = file_sink_config(tmp_path)
    where = f"FileSink manifests and file names under {tmp_path / 'out'}"
    assert admin.get_offsets(backend, "archive", config=config) == {"offsets": [], "managed_by": "destination",
                                                                    "where": where}
    done = admin.alter_offsets(backend, "archive", [sink_entry(0, 3)], config=config)
    assert done == {"connector": "archive", "altered": 1, "in": "destination", "where": where}
    assert admin.get_offsets(backend, "archive", config=config) == {
        "offsets": [sink_entry(0, 3)], "managed_by": "destination", "where": where}
    rec = admin.connector(backend, "archive")
    assert rec is not None and rec.kind == "sink" and rec.owns_offsets and rec.destination == where
    assert rec.destination_offsets == [[TOPIC, 0, 3]]
    assert group_offsets(backend, "archive") == {P0: None, P1: None}  # the group is not used
    # without the config: the registry's mirror, and no change
    got = admin.get_offsets(backend, "archive")
    assert got["offsets"] == [sink_entry(0, 3)] and got["as_of"] == rec.destination_read
    with pytest.raises(admin.OffsetsInDestination, match=r"\(FileSink manifests"):
        admin.alter_offsets(backend, "archive", [sink_entry(0, 5)])

    produce(backend, {0: 5})
    assert admin.sink_lag(backend, "archive") == [
        {"topic": TOPIC, "partition": 0, "committed": 3, "end": 5, "lag": 2, "in": "destination"},
        {"topic": TOPIC, "partition": 1, "committed": None, "end": 0, "lag": 0, "in": "destination"}]

    assert admin.reset_offsets(backend, "archive", config=config) == {"connector": "archive",
                                                                      "source_partitions_reset": 0,
                                                                      "sink_partitions_reset": 1}
    assert admin.get_offsets(backend, "archive", config=config)["offsets"] == []


# -- lag and attempts ------------------------------------------------------------------------------


def test_sink_lag(backend: Backend) -> None:
    register(backend, "archive", kind="sink", topics=(TOPIC,))
    produce(backend, {0: 10, 1: 4})
    commit_group(backend, "archive", {P0: 7})
    assert admin.sink_lag(backend, "archive") == [
        {"topic": TOPIC, "partition": 0, "committed": 7, "end": 10, "lag": 3},
        {"topic": TOPIC, "partition": 1, "committed": None, "end": 4, "lag": 4}]
    assert admin.sink_lag(backend, "archive", topics=["missing"]) == []


def test_run_attempts(backend: Backend) -> None:
    reg = registry(backend)
    rec, _ = reg.begin("gen", kind="source", connector_class=SOURCE)
    assert reg.finish(rec, failed=RuntimeError("boom"))
    time.sleep(0.005)  # attempts are ordered by epoch ms
    register(backend, "archive", kind="sink")
    time.sleep(0.005)
    reg.begin("gen", kind="source", connector_class=SOURCE)

    attempts = admin.run_attempts(backend)
    assert [(a["connector"], a["kind"], a["generation"], a["state"], a["error"]) for a in attempts] == [
        ("gen", "source", 1, "running", None), ("archive", "sink", 0, "stopped", None),
        ("gen", "source", 0, "failed", "RuntimeError: boom")]
    assert set(attempts[0]) == {"connector", "scope", "kind", "generation", "state", "started", "finished", "error",
                                "records", "context", "topics", "host", "workers"}
    assert [a["generation"] for a in admin.run_attempts(backend, "gen")] == [1, 0]
    assert admin.run_attempts(backend, limit=1) == attempts[:1]


def test_run_ranges_merge_the_tasks_of_a_label(backend: Backend) -> None:
    day1, day2 = {"interval": "2024-01-01"}, {"interval": "2024-01-02"}
    entries = [
        (offset_key("gen", {**day1, "task": 0}), {"ranges": {TOPIC: {"0": [0, 5]}}, "records": 5, "generation": 0,
                                                   "updated": 1000}),
        (offset_key("gen", {**day1, "task": 1}), {"ranges": {TOPIC: {"0": [5, 8], "1": [0, 3]}}, "records": 6,
                                                   "generation": 1, "updated": 3000}),
        (offset_key("gen", {**day2, "task": 0}), {"ranges": {TOPIC: {"0": [8, 9]}}, "records": 1, "generation": 2,
                                                   "updated": 2000}),
        (offset_key("other", {**day1, "task": 0}), {"ranges": {}, "records": 0, "generation": 0, "updated": 500}),
        (b"not a key", {"records": 1}),
    ]
    store = backend.offset_store(RANGES_STORE)
    try:
        store.put([(k, json.dumps(v).encode()) for k, v in entries], 5.0)
    finally:
        store.close()
    assert admin.run_ranges(backend, "gen") == [
        {"connector": "gen", "key": day1, "ranges": {TOPIC: {"0": [0, 8], "1": [0, 3]}}, "records": 11,
         "generation": 1, "updated": 3000},
        {"connector": "gen", "key": day2, "ranges": {TOPIC: {"0": [8, 9]}}, "records": 1, "generation": 2,
         "updated": 2000}]
    assert [e["connector"] for e in admin.run_ranges(backend)] == ["gen", "gen", "other"]
    assert len(admin.run_ranges(backend, limit=1)) == 1
    assert admin.interval_ranges(backend, "gen", day2) == {"ranges": {TOPIC: {"0": [8, 9]}}, "records": 1}
    assert admin.interval_ranges(backend, "gen", {"interval": "2024-01-03"}) == {"ranges": {}, "records": 0}
