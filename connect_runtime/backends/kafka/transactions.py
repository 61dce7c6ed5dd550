"""The transactional producer: one task's records and source offsets in one Kafka transaction (KIP-618), and its
defence against a transaction the broker left hanging (:class:`_HangingTransactions`).

Fencing: ``init_transactions`` fences any older instance of the same ``transactional.id``; once fenced, every
call raises :class:`~connect_runtime.api.errors.ProducerFencedError`. A connector's own offsets store is
mirrored to the global offsets topic inside the same transaction.
"""

from __future__ import annotations

import logging
import operator
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import confluent_kafka as ck
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

from connect_runtime.api.errors import BackendError, BackendUnavailableError, ProducerFencedError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends.base import (
    INTERNAL_STORES,
    Consumer,
    ExtraEntries,
    OffsetEntry,
    ProducerRecord,
    TransactionalProducer,
    Written,
)
from connect_runtime.backends.kafka._access import auth_error_code
from connect_runtime.backends.kafka._client import _FENCED_CODES, _UNREACHABLE_CODES, _describe, _kafka_error
from connect_runtime.backends.kafka.group_offsets import TransactionGroupOffsets
from connect_runtime.backends.kafka.offsets import murmur2_partition
from connect_runtime.backends.kafka.producers import _KafkaProducerBase

if TYPE_CHECKING:
    from connect_runtime.backends.kafka.backend import KafkaBackend

log = logging.getLogger(__name__)

_TOPIC_PARTITION = operator.itemgetter(0, 1)


_LEADER_MOVING = frozenset({
    ck.KafkaError.NOT_LEADER_FOR_PARTITION, ck.KafkaError.LEADER_NOT_AVAILABLE, ck.KafkaError.UNKNOWN_TOPIC_OR_PART,
    ck.KafkaError.OFFSET_NOT_AVAILABLE, ck.KafkaError.UNKNOWN_LEADER_EPOCH, ck.KafkaError.FENCED_LEADER_EPOCH,
    ck.KafkaError.REQUEST_TIMED_OUT, ck.KafkaError._TRANSPORT,
})
"""Per-partition errors of a ``list_offsets`` answer that pass once a (new) partition has its leader: librdkafka
does not flag them retriable there (a topic created just before its first transaction answers
NOT_LEADER_FOR_PARTITION for a moment)."""


class _HangingTransactions:
    """Before this producer id first commits on a partition, abort any transaction of it left hanging there.

    A hanging transaction: the coordinator logged its end but its markers never reached a partition, so the
    partition still holds it open (Apache Kafka skips the markers of a partition that has no leader while the
    coordinator sends them, taking it for deleted: a broker in controlled shutdown with partitions only it
    holds, e.g. a one-node cluster stopped right after an EndTxn). Its records and offsets stay invisible to
    read_committed readers (the offsets read at a task's start do not see them, so the task polls those
    records again), until the next marker of the same producer id on that partition settles them: the next
    commit of this transactional id would make the hanging copy visible beside the new one. So the first
    transaction that touches a partition where something is pending ahead of it (its last stable offset below
    this transaction's first record, or below its end for an offsets partition) is aborted once with every
    partition it touches (the abort marker ends the hanging transaction as aborted, as the offsets read
    assumed) and its batches are sent again.

    The further stores of ``extra`` (the ranges ledger) are not settled here: their entries are known only
    from the commit's ``extra`` call, made once; each is the newest value of a key the task rewrites in
    every commit, so a hanging older value made visible by this commit is superseded by it."""

    def __init__(self, producer: KafkaTransactionalProducer) -> None:
        self._producer = producer
        # Partitions where no transaction of this producer id can still be hanging, the offset keys already
        # checked, and whether this transaction sent to a partition not settled yet
        self.settled: set[tuple[str, int | None]] = set()
        self.settled_keys: set[bytes] = set()
        self.unsettled = False

    def note_sent(self, records: Sequence[ProducerRecord]) -> None:
        if not self.unsettled and not set(map(_TOPIC_PARTITION, records)) <= self.settled:
            self.unsettled = True

    def must_check(self, offsets: Sequence[OffsetEntry]) -> bool:
        """Whether this transaction touches a partition or an offset key not settled yet."""
        return self.unsettled or not all(key in self.settled_keys for key, _ in offsets)

    def settle_first(self, offsets: Sequence[OffsetEntry], mirror: bool, deadline: float) -> bool:
        """Settle every partition this transaction touches for the first time (records, ``offsets`` and
        their mirror): when something is pending ahead on one, abort this transaction once and send its
        batches again. Returns whether it did."""
        owner = self._producer
        assert owner._offsets_topic is not None
        written = owner.tracker.written()
        firsts: dict[tuple[str, int], int] = {(tp[0], tp[1]): r[0] for tp, r in written.ranges.items()}
        plan: list[tuple[str, int, Sequence[OffsetEntry]]] = []
        if offsets:
            plan.append((*owner._offsets_topic, offsets))
            if mirror:
                plan.append((*owner.backend.offsets_topic(None, "Write"), offsets))
        stores = {(topic, murmur2_partition(key, n)) for topic, n, entries in plan for key, _ in entries}
        new = (set(firsts) | stores) - self.settled
        pending = self._pending_ahead({tp: firsts.get(tp) for tp in new}, deadline) if new else []
        if pending:
            log.info("%s: a transaction of this producer id may be hanging on %s (pending ahead of this one); "
                     "aborting this transaction once and sending it again, so that the next commit does not "
                     "make it visible", owner.what, ", ".join(f"{t}-{p}" for t, p in sorted(pending)))
            for topic, n, entries in plan:
                owner.send_offsets(topic, n, entries)
            owner._flush(max(0.001, deadline - time.monotonic()))  # every partition joins the transaction
            try:
                owner._p.abort_transaction(max(0.001, deadline - time.monotonic()))
                owner._p.begin_transaction()
            except ck.KafkaException as exc:
                raise owner._failure(exc, "settling a hanging transaction") from exc
            batches, owner._txn_batches = owner._txn_batches, []
            owner.tracker.reset()
            owner._offset_errors.clear()
            for batch in batches:
                _KafkaProducerBase.send(owner, batch)
            owner._txn_batches = batches
        self.settled |= set(firsts) | stores
        for topic in {t for t, _ in firsts}:
            count = owner._partition_count(topic)
            if count and all((topic, p) in self.settled for p in range(count)):
                self.settled.add((topic, None))  # records without a partition land in settled ones
        self.settled_keys.update(key for key, _ in offsets)
        self.unsettled = False
        return bool(pending)

    def _pending_ahead(self, firsts: Mapping[tuple[str, int], int | None], deadline: float) -> list[tuple[str, int]]:
        """The partitions whose last stable offset is below ``firsts`` (this transaction's first record there;
        ``None``: nothing of it there yet, so below the partition's end)."""
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]

        def ask(level: Any) -> dict[tuple[str, int], int]:
            futures = self._producer.backend.admin.list_offsets(
                {ck.TopicPartition(t, p): latest for t, p in firsts}, isolation_level=level,
                request_timeout=max(0.5, deadline - time.monotonic()))
            return {(tp.topic, tp.partition): int(f.result().offset) for tp, f in futures.items()}

        while True:
            try:
                stable = ask(ck.IsolationLevel.READ_COMMITTED)
                ends = ask(ck.IsolationLevel.READ_UNCOMMITTED) if None in firsts.values() else {}
                return [tp for tp, first in firsts.items() if stable[tp] < (ends[tp] if first is None else first)]
            except ck.KafkaException as exc:
                # a leader that just moved, a topic just created: asked again; when the offsets cannot be read
                # in time, every partition counts as pending (an abort too many costs only the copy it writes)
                err = _kafka_error(exc)
                if err is not None and (err.retriable() or err.code() in _LEADER_MOVING) \
                        and deadline - time.monotonic() > 0.1:
                    time.sleep(0.05)
                    continue
                log.debug("%s: the last stable offsets could not be read (%s); settling as if pending",
                          self._producer.what, _describe(exc))
                return list(firsts)


def _extra_entries(extra: ExtraEntries | None, written: Written) -> Mapping[str, Sequence[OffsetEntry]] | None:
    """The extra offset entries of a commit: given, or made from what the transaction wrote."""
    if not extra:
        return None
    return extra(written) if callable(extra) else extra


def _fenced(transactional_id: str, why: str) -> ProducerFencedError:
    return ProducerFencedError(f"transactional producer {transactional_id!r} was fenced by a newer instance with the "
                               f"same transactional.id{': ' + why if why else ''}")


class KafkaTransactionalProducer(_KafkaProducerBase, TransactionalProducer):
    """One task's transactional producer: records and source offsets in one Kafka transaction."""

    def __init__(self, backend: KafkaBackend, transactional_id: str, offset_store: str | None,
                 track_metadata: bool, *, transaction_timeout_ms: int = 60_000) -> None:
        self.transactional_id = transactional_id
        self.offset_store_name = offset_store
        conf = backend.client_config(
            "producer",
            defaults={"acks": "all", "partitioner": "consistent", "transaction.timeout.ms": transaction_timeout_ms,
                      "message.timeout.ms": transaction_timeout_ms},
            forced={"enable.idempotence": True, "transactional.id": transactional_id},
        )
        self._fenced = False
        # a fencing code was seen (not merely a fatal error: a broker restart mid-EndTxn may leave the producer
        # fatally in INVALID_TXN_STATE, which a new producer rides out, while a fencing is final)
        self._fencing_seen = False
        conf["error_cb"] = self._error_cb
        super().__init__(backend, conf, track_metadata,
                         f"transactional producer {transactional_id!r} for {backend.bootstrap}", sparse_reports=True)
        self._offsets_topic: tuple[str, int] | None = None
        self._in_txn = False
        self._hanging = _HangingTransactions(self)
        self._group_offsets = TransactionGroupOffsets(self)  # KIP-447: sent by commit_transaction, after settling

    def _error_cb(self, err: ck.KafkaError) -> None:
        # librdkafka reports the fatal "fenced" error here; later calls fail with a bare _STATE error
        if err.code() in _FENCED_CODES or err.fatal():
            self._fenced = True
            self._fencing_seen |= err.code() in _FENCED_CODES
        self.backend._error_cb(err)

    def _fenced_error(self, exc: BaseException | None) -> ProducerFencedError:
        self._fenced = True
        return _fenced(self.transactional_id, "" if exc is None else self.backend.redact(_describe(exc)))

    def _is_fenced(self, exc: BaseException) -> bool:
        if auth_error_code(self._cause(exc)) is not None:
            return False  # a refused permission, fatal or not, is no fencing (:meth:`_refused`)
        err = _kafka_error(exc)
        if err is not None and (err.code() in _FENCED_CODES or err.fatal()):
            self._fencing_seen |= err.code() in _FENCED_CODES
            return True
        if not self._fenced:
            try:
                self._poll(0)  # serve pending error and delivery reports
            except Exception as polled:
                # Apache Kafka: once fenced, librdkafka refuses produce() with a bare _FATAL (fatal() false)
                # and raises the cause, KafkaError(_FENCED, fatal), from the next poll
                cause = _kafka_error(polled)
                if cause is not None and (cause.code() in _FENCED_CODES or cause.fatal()):
                    self._fenced = True
                    self._fencing_seen |= cause.code() in _FENCED_CODES
            # a produce after fencing fails with a bare _STATE error; the cause is in a delivery report
            for failed in (self.tracker.error, *self._offset_errors):
                if failed is not None and failed.code() in _FENCED_CODES:
                    self._fenced = self._fencing_seen = True
        return self._fenced

    def _refused(self, exc: BaseException, doing: str) -> Exception | None:
        """``exc`` as an AuthorizationError when it (or the error behind it) is a refused permission."""
        exc = self._cause(exc)
        if auth_error_code(exc) is None:
            return None
        err = _kafka_error(exc)
        if err is not None and err.fatal():  # a refused producer id or transactional id: nothing more goes through it
            self._fenced = True
        return self.backend.translate(exc, f"{self.what} {doing}", *self._needs(exc))

    def _failure(self, exc: BaseException, doing: str) -> Exception:
        if (refused := self._refused(exc, doing)) is not None:
            return refused
        if self._is_fenced(exc):
            return self._fenced_error(exc)
        return super()._failure(exc, doing)

    def init_transactions(self, timeout: float) -> None:
        self._offsets_topic = self.backend.offsets_topic(self.offset_store_name, "Write")
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._p.init_transactions(max(0.001, deadline - time.monotonic()))
                return
            except ck.KafkaException as exc:
                err = _kafka_error(exc)
                if err is not None and err.retriable() and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                if self._is_fenced(exc):
                    raise self._fenced_error(exc) from exc
                if err is not None and err.code() in _UNREACHABLE_CODES:
                    self._unreachable = True
                    raise BackendUnavailableError(
                        f"{self.what}: init_transactions did not complete within {timeout:g} s; the Kafka "
                        f"cluster at {self.backend.bootstrap} did not answer: {_describe(exc)}") from exc
                raise self._failure(exc, "init_transactions") from exc

    def begin_transaction(self) -> None:
        if self._fenced:
            raise self._fenced_error(None)
        self._poll(0)
        self.tracker.reset()
        self._offset_errors.clear()
        try:
            self._p.begin_transaction()
        except ck.KafkaException as exc:
            raise self._failure(exc, "begin_transaction") from exc
        self._in_txn = True
        self._txn_batches = []
        self.offset_topics_sent.clear()
        self._group_offsets.clear()
        self._hanging.unsettled = False

    def send(self, records: Sequence[ProducerRecord]) -> None:
        super().send(records)
        self._txn_batches.append(records)
        self._hanging.note_sent(records)

    def flush(self, timeout: float) -> Written:
        try:
            self._flush(timeout)
        except BaseException:  # an interrupt too: the transaction is aborted before the exception goes on
            self._abort_after_failure(timeout)
            raise
        written = self.tracker.written()
        self.tracker.reset()
        return written

    def send_group_offsets(self, consumer: Consumer, offsets: Mapping[TopicPartition, int]) -> None:
        if self._fenced:
            raise self._fenced_error(None)
        if not self._in_txn:
            raise BackendError(f"{self.what}: send_group_offsets outside a transaction")
        self._group_offsets.take(consumer, offsets)

    def commit_transaction(self, offsets: Sequence[OffsetEntry], timeout: float,
                           extra: ExtraEntries | None = None) -> Written:
        if self._fenced:
            raise self._fenced_error(None)
        if self._offsets_topic is None:
            raise BackendError(f"{self.what}: commit_transaction before init_transactions")
        deadline = time.monotonic() + timeout
        # KIP-618: a connector's own store is mirrored to the global one IN the transaction (never after it:
        # a process dying in between would leave the global store behind); the runtime's own stores never are
        mirror = bool(offsets) and self.offset_store_name is not None and (
            self.offset_store_name not in INTERNAL_STORES) and self._offsets_topic[0] != self.backend.default_offsets_topic
        try:
            more: Mapping[str, Sequence[OffsetEntry]] | None = None
            if extra or self._hanging.must_check(offsets):
                self._flush(timeout)
                if self._hanging.settle_first(offsets, mirror, deadline):
                    self._flush(timeout)  # the batches sent again after the settling abort
                # called once per commit: the runtime's ledger accumulates what it is given
                more = _extra_entries(extra, self.tracker.written())
            if offsets:
                topic, partitions = self._offsets_topic
                self.send_offsets(topic, partitions, offsets)
                if mirror:
                    global_topic, global_partitions = self.backend.offsets_topic(None, "Write")
                    self.send_offsets(global_topic, global_partitions, offsets)
            if more:
                for store, entries in more.items():
                    if entries:
                        extra_topic, extra_partitions = self.backend.offsets_topic(store, "Write")
                        self.send_offsets(extra_topic, extra_partitions, entries)
                self._flush(timeout)
            self._group_offsets.send(deadline, timeout)
            # librdkafka's commit flushes first, serving every delivery report (so the ranges are complete
            # when it returns; a record that failed fails the commit, its error naming the cause): one call
            # into C instead of two, so a commit on the committer thread needs the GIL less often
            self._commit(deadline, timeout)
            written = self.tracker.written()
        except BaseException as exc:  # an interrupt too: the transaction is aborted before the exception goes on
            self._abort_after_failure(timeout)
            if self._fencing_seen and isinstance(exc, BackendError) and not isinstance(exc, ProducerFencedError):
                # Apache Kafka 4 may answer a fenced producer's EndTxn with UNKNOWN_SERVER_ERROR; the fencing
                # itself shows in the abort that follows: say what happened, not the broker's vague answer (a
                # fatal error without a fencing code, e.g. INVALID_TXN_STATE after a broker restart, stays what
                # it was, so the run rides it out with a new producer)
                raise self._fenced_error(exc) from exc
            raise
        self._in_txn = False
        self._txn_batches = []
        self._group_offsets.clear()
        self.tracker.reset()
        self._offset_errors.clear()
        return written

    def _commit(self, deadline: float, timeout: float) -> None:
        while True:
            try:
                self._p.commit_transaction(max(0.001, deadline - time.monotonic()))
                return
            except ck.KafkaException as exc:
                err = _kafka_error(exc)
                if self._is_fenced(exc):
                    raise self._fenced_error(exc) from exc
                # librdkafka's transactional API: a retriable error (a timeout while the coordinator is away)
                # resumes the same commit when called again; one that requires an abort (records whose
                # delivery is unknown after a broker died) can only be aborted, and the run fails with it
                if err is not None and err.retriable() and not err.txn_requires_abort() \
                        and time.monotonic() < deadline:
                    time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
                    continue
                if err is not None and auth_error_code(exc) is None and (
                        err.code() in _UNREACHABLE_CODES or err.retriable() or err.txn_requires_abort()):
                    self._unreachable = True
                    raise BackendUnavailableError(
                        f"{self.what}: commit_transaction did not complete within {timeout:g} s (the ride-out "
                        f"bound: errors.retry.timeout, at least offset.flush.timeout.ms); the Kafka cluster at "
                        f"{self.backend.bootstrap} did not take the transaction: "
                        f"{self.backend.redact(_describe(exc))}") from exc
                raise self._failure(exc, "commit_transaction") from exc

    def _abort_after_failure(self, timeout: float) -> None:
        if self._fenced or not self._in_txn:
            return
        try:
            # best effort: an unreachable cluster is not waited for again, nor asked when a call still runs (wedged);
            # the coordinator aborts it after transaction.timeout.ms, the next init_transactions of this id too
            if self._wedged is None:
                self._p.abort_transaction(1.0 if self._unreachable else max(timeout, 0.001))
        except ck.KafkaException as exc:
            if self._is_fenced(exc):
                self._fenced = True
            log.warning("%s: aborting after a failure raised %s", self.what, self.backend.redact(_describe(exc)))
        self._in_txn = False
        self._txn_batches = []
        self._group_offsets.clear()
        try:
            self._poll(0)
        except ck.KafkaException as exc:  # the fatal fencing error surfaces here: the failure being raised wins
            if self._is_fenced(exc):
                self._fenced = True
        self.tracker.reset()
        self._offset_errors.clear()

    def abort_transaction(self, timeout: float) -> None:
        if self._fenced:
            raise self._fenced_error(None)
        try:
            self._p.abort_transaction(timeout)
        except ck.KafkaException as exc:
            raise self._failure(exc, "abort_transaction") from exc
        finally:
            self._poll(0)
            self.tracker.reset()
            self._offset_errors.clear()
            self._group_offsets.clear()
        self._in_txn = False

    def close(self) -> None:
        if self._in_txn and not self._fenced and not self._closed and self._wedged is None:
            try:
                self._p.purge(in_queue=True, in_flight=False, blocking=False)
                self._p.abort_transaction(self.backend.connect_timeout)
            except (ck.KafkaException, RuntimeError) as exc:
                log.warning("%s: aborting on close raised %s", self.what, self.backend.redact(_describe(exc)))
            self._in_txn = False
        super().close()
