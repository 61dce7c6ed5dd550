"""Contract 7: a lost store.

Promise (``connect_runtime.backends.base``, "A lost store"): every blocking call is bounded; a store that cannot be
reached raises :class:`BackendUnavailableError` naming it (never a password) within the bound, and a connection
lost mid-run fails the run with one clear error; nothing committed is lost, nothing uncommitted becomes visible.

The only backend-specific part of the suite is here: how a store is made unreachable (:data:`UNREACHABLE`) and
how one is lost mid-run (:func:`lost_store`). A backend added later adds its ways; the tests stay as they are.

- Unreachable from the start: Kafka at a closed port; SQLite at a path in a directory that cannot be created;
  SQLite with its write lock held by another process (reads are still served there: WAL readers never wait).
  Each backend call and each runtime entry point is tried, with a password in the settings.
- Lost mid-run: Kafka's broker stopped (and started again on its data) or frozen (SIGSTOP, no connection reset);
  SQLite's write lock taken by another process for longer than the busy timeout. A source run and a sink run fail
  with one bounded error; once the store is back, a rerun leaves every record exactly once (source) or delivered
  (sink), and nothing of the failed run's open transactions shows.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import run_sink, run_source
from connect_runtime.api.errors import BackendError, BackendUnavailableError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import Backend, ProducerRecord, open_backend
from connect_runtime.backends.kafka.group_offsets import SEND_GRACE_S
from connect_runtime.runtime.fencing import SINK_COMMITS_STORE
from tests.support import slow_iterations
from tests.support.contract import (
    Broken,
    in_thread,
    json_values,
    read_line,
    read_topic,
    settled,
    sigkill,
    stacks,
    start_worker,
    uid,
    wait_until,
)
from tests.support.sink_helpers import read_log
from tests.support.source_connectors import committed_offset

SECRET = "pw-" + uuid.uuid4().hex
TP = TopicPartition("t", 0)


@dataclass
class Unreachable:
    """A store that cannot be reached: its URL, settings holding a password, what an error must name, the bound
    (seconds) on any call with ``timeout=2``, and the calls it still serves (a locked SQLite file serves reads)."""

    url: str
    settings: dict[str, Any]
    name: str
    bound: float
    served: frozenset[str] = frozenset()
    cleanup: list[Callable[[], None]] = field(default_factory=list)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kafka_closed_port(tmp_path: Path) -> Unreachable:
    port = _closed_port()
    return Unreachable(f"kafka://127.0.0.1:{port}", {
        "connect.timeout.ms": 2000, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "pyconnect", "sasl.password": SECRET}, f"127.0.0.1:{port}", bound=8.0)


def _sqlite_missing_directory(tmp_path: Path) -> Unreachable:
    (tmp_path / "not-a-directory").write_text("a file where the store's directory should be")
    path = tmp_path / "not-a-directory" / "store" / "pyconnect.db"
    return Unreachable(f"sqlite:///{path}", {"busy.timeout.ms": 300, "password": SECRET}, str(path), bound=3.0)


READS = frozenset({"list_topics", "offset_store.get", "consumer.partitions", "consumer.committed",
                   "consumer.end_offsets", "consumer.beginning_offsets", "read_range"})


def _sqlite_locked(tmp_path: Path) -> Unreachable:
    path = tmp_path / "locked.db"
    with open_backend(f"sqlite:///{path}") as be:
        be.create_topics({"t": 1})
    log = tmp_path / "hold.log"
    holder = start_worker("hold", {"path": str(path)}, log)
    assert read_line(holder, 30, log) == {"held": True}

    def release() -> None:
        assert holder.stdin is not None
        try:
            holder.stdin.write("\n")
            holder.stdin.flush()
            holder.wait(10)
        finally:
            sigkill(holder)

    return Unreachable(f"sqlite:///{path}", {"busy.timeout.ms": 300, "password": SECRET}, str(path), bound=3.0,
                       served=READS, cleanup=[release])


UNREACHABLE = {
    "sqlite-missing-directory": _sqlite_missing_directory,
    "sqlite-locked-file": _sqlite_locked,
    "kafka-closed-port": _kafka_closed_port,
}
"""How each backend is made unreachable (the backend-specific part of this module)."""

@pytest.fixture(params=[
    "sqlite-missing-directory", "sqlite-locked-file", pytest.param("kafka-closed-port", marks=pytest.mark.kafka)])
def unreachable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Unreachable]:
    case = UNREACHABLE[request.param](tmp_path)
    try:
        yield case
    finally:
        for undo in case.cleanup:
            undo()


def _op_consumer(call: Callable[[Any], Any], group: str | None = "connect-lost") -> Callable[[Backend], Any]:
    def run(be: Backend) -> Any:
        c = be.consumer(group)
        try:
            return call(c)
        finally:
            # closed aside: how long a close blocks is its own test (test_closing_..._is_bounded)
            threading.Thread(target=c.close, daemon=True).start()
    return run


def _flush(be: Backend) -> Any:
    p = be.producer()
    try:
        p.send([ProducerRecord("t", 0, None, b"x")])
        return p.flush(2)
    finally:
        p.close()


def _init(be: Backend) -> Any:
    p = be.transactional_producer("lost-0")
    try:
        p.init_transactions(2)
        p.begin_transaction()
        p.send([ProducerRecord("t", 0, None, b"x")])
        return p.commit_transaction([(b'["lost",{"p":0}]', b'{"n":1}')], 2)
    finally:
        p.close()


def _store(call: Callable[[Any], Any]) -> Callable[[Backend], Any]:
    def run(be: Backend) -> Any:
        s = be.offset_store(None)
        try:
            return call(s)
        finally:
            s.close()
    return run


_SOURCE = {"name": "lost-source", "connector.class": "tests.support.source_connectors.ScriptedSource", "topic": "t",
           "count": 10, "poll.idle.timeout.ms": 200, "offset.flush.timeout.ms": 2000}
_SINK = {"name": "lost-sink", "connector.class": "tests.support.sink_helpers.RecordingSinkConnector", "topics": "t",
         "offset.flush.timeout.ms": 2000}

OPERATIONS: dict[str, Callable[[Backend], Any]] = {
    "list_topics": lambda be: be.list_topics(),
    "create_topics": lambda be: be.create_topics({"t2": 1}),
    "offset_store.get": _store(lambda s: s.get([b'["lost",{"p":0}]'])),
    "offset_store.put": _store(lambda s: s.put([(b'["lost",{"p":0}]', b'{"n":1}')], 2)),
    "update_entry": lambda be: be.update_entry("lost-store", b"k", lambda old: b"v", 2),
    "producer.flush": _flush,
    "transactional_producer": _init,
    "fence_transactional_ids": lambda be: be.fence_transactional_ids(["lost-1"], 2),
    "consumer.partitions": _op_consumer(lambda c: c.partitions(["t"])),
    "consumer.committed": _op_consumer(lambda c: c.committed([TP], 2)),
    "consumer.end_offsets": _op_consumer(lambda c: c.end_offsets([TP], 2)),
    "consumer.beginning_offsets": _op_consumer(lambda c: c.beginning_offsets([TP], 2)),
    "consumer.commit": _op_consumer(lambda c: c.commit({TP: 1}, 2)),
    "read_range": lambda be: list(be.read_range(TP, 0, 10, timeout=2)),
}

RUNS: dict[str, Callable[[Unreachable], Any]] = {
    "run_source": lambda u: run_source(_SOURCE, u.url, backend_settings=u.settings),
    "run_sink": lambda u: run_sink(_SINK, u.url, backend_settings=u.settings, max_seconds=5),
}

def _check(u: Unreachable, what: str, call: Callable[[], Any], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    try:
        call()
    except Exception as exc:
        elapsed = time.monotonic() - started
        assert what not in u.served, f"{what} raised though this store still serves it: {exc!r}"
        assert SECRET not in str(exc), f"{what}: the password is in the error"
        assert SECRET not in caplog.text, f"{what}: the password is in the log"
        assert elapsed < u.bound, f"{what} took {elapsed:.1f} s to fail (bound {u.bound:g} s)"
        if not isinstance(exc, BackendUnavailableError):
            raise Broken(f"{what} raised {type(exc).__name__}, not BackendUnavailableError: {exc}") from exc
        assert u.name in str(exc), f"{what}: the error does not name the store {u.name}: {exc}"
        return
    elapsed = time.monotonic() - started
    if what not in u.served:
        pytest.fail(f"{what} succeeded on a store that cannot be reached")
    assert elapsed < u.bound, f"{what} took {elapsed:.1f} s"


@pytest.mark.parametrize("what", sorted(OPERATIONS))
def test_a_call_on_an_unreachable_store_fails_in_time_naming_it(
        unreachable: Unreachable, what: str, request: pytest.FixtureRequest,
        caplog: pytest.LogCaptureFixture) -> None:
    opened: list[Backend] = []

    def call() -> Any:
        opened.append(open_backend(unreachable.url, unreachable.settings))  # may fail here already
        return OPERATIONS[what](opened[0])

    try:
        _check(unreachable, what, call, caplog)
    finally:
        for be in opened:
            be.close()


@pytest.mark.parametrize("what", sorted(RUNS))
def test_a_run_on_an_unreachable_store_fails_in_time_naming_it(
        unreachable: Unreachable, what: str, request: pytest.FixtureRequest,
        caplog: pytest.LogCaptureFixture) -> None:
    _check(unreachable, what, lambda: RUNS[what](unreachable), caplog)


@pytest.mark.kafka
def test_closing_a_consumer_whose_commit_could_not_reach_the_store_is_bounded() -> None:
    u = _kafka_closed_port(Path("."))
    with open_backend(u.url, u.settings) as be:
        c = be.consumer("connect-lost")
        with pytest.raises(Exception):  # noqa: B017 - which error is test_a_call_on_..._naming_it's business
            c.commit({TP: 1}, 2)
        t, _out = in_thread(c.close)
        t.join(6)
        if t.is_alive():
            raise Broken("KafkaConsumer.close() after a commit that could not reach the cluster blocked over 6 s")


# -- lost mid-run --------------------------------------------------------------------------------------------


@dataclass
class Lost:
    """A store in use by runs, and how to lose it and get it back."""

    url: str
    settings: dict[str, Any]
    name: str
    lose: Callable[[], None]
    restore: Callable[[], None]


def _restart(broker: Any) -> None:
    """Start a stopped fixture broker again on its data and ports (the fixture's own start() formats anew)."""
    config = broker.work_dir / "server.properties"
    with open(broker.log_path, "ab") as out:
        broker.proc = subprocess.Popen(broker._java("kafka.Kafka", str(config)), cwd=broker.work_dir, stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    problem = broker._wait_until_it_answers(time.monotonic() + 90)
    assert problem is None, f"the broker did not come back: {problem}"


@contextmanager
def lost_store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Lost]:
    """The backend-specific part of losing a store mid-run."""
    if kind.startswith("kafka"):
        broker = request.getfixturevalue("fresh_kafka_broker")
        # every wait on the cluster bounded by 3 s: connecting, and reading an offsets topic (the registry) to its end
        settings = {"connect.timeout.ms": 3000, "offset.storage.read.timeout.ms": 3000, "ssl.key.password": SECRET}
        if kind == "kafka-stopped":
            yield Lost(broker.url, settings, broker.bootstrap, broker.stop, lambda: _restart(broker))
            return
        state = {"stopped": False}

        def freeze() -> None:
            os.kill(broker.proc.pid, signal.SIGSTOP)
            state["stopped"] = True

        def thaw() -> None:
            if state["stopped"]:
                os.kill(broker.proc.pid, signal.SIGCONT)
                state["stopped"] = False

        try:
            yield Lost(broker.url, settings, broker.bootstrap, freeze, thaw)
        finally:
            thaw()
        return
    path = tmp_path / "lost.db"
    holder: dict[str, subprocess.Popen[str]] = {}
    log = tmp_path / "hold.log"

    def hold() -> None:
        holder["p"] = start_worker("hold", {"path": str(path)}, log)
        assert read_line(holder["p"], 30, log) == {"held": True}

    def release() -> None:
        p = holder.pop("p", None)
        if p is not None:
            assert p.stdin is not None
            p.stdin.write("\n")
            p.stdin.flush()
            p.wait(10)
            sigkill(p)

    try:
        yield Lost(f"sqlite:///{path}", {"busy.timeout.ms": 500, "password": SECRET}, str(path), hold, release)
    finally:
        release()


def _serves_again(store: Lost, timeout: float = 90.0) -> None:
    """Wait (bounded) until the store answers again after ``restore`` (a broker thawed or restarted needs a moment
    before its controller and coordinators answer)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open_backend(store.url, store.settings) as be:
                be.list_topics()
                s = be.offset_store(None)
                try:
                    s.get([b'["probe",{}]'])
                finally:
                    s.close()
                c = be.consumer("connect-probe")
                try:
                    c.committed([TopicPartition("probe", 0)], 5)
                finally:
                    c.close()
            return
        except BackendError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _produce_ints(store: Lost, topic: str, n: int) -> None:
    """A one-partition topic holding the JSON values 0..n-1."""
    with open_backend(store.url, store.settings) as be:
        be.create_topics({topic: 1})
        p = be.producer()
        try:
            p.send([ProducerRecord(topic, 0, None, json.dumps(i).encode()) for i in range(n)])
            p.flush(60)
        finally:
            p.close()


def _group_committed(store: Lost, name: str, tp: TopicPartition) -> int | None:
    """The sink connector ``name``'s group offset of ``tp``, read through a backend of its own."""
    with open_backend(store.url, store.settings) as be:
        c = be.consumer(f"connect-{name}")
        try:
            return c.committed([tp], 10)[tp]
        finally:
            c.close()


def _delivered(log: Path) -> set[Any]:
    """The values RecordingSinkConnector's put calls were given."""
    return {r[3] for e in read_log(log) if e["call"] == "put" for r in e["records"]}


FAIL_WITHIN_S = 30.0
"""Bound on a run's failure after its store was lost (settings: every wait on the store 3 s or 0.5 s, commits 3 s,
riding out an unreachable store 3 s (``errors.retry.timeout``), task shutdown 10 s; a run makes a few such waits
one after another: its commit, its producer's close, its registry bookkeeping)."""


KAFKA, KAFKA_SLOW = [pytest.mark.kafka], [pytest.mark.kafka, pytest.mark.slow]
SOURCE_LOST = ["sqlite-locked", pytest.param("kafka-stopped", marks=KAFKA),
               pytest.param("kafka-frozen", marks=KAFKA_SLOW)]
SINK_LOST = ["sqlite-locked", pytest.param("kafka-frozen", marks=KAFKA),
             pytest.param("kafka-stopped", marks=KAFKA_SLOW)]
"""Each run kind meets one Kafka loss by default, the other in the slow part (a fresh broker each)."""


def _lose_under(store: Lost, run: threading.Thread) -> float:
    """Lose the store under ``run``, wait (bounded) for the run to end, restore the store; when it was lost."""
    lost_at = time.monotonic()
    store.lose()
    try:
        run.join(FAIL_WITHIN_S + 30)
        assert not run.is_alive(), f"the run did not end after its store was lost:\n{stacks()}"
    finally:
        store.restore()
    return lost_at


def _one_clear_error(out: dict[str, Any], lost_at: float, name: str, caplog: pytest.LogCaptureFixture) -> None:
    exc = out.get("error")
    assert exc is not None, f"the run did not fail: {out}"
    assert out["ended"] - lost_at < FAIL_WITHIN_S, f"the run failed {out['ended'] - lost_at:.0f} s after the loss"
    assert isinstance(exc, BackendError), f"not a BackendError: {exc!r}"
    assert not isinstance(exc, BaseExceptionGroup)
    assert name in str(exc), f"the error does not name the store {name}: {exc}"
    assert SECRET not in str(exc) and SECRET not in caplog.text
    assert len(str(exc)) < 2000, "not one clear error"


@pytest.mark.parametrize("kind", SOURCE_LOST)
def test_a_source_run_that_loses_its_store_fails_once_and_a_rerun_writes_every_record_once(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    name, topic = uid("lost-src"), uid("lost-src")
    per_task = 400
    config = {"name": name, "connector.class": "tests.support.source_connectors.ScriptedSource", "topic": topic,
              "count": per_task, "batch": 4, "tasks.max": 2, "poll.sleep.ms": 30, "poll.idle.timeout.ms": 300,
              "offset.flush.timeout.ms": 3000, "errors.retry.timeout": 3000,
              "task.shutdown.graceful.timeout.ms": 10000}
    with lost_store(kind, request, tmp_path) as store:
        run, out = in_thread(run_source, config, store.url, backend_settings=store.settings, max_seconds=120)
        wait_until("the run to commit", lambda: all(
            committed_offset(store.url, name, {"task": t, "round": 1}) for t in range(2)), 60)
        lost_at = _lose_under(store, run)
        _one_clear_error(out, lost_at, store.name, caplog)
        _serves_again(store)
        again = run_source({**config, "poll.sleep.ms": 0}, store.url, backend_settings=store.settings)
        with open_backend(store.url, store.settings) as be:
            values = settled(lambda: json_values(read_topic(be, topic)), lambda v: len(v) >= 2 * per_task)
        for t in range(2):
            ns = [v["n"] for v in values if v["task"] == t]
            assert ns == list(range(per_task)), f"task {t}: twice {[n for n, c in Counter(ns).items() if c > 1][:5]}"
            assert committed_offset(store.url, name, {"task": t, "round": 1}) == {"n": per_task}
        assert again.records > 0


def _sink_run_loses_its_store(store: Lost, tmp_path: Path, caplog: pytest.LogCaptureFixture,
                              pause_s: float = 0.0) -> None:
    """A sink run loses its store ``pause_s`` after its first commit: it fails once within the bound, having committed
    nothing past what it delivered; once the store is back a rerun delivers the rest."""
    caplog.clear()
    topic, name = uid("lost-sink"), uid("lost-sink")
    log = tmp_path / f"calls-{name}.jsonl"
    config = {"name": name, "connector.class": "tests.support.sink_helpers.RecordingSinkConnector", "topics": topic,
              "tasks.max": "1", "log.path": str(log), "consumer.max.poll.records": "20", "put.sleep.ms": "50",
              "offset.flush.interval.ms": "0", "offset.flush.timeout.ms": "3000", "errors.retry.timeout": "3000",
              "task.shutdown.graceful.timeout.ms": "10000"}
    n = 1000
    _produce_ints(store, topic, n)

    def committed() -> int | None:
        return _group_committed(store, name, TopicPartition(topic, 0))

    run, out = in_thread(run_sink, config, store.url, backend_settings=store.settings, max_seconds=120)
    wait_until("the sink to commit", lambda: committed() is not None, 60)
    time.sleep(pause_s)
    lost_at = _lose_under(store, run)
    _serves_again(store)
    at_failure = committed()
    delivered = _delivered(log)
    assert at_failure is not None and set(range(at_failure)) <= delivered, "committed past what was delivered"
    run_sink(config, store.url, backend_settings=store.settings, max_seconds=120)
    delivered = _delivered(log)
    assert delivered == set(range(n))
    assert committed() == n
    _one_clear_error(out, lost_at, store.name, caplog)


@pytest.mark.parametrize("kind", SINK_LOST)
def test_a_sink_run_that_loses_its_store_fails_once_and_a_rerun_delivers_the_rest(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with lost_store(kind, request, tmp_path) as store:
        _sink_run_loses_its_store(store, tmp_path, caplog)


@pytest.mark.kafka
@pytest.mark.slow
def test_a_sink_run_whose_broker_freezes_at_a_random_instant_fails_once_within_its_bound(
        request: pytest.FixtureRequest, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The broker frozen (SIGSTOP) at a random instant of a sink's commit cycle (poll, put, the fence transaction, its
    group offsets, its commit): one in six such freezes hung the run for good before send_offsets_to_transaction was
    bounded."""
    caplog.set_level(logging.INFO)
    rnd = random.Random(int(os.environ.get("PYCONNECT_SEED", "416")))
    with lost_store("kafka-frozen", request, tmp_path) as store:
        for _ in range(slow_iterations(3, 20)):
            _sink_run_loses_its_store(store, tmp_path, caplog, pause_s=rnd.uniform(0.0, 1.5))


@pytest.mark.kafka
@pytest.mark.parametrize("warm", [False, True], ids=["first-transaction", "warm-coordinator"])
def test_a_transaction_whose_cluster_freezes_before_its_group_offsets_fails_within_its_bound(
        warm: bool, fresh_kafka_broker: Any) -> None:
    """A sink's commit fence sends its group offsets in its transaction (KIP-447). librdkafka does not bound that
    call on a coordinator that never answers (confluentinc/librdkafka#5456): frozen there, a sink run hung for good
    (CI, a broker frozen mid-run). The commit fails within its bound; the transaction is never committed; a new
    producer of the same id takes over once the broker answers again."""
    broker = fresh_kafka_broker
    topic, group, tid = uid("frozen-txn"), uid("frozen-txn"), uid("frozen-txn")
    tp = TopicPartition(topic, 0)
    with open_backend(broker.url, {"connect.timeout.ms": 3000, "offset.storage.read.timeout.ms": 3000}) as be:
        be.create_topics({topic: 1})
        consumer = be.consumer(group)
        producer = be.transactional_producer(tid, SINK_COMMITS_STORE)
        try:
            producer.init_transactions(30)
            if warm:  # the group's coordinator already known to the producer
                producer.begin_transaction()
                producer.send_group_offsets(consumer, {tp: 1})
                producer.commit_transaction([], 30)
            producer.begin_transaction()
            producer.send_group_offsets(consumer, {tp: 5})
            os.kill(broker.proc.pid, signal.SIGSTOP)
            t0 = time.monotonic()
            try:
                with pytest.raises(BackendUnavailableError, match="did not return within"):
                    producer.commit_transaction([], 3)
                took = time.monotonic() - t0
            finally:
                os.kill(broker.proc.pid, signal.SIGCONT)
            assert took < 3 + SEND_GRACE_S + 2, f"the commit failed {took:.1f} s after it began (bound 3 s)"
        finally:
            producer.close()
        successor = be.transactional_producer(tid, SINK_COMMITS_STORE)
        try:
            successor.init_transactions(60)  # aborts the frozen one's transaction, offsets included
            assert consumer.committed([tp], 30)[tp] == (1 if warm else None)
            successor.begin_transaction()
            successor.send_group_offsets(consumer, {tp: 7})
            successor.commit_transaction([], 30)
            assert consumer.committed([tp], 30)[tp] == 7
        finally:
            successor.close()
            consumer.close()


# -- a blink ---------------------------------------------------------------------------------------------

BLINK_S = 4.0
"""How long a store is gone in a blink: a broker restart, a write lock held for a moment."""


@contextmanager
def blinking_store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Lost]:
    """A store that goes away for :data:`BLINK_S` and comes back (``lose`` does both, in the background)."""
    with lost_store(kind, request, tmp_path) as store:
        if kind.startswith("sqlite"):  # a writer waits for the lock up to its busy timeout: longer than the blink
            store.settings["busy.timeout.ms"] = int((BLINK_S + 10) * 1000)
        else:  # defaults for everything that waits on the cluster: a blink is shorter than each of them
            store.settings = {"ssl.key.password": SECRET}
        lose, restore = store.lose, store.restore

        def blink() -> None:
            lose()
            time.sleep(BLINK_S)
            restore()

        store.lose = lambda: threading.Thread(target=blink, daemon=True).start()
        yield store


BLINKS = ["sqlite-locked", pytest.param("kafka-stopped", marks=KAFKA)]


@pytest.mark.parametrize("kind", BLINKS)
def test_a_source_run_rides_out_a_blink_of_its_store(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    name, topic = uid("blink-src"), uid("blink-src")
    per_task = 300
    config = {"name": name, "connector.class": "tests.support.source_connectors.ScriptedSource", "topic": topic,
              "count": per_task, "batch": 4, "tasks.max": 2, "poll.sleep.ms": 20, "poll.idle.timeout.ms": 300}
    with blinking_store(kind, request, tmp_path) as store:
        run, out = in_thread(run_source, config, store.url, backend_settings=store.settings, max_seconds=180)
        wait_until("the run to commit", lambda: all(
            committed_offset(store.url, name, {"task": t, "round": 1}) for t in range(2)), 60)
        store.lose()
        run.join(150)
        assert not run.is_alive(), "the run did not end"
        assert out.get("error") is None, f"the run did not ride out a {BLINK_S:g} s blink: {out.get('error')!r}"
        _serves_again(store)
        with open_backend(store.url, store.settings) as be:
            values = settled(lambda: json_values(read_topic(be, topic)), lambda v: len(v) >= 2 * per_task)
        for t in range(2):
            ns = [v["n"] for v in values if v["task"] == t]
            assert ns == list(range(per_task)), f"task {t}: {len(ns)} records, twice: " \
                f"{[n for n, c in Counter(ns).items() if c > 1][:5]}"
        assert SECRET not in caplog.text


@pytest.mark.parametrize("kind", BLINKS)
def test_a_sink_run_rides_out_a_blink_of_its_store(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    topic, name = uid("blink-sink"), uid("blink-sink")
    log = tmp_path / "calls.jsonl"
    config = {"name": name, "connector.class": "tests.support.sink_helpers.RecordingSinkConnector", "topics": topic,
              "tasks.max": "1", "log.path": str(log), "consumer.max.poll.records": "20", "put.sleep.ms": "30",
              "offset.flush.interval.ms": "0"}
    n = 600
    with blinking_store(kind, request, tmp_path) as store:
        _produce_ints(store, topic, n)

        def committed() -> int | None:
            return _group_committed(store, name, TopicPartition(topic, 0))

        run, out = in_thread(run_sink, config, store.url, backend_settings=store.settings, max_seconds=180)
        wait_until("the sink to commit", lambda: committed() is not None, 60)
        store.lose()
        run.join(150)
        assert not run.is_alive(), "the sink run did not end"
        assert out.get("error") is None, f"the sink run did not ride out a {BLINK_S:g} s blink: {out.get('error')!r}"
        _serves_again(store)
        delivered = _delivered(log)
        assert delivered == set(range(n))
        assert committed() == n
        assert SECRET not in caplog.text
