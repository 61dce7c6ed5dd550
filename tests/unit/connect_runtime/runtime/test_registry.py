"""The connector registry (``connect_runtime.runtime.registry``): generations, fencing of a run's bookkeeping,
attempts and the public shape, on an SQLite store in a temporary file."""

from __future__ import annotations

import dataclasses
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connect_runtime.api.errors import (
    BackendUnavailableError,
    ConnectError,
    ConnectorRunningError,
    WaitTimeoutError,
)
from connect_runtime.backends import open_backend
from connect_runtime.backends.base import REGISTRY_STORE, Backend
from connect_runtime.runtime.registry import (
    ATTEMPTS_KEPT,
    HOSTNAME_ENV,
    STALE_SECONDS,
    ConnectorRecord,
    Registry,
    owner,
    registry_key,
    task_worker,
)

SRC = "connect_runtime.connectors.datagen.DataGenSource"


@pytest.fixture(autouse=True)
def _outside_airflow(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AIRFLOW_CTX_DAG_ID", "AIRFLOW_CTX_TASK_ID", "AIRFLOW_CTX_DAG_RUN_ID", "AIRFLOW_CTX_TRY_NUMBER",
                HOSTNAME_ENV):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[Backend]:
    with open_backend(f"sqlite:///{tmp_path}/store.db") as b:
        yield b


@pytest.fixture
def registry(backend: Backend) -> Registry:
    return Registry(backend, timeout=5.0)


def now_ms() -> int:
    return int(time.time() * 1000)


def begin(registry: Registry, name: str = "gen", *, kind: str = "source", scope: str = "", floor: int = 0,
          offsets_store: str | None = None, owns_offsets: bool = False,
          ) -> tuple[ConnectorRecord, ConnectorRecord | None]:
    return registry.begin(name, scope=scope, kind=kind, connector_class=SRC, offsets_store=offsets_store,
                          owns_offsets=owns_offsets, floor=floor)


def make_stale(registry: Registry, rec: ConnectorRecord) -> int:
    """Set ``rec``'s heartbeat to older than STALE_SECONDS (its run died); returns the heartbeat set."""
    old = now_ms() - int(STALE_SECONDS * 1000) - 5_000
    assert registry.update(rec, heartbeat=old)
    return old


# -- generations -----------------------------------------------------------------------------------


def test_begin_numbers_generations_and_returns_the_previous_entry(registry: Registry) -> None:
    before = now_ms()
    first, previous = begin(registry, offsets_store="gen-offsets")
    assert previous is None
    assert (first.name, first.scope, first.kind, first.generation) == ("gen", "", "source", 0)
    assert (first.state, first.tasks, first.connector_class, first.offsets_store) == ("running", 0, SRC, "gen-offsets")
    assert first.owner == owner() and first.context is None and first.error is None and first.finished is None
    assert first.started is not None and first.heartbeat == first.started and before <= first.started <= now_ms()
    assert registry.finish(first)

    second, previous = begin(registry)
    assert second.generation == 1 and second.state == "running"
    assert previous is not None and previous.generation == 0 and previous.state == "stopped"
    assert registry.get("gen") == second


def test_begin_honours_floor_but_never_goes_back(registry: Registry) -> None:
    assert begin(registry, floor=5)[0].generation == 5
    assert begin(registry, floor=2)[0].generation == 6  # the previous one + 1 wins over a lower floor
    assert begin(registry, floor=10)[0].generation == 10


def test_scopes_are_separate_entries_that_do_not_fence_each_other(registry: Registry) -> None:
    a, _ = begin(registry, scope="2024-01-01")
    b, previous = begin(registry, scope="2024-01-02")
    assert (a.generation, b.generation, previous) == (0, 0, None)
    assert registry.get("gen", "2024-01-01") == a and registry.get("gen", "2024-01-02") == b
    assert registry.get("gen") is None
    assert [(r.name, r.scope) for r in registry.list()] == [("gen", "2024-01-01"), ("gen", "2024-01-02")]


def test_begin_keeps_topics_and_owns_offsets_of_the_previous_entry(registry: Registry) -> None:
    rec, _ = begin(registry, kind="sink", owns_offsets=True)
    assert registry.finish(rec, topics=["b", "a"])
    again, _ = begin(registry, kind="sink")
    assert again.topics == ["a", "b"] and again.owns_offsets


def test_begin_records_the_airflow_task_that_started_it(registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CTX_DAG_ID", "d")
    monkeypatch.setenv("AIRFLOW_CTX_TASK_ID", "t")
    monkeypatch.setenv("AIRFLOW_CTX_TRY_NUMBER", "2")
    rec, _ = begin(registry)
    assert rec.context == {"dag_id": "d", "task_id": "t", "try_number": "2"}
    assert registry.finish(rec)
    assert registry.attempts("gen")[0]["context"] == {"dag_id": "d", "task_id": "t", "try_number": "2"}


def test_every_attempt_names_the_host_that_ran_it_with_its_try(registry: Registry,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The host is the orchestrator's name for the worker (``PYCONNECT_HOSTNAME``, which the operators set from the
    task instance's ``hostname``), else ``socket.gethostname()``; a killed attempt keeps the host it ran on, the
    attempt that replaced it names its own; the owner says the same host."""
    rec, _ = begin(registry)
    assert rec.host == socket.gethostname() and rec.owner.startswith(socket.gethostname() + ":")
    assert registry.finish(rec)
    monkeypatch.setenv(HOSTNAME_ENV, "worker-a.example")
    monkeypatch.setenv("AIRFLOW_CTX_DAG_ID", "d")
    monkeypatch.setenv("AIRFLOW_CTX_TASK_ID", "t")
    monkeypatch.setenv("AIRFLOW_CTX_TRY_NUMBER", "1")
    on_a, _ = begin(registry)
    assert on_a.host == "worker-a.example" and on_a.owner.startswith("worker-a.example:")
    make_stale(registry, on_a)  # worker A lost: no heartbeat
    monkeypatch.setenv(HOSTNAME_ENV, "worker-b.example")
    monkeypatch.setenv("AIRFLOW_CTX_TRY_NUMBER", "2")
    on_b, _ = begin(registry)
    assert registry.finish(on_b)
    got = [(a["generation"], a["state"], a["host"], (a["context"] or {}).get("try_number"))
           for a in registry.attempts("gen")]
    assert sorted(got) == [(0, "stopped", socket.gethostname(), None), (1, "died", "worker-a.example", "1"),
                           (2, "stopped", "worker-b.example", "2")]


def test_runs_beginning_within_one_millisecond_keep_an_attempt_each(registry: Registry,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that ends and the next beginning in the same millisecond (a fast machine; this test's own clock is
    frozen): each run still starts after the previous one, so the killed run between them keeps its attempt (it was
    taken for the one already recorded when two starts were equal)."""
    import connect_runtime.runtime.registry as registry_module

    frozen = now_ms()
    monkeypatch.setattr(registry_module, "_now_ms", lambda: frozen)
    first, _ = begin(registry)
    assert registry.finish(first)
    second, _ = begin(registry)
    assert second.started is not None and first.started is not None and second.started > first.started
    assert registry.update(second, heartbeat=frozen - int(STALE_SECONDS * 1000) - 5_000)  # then it died
    third, _ = begin(registry)
    assert registry.finish(third)
    assert sorted((a["generation"], a["state"]) for a in registry.attempts("gen")) == [
        (0, "stopped"), (1, "died"), (2, "stopped")]


def test_an_entry_written_before_hosts_were_kept_still_reads(registry: Registry, backend: Backend) -> None:
    """Entries and attempts of an older version have no ``host`` / ``workers``: they read as ``""`` / ``[]`` and a
    new generation over them works; its attempts name their host, the old ones stay as they were."""
    old = {"name": "gen", "scope": "", "kind": "source", "generation": 4, "state": "stopped", "started": 1,
           "finished": 2, "heartbeat": 2, "owner": "old:1", "attempts": [
               {"generation": 4, "state": "stopped", "started": 1, "finished": 2, "error": None, "records": None,
                "context": None, "topics": []}]}
    store = backend.offset_store(REGISTRY_STORE)
    try:
        store.put([(registry_key("gen"), json.dumps(old).encode())], 5.0)
    finally:
        store.close()
    stored = registry.get("gen")
    assert stored is not None and (stored.host, stored.workers) == ("", [])
    rec, _ = begin(registry)
    assert registry.finish(rec)
    attempts = registry.attempts("gen")
    assert [(a["generation"], a.get("host")) for a in attempts] == [(5, socket.gethostname()), (4, None)]


def test_task_worker_records_each_start_of_a_task_capped(registry: Registry, monkeypatch: pytest.MonkeyPatch) -> None:
    rec, _ = begin(registry)
    monkeypatch.setenv(HOSTNAME_ENV, "w1")
    monkeypatch.setenv("AIRFLOW_CTX_DAG_ID", "d")
    monkeypatch.setenv("AIRFLOW_CTX_TASK_ID", "t")
    monkeypatch.setenv("AIRFLOW_CTX_TRY_NUMBER", "3")
    for i in range(ATTEMPTS_KEPT + 2):
        task_worker(rec, i)
    assert len(rec.workers) == ATTEMPTS_KEPT and rec.workers[0]["task"] == 2
    assert {(w["host"], w["try_number"]) for w in rec.workers} == {("w1", "3")}
    assert all(isinstance(w["started"], int) for w in rec.workers)


# -- update, heartbeat ------------------------------------------------------------------------------


def test_update_applies_only_for_the_current_generation(registry: Registry) -> None:
    old, _ = begin(registry)
    new, _ = begin(registry)  # fences ``old``
    assert not registry.update(old, tasks=3, state="failed")
    assert (old.tasks, old.state) == (0, "running")  # the caller's copy is left alone too
    stored = registry.get("gen")
    assert stored is not None and (stored.generation, stored.tasks, stored.state) == (1, 0, "running")

    assert registry.update(new, tasks=3)
    assert new.tasks == 3
    stored = registry.get("gen")
    assert stored is not None and (stored.generation, stored.tasks) == (1, 3)


def test_update_of_an_unknown_entry_writes_nothing(registry: Registry) -> None:
    ghost = ConnectorRecord(name="ghost")
    assert not registry.update(ghost, tasks=2)
    assert registry.get("ghost") is None and registry.list() == []


def test_heartbeat_refreshes_and_adds_topics(registry: Registry) -> None:
    rec, _ = begin(registry)
    old = make_stale(registry, rec)
    assert not rec.running
    before = now_ms()
    assert registry.heartbeat(rec, ["b", "a"])
    assert rec.heartbeat is not None and rec.heartbeat >= before > old and rec.running
    assert rec.topics == ["a", "b"]
    assert registry.heartbeat(rec, ["c", "a"])
    stored = registry.get("gen")
    assert stored is not None and stored.topics == ["a", "b", "c"] and stored.heartbeat == rec.heartbeat


def test_heartbeat_of_a_fenced_run_is_refused(registry: Registry) -> None:
    old, _ = begin(registry)
    begin(registry)
    assert not registry.heartbeat(old, ["x"])
    stored = registry.get("gen")
    assert stored is not None and stored.topics == []


# -- finish and attempts ---------------------------------------------------------------------------


def test_finish_records_a_stopped_attempt(registry: Registry) -> None:
    rec, _ = begin(registry)
    assert registry.finish(rec, topics=["events"])
    assert rec.state == "stopped" and rec.error is None and rec.topics == ["events"]
    assert rec.finished is not None and rec.heartbeat == rec.finished
    stored = registry.get("gen")
    assert stored is not None
    assert stored.attempts == [{"generation": 0, "state": "stopped", "started": rec.started,
                                "finished": rec.finished, "error": None, "records": None, "context": None,
                                "topics": ["events"], "host": socket.gethostname(), "workers": []}]


def test_finish_of_a_failed_run_masks_secrets_and_url_passwords(registry: Registry) -> None:
    rec, _ = begin(registry)
    boom = RuntimeError("cannot reach postgresql://app:pw0rd@db:5432/x with api key s3cr3t-value")
    assert registry.finish(rec, failed=boom, secrets=["s3cr3t-value"])
    error = "RuntimeError: cannot reach postgresql://app:[hidden]@db:5432/x with api key [hidden]"
    assert (rec.state, rec.error) == ("failed", error)
    stored = registry.get("gen")
    assert stored is not None and (stored.state, stored.error) == ("failed", error)
    assert [(a["state"], a["error"]) for a in stored.attempts] == [("failed", error)]
    assert "pw0rd" not in stored.to_json().decode() and "s3cr3t" not in stored.to_json().decode()


def test_finish_keeps_the_first_error_chars_only(registry: Registry) -> None:
    rec, _ = begin(registry)
    assert registry.finish(rec, failed=ValueError("x" * 2000))
    assert rec.error == "ValueError: " + "x" * (500 - len("ValueError: "))
    assert registry.attempts("gen")[0]["error"] == rec.error


def test_finish_of_an_older_generation_records_it_as_fenced_and_leaves_the_newer_entry(registry: Registry) -> None:
    old, _ = begin(registry)
    new, _ = begin(registry)
    assert registry.update(new, tasks=2)
    assert not registry.finish(old, failed=RuntimeError("boom"), topics=["late"])
    assert (old.state, old.error, old.finished) == ("running", None, None)  # not applied to the caller's copy
    stored = registry.get("gen")
    assert stored is not None
    assert (stored.generation, stored.state, stored.tasks, stored.error, stored.finished) == (1, "running", 2, None, None)
    assert stored.topics == []  # the fenced run's topics went to its attempt only
    [attempt] = stored.attempts
    assert attempt["generation"] == 0 and attempt["state"] == "fenced" and attempt["topics"] == ["late"]
    assert attempt["error"] == f"fenced by generation 1 (started by {owner()}); it ended with RuntimeError: boom"
    assert attempt["finished"] is not None and attempt["started"] == old.started


def test_begin_over_a_live_run_records_it_as_fenced(registry: Registry) -> None:
    old, _ = begin(registry)
    new, previous = begin(registry)
    assert previous is not None and previous.running
    [attempt] = new.attempts
    assert attempt == {"generation": 0, "state": "fenced", "started": old.started, "finished": None,
                       "error": f"fenced by generation 1, started by {owner()} while it ran", "records": None,
                       "context": None, "topics": [], "host": socket.gethostname(), "workers": []}


def test_begin_over_a_stale_run_records_it_as_died(registry: Registry) -> None:
    old, _ = begin(registry)
    heartbeat = make_stale(registry, old)
    new, previous = begin(registry)
    assert previous is not None and previous.state == "running" and not previous.running
    [attempt] = new.attempts
    assert attempt == {"generation": 0, "state": "died", "started": old.started, "finished": heartbeat,
                       "error": "the run died (killed or lost): no heartbeat for 30 s; generation 1 replaced it",
                       "records": None, "context": None, "topics": [], "host": socket.gethostname(), "workers": []}


def test_begin_over_a_finished_run_adds_no_second_attempt(registry: Registry) -> None:
    old, _ = begin(registry)
    assert registry.finish(old)
    new, _ = begin(registry)
    assert [(a["generation"], a["state"]) for a in new.attempts] == [(0, "stopped")]


def test_attempts_newest_first_capped_and_with_the_running_generation(registry: Registry) -> None:
    total = ATTEMPTS_KEPT + 3
    for _ in range(total):
        rec, _ = begin(registry)
        assert registry.finish(rec)
    begin(registry, "other")
    running, _ = begin(registry)  # generation ``total``, running now

    attempts = registry.attempts("gen")
    assert [a["generation"] for a in attempts] == [total, *range(total - 1, total - 1 - ATTEMPTS_KEPT, -1)]
    assert attempts[0]["state"] == "running" and attempts[0]["started"] == running.started
    assert {a["state"] for a in attempts[1:]} == {"stopped"}
    assert {(a["connector"], a["scope"], a["kind"]) for a in attempts} == {("gen", "", "source")}
    stored = registry.get("gen")
    assert stored is not None and len(stored.attempts) == ATTEMPTS_KEPT  # kept: ended ones only, oldest first
    assert [a["generation"] for a in stored.attempts] == list(range(total - ATTEMPTS_KEPT, total))

    everyone = registry.attempts()
    assert sorted({a["connector"] for a in everyone}) == ["gen", "other"] and len(everyone) == len(attempts) + 1


def test_attempts_show_a_stale_running_generation_as_died(registry: Registry) -> None:
    rec, _ = begin(registry)
    heartbeat = make_stale(registry, rec)
    [attempt] = registry.attempts("gen")
    assert (attempt["state"], attempt["finished"]) == ("died", heartbeat)
    assert attempt["error"] == "the run died (killed or lost): no heartbeat for 30 s"


# -- public shape, JSON ----------------------------------------------------------------------------


def test_public_shape(registry: Registry) -> None:
    rec, _ = begin(registry)
    assert registry.finish(rec)
    rec, _ = begin(registry)
    out = rec.public()
    fields = {f.name for f in dataclasses.fields(ConnectorRecord)}
    assert set(out) == fields - {"heartbeat", "attempts", "transactional"} | {"running"}
    assert (out["state"], out["running"], out["generation"]) == ("running", True, 1)
    json.dumps(out)  # plain JSON

    make_stale(registry, rec)
    out = rec.public()
    assert (out["state"], out["running"]) == ("stopped (no heartbeat: the run died)", False)
    assert registry.finish(rec)
    out = rec.public()
    assert (out["state"], out["running"]) == ("stopped", False)


def test_from_json_ignores_unknown_fields(registry: Registry) -> None:
    rec = ConnectorRecord.from_json(b'{"name": "x", "generation": 3, "from_the_future": {"a": 1}}')
    assert rec == ConnectorRecord(name="x", generation=3)
    full, _ = begin(registry)
    assert ConnectorRecord.from_json(full.to_json()) == full


def test_list_skips_entries_that_are_not_records(registry: Registry, backend: Backend) -> None:
    begin(registry, "b")
    begin(registry, "a")
    store = backend.offset_store(REGISTRY_STORE)
    try:
        store.put([(registry_key("zz"), b"not json"), (registry_key("yy"), b"[1, 2]")], 5.0)
    finally:
        store.close()
    assert [r.name for r in registry.list()] == ["a", "b"]


def test_registry_key_is_kafka_connect_json() -> None:
    assert registry_key("gen") == b'["gen",{"scope":""}]'
    assert registry_key("gen", "2024-01-01") == b'["gen",{"scope":"2024-01-01"}]'


# -- new_generation_if_idle (KIP-875 alterations) --------------------------------------------------


def test_new_generation_if_idle_refuses_while_running(registry: Registry) -> None:
    begin(registry)
    with pytest.raises(ConnectorRunningError, match=r"connector 'gen' is running \(generation 0, started by "):
        registry.new_generation_if_idle("gen")
    stored = registry.get("gen")
    assert stored is not None and stored.generation == 0


def test_new_generation_if_idle_bumps_an_idle_connector(registry: Registry) -> None:
    rec, _ = begin(registry)
    assert registry.finish(rec)
    bumped = registry.new_generation_if_idle("gen")
    assert (bumped.generation, bumped.state) == (1, "stopped")
    assert registry.get("gen") == bumped
    assert registry.new_generation_if_idle("gen", floor=7).generation == 7
    assert registry.new_generation_if_idle("gen", floor=3).generation == 8
    assert not registry.update(rec, tasks=4)  # the run that registered before is fenced


def test_new_generation_if_idle_after_a_run_died(registry: Registry) -> None:
    rec, _ = begin(registry)
    make_stale(registry, rec)
    assert registry.new_generation_if_idle("gen").generation == 1


def test_new_generation_if_idle_creates_or_refuses_an_unknown_connector(registry: Registry) -> None:
    with pytest.raises(ConnectError, match=r"connector 'new' is not known to this store") as info:
        registry.new_generation_if_idle("new")
    assert not isinstance(info.value, ConnectorRunningError)
    assert registry.get("new") is None

    create = ConnectorRecord(name="new", kind="sink", generation=4, connector_class="x.Sink", owns_offsets=True)
    made = registry.new_generation_if_idle("new", floor=5, create=create)
    assert (made.generation, made.kind, made.state, made.owns_offsets, made.connector_class) == (
        5, "sink", "stopped", True, "x.Sink")
    assert registry.get("new") == made
    # an existing entry wins over ``create``
    assert registry.new_generation_if_idle("new", create=ConnectorRecord(name="new", generation=40)).generation == 6


@pytest.mark.parametrize("failure", [BackendUnavailableError("the store is gone"), WaitTimeoutError("no end")])
def test_a_run_failed_by_its_store_does_not_wait_on_it_to_record_its_end(backend: Backend, registry: Registry,
                                                                         failure: ConnectError) -> None:
    """The registry lives in the store that failed the run: the end is not written (the generation stays running
    until the next run fences it); any other failure is recorded."""
    from connect_runtime.runtime.worker import Generation

    generation = Generation.begin(backend, "c", kind="source", connector_class=SRC)
    generation.finish(failure)
    got = registry.get("c")
    assert got is not None and got.state == "running"
    generation.finish(ValueError("boom"))
    got = registry.get("c")
    assert got is not None and got.state.startswith("failed")


class _SecondAttempt:
    """A backend whose ``update_entry`` runs ``update`` twice, as Kafka's compare-and-set does when another writer
    claimed the entry between its read and its write: first on the entry as read, then on ``then`` (what the other
    writer left), writing only the second answer."""

    def __init__(self, backend: Backend, then: ConnectorRecord) -> None:
        self.backend = backend
        self.then = then

    def offset_store(self, name: str | None = None) -> object:
        return self.backend.offset_store(name)

    def update_entry(self, store: str, key: bytes, update: object, timeout: float = 30.0) -> bytes | None:
        assert callable(update)
        update(self.backend.offset_store(store).get([key]).get(key))
        return self.backend.update_entry(store, key, lambda _current: update(self.then.to_json()), timeout)


def test_only_the_last_attempt_of_an_update_counts(registry: Registry, backend: Backend) -> None:
    """``update_entry`` may call ``update`` once per attempt: a change whose first attempt saw its own generation
    and whose last saw a newer one applied nothing, and says so (heartbeat, finish, ``new_generation_if_idle``)."""
    mine, _ = registry.begin("c", kind="source", connector_class=SRC)
    newer = dataclasses.replace(mine, generation=mine.generation + 1, state="stopped", owner="other:1")
    racing = Registry(_SecondAttempt(backend, newer))  # type: ignore[arg-type]
    assert racing.heartbeat(mine) is False
    assert racing.finish(mine) is False
    assert mine.state == "running"
    again = racing.new_generation_if_idle("c")
    assert again.generation == newer.generation + 1
