"""Retry policy and dead letters: how long a run rides out failures it may outlive, and where the records it
cannot deliver go (Kafka Connect's ``RetryWithToleranceOperator``, ``DeadLetterQueueReporter`` and KIP-610's
``ErrantRecordReporter``). Each rule is stated here once; both directions use what applies to them.

- **Redelivery bound.** A sink ``put`` that raises :class:`RetriableError` is given the same records again, and
  a failed ``pre_commit`` rewinds the task so its records are delivered again. Kafka Connect retries forever; a
  run is bounded: by ``errors.retry.timeout`` ms when positive, else by the run's ``max_seconds``, else by
  :data:`DEFAULT_RETRY_BOUND_S` (:meth:`RetryPolicy.retry_bound_reached`).
- **Waits.** What the task asked for with ``context.timeout(ms)`` (used once), else an exponential backoff
  (:data:`RETRY_DELAY_MIN_S` doubling, capped by ``errors.retry.delay.max.ms``), always cut to what is left of
  the bound (:meth:`RetryPolicy.retry_wait`).
- **Store ride-out.** A commit against a store that cannot be reached for a moment (a broker or database
  restart) waits, or is tried again, for :func:`store_ride_out_s` (a source's commit timeout too), never past
  ``max_seconds`` (:meth:`RetryPolicy.store_bound_reached`).
- **errors.tolerance.** ``none``: a record that fails conversion or a transform, or that the task reports
  through the errant record reporter, fails the run. ``all``: it goes to ``errors.deadletterqueue.topic.name``
  with its original key and value bytes (and the ``__connect.errors.*`` context headers when enabled, built by
  :meth:`~connect_runtime.runtime.pipeline.SinkPipeline.dead_letter`), or is only counted when no topic is set.
  The dead-letter producer is flushed before any commit of offsets past those records (:class:`DeadLetters`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from connect_runtime.api.data import to_plain
from connect_runtime.api.errors import ConnectError, RetriableError
from connect_runtime.api.records import SinkRecord
from connect_runtime.api.sink import ErrantRecordReporter
from connect_runtime.backends.base import Backend, ConsumedRecord, Producer, ProducerRecord
from connect_runtime.metrics import (
    DLQ_PRODUCE_FAILURES,
    DLQ_PRODUCE_REQUESTS,
    TOTAL_RECORD_ERRORS,
    TOTAL_RECORDS_SKIPPED,
    TaskMetrics,
)
from connect_runtime.runtime.pipeline import to_bytes

if TYPE_CHECKING:
    from connect_runtime.runtime.pipeline import SinkPipeline

log = logging.getLogger(__name__)

DEFAULT_RETRY_BOUND_S = 300.0
"""Bound on redelivering after ``RetriableError`` / ``pre_commit`` failures when neither a positive
``errors.retry.timeout`` nor ``max_seconds`` gives one."""

RETRY_DELAY_MIN_S = 0.3
"""The first wait of an exponential backoff (then doubling, capped by ``errors.retry.delay.max.ms``)."""

STORE_RIDE_OUT_S = 30.0
"""How long a run rides out a store it cannot reach (a broker or database restart) when ``errors.retry.timeout``
is 0 (its default): a commit waits, or is tried again, for up to this long before the run fails."""


def store_ride_out_s(values: Mapping[str, Any], max_seconds: float | None = None) -> float:
    """How long a commit may wait for, or retry against, a store it cannot reach: ``errors.retry.timeout`` ms
    when positive; when -1 (retry for ever), the run's ``max_seconds`` if it has one, else an hour;
    otherwise :data:`STORE_RIDE_OUT_S`."""
    ms = int(values.get("errors.retry.timeout") or 0)
    if ms > 0:
        return ms / 1000
    if ms < 0:
        return float(max_seconds) if max_seconds else 3600.0
    return STORE_RIDE_OUT_S


class Stopped(Exception):
    """The run stopped (another task failed it, or it was stopped from outside) while a task worked or waited:
    the task ends without committing anything more."""


class RetryPolicy:
    """A run's bounds and waits for redelivery and for riding out an unreachable store (the module docstring).

    ``values``: the run's typed config (``errors.retry.timeout``, ``errors.retry.delay.max.ms``);
    ``deadline``: the run's ``max_seconds`` as a :func:`time.monotonic` instant, or None."""

    def __init__(self, values: Mapping[str, Any], deadline: float | None, max_seconds: float | None) -> None:
        self.deadline = deadline
        self.max_seconds = max_seconds
        self.retry_timeout_ms = int(values["errors.retry.timeout"])
        self.ride_out_s = store_ride_out_s(values, max_seconds)
        self.retry_delay_max_s: float = values["errors.retry.delay.max.ms"] / 1000

    def retry_bound_reached(self, since: float, now: float) -> str | None:
        """What bound a redelivery that started failing at ``since`` has reached, or None."""
        ms = self.retry_timeout_ms
        if self.deadline is not None and now >= self.deadline:
            return f"the run's max_seconds ({self.max_seconds:g} s) ran out"
        if ms > 0:
            if (now - since) * 1000 >= ms:
                return f"errors.retry.timeout={ms} ms ran out"
        elif self.deadline is None and now - since >= DEFAULT_RETRY_BOUND_S:
            return (f"the default bound of {DEFAULT_RETRY_BOUND_S:g} s ran out (errors.retry.timeout={ms} and "
                    "no max_seconds)")
        return None

    def store_bound_reached(self, since: float, now: float) -> str | None:
        """Whether riding out a store that cannot be reached, since ``since``, has reached its bound
        (:func:`store_ride_out_s`, or the run's ``max_seconds``)."""
        if self.deadline is not None and now >= self.deadline:
            return f"the run's max_seconds ({self.max_seconds:g} s) ran out"
        if now - since >= self.ride_out_s:
            ms = self.retry_timeout_ms
            return (f"errors.retry.timeout={ms} ms ran out" if ms > 0 else
                    f"{self.ride_out_s:g} s ran out (errors.retry.timeout={ms}: the default ride-out)")
        return None

    def retry_wait(self, since: float, now: float, want: float) -> float:
        """``want`` seconds, cut to what is left of the redelivery bound."""
        wait = want
        if self.retry_timeout_ms > 0:
            wait = min(wait, since + self.retry_timeout_ms / 1000 - now)
        elif self.deadline is None:
            wait = min(wait, since + DEFAULT_RETRY_BOUND_S - now)
        if self.deadline is not None:
            wait = min(wait, self.deadline - now)
        return max(0.0, wait)

    def store_wait(self, since: float, now: float, want: float) -> float:
        """``want`` seconds, cut to what is left of the store ride-out and of ``max_seconds``."""
        wait = max(0.0, min(want, since + self.ride_out_s - now))
        if self.deadline is not None:
            wait = max(0.0, min(wait, self.deadline - now))
        return wait

    def first_delay(self) -> float:
        """The first wait of an exponential backoff."""
        return min(RETRY_DELAY_MIN_S, self.retry_delay_max_s)

    def next_delay(self, delay: float) -> float:
        """The wait after ``delay``: doubled, capped by ``errors.retry.delay.max.ms``."""
        return min(delay * 2, self.retry_delay_max_s)

    def failure_delay(self, failures: int) -> float:
        """The backoff after the ``failures``-th failure in a row (1-based)."""
        delay: float = min(RETRY_DELAY_MIN_S * 2 ** min(failures - 1, 10), self.retry_delay_max_s)
        return delay


def put_with_retries(put: Callable[[list[SinkRecord]], None], records: list[SinkRecord], *, policy: RetryPolicy,
                     stop: threading.Event, label: str, take_timeout: Callable[[], float | None],
                     dead_letters: DeadLetters, on_retry: Callable[[], None]) -> None:
    """Hand ``records`` to a sink task's ``put``; after a :class:`RetriableError`, the same records again after
    the task's ``context.timeout`` (``take_timeout``) or the backoff, within the redelivery bound (``on_retry``
    counts each). Any other failure is a :class:`ConnectError` naming the task; a record the task reported
    under ``errors.tolerance=none`` fails the put even when the task swallowed that error.

    :raises Stopped: the run stopped while waiting to redeliver.
    """
    started = time.monotonic()
    delay = policy.first_delay()
    attempts = 0
    while True:
        attempts += 1
        try:
            put(list(records))
            break
        except RetriableError as exc:
            now = time.monotonic()
            ran_out = policy.retry_bound_reached(started, now)
            if ran_out is not None:
                raise ConnectError(
                    f"{label} failed: put still raised RetriableError after {attempts} attempts "
                    f"over {(now - started) * 1000:.0f} ms, redelivering {len(records)} records; waited "
                    f"until {ran_out}: {exc}") from exc
            asked = take_timeout()
            wait = policy.retry_wait(started, now, delay if asked is None else asked)
            log.info("%s: put raised RetriableError (%s); redelivering %d records in %.3f s",
                     label, exc, len(records), wait)
            on_retry()
            if stop.wait(wait):
                raise Stopped from exc
            if asked is None:
                delay = policy.next_delay(delay)
        except ConnectError as exc:
            if exc is dead_letters.report_failure:
                raise
            raise ConnectError(f"{label} failed in put: {type(exc).__name__}: {exc}") from exc
        except Exception as exc:
            raise ConnectError(f"{label} failed in put: {type(exc).__name__}: {exc}") from exc
    if dead_letters.report_failure is not None:
        raise dead_letters.report_failure


class DeadLetters:
    """One sink task's dead letters: records that failed conversion or a transform (from the pipeline) and
    records the task reported (:meth:`report`, behind :class:`ErrantReporter`), under ``errors.tolerance``.

    ``dead_lettered`` counts records written to the dead letter topic (once flushed), ``skipped`` records
    tolerated with no topic configured. Called from the task's own thread only."""

    def __init__(self, backend: Backend, pipeline: SinkPipeline, *, topic: str, tolerate_all: bool,
                 log_errors: bool, log_messages: bool, flush_timeout_s: float, label: str,
                 metrics: TaskMetrics | None = None) -> None:
        self._backend = backend
        self._pipeline = pipeline
        self._topic = topic
        self._tolerate_all = tolerate_all
        self._log_errors = log_errors
        self._log_messages = log_messages
        self._flush_timeout_s = flush_timeout_s
        self._label = label
        self._metrics = metrics
        self.dead_lettered = 0
        self.skipped = 0
        self.report_failure: ConnectError | None = None
        """Set when the task reported a record under ``errors.tolerance=none``: the put fails with it."""
        self.producer: Producer | None = None
        self._pending = 0
        self._in_put = False
        self._batch: list[ConsumedRecord] = []
        self._batch_index: dict[tuple[str, int, int], ConsumedRecord] | None = None

    def send(self, rec: ConsumedRecord, exc: BaseException) -> None:
        """Dead-letter one consumed record (counted as skipped when no dead letter topic is set)."""
        if self._metrics is not None:
            self._metrics.add(TOTAL_RECORD_ERRORS, 1)
            self._metrics.add(TOTAL_RECORDS_SKIPPED, 1)
        if not self._topic:
            self.skipped += 1
            return
        out: ProducerRecord = self._pipeline.dead_letter(rec, exc)
        if self.producer is None:
            self.producer = self._backend.producer()
        self.producer.send([out])
        self._pending += 1

    def flush(self) -> None:
        """Make what was sent durable: called before every commit of offsets past the records."""
        if self.producer is not None and self._pending:
            try:
                self.producer.flush(self._flush_timeout_s)
            except Exception:
                if self._metrics is not None:
                    self._metrics.add(DLQ_PRODUCE_FAILURES, self._pending)
                raise
            if self._metrics is not None:
                self._metrics.add(DLQ_PRODUCE_REQUESTS, self._pending)
            self.dead_lettered += self._pending
            self._pending = 0

    def begin_put(self, batch: list[ConsumedRecord]) -> None:
        """``batch`` (the consumed records) is being put: a report during the put finds its original bytes."""
        self._batch = batch
        self._batch_index = None
        self._in_put = True

    def end_put(self, delivered: bool) -> None:
        self._in_put = False
        if delivered:
            self._batch = []
            self._batch_index = None

    def report(self, record: SinkRecord, error: BaseException) -> None:
        """KIP-610: dead-letter a record the task could not write (or fail, with tolerance none)."""
        if not self._tolerate_all:
            failure = ConnectError(
                f"{self._label} reported record {record.topic}[{record.partition}]@{record.offset} as "
                f"failed and errors.tolerance=none: {type(error).__name__}: {error}")
            failure.__cause__ = error
            self.report_failure = failure
            raise failure
        key = (record.topic, record.partition, record.offset)
        if self._batch_index is None:
            self._batch_index = {(r[0], r[1], r[2]): r for r in self._batch}
        original = self._batch_index.get(key) or consumed_from(record, self._pipeline)
        if self._log_errors:  # the pipeline logs conversion and transform failures itself
            detail = f" key={record.key!r} value={record.value!r}" if self._log_messages else ""
            log.warning("%s: task reported record %s[%d]@%d as failed: %s: %s%s", self._label, record.topic,
                        record.partition, record.offset, type(error).__name__, error, detail)
        self.send(original, error)
        if not self._in_put:
            # reported from flush/pre_commit/close: a sink that commits its own offsets there (SqlSink,
            # FileSink) may commit right after this returns, so the dead letter must be durable first.
            # Reports from put are batched and flushed before the next pre_commit.
            self.flush()


class ErrantReporter(ErrantRecordReporter):
    """What a task's ``context.errant_record_reporter`` is: only ``report``, into the task's dead letters."""

    def __init__(self, dead_letters: DeadLetters) -> None:
        self._dead_letters = dead_letters

    def report(self, record: SinkRecord, error: BaseException) -> None:
        self._dead_letters.report(record, error)


def _to_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, separators=(",", ":"), default=str).encode()


def consumed_from(record: SinkRecord, pipeline: SinkPipeline) -> ConsumedRecord:
    """A reported record no longer in the current batch (reported from ``flush``/``pre_commit``): its
    fields written back by the run's converters, as Kafka Connect's errant record reporter does, so a
    JSON string value is dead-lettered as JSON; a field a converter cannot write falls back to UTF-8 or
    JSON bytes (a report never fails on it)."""
    t = record.topic

    def write(converter: Any, schema: Any, value: Any) -> bytes | None:
        aware = bool(getattr(converter, "SCHEMA_AWARE", False)) or schema is not None
        if not aware and (value is None or isinstance(value, bytes)):
            return value
        try:
            out = to_bytes(converter, aware, t, schema, value, None)
        except Exception:
            return _to_bytes(to_plain(value))
        return out if out is None or isinstance(out, bytes) else _to_bytes(out)

    hc = pipeline.header_converter
    headers = [(k, write(hc, None, v)) for k, v in record.headers] if record.headers else None
    return ConsumedRecord(t, record.partition, record.offset,
                          write(pipeline.key_converter, record.key_schema, record.key),
                          write(pipeline.value_converter, record.value_schema, record.value), record.timestamp,
                          headers)


__all__ = [
    "DEFAULT_RETRY_BOUND_S",
    "RETRY_DELAY_MIN_S",
    "STORE_RIDE_OUT_S",
    "DeadLetters",
    "ErrantReporter",
    "RetryPolicy",
    "Stopped",
    "consumed_from",
    "put_with_retries",
    "store_ride_out_s",
]
