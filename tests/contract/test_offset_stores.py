"""Contract 5: offset stores.

Promise (``connect_runtime.backends.base``, "Offset stores"): ``put`` is durable when it returns; a ``None`` value
deletes; ``get`` / ``read_all`` return the latest committed values; a producer created for store ``S`` commits its
offsets to ``S`` and to the global store (the mirror, KIP-618) in the same transaction, except the runtime's
internal stores (``INTERNAL_STORES``). ``update_entry`` is a read-modify-write that is atomic across processes when
``atomic_update_entry`` (SQLite and Kafka are): a registry change held between its read and its write never undoes
a newer generation.

Each test tries to break it at the backend API (many keys, overwrites and deletes read through another backend
object, a process SIGKILLed right after ``put`` returned, separate stores, the mirror and the internal stores,
``update_entry`` from several processes at once, a registry change held at a barrier between its read and its write
while another process begins a newer generation) and through the runtime (a connector's own store mirrored to the
global store, a switch to it that must not re-ingest, an at-least-once run, the registry naming the host and try
of every attempt and fanned-out task).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connect_runtime import admin, plan_source, run_source, run_source_task
from connect_runtime.backends import Backend, open_backend
from connect_runtime.backends.base import INTERNAL_STORES, RANGES_STORE, REGISTRY_STORE
from connect_runtime.runtime.registry import HOSTNAME_ENV, ConnectorRecord, Registry
from tests.support.contract import (
    HANGING_DEFENCE_ON_TANSU,
    Broken,
    in_thread,
    json_values,
    read_line,
    read_topic,
    settled,
    sigkill,
    start_worker,
    uid,
)
from tests.support.source_connectors import committed_offset


def _key(name: str, **partition: object) -> bytes:
    return json.dumps([name, partition], separators=(",", ":"), sort_keys=True).encode()


def _get(be: Backend, store: str | None, keys: list[bytes]) -> dict[bytes, bytes]:
    s = be.offset_store(store)
    try:
        return s.get(keys)
    finally:
        s.close()


def _read_all(be: Backend, store: str | None) -> dict[bytes, bytes]:
    s = be.offset_store(store)
    try:
        return s.read_all()
    finally:
        s.close()


ABORTED_SHOWN = ("Tansu shows records of aborted transactions to read_committed readers, so the value of an entry "
                 "writer fenced between its read and its write shows (Kafka's update_entry is a compare-and-set "
                 "through a transactional writer per entry)")


# -- at the backend API ---------------------------------------------------------------------------------------


def test_put_get_read_all_and_delete(backend_url: str, backend: Backend) -> None:
    """600 keys, overwrites and deletes (a None value), read back by ``get`` (absent keys left out) and
    ``read_all`` through this backend and through another backend object of the same store."""
    store, conn = uid("offsets"), uid("conn")
    keys = [_key(conn, p=i) for i in range(600)]
    s = backend.offset_store(store)
    try:
        assert s.read_all() == {}
        assert s.get(keys[:3]) == {}
        s.put([(k, b'{"n":%d}' % i) for i, k in enumerate(keys)], 30)
        s.put([(keys[0], b'{"n":"new"}'), (keys[1], None), (keys[2], None), (keys[2], b'{"n":"again"}')], 30)
        s.put([(keys[3], None), (_key(conn, p="never"), None)], 30)  # deleting a key that was never there too
    finally:
        s.close()
    want = {k: b'{"n":%d}' % i for i, k in enumerate(keys)}
    want[keys[0]] = b'{"n":"new"}'
    del want[keys[1]]
    want[keys[2]] = b'{"n":"again"}'
    del want[keys[3]]
    for be in (backend, open_backend(backend_url)):
        try:
            assert _read_all(be, store) == want
            assert _get(be, store, [*keys[:5], _key(conn, p="absent")]) == {k: want[k] for k in (keys[0], keys[2],
                                                                                                  keys[4])}
            assert _get(be, store, keys) == want
        finally:
            if be is not backend:
                be.close()


def test_stores_are_separate(backend: Backend) -> None:
    a, b = uid("store-a"), uid("store-b")
    key = _key(uid("conn"), p=0)
    for name, value in ((a, b"a"), (b, b"b")):
        s = backend.offset_store(name)
        try:
            s.put([(key, value)], 30)
        finally:
            s.close()
    assert _get(backend, a, [key]) == {key: b"a"}
    assert _get(backend, b, [key]) == {key: b"b"}
    s = backend.offset_store(a)
    try:
        s.put([(key, None)], 30)
    finally:
        s.close()
    assert _get(backend, a, [key]) == {}
    assert _get(backend, b, [key]) == {key: b"b"}


def test_a_put_is_durable_once_it_returned(backend_url: str, backend: Backend, tmp_path: Path) -> None:
    """A process puts entries (one of them deleting a key) and is SIGKILLed the moment ``put`` returned: another
    process reads every entry."""
    store, conn = uid("durable"), uid("conn")
    gone = _key(conn, p="gone")
    s = backend.offset_store(store)
    try:
        s.put([(gone, b"old")], 30)
    finally:
        s.close()
    entries = [[_key(conn, p=i).decode(), f'{{"n":{i}}}'] for i in range(50)] + [[gone.decode(), None]]
    log = tmp_path / "put.log"
    proc = start_worker("put", {"url": backend_url, "store": store, "entries": entries}, log)
    try:
        assert read_line(proc, 60, log) == {"put": True}
    finally:
        assert sigkill(proc), "the worker ended by itself"
    with open_backend(backend_url) as be:
        assert _read_all(be, store) == {_key(conn, p=i): b'{"n":%d}' % i for i in range(50)}


@pytest.mark.parametrize("store", ["own", None], ids=["own-store", "global-store"])
def test_a_producer_for_a_store_commits_its_offsets_there_and_to_the_global_store(
        backend: Backend, store: str | None) -> None:
    """Offsets (a value, an overwrite, a delete) committed by a producer for store S are in S and, in the same
    transaction, in the global store (for the global store itself: there, once)."""
    name = uid("own-offsets") if store == "own" else None
    conn = uid("mirror")
    k1, k2 = _key(conn, p=1), _key(conn, p=2)
    p = backend.transactional_producer(uid("tid"), name)
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.commit_transaction([(k1, b'{"n":1}'), (k2, b'{"n":2}')], 30)
        p.begin_transaction()
        p.commit_transaction([(k1, b'{"n":10}'), (k2, None)], 30)
    finally:
        p.close()
    for where in {name, None}:
        got = settled(lambda w=where: _get(backend, w, [k1, k2]), lambda g: g == {k1: b'{"n":10}'})
        assert got == {k1: b'{"n":10}'}, f"store {where or 'global'}"


def test_the_mirror_is_in_the_same_transaction_even_when_the_process_dies(
        backend_url: str, backend: Backend, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A process commits offsets of its own store and is SIGKILLed the moment they show in that store: the global
    store holds them too (the mirror is part of the transaction, not a write after it)."""
    store, tid = uid("own-offsets"), uid("tid")
    key = _key(uid("dies"), p=0)
    log = tmp_path / "worker.log"
    proc = start_worker("commit-and-die", {"url": backend_url, "store": store, "tid": tid, "key": key.decode(),
                                           "entries": 1000}, log)
    try:
        proc.wait(120)
    finally:
        sigkill(proc)
    assert proc.returncode == -9, f"the worker was not killed by its watcher: {log.read_text()[-2000:]}"
    backend.fence_transactional_ids([tid], 30)  # what a successor does first
    own = settled(lambda: _get(backend, store, [key]), lambda g: bool(g))
    assert own == {key: b'{"n":1}'}
    mirrored = settled(lambda: _get(backend, None, [key]), lambda g: bool(g), timeout=5)
    if mirrored != own:
        raise Broken(f"the commit shows in the connector's store ({own}) but not in the global store ({mirrored})")


@pytest.mark.parametrize("internal", sorted(INTERNAL_STORES))
def test_offsets_of_an_internal_store_are_not_mirrored(backend: Backend, internal: str) -> None:
    """A producer created for one of the runtime's internal stores commits its offsets there only."""
    key = _key(uid("internal"), p=0)
    p = backend.transactional_producer(uid("tid"), internal)
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.commit_transaction([(key, b'{"n":1}')], 30)
    finally:
        p.close()
    try:
        assert settled(lambda: _get(backend, internal, [key]), lambda g: g == {key: b'{"n":1}'}) == {key: b'{"n":1}'}
        assert internal in (REGISTRY_STORE, RANGES_STORE)
        leaked = _get(backend, None, [key])
    finally:  # the internal stores are the runtime's (and shared on the session's Kafka broker): leave no entry
        for name in (internal, None):
            s = backend.offset_store(name)
            try:
                s.put([(key, None)], 30)
            finally:
                s.close()
    if leaked:
        raise Broken(f"offsets a producer for the internal store {internal} committed reached the global store")


def test_update_entry_reads_modifies_and_writes_one_entry(backend: Backend) -> None:
    store, key = uid("entries"), _key(uid("conn"), p=0)
    seen: list[bytes | None] = []

    def add(old: bytes | None) -> bytes:
        seen.append(old)
        return str(int(old or b"0") + 5).encode()

    assert backend.update_entry(store, key, add) == b"5"
    assert backend.update_entry(store, key, add) == b"10"
    assert seen == [None, b"5"]
    assert _get(backend, store, [key]) == {key: b"10"}
    assert backend.update_entry(store, key, lambda old: None) is None
    assert _get(backend, store, [key]) == {}


@pytest.mark.not_on_tansu(ABORTED_SHOWN)
def test_update_entry_is_atomic_across_processes(backend_url: str, backend: Backend, tmp_path: Path) -> None:
    """Four processes increment one entry 25 times each, at once: the entry ends at 100 when the backend promises
    ``atomic_update_entry``."""
    if not backend.capabilities.atomic_update_entry:
        pytest.skip("the backend does not promise atomic_update_entry (capabilities): the runtime never relies on it "
                    "for fencing")
    store, key = uid("counter"), _key(uid("conn"), p=0)
    procs = [start_worker("update", {"url": backend_url, "store": store, "key": key.decode(), "times": 25},
                          tmp_path / f"update-{i}.log") for i in range(4)]
    try:
        for i, proc in enumerate(procs):
            assert read_line(proc, 120, tmp_path / f"update-{i}.log") == {"done": True}
    finally:
        for proc in procs:
            sigkill(proc)
    assert _get(backend, store, [key]) == {key: b"100"}


def _begin(url: str, name: str) -> tuple[ConnectorRecord, ConnectorRecord | None]:
    with open_backend(url) as be:
        return Registry(be).begin(name, kind="source", connector_class="x.Y")


@pytest.mark.not_on_tansu(ABORTED_SHOWN)
@pytest.mark.parametrize("op", ["heartbeat", "begin"])
def test_a_registry_change_held_between_its_read_and_its_write_never_undoes_a_newer_generation(
        backend_url: str, op: str, tmp_path: Path) -> None:
    """``update_entry`` is atomic across processes (every backend declares ``atomic_update_entry``), so the registry's
    generations only grow. Process A (which already wrote the entry once, so on Kafka it holds the entry's writer)
    makes a registry change of connector ``name``: it reads the entry (generation 1) and is held there (a barrier between its read and its write) while this process begins generation 2; then A goes on. A
    heartbeat of generation 1 must not write generation 1 back over generation 2 (the newer run would read itself
    fenced, and the next begin would hand out generation 2 twice); a ``begin`` must take a generation of its own."""
    name = uid("held")
    first, _ = _begin(backend_url, name)
    log = tmp_path / "held.log"
    proc = start_worker("held-update", {"url": backend_url, "name": name, "op": op}, log)
    try:
        assert read_line(proc, 60, log) == {"read": first.generation}
        newer, out = in_thread(_begin, backend_url, name)
        # where update_entry holds a write lock (SQLite) this begin waits for A: A goes on after this bound
        newer.join(3)
        newer_first = not newer.is_alive()
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        got = read_line(proc, 60, log)
        newer.join(60)
    finally:
        sigkill(proc)
    assert "result" in out, f"the newer begin: {out}"
    b_record = out["result"][0]
    with open_backend(backend_url) as be:
        now = Registry(be).get(name)
    assert now is not None
    if op == "heartbeat":
        assert now.generation == b_record.generation and now.owner == b_record.owner, (
            f"the held heartbeat of generation {first.generation} ({got}) wrote it back over generation "
            f"{b_record.generation}: the registry holds generation {now.generation}")
        if newer_first:  # the newer generation began while A was held: A's heartbeat must say it was refused
            assert got == {"applied": False}, got
    else:
        assert got["generation"] != b_record.generation, f"two begins both took generation {b_record.generation}"
        assert now.generation == max(got["generation"], b_record.generation)


# -- through the runtime -------------------------------------------------------------------------------------


def _scripted(name: str, topic: str, **extra: object) -> dict[str, object]:
    return {"name": name, "connector.class": "tests.support.source_connectors.ScriptedSource", "topic": topic,
            "poll.idle.timeout.ms": 300, "batch": 4, **extra}


@pytest.mark.not_on_tansu(HANGING_DEFENCE_ON_TANSU)
def test_a_connector_store_is_mirrored_and_switching_to_it_does_not_reingest(backend_url: str) -> None:
    """Runs on the global store, then on the connector's own store (``offsets.storage.topic``): the switch goes on
    from the global store's offsets (KIP-618 fallback), the own store's commits are mirrored to the global store,
    and the admin API reads them."""
    name, topic, own = uid("switch"), uid("switch"), uid("switch-offsets")
    partition = {"task": 0, "round": 1}
    assert run_source(_scripted(name, topic, count=20), backend_url).records == 20
    again = run_source(_scripted(name, topic, count=30, **{"offsets.storage.topic": own}), backend_url)
    assert again.records == 10
    third = run_source(_scripted(name, topic, count=36, **{"offsets.storage.topic": own}), backend_url)
    assert third.records == 6
    with open_backend(backend_url) as be:
        values = settled(lambda: [v["n"] for v in json_values(read_topic(be, topic))], lambda v: len(v) >= 36)
        assert values == list(range(36))
        assert admin.get_offsets(be, name)["offsets"] == [{"partition": partition, "offset": {"n": 36}}]
    assert committed_offset(backend_url, name, partition, own) == {"n": 36}
    assert committed_offset(backend_url, name, partition) == {"n": 36}  # the mirror


def test_the_registry_names_the_host_and_try_of_every_attempt_and_fanned_out_task(
        backend_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry is kept in the store, so what it says of each attempt (the Connectors view's Runs) is the same
    on every backend: a run names the worker it ran on (``PYCONNECT_HOSTNAME``, the name Airflow knows the worker
    by, set by the operators) with its Airflow try; each task of a fanned-out generation names where it started,
    also when its retry runs on another worker."""
    name, topic = uid("hosts"), uid("hosts")
    airflow = {"AIRFLOW_CTX_DAG_ID": "d", "AIRFLOW_CTX_TASK_ID": "t", "AIRFLOW_CTX_DAG_RUN_ID": "r"}
    for k, v in {**airflow, "AIRFLOW_CTX_TRY_NUMBER": "1", HOSTNAME_ENV: "worker-a"}.items():
        monkeypatch.setenv(k, v)
    config = {"name": name, "connector.class": "tests.support.source_connectors.PlanningSource", "topic": topic,
              "files": "a:4,b:3", "tasks.max": 2, "poll.idle.timeout.ms": 300}
    assert run_source({**config, "tasks.max": 1}, backend_url).records == 7
    config["files"] = "a:6,b:5"
    plan = plan_source(config, backend_url)
    run_source_task(config, backend_url, plan, 0)
    monkeypatch.setenv(HOSTNAME_ENV, "worker-b")
    monkeypatch.setenv("AIRFLOW_CTX_TRY_NUMBER", "2")  # task 1's retry, on the other worker
    run_source_task(config, backend_url, plan, 1)
    with open_backend(backend_url) as be:
        fanned, single = admin.run_attempts(be, name)
    assert (single["host"], single["context"]["try_number"], fanned["host"]) == ("worker-a", "1", "worker-a")
    assert [(w["task"], w["host"], w["try_number"]) for w in fanned["workers"]] == [(0, "worker-a", "1"),
                                                                                    (1, "worker-b", "2")]


def test_an_at_least_once_run_writes_its_offsets_after_its_records(backend_url: str) -> None:
    name, topic = uid("alo"), uid("alo")
    result = run_source(_scripted(name, topic, count=50, **{"tasks.max": 2, "offset.flush.interval.ms": 50}),
                        backend_url, exactly_once=False)
    assert result.records == 100
    with open_backend(backend_url) as be:
        values = json_values(read_topic(be, topic))
    for t in range(2):
        assert sorted(v["n"] for v in values if v["task"] == t) == list(range(50))
        assert committed_offset(backend_url, name, {"task": t, "round": 1}) == {"n": 50}


def test_what_a_commit_mirrors_is_the_latest_value_of_each_key_across_stores(backend: Backend) -> None:
    """Two producers for two stores commit offsets of one key in turn: each store holds its producer's latest
    value, the global store the latest of both."""
    key = _key(uid("two-stores"), p=0)
    a, b = uid("store-a"), uid("store-b")
    pa, pb = backend.transactional_producer(uid("tid"), a), backend.transactional_producer(uid("tid"), b)
    try:
        for p in (pa, pb):
            p.init_transactions(30)
        for i, p in enumerate((pa, pb, pa)):
            p.begin_transaction()
            p.commit_transaction([(key, b'{"n":%d}' % i)], 30)
    finally:
        pa.close()
        pb.close()
    assert settled(lambda: _get(backend, a, [key]), lambda g: g == {key: b'{"n":2}'}) == {key: b'{"n":2}'}
    assert _get(backend, b, [key]) == {key: b'{"n":1}'}
    assert settled(lambda: _get(backend, None, [key]), lambda g: g == {key: b'{"n":2}'}) == {key: b'{"n":2}'}
