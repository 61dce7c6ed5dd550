"""The end of a partition, found by reading, not by a ListOffsets query (:class:`_EndReader`; the rule and why:
the package docstring, "End of a partition"). Offset stores read their topic to its end with it too."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import confluent_kafka as ck

from connect_runtime.api.errors import BackendUnavailableError, WaitTimeoutError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends.kafka._access import Need
from connect_runtime.backends.kafka._client import (
    _EOF,
    _GROUPLESS_CONSUMER_CODES,
    _UNREACHABLE_CODES,
    _consume,
    _describe,
    _kafka_error,
    _nogroup,
)

if TYPE_CHECKING:
    from connect_runtime.backends.kafka.backend import KafkaBackend

log = logging.getLogger(__name__)


class _EndReader:
    """A read_committed consumer that reads partitions up to the high watermark returned with fetched
    records (partition EOF), not trusting ListOffsets for the end."""

    def __init__(self, backend: KafkaBackend) -> None:
        self.backend = backend
        conf = backend.client_config(
            "consumer",
            defaults={"fetch.wait.max.ms": 10, "fetch.queue.backoff.ms": 10, "auto.offset.reset": "earliest"},
            forced={"group.id": _nogroup(), "isolation.level": "read_committed", "enable.auto.commit": False,
                    "enable.partition.eof": True},
        )
        conf["error_cb"] = backend.clients.groupless_error_cb
        self._c: Any = backend.make_client(ck.Consumer, conf, "consumer")

    def read(self, starts: Mapping[TopicPartition, int], deadline: float, what: str,
             on_record: Callable[[Any], None]) -> dict[TopicPartition, int]:
        """Read every partition from its start to its end; ``on_record`` gets each message. Returns the
        end reached per partition (the fetched high watermark)."""
        if not starts:
            return {}
        c = self._c
        try:
            c.assign([ck.TopicPartition(tp[0], tp[1], int(off)) for tp, off in starts.items()])
            ends: dict[TopicPartition, int] = {}
            while len(ends) < len(starts):
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sorted(set(starts) - set(ends))
                    raise WaitTimeoutError(
                        f"reading {what} to its end at {self.backend.bootstrap}: {len(missing)} partitions "
                        f"(e.g. {missing[0]}) did not reach their end in time")
                for m in _consume(c, 10_000, min(left, 0.5)):
                    err = m.error()
                    if err is None:
                        on_record(m)
                    elif err.code() == _EOF:
                        ends[TopicPartition(m.topic(), m.partition())] = m.offset()
                    elif err.code() in _GROUPLESS_CONSUMER_CODES:
                        log.debug("reading %s: %s", what, err.str())
                    else:
                        raise self.backend.translate(ck.KafkaException(err), f"reading {what}",
                                                     Need("Read", "Topic", m.topic() or next(iter(starts))[0]))
            return ends
        except ck.KafkaException as exc:
            raise self.backend.translate(exc, f"reading {what}", Need("Read", "Topic", next(iter(starts))[0])) from exc
        finally:
            try:
                c.unassign()
            except (ck.KafkaException, RuntimeError):
                pass

    def watermarks(self, tp: TopicPartition, deadline: float) -> tuple[int, int]:
        """The partition's low and high watermarks. Each attempt is short and asked again until ``deadline``,
        so when the partition's leader dies (a cluster) the query follows the new leader instead of spending
        the whole bound on the dead one."""
        attempt = 2.0
        while True:
            left = deadline - time.monotonic()
            try:
                lo, hi = self._c.get_watermark_offsets(ck.TopicPartition(tp[0], tp[1]),
                                                       timeout=max(0.001, min(attempt, left)))
                return int(lo), int(hi)
            except ck.KafkaException as exc:
                err = _kafka_error(exc)
                retriable = err is not None and (err.retriable() or err.code() in _UNREACHABLE_CODES
                                                 or err.code() == ck.KafkaError._DESTROY_BROKER)
                if retriable and deadline - time.monotonic() > 0.05:
                    log.debug("querying the offsets of %s: %s; asking again", tp, _describe(exc))
                    # the cached leader may be the dead node: ask the cluster for fresh metadata of the topic
                    with contextlib.suppress(Exception):
                        self._c.list_topics(tp[0], timeout=max(0.05, min(attempt, deadline - time.monotonic())))
                    time.sleep(0.05)
                    continue
                if retriable:
                    raise BackendUnavailableError(
                        f"Kafka cluster at {self.backend.bootstrap}: the offsets of {tp} could not be read before the "
                        f"caller's bound ran out: {self.backend.redact(_describe(exc))}") from exc
                raise self.backend.translate(exc, f"querying the offsets of {tp}", Need("Describe", "Topic", tp[0])) from exc

    def record_ends(self, partitions: Sequence[TopicPartition], timeout: float) -> dict[TopicPartition, int]:
        """Per partition, the offset after its last committed record (its first offset if it has none)."""
        deadline = time.monotonic() + timeout
        lows: dict[TopicPartition, int] = {}
        back: dict[TopicPartition, int] = {}
        starts: dict[TopicPartition, int] = {}
        for tp in partitions:
            lo, hi = self.watermarks(tp, deadline)
            lows[tp] = lo
            back[tp] = 2
            starts[tp] = max(lo, hi - 2)
        result: dict[TopicPartition, int] = {}
        while starts:
            last: dict[TopicPartition, int] = {}

            def seen(m: Any, last: dict[TopicPartition, int] = last) -> None:
                tp = TopicPartition(m.topic(), m.partition())
                off = m.offset()
                if off > last.get(tp, -1):
                    last[tp] = off

            ends = self.read(starts, deadline, "partition ends", seen)
            again: dict[TopicPartition, int] = {}
            for tp, start in starts.items():
                if tp in last:
                    result[tp] = last[tp] + 1
                elif start <= lows[tp]:
                    result[tp] = lows[tp]
                else:  # only transaction markers (or aborted records) after start: look further back
                    back[tp] *= 16
                    again[tp] = max(lows[tp], min(start, ends.get(tp, start)) - back[tp])
            starts = again
        return result

    def close(self) -> None:
        try:
            self._c.close()
        except (ck.KafkaException, RuntimeError):
            pass
