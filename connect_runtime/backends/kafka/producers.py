"""The Kafka producers' shared core (:class:`_KafkaProducerBase`: the confluent ``Producer``, the send loop,
offset records, flush, a bounded close) and :class:`KafkaPlainProducer`, the idempotent non-transactional
producer of at-least-once runs, dead letter queues and offset writes. The transactional producer is in
:mod:`~connect_runtime.backends.kafka.transactions`, delivery reports in :mod:`~connect_runtime.backends.kafka.delivery`.

Forced, whatever the settings say: ``enable.idempotence=true``. A record sent with ``partition=None`` goes where
librdkafka's ``consistent`` partitioner (the default ``partitioner``) puts it: the rule of
:func:`connect_runtime.backends.base.default_partition`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import confluent_kafka as ck

from connect_runtime.api.errors import BackendUnavailableError
from connect_runtime.backends.base import OffsetEntry, Producer, ProducerRecord, Written
from connect_runtime.backends.kafka._access import (
    Need,
    abortable_cause,
    auth_error_code,
    transactional_id_need,
    unwritable_topics,
)
from connect_runtime.backends.kafka._client import _describe, _kafka_error, _unwrap
from connect_runtime.backends.kafka.delivery import _POLL_EVERY, PURGED, _DeliveryTracker, _SparseSender
from connect_runtime.backends.kafka.offsets import murmur2_partition

if TYPE_CHECKING:
    from connect_runtime.backends.kafka.backend import KafkaBackend

log = logging.getLogger(__name__)

_PARTITION_COUNT_MAX_AGE = 300.0
"""Seconds a transactional producer trusts a topic's partition count (librdkafka's default
``topic.metadata.refresh.interval.ms``) before asking the cluster again."""


class _RefusedIdQuiet:
    """librdkafka's log of one producer, its FATAL line for a refused producer id (``Cluster authorization failed``:
    a principal without Write on any topic) at DEBUG: a producer made ahead of use (the offsets writer, made when a
    store opens) that is never used must not shout; one that is used raises the AuthorizationError."""

    def __init__(self, logger: Any) -> None:
        self._logger = logger

    def log(self, level: int, fmt: str, *args: Any, **kwargs: Any) -> None:
        if args and "Cluster authorization failed" in str(args[-1]):
            level = logging.DEBUG
        if self._logger is not None:
            self._logger.log(level, fmt, *args, **kwargs)


class _KafkaProducerBase:
    """What both producers share: the confluent Producer, the send loop and delivery tracking."""

    def __init__(self, backend: KafkaBackend, conf: dict[str, Any], track_metadata: bool, what: str,
                 sparse_reports: bool = False) -> None:
        self.backend = backend
        self.what = what
        self.tracker = _DeliveryTracker(track_metadata)
        self._offset_errors: list[ck.KafkaError] = []
        self._offset_error_topic: str | None = None
        self.offset_topics_sent: set[str] = set()
        """Topics offset records were sent to (a transactional producer: in this transaction)."""
        # a transactional producer: this transaction's batches (kept by reference until it ends: the hanging-
        # transaction defence may send them again; a refused topic is looked for among them)
        self._txn_batches: list[Sequence[ProducerRecord]] = []
        # the client's fatal error, when it had one (e.g. its producer id refused: CLUSTER_AUTHORIZATION_FAILED)
        self.fatal_error: ck.KafkaError | None = None
        conf.setdefault("error_cb", self.backend._error_cb)
        reported = conf["error_cb"]

        def error_cb(err: ck.KafkaError) -> None:
            if err.fatal() and self.fatal_error is None:
                self.fatal_error = err
            if err.code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED:  # raised by the first use, if any
                log.debug("%s: %s", what, err.str())
                return
            reported(err)

        conf["error_cb"] = error_cb
        conf["logger"] = _RefusedIdQuiet(conf.get("logger"))
        # sparse: delivery reports only for the first and last record per partition of each send (see
        # _SparseSender); needs the partition of every record before it is queued, so only with the
        # default "consistent" partitioner, which this producer then applies itself
        sparse = sparse_reports and not track_metadata and str(conf.get("partitioner")) == "consistent"
        self._sparse = _SparseSender(self) if sparse else None
        self._partition_counts: dict[str, tuple[int, float]] = {}
        if not sparse:
            conf["on_delivery"] = self.tracker.on_delivery
        self._p: Any = backend.make_client(ck.Producer, conf, what)
        self._produce = self._p.produce
        self._poll = self._p.poll
        self._closed = False
        # a call failed because the cluster could not be reached (close then waits only briefly)
        self._unreachable = False
        # a call into librdkafka that did not return within its bound, still running on this thread (see wedge)
        self._wedged: threading.Thread | None = None

    def wedge(self, call: threading.Thread) -> None:
        """A call into the client did not return within its bound and is left running on ``call``: the producer is
        never used again, and its handle is destroyed only after that call returned (destroying it under a call in
        progress would free what the call still uses)."""
        self._wedged = call
        self._unreachable = True

    def _queue_full(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Librdkafka's queue is full: serve delivery reports until there is room (bounded)."""
        deadline = time.monotonic() + max(self.backend.connect_timeout, 1.0)
        while True:
            self._poll(0.05)
            try:
                self._produce(*args, **kwargs)
                return
            except BufferError:
                if time.monotonic() >= deadline:
                    raise BackendUnavailableError(
                        f"{self.what}: the local queue stayed full for {self.backend.connect_timeout:g} s; the "
                        f"Kafka cluster at {self.backend.bootstrap} does not take records fast enough") from None

    def _partition_count(self, topic: str) -> int:
        """Partitions of ``topic`` as this producer's metadata knows them (cached; 0 when unknown)."""
        cached = self._partition_counts.get(topic)
        now = time.monotonic()
        if cached is not None and now - cached[1] < _PARTITION_COUNT_MAX_AGE:
            return cached[0]
        count = 0
        try:
            md = self._p.list_topics(topic, timeout=self.backend.connect_timeout)
            t = md.topics.get(topic)
            if t is not None and t.error is None:
                count = len(t.partitions)
        except ck.KafkaException as exc:
            log.debug("%s: no metadata for topic %r: %s", self.what, topic, _describe(exc))
        if count:
            self._partition_counts[topic] = (count, now)
        return count

    def send(self, records: Sequence[ProducerRecord]) -> None:
        if self._sparse is not None:
            self._sparse.send(records)
            return
        produce = self._produce
        poll = self._poll
        tracker = self.tracker
        track = tracker.track
        meta = tracker.metadata
        total = len(records)
        try:
            # chunks of _POLL_EVERY records with a poll(0) between them (serves delivery reports)
            for lo in range(0, total, _POLL_EVERY):
                if lo:
                    poll(0)
                for rec in records[lo:lo + _POLL_EVERY]:
                    if len(rec) == 6:
                        topic, partition, key, value, ts, headers = rec
                    else:  # a plain tuple of 4 or 5 fields
                        topic, partition, key, value = rec[0], rec[1], rec[2], rec[3]
                        ts = rec[4] if len(rec) > 4 else None
                        headers = None
                    if partition is None:
                        partition = -1  # librdkafka's consistent partitioner: base.default_partition's rule
                    if ts is None and not headers and not track:
                        try:
                            produce(topic, value, key, partition)
                        except BufferError:
                            self._queue_full((topic, value, key, partition), {})
                        continue
                    kwargs: dict[str, Any] = {}
                    if ts is not None:
                        kwargs["timestamp"] = ts
                    if headers:
                        kwargs["headers"] = headers
                    if track:
                        kwargs["on_delivery"] = tracker.indexed(len(meta))
                        meta.append(None)
                    try:
                        produce(topic, value, key, partition, **kwargs)
                    except BufferError:
                        self._queue_full((topic, value, key, partition), kwargs)
        except (ck.KafkaException, SystemError) as exc:
            raise self._failure(_unwrap(exc), "sending records") from exc
        tracker.count += total

    def send_offsets(self, topic: str, partitions: int, entries: Sequence[OffsetEntry]) -> None:
        """Queue offset records (murmur2-partitioned like Kafka Connect, not tracked in ``Written``)."""
        errors = self._offset_errors
        self.offset_topics_sent.add(topic)

        def report(err: ck.KafkaError | None, msg: Any) -> None:
            if err is not None:
                errors.append(err)
                if err.code() not in PURGED:
                    self._offset_error_topic = msg.topic()

        for key, value in entries:
            args = (topic, value, key, murmur2_partition(key, partitions))
            try:
                self._produce(*args, on_delivery=report)
            except BufferError:
                self._queue_full(args, {"on_delivery": report})
            except (ck.KafkaException, SystemError) as exc:
                raise self._failure(_unwrap(exc), "sending offsets") from exc

    def _flush(self, timeout: float) -> None:
        try:
            left = self._p.flush(timeout)
        except (ck.KafkaException, SystemError) as exc:
            raise self._failure(_unwrap(exc), "flushing") from exc
        if left:
            self._unreachable = True
            raise BackendUnavailableError(
                f"{self.what}: flushing (producing records): {left} records were not acknowledged by the Kafka "
                f"cluster at {self.backend.bootstrap} within {timeout:g} s")
        errors = [e for e in (self.tracker.error, *self._offset_errors) if e is not None]
        err = next((e for e in errors if e.code() not in PURGED), errors[0] if errors else None)
        if err is not None:
            raise self._failure(ck.KafkaException(err), "writing records")

    def _needs(self, exc: BaseException) -> list[Need]:
        """What this producer needs, for naming a refused permission: Write on the topic refused (a delivery report
        names it; else the broker is asked which topic sent to the principal may not write), IdempotentWrite on the
        cluster (or Write on any topic, KIP-679: the producer id of an idempotent producer)."""
        topic = self.tracker.error_topic or self._offset_error_topic
        if topic is None and auth_error_code(exc) == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED:
            topic = next(iter(unwritable_topics(self.backend.admin, self._topics_sent(),
                                                self.backend.connect_timeout)), None)
        needs = [Need("Write", "Topic", topic or "<the topic written>"),
                 Need("IdempotentWrite", "Cluster", also="or Write on any topic: Kafka 3.0+ grants an idempotent "
                                                         "producer's id with either (KIP-679)")]
        tid = getattr(self, "transactional_id", None)  # a transactional producer's: Write on its prefix
        return needs if tid is None else [transactional_id_need(tid), *needs]

    def _topics_sent(self) -> set[str]:
        return {rec[0] for batch in self._txn_batches for rec in batch} | self.offset_topics_sent

    def _cause(self, exc: BaseException) -> BaseException:
        """The error behind a bare ``_FATAL``, ``_STATE`` or purge: the client's fatal error (a refused producer
        id), or the one that doomed the transaction (:func:`abortable_cause`); else ``exc``."""
        err = _kafka_error(exc)
        if self.fatal_error is not None and (err is None or err.code() in PURGED or err.code() in (
                ck.KafkaError._FATAL, ck.KafkaError._STATE)):
            return ck.KafkaException(self.fatal_error)
        return abortable_cause(self._p, exc)

    def _failure(self, exc: BaseException, doing: str) -> Exception:
        exc = self._cause(exc)
        failure = self.backend.translate(exc, f"{self.what} {doing}", *self._needs(exc))
        self._unreachable |= isinstance(failure, BackendUnavailableError)
        return failure

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        wedged = self._wedged
        if wedged is None:
            try:
                self._p.purge(in_queue=True, in_flight=False, blocking=False)
                self._p.poll(0)
            except (ck.KafkaException, RuntimeError):
                pass
        if getattr(self, "_fenced", False):
            # close() would try to abort the fenced transaction and fail; destroying the handle is enough
            self._p = None
            return
        # librdkafka's close aborts an open transaction and flushes, with no bound of its own (a coordinator
        # that never answers holds it for ever): it runs in a thread of its own, waited for a bounded time
        producer, self._p = self._p, None
        failed: list[BaseException] = []

        def close() -> None:
            if wedged is not None:
                wedged.join()  # then nothing else uses the handle (a frozen cluster: for as long as it stays so)
            try:
                producer.close()
            except Exception as exc:  # librdkafka reports some close failures as SystemError
                failed.append(exc)

        closer = threading.Thread(target=close, name="kafka-producer-close", daemon=True)
        closer.start()
        # a producer that already failed for want of the cluster is not waited for again: its close would only
        # run into the same wall (the abort it makes cannot reach the coordinator either)
        bound = 1.0 if self._unreachable else self.backend.connect_timeout + 5
        closer.join(bound)
        if closer.is_alive():
            log.warning("%s: close did not finish within %g s (the cluster at %s did not answer); the producer is "
                        "left to finish in the background", self.what, bound, self.backend.bootstrap)
        elif failed:
            log.warning("%s: close raised %s", self.what, self.backend.redact(_describe(failed[0])))


class KafkaPlainProducer(_KafkaProducerBase, Producer):
    """An idempotent, non-transactional producer (at-least-once runs, dead letter queues, offsets)."""

    def __init__(self, backend: KafkaBackend, track_metadata: bool) -> None:
        conf = backend.client_config(
            "producer",
            defaults={"acks": "all", "partitioner": "consistent", "message.timeout.ms": 60_000},
            forced={"enable.idempotence": True},
        )
        super().__init__(backend, conf, track_metadata, f"producer for {backend.bootstrap}")

    def flush(self, timeout: float) -> Written:
        try:
            self._flush(timeout)
            return self.tracker.written()
        finally:
            self.tracker.reset()
            self._offset_errors.clear()
            self._offset_error_topic = None
