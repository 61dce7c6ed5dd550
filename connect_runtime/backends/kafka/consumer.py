"""The Kafka consumer of sink runs and readers: ``isolation.level=read_committed`` and ``enable.auto.commit=false``
forced, explicit assignment, group offsets committed only through :meth:`KafkaConsumer.commit`.

Group commits go through a handle of their own (:class:`_GroupCommitter`): one whose commit could not reach
the cluster is left to finish and close in the background, and the next commit goes through a new one.
Records are built from librdkafka's messages column by column (:func:`_consumed_records`).
"""

from __future__ import annotations

import functools
import logging
import operator
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import confluent_kafka as ck

from connect_runtime.api.errors import BackendError, BackendUnavailableError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends.base import ConsumedRecord, Consumer
from connect_runtime.backends.kafka._access import Need, group_refusal
from connect_runtime.backends.kafka._client import (
    _GROUPLESS_CONSUMER_CODES,
    _NOT_AVAILABLE,
    _TRANSIENT_CONSUMER_CODES,
    _consume,
    _is_secret,
    _nogroup,
    bounded_call,
)
from connect_runtime.backends.kafka.ends import _EndReader

if TYPE_CHECKING:
    from connect_runtime.backends.kafka.backend import KafkaBackend

log = logging.getLogger(__name__)

_msg_error = ck.Message.error
_new_consumed = functools.partial(tuple.__new__, ConsumedRecord)
_ts_type = operator.itemgetter(0)
_ts_value = operator.itemgetter(1)


def _consumed_records(msgs: list[Any]) -> list[ConsumedRecord]:
    """The records of a batch of messages (no error among them), built column by column with C-level
    ``map`` passes (one per field) rather than a Python step per message: about 4x cheaper per record."""
    M = ck.Message
    stamps = list(map(M.timestamp, msgs))
    if _NOT_AVAILABLE in set(map(_ts_type, stamps)):
        ts: Iterable[int | None] = [None if t == _NOT_AVAILABLE else v for t, v in stamps]
    else:
        ts = map(_ts_value, stamps)
    return list(map(_new_consumed, zip(map(M.topic, msgs), map(M.partition, msgs), map(M.offset, msgs),  # noqa: B905
                                       map(M.key, msgs), map(M.value, msgs), ts, map(M.headers, msgs))))


_FIRST_COMMITTED_S = 2.0
"""Bound on the first attempt of :meth:`KafkaConsumer.committed` before the group is asked about (a refused group
makes librdkafka wait out the whole timeout)."""


def _timed_out(exc: ck.KafkaException) -> bool:
    err = exc.args[0] if exc.args and isinstance(exc.args[0], ck.KafkaError) else None
    return err is not None and err.code() in (ck.KafkaError._TIMED_OUT, ck.KafkaError.REQUEST_TIMED_OUT)


class KafkaConsumer(Consumer):
    """read_committed, explicit assignment, group offsets committed only by :meth:`commit`."""

    def __init__(self, backend: KafkaBackend, group_id: str | None) -> None:
        self.backend = backend
        self.group_id = group_id
        conf = backend.client_config(
            "consumer",
            defaults={"fetch.queue.backoff.ms": 10, "auto.offset.reset": "earliest"},
            forced={"group.id": group_id or _nogroup(), "isolation.level": "read_committed",
                    "enable.auto.commit": False, "enable.partition.eof": False},
        )
        self.effective_config = {k: "***" if _is_secret(k) else v for k, v in conf.items()
                                 if k not in ("logger", "error_cb")}
        """The librdkafka properties this consumer was created with (secrets masked)."""
        self._passing = _TRANSIENT_CONSUMER_CODES if group_id else _GROUPLESS_CONSUMER_CODES
        if not group_id:
            conf["error_cb"] = backend.clients.groupless_error_cb
        self._c: Any = backend.make_client(ck.Consumer, conf, "consumer")
        self._consume = self._c.consume
        self._ends: _EndReader | None = None
        self._assigned: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        self._closed = False
        # taken now, a copy (serialised): a commit on another thread never calls into this handle, which the task
        # may be closing
        self._group_metadata: Any = None if group_id is None else self._c.consumer_group_metadata()
        self._committer = None if group_id is None else _GroupCommitter(backend, conf, self._what(), group_id)

    def _what(self) -> str:
        return f"consumer (group {self.group_id!r})" if self.group_id else "consumer"

    def partitions(self, topics: Sequence[str] = (), pattern: str | None = None) -> list[TopicPartition]:
        try:
            md = self._c.list_topics(timeout=self.backend.connect_timeout)
        except ck.KafkaException as exc:
            raise self.backend._unavailable(exc, "reading cluster metadata") from exc
        available = {name: t for name, t in md.topics.items() if t.error is None}
        if topics:
            names = list(dict.fromkeys(topics))
            missing = [t for t in names if t not in available]
            for topic in missing:  # a topic the principal may not see is left out of the metadata: ask for it by name
                self._check_visible(topic)
            if missing:
                log.warning("kafka consumer: topics %s do not exist at %s", missing, self.backend.bootstrap)
        elif pattern is not None:
            rx = re.compile(pattern)
            names = sorted(t for t in available if rx.fullmatch(t) and not t.startswith("__"))
        else:
            return []
        return [TopicPartition(t, p) for t in names if t in available for p in sorted(available[t].partitions)]

    def _check_visible(self, topic: str) -> None:
        """An :class:`AuthorizationError` (Read on ``topic``) when the metadata of ``topic`` asked by name says it is
        refused to this principal; nothing when it is merely missing."""
        try:
            meta = self._c.list_topics(topic=topic, timeout=self.backend.connect_timeout).topics.get(topic)
        except ck.KafkaException as exc:
            raise self.backend._unavailable(exc, f"reading the metadata of topic {topic!r}",
                                            Need("Read", "Topic", topic)) from exc
        if meta is not None and meta.error is not None:
            refused = self.backend.clients.denied(meta.error, f"reading topic {topic!r}", Need("Read", "Topic", topic))
            if refused is not None:
                raise refused

    def committed(self, partitions: Sequence[TopicPartition], timeout: float) -> dict[TopicPartition, int | None]:
        if not partitions:
            return {}
        if self.group_id is None:
            return {tp: None for tp in partitions}
        asked = [ck.TopicPartition(t, p) for t, p in partitions]
        started = time.monotonic()
        half = started + timeout / 2
        try:
            try:
                # stable (KIP-447's require_stable, as a read_committed consumer asks): waits while a transaction
                # holds newer offsets, which a run's commit fence ends before the run reads them. A refused group
                # shows only as a timeout here (librdkafka waits for a coordinator it may not look up): a first
                # short attempt, then, before waiting longer, the group is asked about directly
                got = self._c.committed(asked, timeout=min(timeout / 2, _FIRST_COMMITTED_S))
            except ck.KafkaException as exc:
                if not _timed_out(exc) or time.monotonic() >= half:
                    raise
                refused = group_refusal(self.backend.admin, self.group_id, self.backend.connect_timeout)
                if refused is not None:
                    raise self.backend._unavailable(ck.KafkaException(refused),
                                                    f"reading committed offsets of group {self.group_id!r}",
                                                    *self._committed_needs(partitions)) from exc
                got = self._c.committed(asked, timeout=max(0.001, half - time.monotonic()))
        except ck.KafkaException:
            # a transaction still holds newer offsets (a run that crashed inside its commit: open until the next
            # run's fence aborts it or it times out), or the cluster did not answer: the last committed offsets
            got = self._last_committed(asked, max(0.001, timeout - (time.monotonic() - started)), partitions)
        out: dict[TopicPartition, int | None] = {}
        for tp in got:
            if tp.error is not None:
                raise self.backend.translate(ck.KafkaException(tp.error),
                                             f"reading the committed offset of {tp.topic}[{tp.partition}]",
                                             Need("Describe", "Group", self.group_id), Need("Describe", "Topic", tp.topic))
            out[TopicPartition(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else None
        return out

    def _last_committed(self, tps: list[Any], timeout: float, partitions: Sequence[TopicPartition]) -> list[Any]:
        """The group's last committed offsets, not waiting for a transaction holding newer ones."""
        group = str(self.group_id)
        try:
            futures = self.backend.admin.list_consumer_group_offsets(
                [ck.ConsumerGroupTopicPartitions(group, tps)], require_stable=False, request_timeout=timeout)
            return list(futures[group].result().topic_partitions)
        except ck.KafkaException as exc:
            raise self.backend._unavailable(exc, f"reading committed offsets of group {self.group_id!r}",
                                            *self._committed_needs(partitions)) from exc

    def _committed_needs(self, partitions: Sequence[TopicPartition]) -> list[Need]:
        """What reading the group's committed offsets needs."""
        return [Need("Describe", "Group", str(self.group_id), also="Read implies it; a sink run needs Read"),
                Need("Describe", "Topic", partitions[0][0])]

    def _end_reader(self) -> _EndReader:
        if self._ends is None:
            self._ends = _EndReader(self.backend)
        return self._ends

    def end_offsets(self, partitions: Sequence[TopicPartition], timeout: float) -> dict[TopicPartition, int]:
        return self._end_reader().record_ends(list(partitions), timeout)

    def beginning_offsets(self, partitions: Sequence[TopicPartition], timeout: float) -> dict[TopicPartition, int]:
        deadline = time.monotonic() + timeout
        reader = self._end_reader()
        return {tp: reader.watermarks(tp, deadline)[0] for tp in partitions}

    def assign(self, positions: Mapping[TopicPartition, int]) -> None:
        self._assigned = {TopicPartition(tp[0], tp[1]): int(o) for tp, o in positions.items()}
        self._paused.clear()
        try:
            self._c.assign([ck.TopicPartition(t, p, o) for (t, p), o in self._assigned.items()])
        except ck.KafkaException as exc:
            raise self.backend.translate(exc, f"{self._what()} assign") from exc

    def seek(self, partition: TopicPartition, offset: int) -> None:
        if partition not in self._assigned:
            raise BackendError(f"{self._what()}: seek on {partition}, which is not assigned")
        try:
            self._c.seek(ck.TopicPartition(partition[0], partition[1], int(offset)))
        except ck.KafkaException:
            # not fetching yet ("erroneous state"): assign again with the new position
            positions = {}
            try:
                for tp in self._c.position([ck.TopicPartition(t, p) for t, p in self._assigned]):
                    positions[TopicPartition(tp.topic, tp.partition)] = tp.offset
            except ck.KafkaException as exc:
                raise self.backend.translate(exc, f"{self._what()} seek") from exc
            for tp, pos in positions.items():
                if pos < 0:
                    positions[tp] = self._assigned[tp]
            positions[TopicPartition(partition[0], partition[1])] = int(offset)
            paused = sorted(self._paused)
            self.assign(positions)
            self.pause(paused)

    def pause(self, partitions: Sequence[TopicPartition]) -> None:
        if partitions:
            try:
                self._c.pause([ck.TopicPartition(t, p) for t, p in partitions])
                self._paused.update(TopicPartition(t, p) for t, p in partitions)
            except ck.KafkaException as exc:
                raise self.backend.translate(exc, f"{self._what()} pause") from exc

    def resume(self, partitions: Sequence[TopicPartition]) -> None:
        if partitions:
            try:
                self._c.resume([ck.TopicPartition(t, p) for t, p in partitions])
                self._paused.difference_update(TopicPartition(t, p) for t, p in partitions)
            except ck.KafkaException as exc:
                raise self.backend.translate(exc, f"{self._what()} resume") from exc

    def poll(self, max_records: int, timeout: float) -> list[ConsumedRecord]:
        try:
            msgs = _consume(self._c, max(1, max_records), timeout)
        except ck.KafkaException as exc:
            raise self.backend.translate(exc, f"{self._what()} poll", *self._read_needs()) from exc
        if not msgs:
            return []
        if any(map(_msg_error, msgs)):  # rare: error events among the messages
            kept = []
            for m in msgs:
                err = m.error()
                if err is None:
                    kept.append(m)
                elif err.code() in self._passing:
                    log.debug("%s: %s", self._what(), err.str())
                else:
                    raise self.backend.translate(ck.KafkaException(err), f"{self._what()} poll",
                                                 *self._read_needs(m.topic()))
            msgs = kept
        return _consumed_records(msgs)

    def _read_needs(self, topic: str | None = None) -> list[Need]:
        """What polling needs: Read on the topic (the refused one when the error names it) and on the group."""
        topic = topic or next(iter(self._assigned), ("<an assigned topic>", 0))[0]
        needs = [Need("Read", "Topic", topic)]
        if self.group_id:
            needs.append(Need("Read", "Group", self.group_id))
        return needs

    def group_metadata(self) -> Any:
        """librdkafka's consumer group metadata of this consumer, for a transactional producer committing the
        group's offsets (KIP-447): an explicitly assigned consumer never joins its group, so it is the group id with
        generation -1 and no member id, which the group coordinator accepts for a group without members."""
        if self._group_metadata is None:
            raise BackendError("a consumer without a group has no group offsets to commit")
        return self._group_metadata

    def commit(self, offsets: Mapping[TopicPartition, int], timeout: float) -> None:
        if not offsets:
            return
        if self._committer is None:  # no group
            raise BackendError("a consumer without a group cannot commit offsets")
        self._committer.commit([ck.TopicPartition(t, p, int(o)) for (t, p), o in offsets.items()], timeout)

    def close(self) -> None:
        ends, self._ends = self._ends, None
        if ends is not None:
            ends.close()
        if self._closed:
            return
        self._closed = True
        if self._committer is not None:
            self._committer.close()
        try:
            self._c.close()
        except (ck.KafkaException, RuntimeError):
            pass


class _GroupCommitter:
    """The client a consumer's group commits go through: a handle of its own (same group, no assignment), so
    one whose commit could not reach the cluster is replaced, not waited for (see :meth:`commit`)."""

    def __init__(self, backend: KafkaBackend, conf: dict[str, Any], what: str, group_id: str) -> None:
        self.backend = backend
        self._conf = conf
        self._what = what
        self._group_id = group_id
        self._client: Any = None

    def commit(self, tps: list[Any], timeout: float) -> None:
        if self._client is None:
            self._client = self.backend.make_client(ck.Consumer, self._conf, "consumer")
        client = self._client
        try:
            running, result = bounded_call(lambda: client.commit(offsets=tps, asynchronous=False), timeout,
                                           "pyconnect-kafka-commit")
        except ck.KafkaException as exc:
            raise self.backend._unavailable(exc, f"committing offsets of group {self._group_id!r}",
                                            Need("Read", "Group", self._group_id),
                                            Need("Read", "Topic", tps[0].topic)) from exc
        if running is not None:
            # librdkafka's synchronous commit goes on until it gives up by itself (after a broker restart it was
            # seen stuck for 40 s while the cluster answered again): this handle is left to finish it and close in
            # the background, and the next commit goes through a new one
            self._client = None
            _close_in_background(client, running)
            raise BackendUnavailableError(
                f"Kafka cluster at {self.backend.bootstrap} did not answer the {self._what} committing offsets "
                f"within {timeout:g} s")
        for tp in result or []:
            if tp.error is not None:
                raise self.backend.translate(ck.KafkaException(tp.error),
                                             f"committing the offset of {tp.topic}[{tp.partition}]",
                                             Need("Read", "Group", self._group_id), Need("Read", "Topic", tp.topic))

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except (ck.KafkaException, RuntimeError):
                pass


def _close_in_background(client: Any, busy: threading.Thread) -> None:
    """Close a consumer handle once the call ``busy`` runs on it has returned (never destroy it under that call),
    without anyone waiting for it."""

    def close() -> None:
        busy.join()
        try:
            client.close()
        except (ck.KafkaException, RuntimeError):
            pass

    threading.Thread(target=close, name="kafka-consumer-close", daemon=True).start()

