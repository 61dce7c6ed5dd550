"""The admin half of the Kafka backend: one ``AdminClient`` per backend for cluster metadata, topic creation
(``topic.creation.default.*`` settings; bounded by ``connect.timeout.ms``; waits until the metadata shows the
new topics) and the offsets topics (created compacted when missing; an existing one that is not compacted is
refused, as Kafka Connect refuses it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType  # type: ignore[attr-defined]

from connect_runtime.api.errors import BackendError, BackendUnavailableError, ConfigError
from connect_runtime.backends.kafka._access import Need
from connect_runtime.backends.kafka._client import _UNREACHABLE_CODES, _Clients, _kafka_error

log = logging.getLogger(__name__)


def _transient(exc: ck.KafkaException) -> bool:
    err = _kafka_error(exc)
    return err is not None and err.code() in _UNREACHABLE_CODES


class _KafkaAdmin:
    """Cluster metadata, topics and offsets topics of one backend (see the module docstring)."""

    def __init__(self, clients: _Clients) -> None:
        self.clients = clients
        self._lock = threading.Lock()
        self._client: Any = None
        self._closed = False
        self._offset_topics: dict[str, int] = {}

    @property
    def client(self) -> Any:
        """The backend's ``AdminClient``, created on first use."""
        with self._lock:
            if self._closed:
                raise BackendError(f"the Kafka backend for {self.clients.bootstrap} is closed")
            if self._client is None:
                conf = self.clients.client_config("admin")
                self._client = self.clients.make_client(AdminClient, conf, "admin client")
            return self._client

    def metadata(self, topic: str | None = None) -> Any:
        """The cluster's metadata (of ``topic`` only, if given), asked in steps of at most a second within
        ``connect.timeout.ms``: between steps the client's error callback runs, and a broker that refuses this
        client (authentication, TLS) fails the call at once, naming the cause, rather than after the whole
        bound as an unreachable cluster."""
        client = self.client
        started = time.monotonic()
        deadline = started + self.clients.connect_timeout
        while True:
            step = max(0.05, min(1.0, deadline - time.monotonic()))
            try:
                return client.list_topics(timeout=step) if topic is None else client.list_topics(topic=topic,
                                                                                                 timeout=step)
            except ck.KafkaException as exc:
                client.poll(0)  # serves the error callback, which records a refusal
                refused = self.clients.refusal("reading cluster metadata", since=started)
                if refused is not None:
                    raise refused from exc
                if time.monotonic() >= deadline or not _transient(exc):
                    raise self.clients.unavailable(exc, "reading cluster metadata") from exc

    def list_topics(self) -> dict[str, int]:
        md = self.metadata()
        return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}

    def create_topics(self, topics: Mapping[str, int], *, exist_ok: bool = True,
                      config: Mapping[str, str] | None = None, replication: int | None = None) -> None:
        if topics:
            self._create_topics(topics, self.list_topics(), exist_ok=exist_ok, config=config, replication=replication)

    def _create_topics(self, topics: Mapping[str, int], existing: Mapping[str, int], *, exist_ok: bool = True,
                       config: Mapping[str, str] | None = None, replication: int | None = None, use: str = "Write",
                       ) -> tuple[dict[str, int], set[str]]:
        """:meth:`create_topics` given the topics that exist (``{name: partitions}``). Returns the partition
        count of every topic in ``topics`` as the metadata shows it afterwards, and the names this call
        created (not those that existed, or that another client created meanwhile).

        ``use``: what the caller does with the topics (a source's data and dead letter topics: ``Write``; an
        offsets store: ``Read``). A topic the principal may not see (``Describe``, which ``use`` implies) is not in
        ``existing``; creating it is then refused unless the principal may create it, and the authorization
        error names ``use`` on the topic, Create being the other way out."""
        wanted = [t for t in topics if t not in existing]
        if not exist_ok:
            clash = sorted(t for t in topics if t in existing)
            if clash:
                raise BackendError(f"Kafka topics already exist at {self.clients.bootstrap}: {', '.join(clash)}")
        counts = {t: existing[t] for t in topics if t in existing}
        if not wanted:
            return counts, set()
        configs = dict(self.clients.topic_configs)
        configs.update(config or {})
        new = [NewTopic(t, int(topics[t]) if int(topics[t]) > 0 else self.clients.default_partitions,
                        self.clients.topic_replication if replication is None else replication, config=configs)
               for t in wanted]
        timeout = self.clients.connect_timeout
        try:
            futures = self.client.create_topics(new, operation_timeout=timeout, request_timeout=timeout)
        except ck.KafkaException as exc:
            raise self.clients.unavailable(exc, "creating topics") from exc
        created = set(wanted)
        for name, fut in futures.items():
            try:
                fut.result(timeout + 1)
            except ck.KafkaException as exc:
                err = _kafka_error(exc)
                if err is not None and err.code() == ck.KafkaError.TOPIC_ALREADY_EXISTS and exist_ok:
                    created.discard(name)
                    continue
                raise self.clients.unavailable(
                    exc, f"seeing or creating topic {name!r}",
                    Need(use, "Topic", name, also=f"{use} implies Describe, without which the topic looks missing; "
                                                   f"or Create on it, to let the run create it"),
                    Need("Create", "Cluster")) from exc
            except TimeoutError as exc:
                raise BackendUnavailableError(
                    f"Kafka cluster at {self.clients.bootstrap} did not create topic {name!r} within "
                    f"{timeout:g} s") from exc
        counts.update(self._wait_for_topics(wanted))
        log.info("kafka backend %s: created topics %s", self.clients.bootstrap, ", ".join(sorted(wanted)))
        return counts, created

    def _wait_for_topics(self, names: Iterable[str]) -> dict[str, int]:
        """Until the metadata shows the topics (bounded by connect.timeout.ms); their partition counts."""
        deadline = time.monotonic() + self.clients.connect_timeout
        missing = set(names)
        counts: dict[str, int] = {}
        while True:
            md = self.metadata()
            for t in list(missing):
                meta = md.topics.get(t)
                if meta is not None and meta.error is None:
                    counts[t] = len(meta.partitions)
                    missing.discard(t)
            if not missing:
                return counts
            if time.monotonic() >= deadline:
                raise BackendUnavailableError(
                    f"Kafka cluster at {self.clients.bootstrap}: created topics {sorted(missing)} did not appear "
                    f"in the metadata within {self.clients.connect_timeout:g} s")
            time.sleep(0.05)

    def _topic_cleanup_policy(self, topic: str) -> str:
        res = ConfigResource(ResourceType.TOPIC, topic)
        timeout = self.clients.connect_timeout
        deadline = time.monotonic() + timeout
        while True:
            try:
                futures = self.client.describe_configs([res], request_timeout=max(0.1, deadline - time.monotonic()))
                entries = next(iter(futures.values())).result(timeout + 1)
                break
            except ck.KafkaException as exc:
                err = _kafka_error(exc)
                # a topic another task created a moment ago: the broker asked may not know it yet (a cluster)
                if (err is not None and err.code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART
                        and time.monotonic() + 0.1 < deadline):
                    time.sleep(0.1)
                    continue
                raise self.clients.unavailable(exc, f"describing topic {topic!r} (its cleanup.policy)",
                                               Need("DescribeConfigs", "Topic", topic)) from exc
        entry = entries.get("cleanup.policy")
        return "delete" if entry is None or entry.value is None else str(entry.value)

    def offsets_topic(self, name: str | None, use: str = "Read") -> tuple[str, int]:
        """The offsets topic of store ``name`` and its partition count; created compacted if missing. ``use``: what
        the caller does with it (``Read``, or ``Write`` for a producer), named when the topic may not be seen."""
        topic = name or self.clients.default_offsets_topic
        with self._lock:
            known = self._offset_topics.get(topic)
        if known is not None:
            return topic, known
        setting = "offset.storage.topic" if name is None else "offsets.storage.topic"
        counts, created = self._create_topics({topic: self.clients.offsets_partitions}, self.list_topics(),
                                              exist_ok=True, config={"cleanup.policy": "compact"},
                                              replication=self.clients.offsets_replication, use=use)
        # created here with cleanup.policy=compact: no need to ask; otherwise it must be checked
        policy = "compact" if topic in created else self._topic_cleanup_policy(topic)
        if "compact" not in [p.strip() for p in policy.split(",")]:
            raise ConfigError(
                f"Kafka offsets topic {topic!r} at {self.clients.bootstrap} has cleanup.policy={policy}; an offsets "
                f"topic must be compacted (cleanup.policy=compact). Compact it or name another topic with {setting}.",
                errors={setting: f"topic {topic!r} is not compacted (cleanup.policy={policy})"},
            )
        partitions = counts[topic]
        with self._lock:
            self._offset_topics[topic] = partitions
        return topic, partitions

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._client = None
