"""The store interface, and the contract every backend keeps.

One interface, two implementations: ``sqlite`` (embedded default, ``sqlite:///path/file.db``) and ``kafka``
(``kafka://host:9092[,host2:9092]``). The runtime only talks to these classes; it never imports ``sqlite3`` or
``confluent_kafka`` itself. Everything here is byte-level: the runtime's converters make the bytes, and source
offsets are stored exactly as Kafka Connect stores them (key ``["<connector>",{partition}]``, value ``{offset}`` as
compact JSON, ``None`` value = delete; see :mod:`connect_runtime.runtime.offsets`).

The contract
------------
What the runtime relies on, promise by promise. Each is tested, on every backend (SQLite, Apache Kafka,
Tansu where it is faithful), by ``tests/contract/`` (the test module is named after the promise): a new
backend passes that suite, or it is not a backend. Where a backend cannot keep a promise by itself, its
:class:`Capabilities` say so and the runtime does that part (the capability named).

1. **Atomic commits** (``test_atomic_commit``). Records sent in a transaction, the source offsets passed to
   ``commit_transaction`` and every ``extra`` entry (the runtime's ranges record) become visible together,
   or never: after ``abort_transaction``, after fencing, and after the process is SIGKILLed at any instant.
   A commit that raised may have committed (a lost connection after the broker committed): the runtime
   never retries one; the next run reads the committed offsets and goes on.
2. **Only committed data is visible** (``test_read_committed``). ``Consumer.poll``, ``end_offsets``,
   ``read_range`` and ``read_range_batches`` return committed records only: never a record of an open or
   aborted transaction, never a record past ``end_offsets``.
3. **Fencing** (``test_fencing``). ``init_transactions`` fences every older producer of the same
   ``transactional_id``: its next ``commit_transaction`` raises :class:`ProducerFencedError` and writes nothing.
   **Every older generation** of a connector (any task index, whatever the new task count) is fenced when a new one
   begins: by the backend inside each commit when ``commits_check_generation`` (``generation_guard``), else by the
   runtime initialising every transactional id of the older generation (:meth:`Backend.fence_transactional_ids`).
   Sink group commits are fenced the same way (the consumer's ``generation_guard``, else the runtime's commit-fence
   producer, whose transaction carries them where ``group_offsets_in_transactions``).
4. **Exact ranges** (``test_exact_ranges``). ``Written.ranges`` gives, per partition, ``[first, next)`` of what one
   flush or commit wrote. One writer: exactly its records. Writers on one partition at once: the range holds this
   writer's records and, with ``transaction_markers``, its own marker offsets, which committed readers skip; records
   of another writer committed inside one of this writer's transactions are not told apart there (documented limit).
5. **Offset stores** (``test_offset_stores``). ``put`` is durable when it returns; a ``None`` value
   deletes; ``get``/``read_all`` return the latest committed values; a producer created for store ``S``
   commits its offsets to ``S`` **and** to the global store (the mirror, KIP-618) in the same
   transaction, except the runtime's internal stores (:data:`INTERNAL_STORES`). ``update_entry`` is a
   read-modify-write that is atomic across processes when ``atomic_update_entry`` (SQLite and Kafka both are: a
   change held between its read and its write never undoes a change made meanwhile, so the registry's
   generations only grow); its ``update`` callable may be called more than once (once per attempt).
6. **Sink consumers** (``test_sink_consumer``). read_committed, explicit assignment, offsets in order per partition;
   group offsets are committed only by ``commit`` (never automatically) or ``send_group_offsets`` and read back by
   ``committed``; ``beginning_offsets`` / ``end_offsets`` bound what ``poll`` returns.
7. **A lost store** (``test_lost_store``). Every blocking call is bounded; a store that cannot be reached raises
   :class:`BackendUnavailableError` naming it (never a password) within the bound, and a connection lost mid-run
   fails the run with one clear error; nothing committed is lost, nothing uncommitted becomes visible.
8. **When ``commit_record`` is due** (``test_commit_record``, the runtime's half of the contract): every
   ``commit_record(record, metadata)`` of a committed transaction, then ``commit()``, before the task's
   next ``poll``, also when the run then fails or is fenced. A backend makes this possible by returning
   ``Written.metadata`` (per record, in send order) from the commit when ``track_metadata`` was asked for.

Errors: implementations translate their library's exceptions into
:class:`~connect_runtime.api.errors.BackendError` (chained), :class:`ProducerFencedError` for a
fenced producer, :class:`BackendUnavailableError` when the store cannot be reached within a bounded
wait. Every blocking call takes or has a bounded timeout.

Threads: a Backend object may be shared by threads; every producer, consumer and offset store it
returns is used by one thread only.
"""

from __future__ import annotations

import abc
import json
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from connect_runtime.api.records import RecordMetadata, TopicPartition

WireHeaders = list[tuple[str, "bytes | None"]]


def default_partition(key: bytes | None, partitions: int) -> int:
    """The partitioning policy of every backend, for a record sent with ``partition=None``:
    ``crc32(key) % partitions`` for a keyed record, partition 0 for a record without a key (or a
    topic of one partition). Stable across processes and backends, so a key always lands on the same
    partition of a topic of a given size. Hot loops inline ``zlib.crc32(key) % partitions``; this is
    the rule they follow. (Offset topics on Kafka follow Kafka Connect instead: murmur2.)"""
    if key is None or partitions <= 1:
        return 0
    return zlib.crc32(key) % partitions


def canonical_offset_key(key: bytes) -> bytes:
    """A stored source-offset key re-serialised with sorted object keys and compact separators: the
    one form every backend and the runtime compare keys in (Kafka Connect writes
    ``["name",{...}]`` in insertion order). Keys that are not JSON stay as they are."""
    try:
        data = json.loads(key)
    except ValueError:
        return key
    return json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


class ProducerRecord(NamedTuple):
    """A converted record on its way to a topic (plain tuples of the same shape too); ``partition=None`` lets the
    backend choose, by :func:`default_partition`."""

    topic: str
    partition: int | None
    key: bytes | None
    value: bytes | None
    timestamp: int | None = None
    headers: WireHeaders | None = None


class ConsumedRecord(NamedTuple):
    """A committed record read from a topic."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int | None
    headers: WireHeaders | None


OffsetEntry = tuple[bytes, "bytes | None"]
"""A source offset as stored: (key bytes, value bytes or None to delete)."""

REGISTRY_STORE = "pyconnect-connectors"
"""Offset store of the runtime's connector registry (generations, task counts, run state)."""
RANGES_STORE = "pyconnect-ranges"
"""Offset store of the runtime's ranges record (what each labelled run, e.g. a data interval, committed)."""
INTERNAL_STORES = frozenset({REGISTRY_STORE, RANGES_STORE})
"""Stores of the runtime's own bookkeeping: never mirrored to the global offsets store."""

Ranges = dict[TopicPartition, tuple[int, int]]
"""Per topic partition, the offsets ``[first, next)`` written by one flush or commit."""


class Written(NamedTuple):
    """What one flush or transaction commit durably wrote."""

    ranges: Ranges
    metadata: list[RecordMetadata] | None
    """Per record, in send order; only when the producer was created with ``track_metadata=True``."""


ExtraEntries = Mapping[str, Sequence[OffsetEntry]] | Callable[[Written], Mapping[str, Sequence[OffsetEntry]]]
"""Entries of further offset stores committed in a transaction (see ``commit_transaction``)."""


class Producer(abc.ABC):
    """A non-transactional producer (at-least-once source runs, dead letter queues)."""

    @abc.abstractmethod
    def send(self, records: Sequence[ProducerRecord]) -> None:
        """Queue records for writing (may write asynchronously)."""

    @abc.abstractmethod
    def flush(self, timeout: float) -> Written:
        """Wait until everything sent since the last flush is durably written; what it wrote."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the producer; unflushed records may be lost."""


class TransactionalProducer(Producer):
    """One task's transactional producer (KIP-618).

    ``init_transactions`` registers ``transactional_id`` and fences every older producer with the same id: their next
    ``commit_transaction`` raises :class:`ProducerFencedError` and writes nothing. Records sent between
    ``begin_transaction`` and ``commit_transaction`` and the source offsets passed to ``commit_transaction`` become
    visible together, or (abort, crash, fencing) never."""

    transactional_id: str

    generation_guard: tuple[str, bytes, int] | None = None
    """``(store, key, generation)``: a connector generation this producer belongs to (set by the runtime before
    ``init_transactions``). A backend that can check it inside the commit (SQLite) refuses to commit with
    :class:`ProducerFencedError` once the registry entry ``key`` of ``store`` holds a newer generation; a backend
    that cannot (Kafka) relies on the runtime fencing every transactional id of the older generation
    (:meth:`Backend.fence_transactional_ids`)."""

    @abc.abstractmethod
    def init_transactions(self, timeout: float) -> None:
        """Register this producer and fence older instances of the same ``transactional_id``."""

    @abc.abstractmethod
    def begin_transaction(self) -> None:
        """Start a transaction."""

    @abc.abstractmethod
    def commit_transaction(self, offsets: Sequence[OffsetEntry], timeout: float,
                           extra: ExtraEntries | None = None) -> Written:
        """Write the offsets into this producer's offset store in the same transaction as the records,
        then commit. ``extra`` adds entries of further offset stores to the same transaction (the
        runtime's ranges record): a mapping ``{store: entries}``, or a callable that gets what this
        transaction wrote (its ranges, known once offsets are assigned) and returns that mapping.
        Raises :class:`ProducerFencedError` (nothing written) if fenced."""

    @abc.abstractmethod
    def abort_transaction(self, timeout: float) -> None:
        """Drop everything sent since ``begin_transaction``."""

    def send_group_offsets(self, consumer: Consumer, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``consumer``'s group offsets with this transaction, or never (``group_offsets_in_transactions``)."""
        raise NotImplementedError(f"{type(self).__name__} cannot commit group offsets in a transaction")


class OffsetStore(abc.ABC):
    """Source offsets of one offsets store (Kafka: one offsets topic; SQLite: one named table slice)."""

    @abc.abstractmethod
    def get(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """The committed values of these keys (absent keys are left out)."""

    @abc.abstractmethod
    def read_all(self) -> dict[bytes, bytes]:
        """Every committed key with its latest non-deleted value."""

    @abc.abstractmethod
    def put(self, entries: Sequence[OffsetEntry], timeout: float) -> None:
        """Write entries durably (a ``None`` value deletes the key)."""

    def close(self) -> None:
        """Release resources."""


class Consumer(abc.ABC):
    """A read_committed consumer with explicit assignment, in consumer group ``group_id``. Group offsets are
    committed only through :meth:`commit` (never automatically)."""

    group_id: str | None

    generation_guard: tuple[str, bytes, int] | None = None
    """``(store, key, generation)``: the sink connector generation this consumer commits for (set by the runtime
    before the first commit). A backend whose ``capabilities.commits_check_generation`` checks it inside the commit's
    write transaction and raises :class:`ProducerFencedError` (nothing committed) once the registry entry ``key`` of
    ``store`` holds another generation; otherwise the runtime fences sink commits itself."""

    task_guard: tuple[str, bytes, int] | None = None
    """A fanned-out sink task's try ``(store, key, try)``, checked as ``generation_guard``: its later try fences it."""

    @abc.abstractmethod
    def partitions(self, topics: Sequence[str] = (), pattern: str | None = None) -> list[TopicPartition]:
        """Every partition of the named topics, or of the topics whose name fully matches ``pattern``."""

    @abc.abstractmethod
    def committed(self, partitions: Sequence[TopicPartition], timeout: float) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (next offset to read), ``None`` where nothing was committed."""

    @abc.abstractmethod
    def end_offsets(self, partitions: Sequence[TopicPartition], timeout: float) -> dict[TopicPartition, int]:
        """The read_committed end of each partition (the offset after the last committed record)."""

    @abc.abstractmethod
    def beginning_offsets(self, partitions: Sequence[TopicPartition], timeout: float) -> dict[TopicPartition, int]:
        """The first offset of each partition."""

    @abc.abstractmethod
    def assign(self, positions: Mapping[TopicPartition, int]) -> None:
        """Read exactly these partitions, each from the given offset (replaces any assignment)."""

    @abc.abstractmethod
    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Move the read position of one assigned partition."""

    @abc.abstractmethod
    def pause(self, partitions: Sequence[TopicPartition]) -> None:
        """Stop returning records of these partitions."""

    @abc.abstractmethod
    def resume(self, partitions: Sequence[TopicPartition]) -> None:
        """Return records of these partitions again."""

    @abc.abstractmethod
    def poll(self, max_records: int, timeout: float) -> list[ConsumedRecord]:
        """Up to ``max_records`` committed records of unpaused assigned partitions, in offset order per
        partition; waits at most ``timeout`` seconds, returning ``[]`` when none came."""

    @abc.abstractmethod
    def commit(self, offsets: Mapping[TopicPartition, int], timeout: float) -> None:
        """Synchronously commit group offsets (next offset to read)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the consumer (commits nothing)."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend does by itself, so the runtime knows what it must do (see the contract above)."""

    commits_check_generation: bool = False
    """Producer and group commits check ``generation_guard`` inside their write transaction (SQLite). If
    not, the runtime fences an older generation itself: it initialises every transactional id of it, and
    routes sink group commits through a commit-fence producer (Kafka)."""
    transaction_markers: bool = False
    """A committed transaction leaves one marker offset after its last record in each partition it wrote
    (Kafka): two spans of one writer separated by exactly one offset hold nothing of anyone else, so the
    runtime joins them in a run's ranges."""
    commit_waits_on_io: bool = False
    """A commit waits on the network with the GIL released (Kafka): the runtime overlaps it with the task's
    next batch. If not (SQLite: CPU work under the GIL), commits stay in line with the task's loop."""
    atomic_update_entry: bool = False
    """``update_entry`` is atomic across processes (SQLite: one write transaction; Kafka: a compare-and-set through a
    transactional writer of the entry, ``backends/kafka/entries.py``). A backend that cannot make it so leaves it
    ``False`` and keeps the base class's read then write: its registry can then lose a write made between another
    writer's read and write (an older run's heartbeat writing its generation back)."""
    group_offsets_in_transactions: bool = False
    """``TransactionalProducer.send_group_offsets`` (Kafka, KIP-447): the runtime's sink commit fence uses it."""


class Backend(abc.ABC):
    """A record and offset store, opened from a URL by :func:`connect_runtime.backends.open_backend`."""

    url: str
    cluster_id: str | None
    """Prefix of transactional ids (``<cluster id>-<connector>-<task>``); ``None`` for no prefix."""
    group_id_prefix: str = "connect-"
    """Sink groups are ``<prefix><connector>`` (Kafka Connect's ``connect-<connector>``; Kafka: ``group.id.prefix``)."""

    capabilities: Capabilities = Capabilities()
    """What this backend does by itself (see :class:`Capabilities`)."""

    @abc.abstractmethod
    def transactional_producer(self, transactional_id: str, offset_store: str | None = None, *,
                               track_metadata: bool = False) -> TransactionalProducer:
        """A task's transactional producer whose commits also write ``offset_store`` (None = default)."""

    @abc.abstractmethod
    def producer(self, *, track_metadata: bool = False) -> Producer:
        """A non-transactional producer."""

    @abc.abstractmethod
    def offset_store(self, name: str | None = None) -> OffsetStore:
        """The source offset store ``name`` (None = the default, ``connect-offsets``)."""

    @abc.abstractmethod
    def consumer(self, group_id: str | None = None) -> Consumer:
        """A read_committed consumer; ``group_id=None`` for reading without a group."""

    @abc.abstractmethod
    def create_topics(self, topics: Mapping[str, int], *, exist_ok: bool = True,
                      replication: int | None = None) -> None:
        """Create topics with the given partition counts (existing ones are left as they are);
        ``replication``: their replication factor where the backend replicates (``None``: its default)."""

    @abc.abstractmethod
    def list_topics(self) -> dict[str, int]:
        """Every topic and its partition count."""

    def update_entry(self, store: str, key: bytes, update: Callable[[bytes | None], bytes | None],
                     timeout: float = 30.0) -> bytes | None:
        """Read-modify-write one entry of an offset store: ``update(current value or None)`` returns the
        new value (``None`` deletes). Atomic across processes when ``capabilities.atomic_update_entry`` (SQLite:
        one write transaction; Kafka: a compare-and-set, its own implementation); this default is a read then a
        write. ``update`` may be called more than once (once per attempt): it computes the new value from the one
        it is given, and only its last call counts. Returns what the entry holds after."""
        store_ = self.offset_store(store)
        try:
            new = update(store_.get([key]).get(key))
            store_.put([(key, new)], timeout)
            return new
        finally:
            store_.close()

    def fence_transactional_ids(self, transactional_ids: Sequence[str], timeout: float) -> None:
        """Fence every producer of these transactional ids (KIP-618 zombie fencing of an older generation):
        a producer with each id is initialised once, which bumps its epoch, and closed."""
        for tid in transactional_ids:
            producer = self.transactional_producer(tid)
            try:
                producer.init_transactions(timeout)
            finally:
                producer.close()

    def read_range(
        self, partition: TopicPartition, start: int, end: int, *, batch_size: int = 10_000, timeout: float = 30.0
    ) -> Iterator[ConsumedRecord]:
        """Committed records of one partition with ``start <= offset < end``, in offset order."""
        consumer = self.consumer(None)
        try:
            consumer.assign({partition: start})
            position = start
            while position < end:
                batch = consumer.poll(min(batch_size, end - position), timeout)
                if not batch:
                    ends = consumer.end_offsets([partition], timeout)
                    if ends[partition] <= position:
                        return
                    continue
                for rec in batch:
                    if rec.offset >= end:
                        return
                    position = rec.offset + 1
                    yield rec
        finally:
            consumer.close()

    def read_range_batches(
        self, partition: TopicPartition, start: int, end: int, *, batch_size: int = 10_000,
        timeout: float = 30.0, keys: bool = True, timestamps: bool = True, headers: bool = True,
    ) -> Iterator[tuple[Sequence[int], Sequence[bytes | None] | None, Sequence[bytes | None],
                        Sequence[int | None] | None, Sequence[WireHeaders | None] | None]]:
        """The records of :meth:`read_range` as columns, at most ``batch_size`` records per batch: each batch
        is ``(offsets, keys, values, timestamps, headers)``, one entry per record in offset order (a column
        not asked for with ``keys``/``timestamps``/``headers`` is ``None``). For readers that build columnar
        data (the Spark data source); backends override it to skip per-record objects."""
        batch: list[ConsumedRecord] = []
        size = max(1, batch_size)
        for rec in self.read_range(partition, start, end, batch_size=size, timeout=timeout):
            batch.append(rec)
            if len(batch) >= size:
                _t, _p, offs, ks, values, stamps, hdrs = zip(*batch, strict=True)
                yield (offs, ks if keys else None, values, stamps if timestamps else None,
                       hdrs if headers else None)
                batch = []
        if batch:
            _t, _p, offs, ks, values, stamps, hdrs = zip(*batch, strict=True)
            yield offs, ks if keys else None, values, stamps if timestamps else None, hdrs if headers else None

    def close(self) -> None:
        """Release connections."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "INTERNAL_STORES",
    "RANGES_STORE",
    "REGISTRY_STORE",
    "Backend",
    "Capabilities",
    "ConsumedRecord",
    "Consumer",
    "ExtraEntries",
    "OffsetEntry",
    "OffsetStore",
    "Producer",
    "ProducerRecord",
    "Ranges",
    "TransactionalProducer",
    "WireHeaders",
    "Written",
    "canonical_offset_key",
    "default_partition",
]
