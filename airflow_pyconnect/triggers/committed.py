"""CommittedRecordsTrigger: an event trigger for ``AssetWatcher`` that fires when records are committed.

Schedule a DAG on new data in a pyconnect store, whoever committed it (a source operator, ``pyconnect
run``, another Airflow), the way the apache-kafka provider's message-queue triggers do for raw topics::

    from airflow.sdk import DAG, Asset, AssetWatcher
    from airflow_pyconnect.triggers.committed import CommittedRecordsTrigger, committed_ranges

    orders = Asset("orders_committed", watchers=[AssetWatcher(
        name="orders_committed", trigger=CommittedRecordsTrigger(topics=["orders"]))])

    with DAG("on_orders", schedule=[orders], user_defined_macros={"committed_ranges": committed_ranges}):
        PyConnectSinkOperator(..., until_offsets="{{ committed_ranges(triggering_asset_events) | tojson }}")

What it watches
---------------
The trigger keeps its position in a consumer group of its own, ``watcher_group`` (default
``airflow-watch-<topic>[+<topic>...]``), in the store of the ``pyconnect`` connection. Each poll reads
the group's committed offsets and the topics' end offsets, **committed data only** (``read_committed``;
on Kafka the last stable offset). When any partition's end moved past the watcher's position, it fires
one event whose payload is plain JSON::

    {"topics": ["orders"], "ranges": {"orders": {"0": [120, 170]}}, "records_upper_bound": 50,
     "watcher_group": "airflow-watch-orders", "pyconnect_conn_id": "pyconnect_default"}

``ranges`` holds ``[from, to)`` per partition that advanced: the exact shape a sink operator's
``until_offsets`` accepts (its target is each ``to``). On SQLite a range holds exactly ``to - from``
records; on Kafka the end of a partition counts transaction markers too, so a range may hold marker
offsets, which committed readers skip: ``records_upper_bound`` is the sum of ``to - from``, an upper
bound there. A sink bounded by these ranges reads from **its own** group's position up to each ``to``:
it delivers each record once even if an event came twice or two events were merged into one DAG run.

``start_from`` says where a new watcher starts on the partitions that exist when it first polls:
``"end"`` (default: only records committed from then on fire) or ``"beginning"`` (everything already
in the topics fires the first event). Partitions and topics that appear later are watched from their
beginning, so nothing committed to them is missed. The starting position is committed to the group at
once, so a restart goes on from it (a watcher whose topics did not exist yet and whose triggerer was
down while they were created and written starts from ``start_from`` again: the one case it misses).

Delivery: at least once, never lost
-----------------------------------
The watcher's group offsets move only **after** Airflow has stored the event. In the triggerer the
trigger runs in Airflow 3.3's shared-stream **ack mode** (``create_shared_stream_producer``): the
:class:`CommittedRecordsProducer` polls, the triggerer fans each raw event out to every trigger with the
same :meth:`~CommittedRecordsTrigger.shared_stream_key` (same connection, group and topics: they share
one poll, and each fires every event), and calls :meth:`CommittedRecordsProducer.advance` once the
trigger events are persisted in the metadata database; only then are the ranges' ends committed to the
group. So a triggerer restart (or a trigger moved to another triggerer) neither loses a range nor,
except for a crash between the event being stored and the commit, repeats one: a crash in that window
fires the same range again after the restart, which Airflow's at-least-once event delivery admits. An
event the triggerer could not persist in time (``[triggerer] shared_stream_ack_timeout``) is never
committed past: its range is read again and fired with the next event.

:meth:`CommittedRecordsTrigger.run` (outside a triggerer: tests, your own event loop) drives the same
producer and commits an event's ends when the caller asks for the next event.

Failures
--------
Every backend call runs in one thread of the producer's own (``run_in_executor``, never on the
triggerer's event loop; one thread, because a backend's consumer belongs to one thread). A store that
cannot be reached (or any other failure to read) is retried with a backoff that doubles from
``poll_interval`` up to ``max_retry_delay`` seconds, with **one log line per failure**, and one line
when it is reachable again; a commit that failed is retried before the next read. Log lines and events
never hold a secret: the connection's password and secret settings, and any URL's password, are masked
(:func:`connect_runtime.secrets.scrub`). The trigger never gives up: a watcher that ended would stop
scheduling the DAG until the triggerer restarts.

Nothing here imports a backend at module level (DAG files import this module).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Hashable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, NamedTuple

from airflow.triggers.base import BaseEventTrigger, TriggerEvent
from airflow.triggers.shared_stream import AdvanceItem, AdvanceOutcome, SharedStreamProducer

if TYPE_CHECKING:
    from connect_runtime.api.records import TopicPartition
    from connect_runtime.backends.base import Backend, Consumer

log = logging.getLogger(__name__)

CLASSPATH = "airflow_pyconnect.triggers.committed.CommittedRecordsTrigger"
START_FROM = ("end", "beginning")
GROUP_PREFIX = "airflow-watch-"
TIMEOUT_S = 30.0
"""Bound of each backend call (reading offsets, committing)."""

Ranges = dict[str, dict[str, list[int]]]
"""``{topic: {"<partition>": [from, to]}}``."""


def default_watcher_group(topics: Iterable[str]) -> str:
    """``airflow-watch-<topic>[+<topic>...]`` (topics sorted)."""
    return GROUP_PREFIX + "+".join(sorted(set(topics)))


def _topics(value: str | Sequence[str]) -> list[str]:
    names = [value] if isinstance(value, str) else list(value)
    if not names or not all(isinstance(t, str) and t.strip() for t in names):
        raise ValueError(f"topics must be a non-empty list of topic names, got {value!r}")
    return sorted({t.strip() for t in names})


class Polled(NamedTuple):
    """What one poll found: the event payload and, per partition that advanced, where its range starts
    and ends (the ``broker_payload`` the triggerer hands back to :meth:`CommittedRecordsProducer.advance`)."""

    payload: dict[str, Any]
    froms: dict[TopicPartition, int]
    tos: dict[TopicPartition, int]


class _Watch:
    """The blocking half: one backend and one consumer in the watcher group, used by one thread only."""

    def __init__(self, pyconnect_conn_id: str, topics: list[str], group: str, start_from: str) -> None:
        self.conn_id, self.topics, self.group, self.start_from = pyconnect_conn_id, topics, group, start_from
        self.next: dict[TopicPartition, int] = {}
        """Per partition, the start of the next range (what is committed, or fired and not yet committed)."""
        self.started = False
        self.secrets: list[str] = []
        self._backend: Backend | None = None
        self._consumer: Consumer | None = None

    def _open(self) -> Consumer:
        if self._consumer is None:
            from airflow_pyconnect.hooks.pyconnect import PyConnectHook

            hook = PyConnectHook(self.conn_id)
            url, settings = hook.backend_config()
            self.secrets = _secret_values(url, settings)
            self._backend = hook.get_backend()
            self._consumer = self._backend.consumer(self.group)
        return self._consumer

    def close(self) -> None:
        consumer, backend, self._consumer, self._backend = self._consumer, self._backend, None, None
        for part in (consumer, backend):
            if part is not None:
                try:
                    part.close()
                except Exception:  # releasing a broken connection
                    pass

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._open().commit(dict(offsets), TIMEOUT_S)

    def poll(self, rewind: Mapping[TopicPartition, int]) -> Polled | None:
        """One read: the payload of the ranges committed since the last one, or ``None``."""
        consumer = self._open()
        for tp, start in rewind.items():  # a fired range that was never stored: fire it again
            if tp in self.next:
                self.next[tp] = min(self.next[tp], start)
        partitions = sorted(set(consumer.partitions(self.topics)))
        new = [tp for tp in partitions if tp not in self.next]
        ends = consumer.end_offsets(partitions, TIMEOUT_S) if partitions else {}
        if new:
            self._place(consumer, new, ends)
        self.started = True
        ranges: Ranges = {}
        froms: dict[TopicPartition, int] = {}
        tos: dict[TopicPartition, int] = {}
        for tp in partitions:
            start, end = self.next[tp], ends[tp]
            if end < start:
                first = consumer.beginning_offsets([tp], TIMEOUT_S)[tp]
                log.warning("pyconnect watcher %s: the end of %s[%d] went back from %d to %d (topic recreated or "
                            "store replaced?): watching it from its beginning, %d", self.group, tp.topic,
                            tp.partition, start, end, first)
                start = first
            if end > start:
                ranges.setdefault(tp.topic, {})[str(tp.partition)] = [start, end]
                froms[tp], tos[tp] = start, end
            self.next[tp] = end
        if not ranges:
            return None
        payload = {
            "topics": list(self.topics),
            "ranges": ranges,
            "records_upper_bound": sum(tos[tp] - froms[tp] for tp in tos),
            "watcher_group": self.group,
            "pyconnect_conn_id": self.conn_id,
        }
        return Polled(payload, froms, tos)

    def _place(self, consumer: Consumer, new: list[TopicPartition], ends: Mapping[TopicPartition, int]) -> None:
        """Where newly seen partitions start: the group's committed offset, else ``start_from`` (on the
        partitions of a watcher's first poll) or their beginning (partitions that appeared later)."""
        committed = consumer.committed(new, TIMEOUT_S)
        fresh = [tp for tp in new if committed.get(tp) is None]
        at_end = (self.start_from == "end" and not self.started and not self.next
                  and all(committed.get(tp) is None for tp in new))
        starts = dict(ends) if at_end else consumer.beginning_offsets(fresh, TIMEOUT_S) if fresh else {}
        baseline = {tp: starts[tp] for tp in fresh}
        if baseline:  # a restart goes on from here
            consumer.commit(baseline, TIMEOUT_S)
            log.info("pyconnect watcher %s: watching %s from %s", self.group,
                     ", ".join(f"{tp.topic}[{tp.partition}]" for tp in fresh),
                     "their end" if at_end else "their beginning")
        for tp in new:
            c = committed.get(tp)
            self.next[tp] = baseline[tp] if c is None else int(c)


def _secret_values(url: str, settings: Mapping[str, Any]) -> list[str]:
    from connect_runtime.api.config import HIDDEN, mask
    from connect_runtime.secrets import url_passwords

    masked = mask(dict(settings))
    return [str(settings[k]) for k, v in masked.items() if v == HIDDEN and settings.get(k)] + url_passwords(url)


def _describe(exc: BaseException, secrets: Iterable[str]) -> str:
    from connect_runtime.secrets import scrub

    return scrub(f"{type(exc).__name__}: {exc}", secrets)


class CommittedRecordsProducer(SharedStreamProducer):
    """The polling half of :class:`CommittedRecordsTrigger` (a shared-stream producer in ack mode).

    ``open_stream`` yields ``(payload, Polled)`` whenever a poll finds new committed ranges;
    ``advance`` commits the ends of the events Airflow stored (see the module docstring). Parameters as
    :class:`CommittedRecordsTrigger`'s.
    """

    def __init__(self, *, topics: Sequence[str], pyconnect_conn_id: str = "pyconnect_default",
                 watcher_group: str | None = None, start_from: str = "end", poll_interval: float = 5.0,
                 max_retry_delay: float = 60.0) -> None:
        self.topics = _topics(topics)
        self.group = watcher_group or default_watcher_group(self.topics)
        self.poll_interval = float(poll_interval)
        self.max_retry_delay = max(float(max_retry_delay), self.poll_interval)
        self._watch = _Watch(pyconnect_conn_id, self.topics, self.group, start_from)
        self._executor: ThreadPoolExecutor | None = None
        self._floor: dict[TopicPartition, int] = {}
        """Per partition, the start of a fired range that was never stored: nothing is committed past it."""
        self._rewind: dict[TopicPartition, int] = {}
        self._to_commit: dict[TopicPartition, int] = {}
        self.failures = 0

    async def _call(self, fn: Any, *args: Any) -> Any:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"pyconnect-watch-{self.group}")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _what(self) -> str:
        return f"pyconnect watcher {self.group} (connection {self._watch.conn_id!r}, topics {', '.join(self.topics)})"

    async def _flush_commits(self) -> None:
        if self._to_commit:
            offsets = dict(self._to_commit)
            await self._call(self._watch.commit, offsets)
            for tp, off in offsets.items():
                if self._to_commit.get(tp) == off:
                    del self._to_commit[tp]

    async def open_stream(self) -> AsyncIterator[tuple[dict[str, Any], Polled]]:
        """Poll forever: yield each new set of committed ranges; retry a failing store with backoff."""
        while True:
            try:
                await self._flush_commits()
                rewind, self._rewind = self._rewind, {}
                try:
                    polled = await self._call(self._watch.poll, rewind)
                except BaseException:  # cancelled too (the triggerer stops us): keep the rewind for the next poll
                    self._rewind = {**rewind, **self._rewind}
                    raise
            except Exception as exc:
                self.failures += 1
                delay = min(self.poll_interval * 2 ** min(self.failures - 1, 30), self.max_retry_delay)
                log.warning("%s: reading the store failed (failure %d, next try in %g s): %s", self._what(),
                            self.failures, delay, _describe(exc, self._watch.secrets))
                await self._call(self._watch.close)  # reconnect on the next try
                await asyncio.sleep(delay)
                continue
            if self.failures:
                log.info("%s: the store is reachable again after %d failure(s)", self._what(), self.failures)
                self.failures = 0
            if polled is not None:
                log.info("%s: new committed records: %s", self._what(), polled.payload["ranges"])
                yield polled.payload, polled
            await asyncio.sleep(self.poll_interval)

    async def advance(self, batch: Sequence[AdvanceItem]) -> None:
        """Commit the ends of the events Airflow stored, in order; hold (and fire again) the range of an
        event that was not stored (``failed``, or broadcast to no trigger), never committing past it."""
        for item in batch:
            polled: Polled = item.broker_payload
            outcome = item.outcome
            if outcome.failed or (outcome.acked == 0 and outcome.rejected == 0):
                for tp, start in polled.froms.items():
                    self._floor[tp] = min(self._floor.get(tp, start), start)
                    self._rewind[tp] = min(self._rewind.get(tp, start), start)
                log.warning("%s: the event of %s was not stored by Airflow (%s): its records fire again",
                            self._what(), polled.payload["ranges"], outcome)
                continue
            for tp, end in polled.tos.items():  # acked, or rejected (a terminal refusal: not fired again)
                floor = self._floor.get(tp)
                if floor is not None:
                    if polled.froms[tp] <= floor:
                        del self._floor[tp]  # this event covered the held range again
                    else:
                        end = floor
                self._to_commit[tp] = max(self._to_commit.get(tp, 0), end)
        try:
            await self._flush_commits()
        except Exception as exc:  # kept, and committed before the next read
            log.warning("%s: committing %s failed, retried before the next read: %s", self._what(),
                        {f"{tp.topic}[{tp.partition}]": o for tp, o in self._to_commit.items()},
                        _describe(exc, self._watch.secrets))

    async def aclose(self) -> None:
        """Commit what is due (best effort), close the backend and stop the thread."""
        if self._executor is None:
            return
        try:
            await self._flush_commits()
        except Exception as exc:
            log.warning("%s: committing on close failed: %s", self._what(), _describe(exc, self._watch.secrets))
        await self._call(self._watch.close)
        executor, self._executor = self._executor, None
        executor.shutdown(wait=False)


class CommittedRecordsTrigger(BaseEventTrigger):
    """Fires an event each time new records are committed to ``topics`` (for ``AssetWatcher``).

    :param topics: the topics to watch (a name or a list of names).
    :param pyconnect_conn_id: the ``pyconnect`` connection naming the store.
    :param watcher_group: the consumer group holding the watcher's position (default
        ``airflow-watch-<topic>[+<topic>...]``). Watchers with the same connection, group and topics share
        one poll and each fires every event; give a watcher of other topics, or one that must keep a
        position of its own, its own group.
    :param start_from: where a new watcher starts on the partitions that exist when it first polls:
        ``"end"`` (records committed from then on) or ``"beginning"`` (everything in the topics).
    :param poll_interval: seconds between two reads of the store.
    :param max_retry_delay: the longest wait between two tries while the store cannot be reached.

    See the module docstring for the event payload, the delivery guarantee and failures.
    """

    def __init__(self, topics: str | Sequence[str], pyconnect_conn_id: str = "pyconnect_default",
                 watcher_group: str | None = None, start_from: str = "end", poll_interval: float = 5.0,
                 max_retry_delay: float = 60.0) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # BaseTrigger.__init__ is not annotated
        self.topics = _topics(topics)
        if start_from not in START_FROM:
            raise ValueError(f"start_from must be one of {', '.join(START_FROM)}, got {start_from!r}")
        if float(poll_interval) <= 0 or float(max_retry_delay) <= 0:
            raise ValueError("poll_interval and max_retry_delay must be positive (seconds)")
        self.pyconnect_conn_id = pyconnect_conn_id
        self.watcher_group = watcher_group or default_watcher_group(self.topics)
        self.start_from = start_from
        self.poll_interval = float(poll_interval)
        self.max_retry_delay = float(max_retry_delay)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            CLASSPATH,
            {
                "topics": list(self.topics),
                "pyconnect_conn_id": self.pyconnect_conn_id,
                "watcher_group": self.watcher_group,
                "start_from": self.start_from,
                "poll_interval": self.poll_interval,
                "max_retry_delay": self.max_retry_delay,
            },
        )

    def shared_stream_key(self) -> Hashable:
        """Watchers of the same topics through the same connection and group share one poll."""
        return "airflow_pyconnect.committed", self.pyconnect_conn_id, self.watcher_group, tuple(self.topics)

    @classmethod
    def create_shared_stream_producer(cls, kwargs: dict[str, Any]) -> CommittedRecordsProducer:
        """Ack mode: the group's offsets move only after Airflow stored the events."""
        return CommittedRecordsProducer(**kwargs)

    async def filter_shared_stream(self, shared_stream: AsyncIterator[Any]) -> AsyncIterator[TriggerEvent]:
        """Every poll that found new committed ranges is one event."""
        async for payload in shared_stream:
            yield TriggerEvent(payload)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """The same polls outside a triggerer's shared stream: an event's ends are committed when the
        caller asks for the next event (the triggerer itself uses :meth:`filter_shared_stream`)."""
        producer = self.create_shared_stream_producer(self.serialize()[1])
        stream = producer.open_stream()
        try:
            async for payload, polled in stream:
                yield TriggerEvent(payload)
                await producer.advance([AdvanceItem(polled, AdvanceOutcome(acked=1, failed=0))])
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
            await producer.aclose()


def committed_ranges(events: Any) -> Ranges:
    """The ranges of the :class:`CommittedRecordsTrigger` events that triggered a DAG run, merged per
    partition into ``[first from, last to]``: a sink operator's ``until_offsets``.

    ``events`` is the ``triggering_asset_events`` of the run (a mapping of asset to events), a list of
    events, one event, or an event's payload. Events of other triggers are ignored; none gives ``{}``
    (a sink bounded by ``{}`` reads nothing). In a template: ``user_defined_macros={"committed_ranges":
    committed_ranges}`` and ``until_offsets="{{ committed_ranges(triggering_asset_events) | tojson }}"``.
    """
    merged: dict[str, dict[str, list[int]]] = {}
    for payload in _payloads(events):
        for topic, parts in (payload.get("ranges") or {}).items():
            for p, (start, end) in parts.items():
                have = merged.setdefault(str(topic), {}).get(str(p))
                merged[str(topic)][str(p)] = [int(start), int(end)] if have is None else \
                    [min(have[0], int(start)), max(have[1], int(end))]
    return merged


def _payloads(events: Any) -> Iterator[Mapping[str, Any]]:
    if events is None or isinstance(events, (str, bytes)):
        return
    if isinstance(events, dict) and isinstance(events.get("ranges"), Mapping):
        yield events  # a payload
        return
    extra = events if isinstance(events, dict) and "payload" in events else getattr(events, "extra", None)
    if isinstance(extra, Mapping):  # one asset event (or its extra)
        payload = extra.get("payload")
        if isinstance(payload, Mapping) and isinstance(payload.get("ranges"), Mapping):
            yield payload
        return
    if isinstance(events, Mapping):  # triggering_asset_events: asset -> events
        events = events.values()
    if isinstance(events, Iterable):
        for item in events:
            yield from _payloads(item)


__all__ = ["CommittedRecordsProducer", "CommittedRecordsTrigger", "Polled", "committed_ranges",
           "default_watcher_group"]
