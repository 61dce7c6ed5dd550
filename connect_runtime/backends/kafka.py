"""The Kafka backend: ``kafka://host:9092[,host2:9092]`` over confluent-kafka (librdkafka).

``confluent_kafka`` is imported only here, and this module only when a ``kafka://`` URL is opened.

Settings (the ``settings`` mapping of :func:`connect_runtime.backends.open_backend`):

- any librdkafka property (``security.protocol``, ``sasl.*``, ``ssl.*`` files, ...) applies to every
  client; ``producer.override.<p>``, ``consumer.override.<p>`` and ``admin.override.<p>`` apply to
  that kind of client only. Values are never logged.
- ``cluster.id`` (default ``connect-cluster``): prefix of transactional ids,
  ``<cluster id>-<connector>-<task>``.
- ``connect.timeout.ms`` (default 10000): bound on reaching the cluster (metadata, admin requests,
  producer init); an unreachable cluster raises :class:`BackendUnavailableError` naming the
  bootstrap servers within about this long.
- ``offset.storage.topic`` (default ``connect-offsets``), ``offset.storage.partitions`` (default 25),
  ``offset.storage.replication.factor`` (default -1, the broker's default): the default offsets
  topic, created compacted when missing (Kafka Connect's worker settings of the same names).
- ``offset.storage.read.timeout.ms`` (default 30000): bound on reading an offsets topic to its end.
- ``topic.creation.default.replication.factor`` (default -1) and any other
  ``topic.creation.default.<topic config>`` for topics created by :meth:`KafkaBackend.create_topics`.

Forced, whatever the settings say: producers are idempotent (``enable.idempotence=true``); consumers
are ``isolation.level=read_committed`` with ``enable.auto.commit=false`` (group offsets are committed
only through :meth:`KafkaConsumer.commit`).

Delivery reports: a transactional producer without ``track_metadata`` (and with the default
``partitioner=consistent``) settles each record's partition itself (``crc32(key) % partitions``,
partition 0 without a key, the same choice librdkafka would make) and asks for delivery reports of
only the first and last record per partition of each send: ``Written.ranges`` need no more, and a
record that fails delivery fails ``commit_transaction``. Plain producers and ``track_metadata`` keep
a report per record.

End of a partition: a ListOffsets query is not trusted for the end of a partition (it is wrong on
some Kafka-protocol brokers, and on Kafka it names the offset after the last transaction marker,
not after the last record). The end is found by reading: a probe consumer reads from just before
the queried end up to the high watermark returned with fetched records (``enable.partition.eof``),
stepping further back while it sees no record; the end is the offset after the last committed record.

Source offsets: one compacted topic per offset store, records keyed and valued exactly as Kafka
Connect writes them, partitioned with Kafka's murmur2 (as Kafka Connect does), so the same key
always lands in the same partition. Reading replays the topic to its end (last value per key wins,
a null value deletes); keys are re-canonicalised so keys written by Kafka Connect in any key order
are found.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import logging
import operator
import re
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from connect_runtime.api.errors import (
    BackendError,
    BackendUnavailableError,
    ConfigError,
    ProducerFencedError,
    WaitTimeoutError,
)
from connect_runtime.api.records import RecordMetadata, TopicPartition
from connect_runtime.backends.base import (
    INTERNAL_STORES,
    Backend,
    Capabilities,
    ConsumedRecord,
    Consumer,
    ExtraEntries,
    OffsetEntry,
    OffsetStore,
    Producer,
    ProducerRecord,
    Ranges,
    TransactionalProducer,
    WireHeaders,
    Written,
    canonical_offset_key,
)

log = logging.getLogger(__name__)
_librdkafka_logger = logging.getLogger(__name__ + ".librdkafka")

_VARYING = re.compile(r"after \d+ms|, \d+ identical error\(s\) suppressed|\(\d+ identical error\(s\) suppressed\)|"
                      r"(?<=#producer)-\d+|(?<=#consumer)-\d+|(?<=#admin)-\d+")


_TOPIC_PARTITION = operator.itemgetter(0, 1)
_THREAD = re.compile(r"^\[thrd:[^\]]*\]:\s*")


class _Quiet:
    """Client errors and librdkafka log lines, each logged once per :attr:`INTERVAL` s: a broker that is down
    makes every client report it every few hundred ms, twice (librdkafka's log line and the error callback),
    which buried the one line that mattered. The same event (same text but for timings and client numbers,
    whichever of the two reported it) is logged once; the next line after the interval says how many were
    left out."""

    INTERVAL = 30.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, list[float]] = {}  # key -> [last logged (monotonic), left out since]

    def emit(self, logger: logging.Logger, level: int, event: str, line: str) -> None:
        if not logger.isEnabledFor(level):
            return
        key = _VARYING.sub("", event)
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen[0] < self.INTERVAL:
                seen[1] += 1
                return
            left_out = 0 if seen is None else int(seen[1])
            if len(self._seen) > 4096:
                self._seen.clear()
            self._seen[key] = [now, 0]
        if left_out:
            line = f"{line} ({left_out} more like it in the last {self.INTERVAL:g} s left out)"
        logger.log(level, "%s", line)


_QUIET = _Quiet()


class _LibrdkafkaLog:
    """The ``logger`` given to librdkafka (confluent-kafka calls ``log(level, "%s [%s] %s", facility, client,
    message)``), through :data:`_QUIET`."""

    def log(self, level: int, fmt: str, *args: Any, **_: Any) -> None:
        line = fmt % args if args else fmt
        event = _THREAD.sub("", str(args[-1])) if args else line  # the same text as the error callback's
        _QUIET.emit(_librdkafka_logger, level, event, line)


_librdkafka_log = _LibrdkafkaLog()

DEFAULT_CLUSTER_ID = "connect-cluster"
DEFAULT_OFFSETS_TOPIC = "connect-offsets"

# settings of this backend (everything else is a librdkafka property)
_OWN_SETTINGS = {
    "cluster.id": DEFAULT_CLUSTER_ID,
    "connect.timeout.ms": 10_000,
    "offset.storage.topic": DEFAULT_OFFSETS_TOPIC,
    "offset.storage.partitions": 25,
    "offset.storage.replication.factor": -1,
    "offset.storage.read.timeout.ms": 30_000,
}
_PREFIXES = ("producer.override.", "consumer.override.", "admin.override.")
_TOPIC_CREATION = "topic.creation.default."
_SECRET_WORDS = ("password", "secret", "token", "key", "jaas", "credential")

_FENCED_CODES = frozenset(
    {ck.KafkaError._FENCED, ck.KafkaError.PRODUCER_FENCED, ck.KafkaError.INVALID_PRODUCER_EPOCH,
     ck.KafkaError.TRANSACTION_COORDINATOR_FENCED}
)
_UNREACHABLE_CODES = frozenset(
    {ck.KafkaError._TRANSPORT, ck.KafkaError._ALL_BROKERS_DOWN, ck.KafkaError._TIMED_OUT,
     ck.KafkaError._MSG_TIMED_OUT, ck.KafkaError.REQUEST_TIMED_OUT, ck.KafkaError._TIMED_OUT_QUEUE}
)
# consumer errors that pass on their own (librdkafka reconnects and refetches)
_TRANSIENT_CONSUMER_CODES = _UNREACHABLE_CODES | {ck.KafkaError._PARTITION_EOF}

_EOF = ck.KafkaError._PARTITION_EOF
_NOT_AVAILABLE = ck.TIMESTAMP_NOT_AVAILABLE
_POLL_EVERY = 1000
"""Produce calls between two ``poll(0)`` (serves delivery reports while a big batch is queued)."""
_PARTITION_COUNT_MAX_AGE = 300.0
"""Seconds a transactional producer trusts a topic's partition count (librdkafka's default
``topic.metadata.refresh.interval.ms``) before asking the cluster again."""


# --------------------------------------------------------------------------------------------------
# Helpers


def murmur2_partition(key: bytes, partitions: int) -> int:
    """Kafka's default partition of a keyed record: ``toPositive(murmur2(key)) % partitions``."""
    m = 0x5BD1E995
    length = len(key)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    whole = length & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(key[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= key[whole + 2] << 16
    if rest >= 2:
        h ^= key[whole + 1] << 8
    if rest >= 1:
        h ^= key[whole]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


def _is_secret(name: str) -> bool:
    lowered = name.lower()
    return any(w in lowered for w in _SECRET_WORDS) and not lowered.endswith(".location")


def _kafka_error(exc: BaseException) -> ck.KafkaError | None:
    if isinstance(exc, ck.KafkaException) and exc.args and isinstance(exc.args[0], ck.KafkaError):
        return exc.args[0]
    return None


def _unwrap(exc: BaseException) -> BaseException:
    """The KafkaException behind a SystemError (confluent-kafka raises one when a callback runs while a
    fatal client error is pending; the KafkaException is its cause)."""
    if isinstance(exc, SystemError):
        inner = exc.__cause__ or exc.__context__
        if isinstance(inner, ck.KafkaException):
            return inner
    return exc


def _describe(exc: BaseException) -> str:
    err = _kafka_error(exc)
    if err is not None:
        return f"{err.name()}: {err.str()}"
    return f"{type(exc).__name__}: {exc}"


def _parse_bootstrap(url: str) -> str:
    rest = url.split("://", 1)[1] if "://" in url else ""
    rest = rest.split("?", 1)[0].strip("/")
    servers = [s.strip() for s in rest.split(",") if s.strip()]
    bad = [s for s in servers if not re.fullmatch(r"(\[[0-9a-fA-F:.]+\]|[^:/\s\[\]]+):\d{1,5}", s)]
    if not servers or bad:
        raise ConfigError(errors={"backend": f"expected a URL kafka://host:port[,host:port], got {url!r}"})
    return ",".join(servers)


def _consume(consumer: Any, max_messages: int, timeout: float) -> list[Any]:
    """Up to ``max_messages`` messages, returning as soon as any are there (``consume`` alone waits
    for the whole count or the whole timeout)."""
    msgs: list[Any] = consumer.consume(max_messages, 0)
    if msgs or timeout <= 0:
        return msgs
    first = consumer.poll(timeout)
    if first is None:
        return []
    if max_messages > 1:
        more: list[Any] = consumer.consume(max_messages - 1, 0)
        if more:
            more.insert(0, first)
            return more
    return [first]


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


# --------------------------------------------------------------------------------------------------
# Backend


class KafkaBackend(Backend):
    """Records in Kafka topics, source offsets in compacted offsets topics, group offsets in Kafka."""

    capabilities = Capabilities(commits_check_generation=False, transaction_markers=True, commit_waits_on_io=True,
                                atomic_update_entry=False)

    def __init__(self, url: str, bootstrap: str, settings: Mapping[str, Any]) -> None:
        self.url = url
        self.bootstrap = bootstrap
        own: dict[str, Any] = dict(_OWN_SETTINGS)
        common: dict[str, Any] = {}
        overrides: dict[str, dict[str, Any]] = {p: {} for p in _PREFIXES}
        topic_creation: dict[str, str] = {}
        for raw_name, value in settings.items():
            name = str(raw_name)
            if name in own:
                own[name] = value
            elif name.startswith(_TOPIC_CREATION):
                topic_creation[name[len(_TOPIC_CREATION):]] = str(value)
            elif name.startswith(_PREFIXES):
                prefix = next(p for p in _PREFIXES if name.startswith(p))
                overrides[prefix][name[len(prefix):]] = value
            elif name == "bootstrap.servers":
                if str(value) != bootstrap:
                    log.warning("kafka backend: setting bootstrap.servers is ignored; the URL names the servers")
            else:
                common[name] = value
        errors: dict[str, str] = {}

        def number(name: str, minimum: int) -> int:
            try:
                v = int(own[name])
            except (TypeError, ValueError):
                errors[name] = f"expected an integer, got {own[name]!r}"
                return int(str(_OWN_SETTINGS[name]))
            if v < minimum:
                errors[name] = f"expected a value of at least {minimum}, got {v}"
            return v

        self.connect_timeout = number("connect.timeout.ms", 1) / 1000
        self.offsets_partitions = number("offset.storage.partitions", 1)
        self.offsets_replication = number("offset.storage.replication.factor", -1)
        self.read_timeout = number("offset.storage.read.timeout.ms", 1) / 1000
        self.default_partitions = 1
        if "partitions" in topic_creation:
            try:
                self.default_partitions = int(topic_creation.pop("partitions"))
            except ValueError:
                errors["topic.creation.default.partitions"] = "expected an integer"
        try:
            self.topic_replication = int(topic_creation.pop("replication.factor", -1))
        except ValueError:
            errors["topic.creation.default.replication.factor"] = "expected an integer"
            self.topic_replication = -1
        self.topic_configs = topic_creation
        cid = own["cluster.id"]
        self.cluster_id: str | None = None if cid is None or str(cid) == "" else str(cid)
        self.default_offsets_topic = str(own["offset.storage.topic"] or DEFAULT_OFFSETS_TOPIC)
        if errors:
            raise ConfigError(errors=errors)
        self._common = common
        self._overrides = overrides
        self._secrets = [str(v) for k, v in list(common.items()) + [
            (k, v) for o in overrides.values() for k, v in o.items()] if _is_secret(k) and str(v)]
        self._lock = threading.Lock()
        self._admin: Any = None
        self._offset_topics: dict[str, int] = {}
        self._mirror: KafkaPlainProducer | None = None
        self._offsets_write_lock = threading.Lock()
        self._closed = False

    @classmethod
    def from_url(cls, url: str, settings: Mapping[str, Any]) -> KafkaBackend:
        """A backend for ``kafka://host:port[,host:port]``; no I/O happens until it is used."""
        return cls(url, _parse_bootstrap(url), settings)

    def __repr__(self) -> str:
        return f"KafkaBackend({self.url!r})"

    # -- client configs ----------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        """``text`` with every secret setting value replaced by ``***``."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def client_config(self, kind: str, defaults: Mapping[str, Any] | None = None,
                      forced: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """librdkafka config of one client: ``defaults`` < common settings < ``<kind>.override.*`` <
        ``forced``."""
        conf: dict[str, Any] = {
            "client.id": "pyconnect",
            "socket.connection.setup.timeout.ms": max(1000, int(self.connect_timeout * 1000)),
            "logger": _librdkafka_log,
            "error_cb": self._error_cb,
        }
        conf.update(defaults or {})
        conf.update(self._common)
        overrides = self._overrides[f"{kind}.override."]
        conf.update(overrides)
        for name, value in (forced or {}).items():
            if name in conf and name not in (defaults or {}) and str(conf[name]).lower() != str(value).lower():
                log.warning("kafka backend: %s client setting %s is ignored; it is always %s", kind, name,
                            "<set>" if _is_secret(name) else value)
            conf[name] = value
        conf["bootstrap.servers"] = self.bootstrap
        return conf

    def _error_cb(self, err: ck.KafkaError) -> None:
        text = self.redact(err.str())
        _QUIET.emit(log, logging.WARNING, text, f"kafka client ({self.bootstrap}): {err.name()}: {text}")

    def make_client(self, factory: Callable[[dict[str, Any]], Any], conf: dict[str, Any], what: str) -> Any:
        try:
            return factory(conf)
        except (ck.KafkaException, ValueError, TypeError) as exc:
            message = self.redact(_describe(exc))
            m = re.search(r'property:?\s*"?([A-Za-z0-9_.\-]+)"?', message)
            field = m.group(1) if m else "settings"
            raise ConfigError(
                f"invalid Kafka {what} settings for {self.bootstrap}: {message}", errors={field: message}
            ) from exc

    def translate(self, exc: BaseException, doing: str) -> BackendError:
        """A BackendError (BackendUnavailableError when the cluster did not answer) for a client error."""
        err = _kafka_error(exc)
        message = f"Kafka {doing} at {self.bootstrap} failed: {self.redact(_describe(exc))}"
        if err is not None and err.code() in _UNREACHABLE_CODES:
            return BackendUnavailableError(
                f"Kafka cluster at {self.bootstrap} could not be reached for {doing} within the bounded wait "
                f"(connect.timeout.ms={int(self.connect_timeout * 1000)}): {self.redact(_describe(exc))}")
        return BackendError(message)

    # -- admin -------------------------------------------------------------------------------------
    @property
    def admin(self) -> Any:
        with self._lock:
            if self._closed:
                raise BackendError(f"the Kafka backend for {self.bootstrap} is closed")
            if self._admin is None:
                conf = self.client_config("admin")
                self._admin = self.make_client(AdminClient, conf, "admin client")
            return self._admin

    def _metadata(self, topic: str | None = None) -> Any:
        try:
            if topic is None:
                return self.admin.list_topics(timeout=self.connect_timeout)
            return self.admin.list_topics(topic=topic, timeout=self.connect_timeout)
        except ck.KafkaException as exc:
            raise self._unavailable(exc, "reading cluster metadata") from exc

    def _unavailable(self, exc: BaseException, doing: str) -> BackendError:
        err = _kafka_error(exc)
        if err is None or err.code() in _UNREACHABLE_CODES:
            return BackendUnavailableError(
                f"Kafka cluster at {self.bootstrap} could not be reached for {doing} within "
                f"{self.connect_timeout:g} s (connect.timeout.ms): {self.redact(_describe(exc))}")
        return self.translate(exc, doing)

    def list_topics(self) -> dict[str, int]:
        md = self._metadata()
        return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}

    def create_topics(self, topics: Mapping[str, int], *, exist_ok: bool = True,
                      config: Mapping[str, str] | None = None, replication: int | None = None) -> None:
        if topics:
            self._create_topics(topics, self.list_topics(), exist_ok=exist_ok, config=config, replication=replication)

    def _create_topics(self, topics: Mapping[str, int], existing: Mapping[str, int], *, exist_ok: bool = True,
                       config: Mapping[str, str] | None = None, replication: int | None = None,
                       ) -> tuple[dict[str, int], set[str]]:
        """:meth:`create_topics` given the topics that exist (``{name: partitions}``). Returns the partition
        count of every topic in ``topics`` as the metadata shows it afterwards, and the names this call
        created (not those that existed, or that another client created meanwhile)."""
        wanted = [t for t in topics if t not in existing]
        if not exist_ok:
            clash = sorted(t for t in topics if t in existing)
            if clash:
                raise BackendError(f"Kafka topics already exist at {self.bootstrap}: {', '.join(clash)}")
        counts = {t: existing[t] for t in topics if t in existing}
        if not wanted:
            return counts, set()
        configs = dict(self.topic_configs)
        configs.update(config or {})
        new = [NewTopic(t, int(topics[t]) if int(topics[t]) > 0 else self.default_partitions,
                        self.topic_replication if replication is None else replication, config=configs)
               for t in wanted]
        timeout = self.connect_timeout
        try:
            futures = self.admin.create_topics(new, operation_timeout=timeout, request_timeout=timeout)
        except ck.KafkaException as exc:
            raise self._unavailable(exc, "creating topics") from exc
        created = set(wanted)
        for name, fut in futures.items():
            try:
                fut.result(timeout + 1)
            except ck.KafkaException as exc:
                err = _kafka_error(exc)
                if err is not None and err.code() == ck.KafkaError.TOPIC_ALREADY_EXISTS and exist_ok:
                    created.discard(name)
                    continue
                raise self._unavailable(exc, f"creating topic {name!r}") from exc
            except TimeoutError as exc:
                raise BackendUnavailableError(
                    f"Kafka cluster at {self.bootstrap} did not create topic {name!r} within {timeout:g} s") from exc
        counts.update(self._wait_for_topics(wanted))
        log.info("kafka backend %s: created topics %s", self.bootstrap, ", ".join(sorted(wanted)))
        return counts, created

    def _wait_for_topics(self, names: Iterable[str]) -> dict[str, int]:
        """Until the metadata shows the topics (bounded by connect.timeout.ms); their partition counts."""
        deadline = time.monotonic() + self.connect_timeout
        missing = set(names)
        counts: dict[str, int] = {}
        while True:
            md = self._metadata()
            for t in list(missing):
                meta = md.topics.get(t)
                if meta is not None and meta.error is None:
                    counts[t] = len(meta.partitions)
                    missing.discard(t)
            if not missing:
                return counts
            if time.monotonic() >= deadline:
                raise BackendUnavailableError(
                    f"Kafka cluster at {self.bootstrap}: created topics {sorted(missing)} did not appear in the "
                    f"metadata within {self.connect_timeout:g} s")
            time.sleep(0.05)

    def _topic_cleanup_policy(self, topic: str) -> str:
        res = ConfigResource(ResourceType.TOPIC, topic)
        timeout = self.connect_timeout
        deadline = time.monotonic() + timeout
        while True:
            try:
                futures = self.admin.describe_configs([res], request_timeout=max(0.1, deadline - time.monotonic()))
                entries = next(iter(futures.values())).result(timeout + 1)
                break
            except ck.KafkaException as exc:
                err = _kafka_error(exc)
                # a topic another task created a moment ago: the broker asked may not know it yet (a cluster)
                if (err is not None and err.code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART
                        and time.monotonic() + 0.1 < deadline):
                    time.sleep(0.1)
                    continue
                raise self._unavailable(exc, f"describing topic {topic!r}") from exc
        entry = entries.get("cleanup.policy")
        return "delete" if entry is None or entry.value is None else str(entry.value)

    def offsets_topic(self, name: str | None) -> tuple[str, int]:
        """The offsets topic of store ``name`` and its partition count; created compacted if missing."""
        topic = name or self.default_offsets_topic
        with self._lock:
            known = self._offset_topics.get(topic)
        if known is not None:
            return topic, known
        setting = "offset.storage.topic" if name is None else "offsets.storage.topic"
        counts, created = self._create_topics({topic: self.offsets_partitions}, self.list_topics(), exist_ok=True,
                                              config={"cleanup.policy": "compact"},
                                              replication=self.offsets_replication)
        # created here with cleanup.policy=compact: no need to ask; otherwise it must be checked
        policy = "compact" if topic in created else self._topic_cleanup_policy(topic)
        if "compact" not in [p.strip() for p in policy.split(",")]:
            raise ConfigError(
                f"Kafka offsets topic {topic!r} at {self.bootstrap} has cleanup.policy={policy}; an offsets topic "
                f"must be compacted (cleanup.policy=compact). Compact it or name another topic with {setting}.",
                errors={setting: f"topic {topic!r} is not compacted (cleanup.policy={policy})"},
            )
        partitions = counts[topic]
        with self._lock:
            self._offset_topics[topic] = partitions
        return topic, partitions

    # -- clients -----------------------------------------------------------------------------------
    def transactional_producer(
        self, transactional_id: str, offset_store: str | None = None, *, track_metadata: bool = False
    ) -> KafkaTransactionalProducer:
        return KafkaTransactionalProducer(self, transactional_id, offset_store, track_metadata)

    def producer(self, *, track_metadata: bool = False) -> KafkaPlainProducer:
        return KafkaPlainProducer(self, track_metadata)

    def offset_store(self, name: str | None = None) -> KafkaOffsetStore:
        self._offsets_producer()  # created now: its connection and producer id come while the store reads
        return KafkaOffsetStore(self, name)

    def _offsets_producer(self) -> KafkaPlainProducer:
        with self._lock:
            if self._mirror is None:
                self._mirror = KafkaPlainProducer(self, False)
            return self._mirror

    def consumer(self, group_id: str | None = None) -> KafkaConsumer:
        return KafkaConsumer(self, group_id)

    def read_range_batches(
        self, partition: TopicPartition, start: int, end: int, *, batch_size: int = 10_000,
        timeout: float = 30.0, keys: bool = True, timestamps: bool = True, headers: bool = True,
    ) -> Iterator[tuple[Sequence[int], Sequence[bytes | None] | None, Sequence[bytes | None],
                        Sequence[int | None] | None, Sequence[WireHeaders | None] | None]]:
        """:meth:`read_range` as columns, straight from librdkafka's messages: one ``consume`` call per batch
        of a ``read_committed`` consumer of its own, no per-record :class:`ConsumedRecord`. Offsets come from
        the messages (transaction markers leave gaps); the read ends at ``end`` or at the partition's end."""
        tp = TopicPartition(*partition)
        consumer = self.consumer(None)
        try:
            consumer.assign({tp: start})
            client = consumer._c
            position = start
            size = max(1, batch_size)
            while position < end:
                try:
                    msgs = _consume(client, min(size, end - position), timeout)
                except ck.KafkaException as exc:
                    raise self.translate(exc, f"reading {tp.topic}[{tp.partition}]") from exc
                offs: list[int] = []
                ks: list[bytes | None] = []
                vs: list[bytes | None] = []
                ts: list[int | None] = []
                hs: list[WireHeaders | None] = []
                done = False
                for m in msgs:
                    err = m.error()
                    if err is not None:
                        if err.code() in _TRANSIENT_CONSUMER_CODES:
                            continue
                        raise self.translate(ck.KafkaException(err), f"reading {tp.topic}[{tp.partition}]")
                    off = m.offset()
                    if off >= end:
                        done = True
                        break
                    offs.append(off)
                    vs.append(m.value())
                    if keys:
                        ks.append(m.key())
                    if timestamps:
                        kind, stamp = m.timestamp()
                        ts.append(None if kind == _NOT_AVAILABLE else stamp)
                    if headers:
                        hs.append(m.headers())
                if offs:
                    position = offs[-1] + 1
                    yield offs, ks if keys else None, vs, ts if timestamps else None, hs if headers else None
                if done:
                    return
                if not offs and consumer.end_offsets([tp], timeout)[tp] <= position:
                    return  # nothing more is committed (bounded: end_offsets fails when the cluster is away)
        finally:
            consumer.close()

    def write_offsets(self, topic: str, partitions: int, entries: Sequence[OffsetEntry], timeout: float) -> None:
        """Write offset records through the backend's shared plain producer and wait for them (serialised:
        one writer at a time, so a flush's errors belong to its own records)."""
        with self._offsets_write_lock:
            producer = self._offsets_producer()
            try:
                producer.send_offsets(topic, partitions, entries)
                producer.flush(timeout)
            except BaseException:
                with self._lock:
                    broken = self._mirror if self._mirror is producer else None
                    if broken is not None:
                        self._mirror = None
                if broken is not None:
                    broken.close()
                raise

    def mirror_offsets(self, entries: Sequence[OffsetEntry], attempts: int = 3) -> None:
        """KIP-618: also write a connector-specific store's offsets to the global offsets topic.
        Retried a bounded number of times; a failure is logged, never raised."""
        if not entries:
            return
        last: BaseException | None = None
        for attempt in range(1, attempts + 1):
            try:
                topic, partitions = self.offsets_topic(None)
                self.write_offsets(topic, partitions, entries, self.connect_timeout)
                return
            except Exception as exc:
                last = exc
                log.warning("kafka backend %s: writing %d offsets to the global offsets topic failed "
                            "(attempt %d of %d): %s", self.bootstrap, len(entries), attempt, attempts, exc)
        log.error("kafka backend %s: gave up writing %d offsets to the global offsets topic: %s",
                  self.bootstrap, len(entries), last)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            mirror, self._mirror = self._mirror, None
            self._admin = None
        if mirror is not None:
            mirror.close()


# --------------------------------------------------------------------------------------------------
# Producers


class _DeliveryTracker:
    """Delivery reports since the last flush/commit: per-partition ranges, errors, optional metadata."""

    __slots__ = ("count", "error", "metadata", "ranges", "track")

    def __init__(self, track: bool) -> None:
        self.track = track
        self.reset()

    def reset(self) -> None:
        self.ranges: dict[tuple[str, int], list[int]] = {}
        self.error: ck.KafkaError | None = None
        self.metadata: list[RecordMetadata | None] = []
        self.count = 0

    def on_delivery(self, err: ck.KafkaError | None, msg: Any) -> None:
        if err is not None:
            if self.error is None:
                self.error = err
            return
        off = msg.offset()
        r = self.ranges.get((msg.topic(), msg.partition()))
        if r is None:
            self.ranges[(msg.topic(), msg.partition())] = [off, off]
        elif off > r[1]:  # reports of one partition come in offset order: the common case
            r[1] = off
        elif off < r[0]:
            r[0] = off

    def indexed(self, index: int) -> Callable[[ck.KafkaError | None, Any], None]:
        def report(err: ck.KafkaError | None, msg: Any) -> None:
            self.on_delivery(err, msg)
            if err is None:
                ts_type, ts = msg.timestamp()
                self.metadata[index] = RecordMetadata(
                    msg.topic(), msg.partition(), msg.offset(), None if ts_type == _NOT_AVAILABLE else ts)
        return report

    def written(self) -> Written:
        ranges: Ranges = {TopicPartition(t, p): (r[0], r[1] + 1) for (t, p), r in self.ranges.items()}
        meta: list[RecordMetadata] | None = None
        if self.track:
            meta = [m for m in self.metadata if m is not None]
        return Written(ranges, meta)


class _KafkaProducerBase:
    """What both producers share: the confluent Producer, the send loop and delivery tracking."""

    def __init__(self, backend: KafkaBackend, conf: dict[str, Any], track_metadata: bool, what: str,
                 sparse_reports: bool = False) -> None:
        self.backend = backend
        self.what = what
        self.tracker = _DeliveryTracker(track_metadata)
        self._offset_errors: list[ck.KafkaError] = []
        # sparse: delivery reports only for the first and last record per partition of each send (see
        # _send_sparse); needs the partition of every record before it is queued, so only with the
        # default "consistent" partitioner, which this producer then applies itself
        self._sparse = sparse_reports and not track_metadata and str(conf.get("partitioner")) == "consistent"
        self._partition_counts: dict[str, tuple[int, float]] = {}
        if not self._sparse:
            conf["on_delivery"] = self.tracker.on_delivery
        self._p: Any = backend.make_client(ck.Producer, conf, what)
        self._produce = self._p.produce
        self._poll = self._p.poll
        self._closed = False

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

    def _send_sparse(self, records: Sequence[ProducerRecord]) -> None:
        """Transactional send without per-record delivery reports.

        A record that fails delivery fails the transaction (commit_transaction raises), so the
        reports are only needed for ``Written.ranges``: ``[first, last + 1)`` per partition of the
        transaction. Each record's partition is settled here, as the "consistent" partitioner would
        (``crc32(key) % partitions``, partition 0 without a key), and only the first and last record
        per partition of this send get a report. A record of a topic whose partition count is not
        known gets a report of its own and librdkafka's partitioner.
        """
        if self._send_one_partition(records):
            return
        produce = self._produce
        poll = self._poll
        report = self.tracker.on_delivery
        counts: dict[str, int] = {}
        crc32 = zlib.crc32
        parts: list[int] = []
        append = parts.append
        unknown = False
        for rec in records:
            partition = rec[1]
            if partition is None:
                key = rec[2]
                if key is None:
                    partition = 0
                else:
                    topic = rec[0]
                    n = counts.get(topic)
                    if n is None:
                        n = counts[topic] = self._partition_count(topic)
                    if n:
                        partition = crc32(key) % n
                    else:
                        partition = -1
                        unknown = True
            append(partition)
        total = len(records)
        # indices that get a delivery report: first and last per (topic, partition)
        marked: set[int]
        if not total:
            return
        topic0 = records[0][0]
        if not unknown and parts.count(parts[0]) == total and all(rec[0] == topic0 for rec in records):
            marked = {0, total - 1}  # the common case: one topic, one partition
        else:
            pairs = [(rec[0], p) for rec, p in zip(records, parts, strict=True)]
            marked = set({tp: i for i, tp in enumerate(pairs)}.values())
            marked.update({tp: i for i, tp in reversed(list(enumerate(pairs)))}.values())
            if unknown:
                marked.update(i for i, p in enumerate(parts) if p < 0)
        try:
            for lo in range(0, total, _POLL_EVERY):
                if lo:
                    poll(0)
                for i in range(lo, min(total, lo + _POLL_EVERY)):
                    rec = records[i]
                    if len(rec) == 6:
                        topic, _, key, value, ts, headers = rec
                    else:  # a plain tuple of 4 or 5 fields
                        topic, key, value = rec[0], rec[2], rec[3]
                        ts = rec[4] if len(rec) > 4 else None
                        headers = None
                    args = (topic, value, key, parts[i], report if i in marked else None, None, ts or 0,
                            headers or None)
                    try:
                        produce(*args)
                    except BufferError:
                        self._queue_full(args, {})
        except (ck.KafkaException, SystemError) as exc:
            raise self._failure(_unwrap(exc), "sending records") from exc
        self.tracker.count += total

    def _send_one_partition(self, records: Sequence[ProducerRecord]) -> bool:
        """:meth:`_send_sparse` for its common case, without a Python step per record: every record a
        6-field ``ProducerRecord`` of one topic and one partition (given, or ``None`` with no key, which the
        "consistent" partitioner maps to partition 0), no headers. The records are turned into columns with
        one ``zip`` and queued by ``map`` over ``produce``; only the first and the last get a delivery
        report. Returns False (nothing queued) when the batch is not of that shape."""
        total = len(records)
        if total < 3 or set(map(len, records)) != {6}:
            return False
        topics, parts, keys, values, stamps, headers = zip(*records, strict=True)
        if len(set(topics)) != 1 or any(headers):
            return False
        part_set = set(parts)
        if len(part_set) != 1:
            return False
        partition = part_set.pop()
        if partition is None:
            if set(keys) != {None}:
                return False
            partition = 0
        elif type(partition) is not int or partition < 0:
            return False
        topic = topics[0]
        if None in stamps:
            stamps = tuple([t or 0 for t in stamps])
        produce = self._produce
        report = self.tracker.on_delivery
        try:
            for lo in range(0, total, _POLL_EVERY):
                if lo:
                    self._poll(0)
                hi = min(total, lo + _POLL_EVERY)
                i = lo
                while i < hi:
                    first, last = i == 0, hi == total
                    if first or (last and i == hi - 1):  # the records that get a delivery report
                        args = (topic, values[i], keys[i], partition, report, None, stamps[i], None)
                        try:
                            produce(*args)
                        except BufferError:
                            self._queue_full(args, {})
                        i += 1
                        continue
                    end = hi - 1 if last else hi
                    # produce(topic, value, key, partition, on_delivery, callback, timestamp, headers) per record;
                    # ``pulled`` counts the records map took, so a full queue can resume right after the one
                    # it refused
                    pulled = itertools.count(i + 1)
                    try:
                        collections.deque(map(produce, itertools.compress(itertools.repeat(topic), pulled),
                                              values[i:end], keys[i:end], itertools.repeat(partition),
                                              itertools.repeat(None), itertools.repeat(None), stamps[i:end]), 0)
                        i = end
                    except BufferError:
                        j = next(pulled) - 2  # the refused record
                        self._queue_full((topic, values[j], keys[j], partition, None, None, stamps[j], None), {})
                        i = j + 1
        except (ck.KafkaException, SystemError) as exc:
            raise self._failure(_unwrap(exc), "sending records") from exc
        self.tracker.count += total
        return True

    def send(self, records: Sequence[ProducerRecord]) -> None:
        if self._sparse:
            self._send_sparse(records)
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
                        partition = -1
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

        def report(err: ck.KafkaError | None, msg: Any) -> None:
            if err is not None:
                errors.append(err)

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
            raise BackendUnavailableError(
                f"{self.what}: {left} records were not acknowledged by the Kafka cluster at "
                f"{self.backend.bootstrap} within {timeout:g} s")
        err = self.tracker.error or (self._offset_errors[0] if self._offset_errors else None)
        if err is not None:
            raise self._failure(ck.KafkaException(err), "writing records")

    def _failure(self, exc: BaseException, doing: str) -> Exception:
        return self.backend.translate(exc, f"{self.what} {doing}")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
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
            try:
                producer.close()
            except Exception as exc:  # librdkafka reports some close failures as SystemError
                failed.append(exc)

        closer = threading.Thread(target=close, name="kafka-producer-close", daemon=True)
        closer.start()
        bound = self.backend.connect_timeout + 5
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


class KafkaTransactionalProducer(_KafkaProducerBase, TransactionalProducer):
    """One task's transactional producer: records and source offsets in one Kafka transaction."""

    def __init__(self, backend: KafkaBackend, transactional_id: str, offset_store: str | None,
                 track_metadata: bool) -> None:
        self.transactional_id = transactional_id
        self.offset_store_name = offset_store
        conf = backend.client_config(
            "producer",
            defaults={"acks": "all", "partitioner": "consistent", "transaction.timeout.ms": 60_000,
                      "message.timeout.ms": 60_000},
            forced={"enable.idempotence": True, "transactional.id": transactional_id},
        )
        self._fenced = False
        conf["error_cb"] = self._error_cb
        super().__init__(backend, conf, track_metadata,
                         f"transactional producer {transactional_id!r} for {backend.bootstrap}", sparse_reports=True)
        self._offsets_topic: tuple[str, int] | None = None
        self._in_txn = False
        # Partitions where no transaction of this producer id can still be hanging (see _settle_first), the
        # offset keys already checked, and this transaction's batches (kept by reference until it ends)
        self._settled: set[tuple[str, int | None]] = set()
        self._settled_keys: set[bytes] = set()
        self._txn_batches: list[Sequence[ProducerRecord]] = []
        self._txn_unsettled = False

    def _error_cb(self, err: ck.KafkaError) -> None:
        # librdkafka reports the fatal "fenced" error here; later calls fail with a bare _STATE error
        if err.code() in _FENCED_CODES or err.fatal():
            self._fenced = True
        self.backend._error_cb(err)

    def _fenced_error(self, exc: BaseException | None) -> ProducerFencedError:
        self._fenced = True
        why = "" if exc is None else f": {self.backend.redact(_describe(exc))}"
        return ProducerFencedError(
            f"transactional producer {self.transactional_id!r} was fenced by a newer instance with the same "
            f"transactional.id{why}")

    def _is_fenced(self, exc: BaseException) -> bool:
        err = _kafka_error(exc)
        if err is not None and (err.code() in _FENCED_CODES or err.fatal()):
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
            # a produce after fencing fails with a bare _STATE error; the cause is in a delivery report
            for failed in (self.tracker.error, *self._offset_errors):
                if failed is not None and failed.code() in _FENCED_CODES:
                    self._fenced = True
        return self._fenced

    def _failure(self, exc: BaseException, doing: str) -> Exception:
        if self._is_fenced(exc):
            return self._fenced_error(exc)
        return super()._failure(exc, doing)

    def init_transactions(self, timeout: float) -> None:
        self._offsets_topic = self.backend.offsets_topic(self.offset_store_name)
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
                    raise BackendUnavailableError(
                        f"{self.what}: init_transactions did not complete within {timeout:g} s; the Kafka "
                        f"cluster at {self.backend.bootstrap} did not answer: {_describe(exc)}") from exc
                raise self.backend.translate(exc, f"{self.what} init_transactions") from exc

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
        self._txn_unsettled = False

    def send(self, records: Sequence[ProducerRecord]) -> None:
        super().send(records)
        self._txn_batches.append(records)
        if not self._txn_unsettled and not set(map(_TOPIC_PARTITION, records)) <= self._settled:
            self._txn_unsettled = True

    def flush(self, timeout: float) -> Written:
        try:
            self._flush(timeout)
        except BaseException:
            self._abort_after_failure(timeout)
            raise
        written = self.tracker.written()
        self.tracker.reset()
        return written

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
            if extra or self._txn_unsettled or not all(key in self._settled_keys for key, _ in offsets):
                self._flush(timeout)
                if self._settle_first(offsets, mirror, deadline):
                    self._flush(timeout)  # the batches sent again after the settling abort
                # called once per commit: the runtime's ledger accumulates what it is given
                more = self._extra_entries(extra, self.tracker.written())
            if offsets:
                topic, partitions = self._offsets_topic
                self.send_offsets(topic, partitions, offsets)
                if mirror:
                    global_topic, global_partitions = self.backend.offsets_topic(None)
                    self.send_offsets(global_topic, global_partitions, offsets)
            if more:
                for store, entries in more.items():
                    if entries:
                        extra_topic, extra_partitions = self.backend.offsets_topic(store)
                        self.send_offsets(extra_topic, extra_partitions, entries)
                self._flush(timeout)
            # librdkafka's commit flushes first, serving every delivery report (so the ranges are complete
            # when it returns; a record that failed fails the commit, its error naming the cause): one call
            # into C instead of two, so a commit on the committer thread needs the GIL less often
            self._commit(deadline, timeout)
            written = self.tracker.written()
        except BaseException:
            self._abort_after_failure(timeout)
            raise
        self._in_txn = False
        self._txn_batches = []
        self.tracker.reset()
        self._offset_errors.clear()
        return written

    @staticmethod
    def _extra_entries(extra: ExtraEntries | None, written: Written) -> Mapping[str, Sequence[OffsetEntry]] | None:
        if not extra:
            return None
        return extra(written) if callable(extra) else extra

    def _settle_first(self, offsets: Sequence[OffsetEntry], mirror: bool, deadline: float) -> bool:
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
        assumed) and its batches are sent again. Returns whether it aborted and sent them again.

        The further stores of ``extra`` (the ranges ledger) are not settled here: their entries are known only
        from the commit's ``extra`` call, made once; each is the newest value of a key the task rewrites in
        every commit, so a hanging older value made visible by this commit is superseded by it."""
        assert self._offsets_topic is not None
        written = self.tracker.written()
        firsts: dict[tuple[str, int], int] = {(tp[0], tp[1]): r[0] for tp, r in written.ranges.items()}
        plan: list[tuple[str, int, Sequence[OffsetEntry]]] = []
        if offsets:
            plan.append((*self._offsets_topic, offsets))
            if mirror:
                plan.append((*self.backend.offsets_topic(None), offsets))
        stores = {(topic, murmur2_partition(key, n)) for topic, n, entries in plan for key, _ in entries}
        new = (set(firsts) | stores) - self._settled
        pending = self._pending_ahead({tp: firsts.get(tp) for tp in new}, deadline) if new else []
        if pending:
            log.info("%s: a transaction of this producer id may be hanging on %s (pending ahead of this one); "
                     "aborting this transaction once and sending it again, so that the next commit does not "
                     "make it visible", self.what, ", ".join(f"{t}-{p}" for t, p in sorted(pending)))
            for topic, n, entries in plan:
                self.send_offsets(topic, n, entries)
            self._flush(max(0.001, deadline - time.monotonic()))  # every partition joins the transaction
            try:
                self._p.abort_transaction(max(0.001, deadline - time.monotonic()))
                self._p.begin_transaction()
            except ck.KafkaException as exc:
                raise self._failure(exc, "settling a hanging transaction") from exc
            batches, self._txn_batches = self._txn_batches, []
            self.tracker.reset()
            self._offset_errors.clear()
            for batch in batches:
                _KafkaProducerBase.send(self, batch)
            self._txn_batches = batches
        self._settled |= set(firsts) | stores
        for topic in {t for t, _ in firsts}:
            count = self._partition_count(topic)
            if count and all((topic, p) in self._settled for p in range(count)):
                self._settled.add((topic, None))  # records without a partition land in settled ones
        self._settled_keys.update(key for key, _ in offsets)
        self._txn_unsettled = False
        return bool(pending)

    def _pending_ahead(self, firsts: Mapping[tuple[str, int], int | None], deadline: float) -> list[tuple[str, int]]:
        """The partitions whose last stable offset is below ``firsts`` (this transaction's first record there;
        ``None``: nothing of it there yet, so below the partition's end)."""
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]

        def ask(level: Any) -> dict[tuple[str, int], int]:
            futures = self.backend.admin.list_offsets(
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
                if err is not None and err.retriable() and deadline - time.monotonic() > 0.1:
                    time.sleep(0.05)
                    continue
                log.debug("%s: the last stable offsets could not be read (%s); settling as if pending",
                          self.what, _describe(exc))
                return list(firsts)

    def _commit(self, deadline: float, timeout: float) -> None:
        while True:
            try:
                self._p.commit_transaction(max(0.001, deadline - time.monotonic()))
                return
            except ck.KafkaException as exc:
                err = _kafka_error(exc)
                if self._is_fenced(exc):
                    raise self._fenced_error(exc) from exc
                if err is not None and err.retriable() and time.monotonic() < deadline:
                    continue
                if err is not None and err.code() in _UNREACHABLE_CODES:
                    raise BackendUnavailableError(
                        f"{self.what}: commit_transaction did not complete within {timeout:g} s at "
                        f"{self.backend.bootstrap}: {_describe(exc)}") from exc
                raise self.backend.translate(exc, f"{self.what} commit_transaction") from exc

    def _abort_after_failure(self, timeout: float) -> None:
        if self._fenced or not self._in_txn:
            return
        try:
            self._p.abort_transaction(max(timeout, 0.001))
        except ck.KafkaException as exc:
            if self._is_fenced(exc):
                self._fenced = True
            log.warning("%s: aborting after a failure raised %s", self.what, self.backend.redact(_describe(exc)))
        self._in_txn = False
        self._txn_batches = []
        self._poll(0)
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
        self._in_txn = False

    def close(self) -> None:
        if self._in_txn and not self._fenced and not self._closed:
            try:
                self._p.purge(in_queue=True, in_flight=False, blocking=False)
                self._p.abort_transaction(self.backend.connect_timeout)
            except (ck.KafkaException, RuntimeError) as exc:
                log.warning("%s: aborting on close raised %s", self.what, self.backend.redact(_describe(exc)))
            self._in_txn = False
        super().close()


# --------------------------------------------------------------------------------------------------
# Reading to the end


def _nogroup() -> str:
    return f"pyconnect-nogroup-{uuid.uuid4().hex}"


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
                    elif err.code() in _TRANSIENT_CONSUMER_CODES:
                        log.debug("reading %s: %s", what, err.str())
                    else:
                        raise self.backend.translate(ck.KafkaException(err), f"reading {what}")
            return ends
        except ck.KafkaException as exc:
            raise self.backend.translate(exc, f"reading {what}") from exc
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
                raise self.backend.translate(exc, f"querying the offsets of {tp}") from exc

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


# --------------------------------------------------------------------------------------------------
# Offset store


class KafkaOffsetStore(OffsetStore):
    """Source offsets in a compacted topic, read to its end on each ``get``/``read_all``."""

    def __init__(self, backend: KafkaBackend, name: str | None) -> None:
        self.backend = backend
        self.name = name
        self._topic: tuple[str, int] | None = None
        self._reader: _EndReader | None = None
        self._producer: KafkaPlainProducer | None = None
        self._values: dict[bytes, bytes] = {}
        self._positions: dict[TopicPartition, int] = {}

    @property
    def topic(self) -> str:
        return self._ensure()[0]

    def _ensure(self) -> tuple[str, int]:
        if self._topic is None:
            self._topic = self.backend.offsets_topic(self.name)
        return self._topic

    def _catch_up(self) -> None:
        topic, partitions = self._ensure()
        if self._reader is None:
            self._reader = _EndReader(self.backend)
        for p in range(partitions):
            # 0, not OFFSET_BEGINNING (a ListOffsets round that costs a fresh consumer ~0.5 s); a log
            # that starts later is handled by auto.offset.reset=earliest
            self._positions.setdefault(TopicPartition(topic, p), 0)
        values = self._values
        positions = self._positions

        def apply(m: Any) -> None:
            key = m.key()
            positions[TopicPartition(m.topic(), m.partition())] = m.offset() + 1
            if key is None:
                return
            key = canonical_offset_key(key)
            value = m.value()
            if value is None:
                values.pop(key, None)
            else:
                values[key] = value

        deadline = time.monotonic() + self.backend.read_timeout
        ends = self._reader.read(dict(positions), deadline, f"offsets topic {topic!r}", apply)
        for tp, end in ends.items():
            if end >= 0 and (positions[tp] < 0 or end > positions[tp]):
                positions[tp] = end

    def get(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        self._catch_up()
        out: dict[bytes, bytes] = {}
        for key in keys:
            value = self._values.get(canonical_offset_key(key))
            if value is not None:
                out[key] = value
        return out

    def read_all(self) -> dict[bytes, bytes]:
        self._catch_up()
        return dict(self._values)

    def put(self, entries: Sequence[OffsetEntry], timeout: float) -> None:
        if not entries:
            return
        topic, partitions = self._ensure()
        # one long-lived producer per backend for offset writes: a fresh producer's first flush waits for
        # its connection and metadata (~0.5-0.8 s on Tansu), once per registry write otherwise
        self.backend.write_offsets(topic, partitions, entries, timeout)
        if self.name is not None and topic != self.backend.default_offsets_topic and self.name not in INTERNAL_STORES:
            self.backend.mirror_offsets(entries)

    def close(self) -> None:
        reader, self._reader = self._reader, None
        producer, self._producer = self._producer, None
        if reader is not None:
            reader.close()
        if producer is not None:
            producer.close()


# --------------------------------------------------------------------------------------------------
# Consumer


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
        self._conf = conf
        self._c: Any = backend.make_client(ck.Consumer, conf, "consumer")
        self._consume = self._c.consume
        self._ends: _EndReader | None = None
        self._assigned: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        self._closed = False
        self._committer: Any = None
        """The client group commits go through: a handle of their own (same group, no assignment), so one whose
        commit could not reach the cluster is replaced, not waited for (see :meth:`commit`)."""

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
            if missing:
                log.warning("kafka consumer: topics %s do not exist at %s", missing, self.backend.bootstrap)
        elif pattern is not None:
            rx = re.compile(pattern)
            names = sorted(t for t in available if rx.fullmatch(t) and not t.startswith("__"))
        else:
            return []
        return [TopicPartition(t, p) for t in names if t in available for p in sorted(available[t].partitions)]

    def committed(self, partitions: Sequence[TopicPartition], timeout: float) -> dict[TopicPartition, int | None]:
        if not partitions:
            return {}
        if self.group_id is None:
            return {tp: None for tp in partitions}
        try:
            got = self._c.committed([ck.TopicPartition(t, p) for t, p in partitions], timeout=timeout)
        except ck.KafkaException as exc:
            raise self.backend._unavailable(exc, f"reading committed offsets of group {self.group_id!r}") from exc
        out: dict[TopicPartition, int | None] = {}
        for tp in got:
            if tp.error is not None:
                raise self.backend.translate(ck.KafkaException(tp.error),
                                             f"reading the committed offset of {tp.topic}[{tp.partition}]")
            out[TopicPartition(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else None
        return out

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
            raise self.backend.translate(exc, f"{self._what()} poll") from exc
        if not msgs:
            return []
        if any(map(_msg_error, msgs)):  # rare: error events among the messages
            kept = []
            for m in msgs:
                err = m.error()
                if err is None:
                    kept.append(m)
                elif err.code() in _TRANSIENT_CONSUMER_CODES:
                    log.debug("%s: %s", self._what(), err.str())
                else:
                    raise self.backend.translate(ck.KafkaException(err), f"{self._what()} poll")
            msgs = kept
        return _consumed_records(msgs)

    def commit(self, offsets: Mapping[TopicPartition, int], timeout: float) -> None:
        if not offsets:
            return
        if self.group_id is None:
            raise BackendError("a consumer without a group cannot commit offsets")
        tps = [ck.TopicPartition(t, p, int(o)) for (t, p), o in offsets.items()]
        outcome: list[Any] = []
        if self._committer is None:
            self._committer = self.backend.make_client(ck.Consumer, self._conf, "consumer")
        client = self._committer

        def run() -> None:
            try:
                outcome.append(client.commit(offsets=tps, asynchronous=False))
            except BaseException as exc:
                outcome.append(exc)

        worker = threading.Thread(target=run, name="pyconnect-kafka-commit", daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            # librdkafka's synchronous commit goes on until it gives up by itself (after a broker restart it was
            # seen stuck for 40 s while the cluster answered again): this handle is left to finish it and close in
            # the background, and the next commit goes through a new one
            self._committer = None
            _close_in_background(client, worker)
            raise BackendUnavailableError(
                f"Kafka cluster at {self.backend.bootstrap} did not answer the {self._what()} committing offsets "
                f"within {timeout:g} s")
        result = outcome[0]
        if isinstance(result, BaseException):
            if isinstance(result, ck.KafkaException):
                raise self.backend._unavailable(result, f"committing offsets of group {self.group_id!r}") from result
            raise result
        for tp in result or []:
            if tp.error is not None:
                raise self.backend.translate(ck.KafkaException(tp.error),
                                             f"committing the offset of {tp.topic}[{tp.partition}]")

    def close(self) -> None:
        ends, self._ends = self._ends, None
        if ends is not None:
            ends.close()
        if self._closed:
            return
        self._closed = True
        for client in (self._committer, self._c):
            if client is not None:
                try:
                    client.close()
                except (ck.KafkaException, RuntimeError):
                    pass
        self._committer = None


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


__all__ = [
    "DEFAULT_CLUSTER_ID",
    "DEFAULT_OFFSETS_TOPIC",
    "KafkaBackend",
    "KafkaConsumer",
    "KafkaOffsetStore",
    "KafkaPlainProducer",
    "KafkaTransactionalProducer",
    "canonical_offset_key",
    "murmur2_partition",
]
