"""runtime.errors: the retry bounds and waits, the store ride-out, put redelivery, errors.tolerance and the dead
letters (produce, flush, the errant record reporter, context headers). Fast: no broker, a fake producer."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from connect_runtime.api.errors import ConnectError, RetriableError
from connect_runtime.api.records import SinkRecord
from connect_runtime.backends.base import ConsumedRecord, ProducerRecord
from connect_runtime.runtime.errors import (
    DEFAULT_RETRY_BOUND_S,
    STORE_RIDE_OUT_S,
    DeadLetters,
    ErrantReporter,
    RetryPolicy,
    Stopped,
    consumed_from,
    put_with_retries,
    store_ride_out_s,
)
from connect_runtime.runtime.pipeline import SinkPipeline

LABEL = "sink connector 'c' task 0"


def policy(retry_timeout_ms: int = 0, delay_max_ms: int = 60000, *, deadline: float | None = None,
           max_seconds: float | None = None) -> RetryPolicy:
    return RetryPolicy({"errors.retry.timeout": retry_timeout_ms, "errors.retry.delay.max.ms": delay_max_ms},
                       deadline, max_seconds)


# ---- bounds and waits ----------------------------------------------------------------------------


def test_store_ride_out_follows_errors_retry_timeout() -> None:
    assert store_ride_out_s({"errors.retry.timeout": 4000}) == 4.0
    assert store_ride_out_s({"errors.retry.timeout": 0}) == STORE_RIDE_OUT_S
    assert store_ride_out_s({}) == STORE_RIDE_OUT_S
    assert store_ride_out_s({"errors.retry.timeout": -1}, 12.0) == 12.0  # retry for ever: the run's bound
    assert store_ride_out_s({"errors.retry.timeout": -1}) == 3600.0


def test_retry_bound_by_errors_retry_timeout() -> None:
    p = policy(2000)
    assert p.retry_bound_reached(100.0, 101.9) is None
    assert p.retry_bound_reached(100.0, 102.0) == "errors.retry.timeout=2000 ms ran out"


def test_retry_bound_by_max_seconds_before_anything_else() -> None:
    p = policy(60000, deadline=105.0, max_seconds=5.0)
    assert p.retry_bound_reached(100.0, 104.0) is None
    assert p.retry_bound_reached(100.0, 105.0) == "the run's max_seconds (5 s) ran out"
    # without errors.retry.timeout the deadline is the only bound (no default bound then)
    q = policy(0, deadline=1000.0, max_seconds=900.0)
    assert q.retry_bound_reached(0.0, DEFAULT_RETRY_BOUND_S + 1) is None


def test_retry_bound_default_when_nothing_else_bounds_it() -> None:
    p = policy(0)
    assert p.retry_bound_reached(0.0, DEFAULT_RETRY_BOUND_S - 1) is None
    why = p.retry_bound_reached(0.0, DEFAULT_RETRY_BOUND_S)
    assert why is not None and "default bound of 300 s" in why and "errors.retry.timeout=0" in why


def test_retry_wait_is_cut_to_what_is_left_of_the_bound() -> None:
    assert policy(2000).retry_wait(100.0, 101.5, 5.0) == pytest.approx(0.5)
    assert policy(2000).retry_wait(100.0, 100.1, 0.3) == pytest.approx(0.3)
    assert policy(0).retry_wait(0.0, DEFAULT_RETRY_BOUND_S - 0.25, 1.0) == pytest.approx(0.25)
    assert policy(60000, deadline=10.0, max_seconds=10.0).retry_wait(0.0, 9.8, 1.0) == pytest.approx(0.2)
    assert policy(2000).retry_wait(100.0, 103.0, 1.0) == 0.0  # never negative


def test_store_bound_and_wait() -> None:
    p = policy(0)  # the default ride-out
    assert p.store_bound_reached(0.0, STORE_RIDE_OUT_S - 0.1) is None
    why = p.store_bound_reached(0.0, STORE_RIDE_OUT_S)
    assert why is not None and "the default ride-out" in why
    assert policy(1500).store_bound_reached(0.0, 1.5) == "errors.retry.timeout=1500 ms ran out"
    assert policy(0, deadline=5.0, max_seconds=5.0).store_bound_reached(0.0, 5.0) == \
        "the run's max_seconds (5 s) ran out"
    assert p.store_wait(0.0, STORE_RIDE_OUT_S - 0.1, 1.0) == pytest.approx(0.1)
    assert policy(0, deadline=2.0, max_seconds=2.0).store_wait(0.0, 1.9, 1.0) == pytest.approx(0.1)


def test_backoff_doubles_from_300_ms_up_to_the_cap() -> None:
    p = policy(0, delay_max_ms=1000)
    assert p.first_delay() == 0.3
    assert p.next_delay(0.3) == 0.6
    assert p.next_delay(0.6) == 1.0
    assert [p.failure_delay(n) for n in (1, 2, 3, 4)] == [0.3, 0.6, 1.0, 1.0]
    assert policy(0, delay_max_ms=100).first_delay() == 0.1
    assert policy(0, delay_max_ms=10 ** 9).failure_delay(50) == pytest.approx(0.3 * 2 ** 10)  # exponent capped


# ---- put redelivery ------------------------------------------------------------------------------


class FakeProducer:
    def __init__(self) -> None:
        self.sent: list[ProducerRecord] = []
        self.flushed = 0
        self.closed = False

    def send(self, records: list[ProducerRecord]) -> None:
        self.sent.extend(records)

    def flush(self, timeout: float) -> None:
        self.flushed += 1

    def close(self) -> None:
        self.closed = True


class FakeBackend:
    def __init__(self) -> None:
        self.producers: list[FakeProducer] = []

    def producer(self) -> FakeProducer:
        self.producers.append(FakeProducer())
        return self.producers[-1]


def dead_letters(tolerate_all: bool = True, topic: str = "dlq", context_headers: bool = False,
                 backend: FakeBackend | None = None) -> DeadLetters:
    config: dict[str, Any] = {"name": "c", "errors.tolerance": "all" if tolerate_all else "none"}
    if topic:
        config["errors.deadletterqueue.topic.name"] = topic
    if context_headers:
        config["errors.deadletterqueue.context.headers.enable"] = "true"
    pipeline = SinkPipeline.from_config(config, task_id=0)
    return DeadLetters(backend or FakeBackend(), pipeline, topic=topic, tolerate_all=tolerate_all,  # type: ignore[arg-type]
                       log_errors=False, log_messages=False, flush_timeout_s=1.0, label=LABEL)


def sink_record(offset: int, value: Any = "v") -> SinkRecord:
    return SinkRecord(topic="in", partition=0, offset=offset, key=None, value=value, timestamp=1000 + offset)


def consumed(offset: int, value: bytes = b'"v"') -> ConsumedRecord:
    return ConsumedRecord("in", 0, offset, None, value, 1000 + offset, None)


def test_put_redelivers_after_retriable_errors_waiting_what_the_task_asked() -> None:
    calls: list[list[SinkRecord]] = []
    asked = [0.01, None]

    def put(records: list[SinkRecord]) -> None:
        calls.append(records)
        if len(calls) < 3:
            raise RetriableError("busy")

    retries: list[int] = []
    put_with_retries(put, [sink_record(1)], policy=policy(5000, delay_max_ms=20), stop=threading.Event(),
                     label=LABEL, take_timeout=lambda: asked.pop(0), dead_letters=dead_letters(),
                     on_retry=lambda: retries.append(1))
    assert len(calls) == 3 and all(c == [sink_record(1)] for c in calls)
    assert calls[0] is not calls[1]  # each attempt gets its own list (a task may consume it)
    assert len(retries) == 2


def test_put_fails_naming_the_bound_when_it_ran_out() -> None:
    def put(records: list[SinkRecord]) -> None:
        raise RetriableError("still busy")

    with pytest.raises(ConnectError) as info:
        put_with_retries(put, [sink_record(1), sink_record(2)], policy=policy(50, delay_max_ms=10),
                         stop=threading.Event(), label=LABEL, take_timeout=lambda: None,
                         dead_letters=dead_letters(), on_retry=lambda: None)
    msg = str(info.value)
    assert msg.startswith(LABEL + " failed: put still raised RetriableError after ")
    assert "redelivering 2 records" in msg and "errors.retry.timeout=50 ms ran out" in msg and "still busy" in msg
    assert isinstance(info.value.__cause__, RetriableError)


def test_put_stops_waiting_when_the_run_stops() -> None:
    stop = threading.Event()

    def put(records: list[SinkRecord]) -> None:
        stop.set()
        raise RetriableError("busy")

    with pytest.raises(Stopped):
        put_with_retries(put, [], policy=policy(60000), stop=stop, label=LABEL, take_timeout=lambda: 30.0,
                         dead_letters=dead_letters(), on_retry=lambda: None)


def test_any_other_put_failure_names_the_task() -> None:
    def put(records: list[SinkRecord]) -> None:
        raise ValueError("bad row")

    with pytest.raises(ConnectError, match=r"task 0 failed in put: ValueError: bad row") as info:
        put_with_retries(put, [], policy=policy(), stop=threading.Event(), label=LABEL, take_timeout=lambda: None,
                         dead_letters=dead_letters(), on_retry=lambda: None)
    assert isinstance(info.value.__cause__, ValueError)


# ---- errors.tolerance and the errant record reporter ----------------------------------------------


def test_tolerance_none_a_reported_record_fails_the_put_even_if_the_task_swallows_it() -> None:
    dl = dead_letters(tolerate_all=False, topic="")
    reporter = ErrantReporter(dl)

    def put(records: list[SinkRecord]) -> None:
        try:
            reporter.report(records[0], KeyError("no such row"))
        except ConnectError:
            pass  # a task that swallows what report raised

    with pytest.raises(ConnectError, match=r"reported record in\[0\]@7 as failed and errors.tolerance=none") as info:
        put_with_retries(put, [sink_record(7)], policy=policy(), stop=threading.Event(), label=LABEL,
                         take_timeout=lambda: None, dead_letters=dl, on_retry=lambda: None)
    assert info.value is dl.report_failure
    assert isinstance(info.value.__cause__, KeyError)


def test_tolerance_all_without_a_topic_only_counts() -> None:
    backend = FakeBackend()
    dl = dead_letters(topic="", backend=backend)
    dl.send(consumed(1), ValueError("x"))
    ErrantReporter(dl).report(sink_record(2), ValueError("y"))
    dl.flush()
    assert (dl.skipped, dl.dead_lettered, backend.producers) == (2, 0, [])


def test_dead_letters_are_counted_once_flushed_and_keep_the_original_bytes() -> None:
    backend = FakeBackend()
    dl = dead_letters(backend=backend)
    batch = [consumed(1, b'"a"'), consumed(2, b'{"raw": true}')]
    dl.send(batch[0], ValueError("bad"))
    assert dl.dead_lettered == 0  # not durable yet
    # reported during put: found in the batch (its original bytes), flushed with the next commit
    dl.begin_put(batch)
    ErrantReporter(dl).report(sink_record(2, {"raw": True}), KeyError("no row"))
    dl.end_put(True)
    (producer,) = backend.producers
    assert producer.flushed == 0
    dl.flush()
    assert producer.flushed == 1 and dl.dead_lettered == 2
    assert [(r.topic, r.value) for r in producer.sent] == [("dlq", b'"a"'), ("dlq", b'{"raw": true}')]
    dl.flush()
    assert producer.flushed == 1  # nothing pending: no flush


def test_a_report_outside_put_is_durable_when_report_returns() -> None:
    backend = FakeBackend()
    dl = dead_letters(backend=backend)
    ErrantReporter(dl).report(sink_record(3, {"a": 1}), KeyError("no row"))  # e.g. from pre_commit
    (producer,) = backend.producers
    assert producer.flushed == 1 and dl.dead_lettered == 1
    assert producer.sent[0].value == b'{"a":1}'  # written back by the value converter (JSON)


def test_dead_letter_context_headers_name_the_record_the_task_and_the_error() -> None:
    backend = FakeBackend()
    dl = dead_letters(context_headers=True, backend=backend)
    dl.send(consumed(9, b"{nope"), KeyError("no such row"))
    dl.flush()
    headers = dict(backend.producers[0].sent[0].headers or [])
    assert headers["__connect.errors.topic"] == b"in"
    assert headers["__connect.errors.partition"] == b"0"
    assert headers["__connect.errors.offset"] == b"9"
    assert headers["__connect.errors.connector.name"] == b"c"
    assert headers["__connect.errors.task.id"] == b"0"
    assert headers["__connect.errors.exception.class.name"] == b"builtins.KeyError"
    assert headers["__connect.errors.exception.message"] == b"'no such row'"
    assert b"KeyError" in headers["__connect.errors.exception.stacktrace"]
    without = FakeBackend()
    plain = dead_letters(backend=without)
    plain.send(consumed(9), KeyError("x"))
    assert without.producers[0].sent[0].headers is None


def test_consumed_from_falls_back_to_utf8_or_json_bytes() -> None:
    class Broken:
        def from_connect(self, topic: str, value: Any, schema: Any) -> bytes:
            raise TypeError("cannot")

    pipeline = SinkPipeline.from_config({"name": "c"})
    pipeline.value_converter = Broken()  # type: ignore[assignment]
    pipeline.key_converter = Broken()  # type: ignore[assignment]
    rec = SinkRecord(topic="t", partition=1, offset=4, key="k", value={"n": 1}, timestamp=5, headers=None)
    assert consumed_from(rec, pipeline) == ConsumedRecord("t", 1, 4, b"k", b'{"n":1}', 5, None)
