"""A zombie sink's last group commit, on Apache Kafka (the gap issue 33 left in
:class:`~connect_runtime.runtime.fencing.SinkCommitFence`): an older sink run (or an older try of a fanned-out task)
reaches its group commit, the newer run (the task's next try) initialises its commit fence and runs to its target,
then the older one's commit goes on.

The interleaving is forced, not raced: the older one runs on a :class:`KafkaBackend` of this module whose clients
run the newer one at the older one's first group commit, at the last instant before it becomes durable (the
atomic form: after the offsets were sent to the transaction, before its EndTxn; the two-step form: after the fence
transaction, before the consumer's commit). Everything else is the real broker and the real runtime.

- the atomic form (``group_offsets_in_transactions``, the Kafka backend): the older one's offsets never land; it
  ends fenced; the group holds the newer one's offsets, and the newer one put each record once;
- the two-step form (``group.offsets.in.transactions=false``, as for Tansu; on Apache Kafka and on Tansu): the older
  one's one commit lands over the newer one's, which is what the form cannot guarantee (the docstring's
  limitation), and what shows that the interleaving is the one that matters.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import plan_sink, run_sink, run_sink_task
from connect_runtime.api.errors import ProducerFencedError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.backends.base import Consumer
from connect_runtime.backends.kafka import KafkaBackend
from connect_runtime.backends.kafka.consumer import KafkaConsumer
from connect_runtime.backends.kafka.transactions import KafkaTransactionalProducer
from tests.support.contract import in_thread
from tests.support.sink_helpers import read_log

RECORDS = 40
TWO_STEP = {"group.offsets.in.transactions": "false"}
SINK = "tests.support.sink_helpers.RecordingSinkConnector"


class _Interleaved(KafkaBackend):
    """A Kafka backend whose clients run ``newer`` once, at the first group commit made through them, just before
    it becomes durable; ``atomic=False``: the two-step form (``group_offsets_in_transactions`` off)."""

    def __init__(self, url: str, newer: Callable[[], Any], *, atomic: bool) -> None:
        super().__init__(url, url.split("://", 1)[1], {} if atomic else TWO_STEP)
        self.newer = newer
        self.fired = threading.Event()
        self.outcome: dict[str, Any] = {}
        self._once = threading.Lock()

    def interleave(self) -> None:
        with self._once:
            if self.fired.is_set():
                return
            self.fired.set()
        try:
            self.outcome["result"] = self.newer()
        except Exception as exc:  # the test asserts on it
            self.outcome["error"] = exc

    def transactional_producer(self, transactional_id: str, offset_store: str | None = None, *,
                               track_metadata: bool = False) -> KafkaTransactionalProducer:
        return _Producer(self, transactional_id, offset_store, track_metadata)

    def consumer(self, group_id: str | None = None) -> KafkaConsumer:
        return _Consumer(self, group_id)


class _Producer(KafkaTransactionalProducer):
    """The atomic form's last instant: the group offsets are in the transaction, its EndTxn not sent yet."""

    backend: _Interleaved
    _group_sent = False

    def send_group_offsets(self, consumer: Consumer, offsets: Mapping[TopicPartition, int]) -> None:
        super().send_group_offsets(consumer, offsets)
        self._group_sent = True

    def _commit(self, deadline: float, timeout: float) -> None:
        if self._group_sent:
            self._group_sent = False
            self.backend.interleave()
        super()._commit(deadline, timeout)


class _Consumer(KafkaConsumer):
    """The two-step form's last instant: the fence transaction committed, the group's offsets not yet."""

    backend: _Interleaved

    def commit(self, offsets: Mapping[TopicPartition, int], timeout: float) -> None:
        self.backend.interleave()
        super().commit(offsets, timeout)


@pytest.fixture(params=[pytest.param("kafka", marks=pytest.mark.kafka), "tansu"])
def url(request: pytest.FixtureRequest) -> str:
    """The session's Apache Kafka broker, or a Tansu broker of the test's own (the two-step form is Tansu's:
    ``group.offsets.in.transactions=false``)."""
    return str(request.getfixturevalue("kafka_url" if request.param == "kafka" else "tansu_url"))


def _topic(url: str, records: int = RECORDS) -> str:
    name = f"atomic-{uuid.uuid4().hex[:8]}"
    with open_backend(url) as be:
        be.create_topics({name: 1})
        producer = be.producer()
        try:
            producer.send([ProducerRecord(name, 0, None, json.dumps(i).encode()) for i in range(records)])
            producer.flush(60)
        finally:
            producer.close()
    return name


def _config(name: str, topic: str, log: Path) -> dict[str, str]:
    # a group commit after every batch of 5: the older one's first commit comes after its first batch
    return {"name": name, "connector.class": SINK, "topics": topic, "tasks.max": "1", "log.path": str(log),
            "consumer.max.poll.records": "5", "offset.flush.interval.ms": "0"}


def _group_offset(url: str, name: str, topic: str) -> int | None:
    """The group's committed offset, read by a consumer of its own (the last committed: a transaction's pending
    offsets are not)."""
    with open_backend(url) as be:
        consumer = be.consumer(f"connect-{name}")
        try:
            return consumer.committed([TopicPartition(topic, 0)], 30)[TopicPartition(topic, 0)]
        finally:
            consumer.close()


def _put_offsets(log: Path) -> list[int]:
    return [r[2] for e in read_log(log) if e["call"] == "put" for r in e["records"]]


@pytest.fixture(params=["run", "fan-out"])
def shape(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@contextmanager
def _older_and_newer(shape: str, url: str, name: str, topic: str, tmp_path: Path,
                     atomic: bool) -> Iterator[tuple[dict[str, Any], _Interleaved]]:
    """Run the older one on an interleaving backend to its end: (its outcome, the backend, holding the newer
    one's outcome)."""
    until = {topic: {"0": RECORDS}}
    older_cfg, newer_cfg = _config(name, topic, tmp_path / "older.jsonl"), _config(name, topic, tmp_path / "newer.jsonl")
    settings = None if atomic else TWO_STEP
    if shape == "run":
        def newer() -> Any:
            return run_sink(newer_cfg, url, until_offsets=until, max_seconds=120, backend_settings=settings)

        def older(be: _Interleaved) -> Any:
            return run_sink(older_cfg, be, until_offsets=until, max_seconds=120)
    else:
        plan = plan_sink(older_cfg, url, until_offsets=until, backend_settings=settings)
        again = json.loads(json.dumps(plan))  # the same plan, the task logging into the newer one's file
        again["tasks"][0]["config"]["log.path"] = newer_cfg["log.path"]

        def newer() -> Any:  # the task's next try (same plan, same index)
            return run_sink_task(newer_cfg, url, again, 0, max_seconds=120, backend_settings=settings)

        def older(be: _Interleaved) -> Any:
            return run_sink_task(older_cfg, be, plan, 0, max_seconds=120)
    backend = _Interleaved(url, newer, atomic=atomic)
    try:
        thread, out = in_thread(older, backend)
        thread.join(180)
        assert not thread.is_alive(), "the older one still runs 180 s after it started (bounded by max_seconds 120)"
        yield out, backend
    finally:
        backend.close()


@pytest.mark.kafka
def test_a_zombie_group_commit_never_lands_when_offsets_commit_in_the_fence_transaction(
        kafka_url: str, tmp_path: Path, shape: str) -> None:
    """Atomic form: the older one's offsets were in its transaction when the newer one initialised its fence; they
    never land, the older one ends fenced, the group holds the newer one's target, each record put once by it."""
    name, topic = f"atomic-{shape}-{uuid.uuid4().hex[:8]}", _topic(kafka_url)
    with _older_and_newer(shape, kafka_url, name, topic, tmp_path, atomic=True) as (out, backend):
        assert backend.fired.is_set(), f"the older one never reached a group commit: {out}"
        assert "error" not in backend.outcome, backend.outcome
        newer = backend.outcome["result"]
        assert newer.records == RECORDS and newer.committed == {topic: {"0": RECORDS}}, newer
        assert isinstance(out.get("error"), ProducerFencedError), out
        assert "fenced" in str(out["error"])
    assert _put_offsets(tmp_path / "newer.jsonl") == list(range(RECORDS)), "the newer one put each record once"
    assert _group_offset(kafka_url, name, topic) == RECORDS, "the zombie's offsets landed over the newer one's"


def test_the_two_step_form_lands_the_zombie_commit_it_cannot_fence(url: str, tmp_path: Path) -> None:
    """Two-step form (the capability off): the same interleaving lands the older one's group commit over the newer
    one's (the limitation :class:`SinkCommitFence` states); its next commit is fenced."""
    name, topic = f"two-step-{uuid.uuid4().hex[:8]}", _topic(url)
    with _older_and_newer("run", url, name, topic, tmp_path, atomic=False) as (out, backend):
        assert backend.fired.is_set(), f"the older one never reached a group commit: {out}"
        assert backend.outcome["result"].committed == {topic: {"0": RECORDS}}, backend.outcome
        assert isinstance(out.get("error"), ProducerFencedError), out
    landed = _group_offset(url, name, topic)
    assert landed is not None and landed < RECORDS, f"the group holds {landed}: the zombie's commit did not land"


@pytest.mark.kafka
def test_group_offsets_in_transactions_ride_out_a_broker_restart(fresh_kafka_broker: Any, tmp_path: Path) -> None:
    """The broker SIGKILLed and started again while a sink commits its group offsets in its fence's transactions
    (a commit after every batch): the run completes, or fails with one error naming the broker; the group's offsets
    never run ahead of what was put, and a rerun puts the rest: every record put, the group at the end."""
    broker, records = fresh_kafka_broker, 2000
    topic, name = _topic(broker.url, records), f"restart-{uuid.uuid4().hex[:8]}"
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    config = {**_config(name, topic, first), "consumer.max.poll.records": "50", "put.sleep.ms": "20",
              "errors.retry.timeout": "60000"}
    until = {topic: {"0": records}}
    thread, out = in_thread(run_sink, config, broker.url, until_offsets=until, max_seconds=150)
    deadline = time.monotonic() + 120
    while thread.is_alive() and len(_put_offsets(first) if first.exists() else []) < 500:
        assert time.monotonic() < deadline, "the sink put fewer than 500 records within 120 s"
        time.sleep(0.02)
    killed = thread.is_alive()
    if killed:
        broker.kill()
        broker.restart()
    thread.join(180)
    assert not thread.is_alive(), "the sink run did not end within 180 s of the restart (bounded by max_seconds 150)"
    if "error" in out:
        assert broker.bootstrap in str(out["error"]), f"the run failed without naming the broker: {out['error']!r}"
    put_first = _put_offsets(first)
    landed = _group_offset(broker.url, name, topic) or 0
    assert landed <= max(put_first, default=-1) + 1, f"the group holds {landed}, past what was put"
    rerun = run_sink({**config, "log.path": str(second)}, broker.url, until_offsets=until, max_seconds=150)
    assert rerun.records == records - landed, rerun
    put_second = _put_offsets(second)
    assert put_second == list(range(landed, records)), "the rerun did not start where the group's offsets stood"
    assert set(put_first) | set(put_second) == set(range(records)), "a record was never put"
    assert _group_offset(broker.url, name, topic) == records
    print(f"\n{'killed' if killed else 'ended first'}: first run {out.get('error') or out.get('result')}; "
          f"group at {landed} after it")


@pytest.mark.kafka
def test_committed_offsets_are_the_last_committed_while_a_crashed_run_holds_newer_ones_in_its_transaction(
        kafka_url: str) -> None:
    """A run killed between sending its group offsets to its fence's transaction and committing it leaves that
    transaction open until the next run's fence aborts it (or it times out, a minute later): meanwhile ``committed``
    (offsets get, a trigger) answers within its bound with the last committed offsets (after waiting half of it for
    the transaction to end), not the pending ones, and not an error."""
    topic, group = _topic(kafka_url, 0), f"connect-open-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(topic, 0)
    with open_backend(kafka_url) as be:
        c, reader = be.consumer(group), be.consumer(group)
        p = be.transactional_producer(f"open-{uuid.uuid4().hex[:8]}")
        try:
            p.init_transactions(30)
            p.begin_transaction()
            p.send_group_offsets(c, {tp: 3})
            p.commit_transaction([], 30)
            p.begin_transaction()
            p.send_group_offsets(c, {tp: 7})
            p._group_offsets.send(time.monotonic() + 30, 30)  # AddOffsetsToTxn + TxnOffsetCommit; no EndTxn: a crash
            assert reader.committed([tp], 5) == {tp: 3}
            p.abort_transaction(30)
            assert reader.committed([tp], 5) == {tp: 3}
        finally:
            p.close()
            c.close()
            reader.close()
