"""A consumer group's offsets committed in a Kafka transaction (KIP-447's ``send_offsets_to_transaction``): what a
sink's commit fence uses where ``Capabilities.group_offsets_in_transactions``
(:class:`~connect_runtime.runtime.fencing.SinkCommitFence`).

The offsets a transaction carries are sent by its commit, after anything the commit may abort and send again (the
hanging-transaction defence of :mod:`.transactions`: an abort drops them), then committed with it: they become the
group's committed offsets with the transaction, and never when it aborts or its producer was fenced (a newer
instance's ``init_transactions`` aborts the open transaction, offsets included).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import confluent_kafka as ck

from connect_runtime.api.errors import BackendError, BackendUnavailableError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends.base import Consumer
from connect_runtime.backends.kafka._client import _UNREACHABLE_CODES, _describe, _kafka_error, bounded_call
from connect_runtime.backends.kafka.consumer import KafkaConsumer

if TYPE_CHECKING:
    from connect_runtime.backends.kafka.transactions import KafkaTransactionalProducer


SEND_GRACE_S = 2.0
"""How long past its own timeout ``send_offsets_to_transaction`` is waited for before its producer is given up:
librdkafka does not enforce that timeout on the group coordinator's requests (confluentinc/librdkafka#5456: a
coordinator that is frozen, its connection open but never answering, holds the call for ever)."""


class TransactionGroupOffsets:
    """The group offsets of one transaction of ``producer``: :meth:`take` them, :meth:`send` them in its commit,
    :meth:`clear` them when it ends."""

    def __init__(self, producer: KafkaTransactionalProducer) -> None:
        self._producer = producer
        self._pending: tuple[str, list[Any], Any] | None = None

    def take(self, consumer: Consumer, offsets: Mapping[TopicPartition, int]) -> None:
        """``consumer``'s group offsets (next offset to read) go into the open transaction. The group metadata is
        the consumer's (an explicitly assigned consumer: its group id at generation -1, no member id, which the
        group coordinator accepts for a group without members)."""
        owner = self._producer
        if not isinstance(consumer, KafkaConsumer) or consumer.group_id is None:
            raise BackendError(f"{owner.what}: group offsets need a Kafka consumer with a group, got {consumer!r}")
        self._pending = (consumer.group_id, [ck.TopicPartition(t, p, int(o)) for (t, p), o in sorted(offsets.items())],
                         consumer.group_metadata())

    def send(self, deadline: float, timeout: float) -> None:
        """AddOffsetsToTxn and TxnOffsetCommit of the offsets taken (if any), within the commit's bound."""
        if self._pending is None:
            return
        owner = self._producer
        backend = owner.backend
        group, tps, metadata = self._pending
        try:
            _bounded_send(owner, tps, metadata, max(0.001, deadline - time.monotonic()), group, timeout)
        except ck.KafkaException as exc:
            if owner._is_fenced(exc):
                raise owner._fenced_error(exc) from exc
            err = _kafka_error(exc)
            if err is not None and (err.code() in _UNREACHABLE_CODES or err.retriable() or err.txn_requires_abort()):
                owner._unreachable |= err.code() in _UNREACHABLE_CODES
                raise BackendUnavailableError(
                    f"{owner.what}: sending the offsets of group {group!r} to the transaction did not complete "
                    f"within {timeout:g} s (offset.flush.timeout.ms); the Kafka cluster at {backend.bootstrap} did "
                    f"not take them: {backend.redact(_describe(exc))}") from exc
            raise backend.translate(exc, f"{owner.what} sending the offsets of group {group!r} to the "
                                         f"transaction") from exc

    def clear(self) -> None:
        """The transaction ended (committed or aborted): its offsets with it."""
        self._pending = None


def _bounded_send(owner: KafkaTransactionalProducer, tps: list[Any], metadata: Any, bound: float, group: str,
                  timeout: float) -> None:
    """``send_offsets_to_transaction`` waited for ``bound`` plus :data:`SEND_GRACE_S`. A call still running then is
    left to its thread and the producer wedged (never used again, its handle destroyed only after the call returned:
    :meth:`~.producers._KafkaProducerBase.wedge`); its transaction stays open until the coordinator's transaction
    timeout or the next ``init_transactions`` of its id aborts it, offsets included."""
    running, _ = bounded_call(lambda: owner._p.send_offsets_to_transaction(tps, metadata, bound),
                              bound + SEND_GRACE_S, "kafka-send-offsets")
    if running is not None:
        owner.wedge(running)
        raise BackendUnavailableError(
            f"{owner.what}: sending the offsets of group {group!r} to the transaction did not return within "
            f"{bound + SEND_GRACE_S:g} s (offset.flush.timeout.ms {timeout:g} s and {SEND_GRACE_S:g} s more): the "
            f"Kafka cluster at {owner.backend.bootstrap} did not answer, and librdkafka does not bound that call "
            "(confluentinc/librdkafka#5456); the producer is given up and its transaction aborted by the cluster")


__all__ = ["SEND_GRACE_S", "TransactionGroupOffsets"]
