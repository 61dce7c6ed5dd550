"""``KafkaBackend``: the backend contract (:mod:`connect_runtime.backends.base`) on a Kafka cluster, composed of
the package's parts: the clients' settings and error translation (``_client``), the admin client (``admin``),
the offsets writer (``offsets``); it makes the producers, consumers and offset stores.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import confluent_kafka as ck

from connect_runtime.api.errors import BackendError, ConfigError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import kafka_bootstrap_servers
from connect_runtime.backends.base import Backend, Capabilities
from connect_runtime.backends.kafka._access import Need
from connect_runtime.backends.kafka._client import _Clients
from connect_runtime.backends.kafka.admin import _KafkaAdmin
from connect_runtime.backends.kafka.columnar import Columns, read_range_batches
from connect_runtime.backends.kafka.consumer import KafkaConsumer
from connect_runtime.backends.kafka.entries import EntryWriters
from connect_runtime.backends.kafka.offsets import KafkaOffsetStore, _OffsetsWriter
from connect_runtime.backends.kafka.producers import KafkaPlainProducer
from connect_runtime.backends.kafka.transactions import KafkaTransactionalProducer

GROUP_OFFSETS_IN_TRANSACTIONS = "group.offsets.in.transactions"
"""Backend setting (default true): sink group offsets are committed in the commit fence's transactions (KIP-447);
false for a Kafka-protocol broker that does not keep them faithfully (Tansu)."""


def _flag(settings: dict[str, Any], name: str) -> bool:
    value = settings.pop(name, True)
    if isinstance(value, bool):
        return value
    if str(value).strip().lower() in ("true", "false"):
        return str(value).strip().lower() == "true"
    raise ConfigError(errors={name: f"expected true or false, got {value!r}"})


class KafkaBackend(Backend):
    """Records in Kafka topics, source offsets in compacted offsets topics, group offsets in Kafka."""

    capabilities = Capabilities(commits_check_generation=False, transaction_markers=True, commit_waits_on_io=True,
                                atomic_update_entry=True, group_offsets_in_transactions=True)

    def __init__(self, url: str, bootstrap: str, settings: Mapping[str, Any]) -> None:
        self.url = url
        self.bootstrap = bootstrap
        settings = dict(settings)
        if not _flag(settings, GROUP_OFFSETS_IN_TRANSACTIONS):
            self.capabilities = dataclasses.replace(self.capabilities, group_offsets_in_transactions=False)
        self.clients = clients = _Clients(bootstrap, settings)
        self.cluster_id = clients.cluster_id
        self.group_id_prefix = clients.group_id_prefix
        self.connect_timeout = clients.connect_timeout
        self.read_timeout = clients.read_timeout
        self.default_offsets_topic = clients.default_offsets_topic
        self._admin = _KafkaAdmin(clients)
        self.offsets_writer = _OffsetsWriter(self)
        self.entry_writers = EntryWriters(self)

    @classmethod
    def from_url(cls, url: str, settings: Mapping[str, Any]) -> KafkaBackend:
        """A backend for ``kafka://host:port[,host:port]``; no I/O happens until it is used."""
        return cls(url, kafka_bootstrap_servers(url), settings)

    def __repr__(self) -> str:
        return f"KafkaBackend({self.url!r})"

    # -- client configs and errors (the clients' settings) -----------------------------------------
    def redact(self, text: str) -> str:
        """``text`` with every secret setting value replaced by ``***``."""
        return self.clients.redact(text)

    def client_config(self, kind: str, defaults: Mapping[str, Any] | None = None,
                      forced: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """librdkafka config of one client: ``defaults`` < common settings < ``<kind>.override.*`` <
        ``forced``."""
        return self.clients.client_config(kind, defaults, forced)

    def _error_cb(self, err: ck.KafkaError) -> None:
        self.clients.error_cb(err)

    def make_client(self, factory: Callable[[dict[str, Any]], Any], conf: dict[str, Any], what: str) -> Any:
        return self.clients.make_client(factory, conf, what)

    def translate(self, exc: BaseException, doing: str, *needs: Need) -> BackendError:
        """A BackendError (BackendUnavailableError when the cluster did not answer, AuthorizationError naming the
        one of ``needs`` it refused) for a client error."""
        return self.clients.translate(exc, doing, *needs)

    def _unavailable(self, exc: BaseException, doing: str, *needs: Need) -> BackendError:
        return self.clients.unavailable(exc, doing, *needs)

    # -- admin -------------------------------------------------------------------------------------
    @property
    def admin(self) -> Any:
        return self._admin.client

    def list_topics(self) -> dict[str, int]:
        return self._admin.list_topics()

    def create_topics(self, topics: Mapping[str, int], *, exist_ok: bool = True,
                      config: Mapping[str, str] | None = None, replication: int | None = None) -> None:
        self._admin.create_topics(topics, exist_ok=exist_ok, config=config, replication=replication)

    def offsets_topic(self, name: str | None, use: str = "Read") -> tuple[str, int]:
        """The offsets topic of store ``name`` and its partition count; created compacted if missing (``use``: what the
        caller does with it, ``Read`` or ``Write``, named in an authorization failure)."""
        return self._admin.offsets_topic(name, use)

    # -- clients -----------------------------------------------------------------------------------
    def transactional_producer(
        self, transactional_id: str, offset_store: str | None = None, *, track_metadata: bool = False
    ) -> KafkaTransactionalProducer:
        return KafkaTransactionalProducer(self, transactional_id, offset_store, track_metadata)

    def producer(self, *, track_metadata: bool = False) -> KafkaPlainProducer:
        return KafkaPlainProducer(self, track_metadata)

    def offset_store(self, name: str | None = None) -> KafkaOffsetStore:
        self.offsets_writer.producer()  # created now: its connection and producer id come while the store reads
        return KafkaOffsetStore(self, name)

    def consumer(self, group_id: str | None = None) -> KafkaConsumer:
        return KafkaConsumer(self, group_id)

    def update_entry(self, store: str, key: bytes, update: Callable[[bytes | None], bytes | None],
                     timeout: float = 30.0) -> bytes | None:
        """A compare-and-set through a transactional writer of the entry (:mod:`.entries`): atomic across
        processes."""
        return self.entry_writers.update_entry(store, key, update, timeout)

    def read_range_batches(
        self, partition: TopicPartition, start: int, end: int, *, batch_size: int = 10_000,
        timeout: float = 30.0, keys: bool = True, timestamps: bool = True, headers: bool = True,
    ) -> Iterator[Columns]:
        """:meth:`read_range` as columns, straight from librdkafka's messages: one ``consume`` call per batch
        of a ``read_committed`` consumer of its own, no per-record :class:`ConsumedRecord`. Offsets come from
        the messages (transaction markers leave gaps); the read ends at ``end`` or at the partition's end."""
        return read_range_batches(self, partition, start, end, batch_size=batch_size, timeout=timeout, keys=keys,
                                  timestamps=timestamps, headers=headers)

    def close(self) -> None:
        self._admin.close()
        self.offsets_writer.close()
        self.entry_writers.close()
