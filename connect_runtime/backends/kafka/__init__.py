"""The Kafka backend: ``kafka://host:9092[,host2:9092]`` over confluent-kafka (librdkafka).

``confluent_kafka`` is imported only in this package, and the package only when a ``kafka://`` URL is opened
(``import connect_runtime`` and the SQLite backend never import it).

Settings (the ``settings`` mapping of :func:`connect_runtime.backends.open_backend`):

- any librdkafka property (``security.protocol``, ``sasl.*``, ``ssl.*`` files, ...) applies to every
  client; ``producer.override.<p>``, ``consumer.override.<p>`` and ``admin.override.<p>`` apply to
  that kind of client only. Values are never logged. ``oauth_cb`` (a callable, or its dotted path) is
  confluent-kafka's OAUTHBEARER token callable, imported when the backend opens (``_auth``).
- ``cluster.id`` (default ``connect-cluster``): prefix of transactional ids,
  ``<cluster id>-<connector>-<task>``.
- ``group.id.prefix`` (default ``connect-``): prefix of sink connectors' consumer groups,
  ``<prefix><connector>`` (Kafka Connect's ``connect-<connector>`` by default): with ``cluster.id`` it makes every
  name an ACL needs predictable (docs/kafka.md, "Access control (ACLs)").
- ``connect.timeout.ms`` (default 10000): bound on reaching the cluster (metadata, admin requests,
  producer init); an unreachable cluster raises :class:`BackendUnavailableError` naming the
  bootstrap servers within about this long.
- ``offset.storage.topic`` (default ``connect-offsets``), ``offset.storage.partitions`` (default 25),
  ``offset.storage.replication.factor`` (default -1, the broker's default): the default offsets
  topic, created compacted when missing (Kafka Connect's worker settings of the same names).
- ``offset.storage.read.timeout.ms`` (default 30000): bound on reading an offsets topic to its end.
- ``group.offsets.in.transactions`` (default true): a sink's group offsets are committed inside its commit fence's
  transaction (KIP-447), so a fenced run never lands one; ``false`` commits them after it, through the consumer (for
  a Kafka-protocol broker that does not keep transactional group offsets faithfully: Tansu drops every later one of
  a producer after an abort, and every one after a plain commit of the group).
- ``topic.creation.default.replication.factor`` (default -1) and any other
  ``topic.creation.default.<topic config>`` for topics created by :meth:`KafkaBackend.create_topics`.

Forced, whatever the settings say: producers are idempotent (``enable.idempotence=true``); consumers
are ``isolation.level=read_committed`` with ``enable.auto.commit=false`` (group offsets are committed
only through :meth:`KafkaConsumer.commit`).

Delivery reports: a transactional producer without ``track_metadata`` (and with the default
``partitioner=consistent``) settles each record's partition itself (``crc32(key) % partitions``,
partition 0 without a key: the rule of :func:`connect_runtime.backends.base.default_partition`, the same
choice librdkafka would make) and asks for delivery reports of only the first and last record per
partition of each send: ``Written.ranges`` need no more, and a record that fails delivery fails
``commit_transaction``. Plain producers and ``track_metadata`` keep a report per record.

End of a partition: a ListOffsets query is not trusted for the end of a partition (it is wrong on
some Kafka-protocol brokers, and on Kafka it names the offset after the last transaction marker,
not after the last record). The end is found by reading: a probe consumer reads from just before
the queried end up to the high watermark returned with fetched records (``enable.partition.eof``),
stepping further back while it sees no record; the end is the offset after the last committed record.

Source offsets: one compacted topic per offset store, records keyed and valued exactly as Kafka
Connect writes them, partitioned with Kafka's murmur2 (as Kafka Connect does), so the same key
always lands in the same partition. Reading replays the topic to its end (last value per key wins,
a null value deletes); keys are re-canonicalised (:func:`~connect_runtime.backends.base.canonical_offset_key`)
so keys written by Kafka Connect in any key order are found.

Entries: ``update_entry`` (the registry of generations) is a compare-and-set, atomic across processes: each entry
has a transactional writer, ``<cluster id>-<store>-<16 hex digits of the key's SHA-1>``, which claims the entry
(``init_transactions``), reads it and writes it in one transaction (``entries``).

Transactions: one task's records and source offsets commit in one Kafka transaction (a connector's own
offsets store mirrored to the global one inside it, KIP-618); a newer producer with the same
``transactional.id`` fences the older one. A transaction the broker left hanging on a partition is aborted
before this ``transactional.id`` first commits there, so the next commit cannot make it visible.

Where things are:

=================  ==========================================================================================
``backend``        :class:`KafkaBackend`: the backend contract, composing the parts below
``_client``        settings parsing, each client's librdkafka config (secrets masked), client creation,
                   confluent-kafka errors translated to ``BackendError`` / ``BackendUnavailableError``
``_logs``          librdkafka's log lines and error callbacks, each event logged once per interval
``_access``        a refused permission (``*_AUTHORIZATION_FAILED``) as one ``AuthorizationError`` naming the
                   operation, the resource, the principal and the ``kafka-acls.sh`` fix
``_auth``          ``oauth_cb`` by dotted path; a broker refusing the client (SASL, TLS) told from one that is down
``admin``          the ``AdminClient``: metadata, topic creation, offsets topics (created compacted, checked)
``delivery``       delivery reports: per-partition ranges, and the sparse reports of a transactional send
``producers``      the producers' shared core (send loop, offset records, flush, bounded close) and
                   :class:`KafkaPlainProducer`
``transactions``   :class:`KafkaTransactionalProducer` and its defence against a hanging transaction
``consumer``       :class:`KafkaConsumer`, its group-commit handle and background close
``ends``           the end of a partition, found by reading (``_EndReader``)
``offsets``        :class:`KafkaOffsetStore`, the backend's offsets writer, :func:`murmur2_partition`
``entries``        ``update_entry`` as a compare-and-set: a transactional writer per entry (the registry's)
``columnar``       ``read_range_batches``: a committed range read straight into columns
=================  ==========================================================================================
"""

from __future__ import annotations

from connect_runtime.backends.base import canonical_offset_key
from connect_runtime.backends.kafka._client import DEFAULT_CLUSTER_ID, DEFAULT_OFFSETS_TOPIC
from connect_runtime.backends.kafka.backend import KafkaBackend
from connect_runtime.backends.kafka.consumer import KafkaConsumer
from connect_runtime.backends.kafka.offsets import KafkaOffsetStore, murmur2_partition
from connect_runtime.backends.kafka.producers import KafkaPlainProducer
from connect_runtime.backends.kafka.transactions import KafkaTransactionalProducer

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

