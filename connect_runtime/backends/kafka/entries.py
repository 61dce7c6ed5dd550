"""``update_entry`` on Kafka: a compare-and-set of one offset-store entry, atomic across processes (the contract:
:mod:`connect_runtime.backends.base`, "Offset stores"; the runtime's registry of generations relies on it).

A plain read then write lets two writers interleave: an older run's heartbeat reads generation 1, a newer run
writes generation 2, the heartbeat writes generation 1 back (and the next run takes generation 2 again). So each
entry has a writer of its own, a transactional id ``<cluster id>-<store>-<16 hex digits of the key's SHA-1>``, and
one update is::

    init_transactions()      claims the entry (once; again after a fencing): fences every other writer of it; its
                             open transaction is aborted, a commit of it still completing is completed first, so
                             the read below sees it
    read the entry           read_committed, to the end of the store
    new = update(current)    unchanged: nothing is written (and without a claim held, none is made for it)
    begin, send, commit      one record in one transaction; ProducerFencedError when another writer claimed the
                             entry after this one did (it may have written since the read): nothing of this one
                             is visible, and the whole update runs again with a new claim (after a short random
                             pause), within ``timeout``
    read it back             until the store shows it, so every reader that starts after this returns sees it (a
                             commit returns before its markers are written)

This is how Kafka Connect's config topic keeps one writer with exactly-once support on: the leader claims write
privileges by initialising a transactional producer (``KafkaConfigBackingStore.claimWritePrivileges``), writes each
change in a transaction and reads the topic to its end after it; a new leader's producer fences the old one. Here
the writers of one entry claim it for each update instead of once per leadership, since any process may write.

Why not keep the plain write and let the highest generation win on read: the topic is compacted, and compaction
keeps the LAST record of a key, so an older generation written last would win once the cleaner ran; and fields of
one generation (a fan-out's done tasks) would still lose updates.

The ``update`` callable may run more than once (once per attempt): it must only compute the new value from the one
it is given (recording what it saw is fine; the last call is the one that counts).
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from connect_runtime.api.errors import ProducerFencedError, WaitTimeoutError
from connect_runtime.backends.closing import CloseWhenIdle
from connect_runtime.backends.kafka.offsets import KafkaOffsetStore
from connect_runtime.backends.kafka.transactions import KafkaTransactionalProducer

if TYPE_CHECKING:
    from connect_runtime.backends.kafka.backend import KafkaBackend

log = logging.getLogger(__name__)

FIRST_PAUSE_S = 0.02
"""The pause before an update runs again after another writer claimed its entry (doubled each time, to
:data:`LONGEST_PAUSE_S`, each a random part of it: two writers that keep fencing each other fall apart)."""
LONGEST_PAUSE_S = 0.5
TRANSACTION_TIMEOUT_MS = 10_000
"""``transaction.timeout.ms`` of an entry writer: a writer killed inside its (one record) transaction holds back
what read_committed readers of that partition see until the broker aborts it, about this long (its next claim
aborts it at once); a task's producer keeps librdkafka's 60 s."""
WRITERS_KEPT = 16
"""Entry writers one backend keeps (the least recently claimed one is closed past this: each holds connections)."""


def entry_transactional_id(cluster_id: str | None, store: str, key: bytes) -> str:
    """The transactional id of the writer of entry ``key`` of ``store``."""
    tid = f"{store}-{hashlib.sha1(key).hexdigest()[:16]}"
    return f"{cluster_id}-{tid}" if cluster_id else tid


class EntryWriters:
    """The backend's writers of entries (one transactional producer per entry it updated, kept while it stays
    unfenced: an update then costs a read, one transaction and a read back, ~30 ms; claiming the entry again
    costs a round of ``init_transactions``, up to ~0.5 s right after another writer's commit) and a reader per
    store. One update at a time (:class:`CloseWhenIdle`): the clients are never closed under one."""

    def __init__(self, backend: KafkaBackend) -> None:
        self.backend = backend
        self._writers: dict[str, KafkaTransactionalProducer] = {}
        self._readers: dict[str, KafkaOffsetStore] = {}
        self._calls = CloseWhenIdle(self._release)

    def update_entry(self, store: str, key: bytes, update: Callable[[bytes | None], bytes | None],
                     timeout: float) -> bytes | None:
        """Read-modify-write entry ``key`` of ``store`` atomically (see the module docstring); returns what it
        holds after. :class:`WaitTimeoutError` when other writers kept claiming the entry for ``timeout`` s."""
        deadline = time.monotonic() + timeout
        tid = entry_transactional_id(self.backend.cluster_id, store, key)
        pause, attempts = FIRST_PAUSE_S, 0
        with self._calls.call():
            reader = self._readers.get(store)
            if reader is None:
                reader = self._readers[store] = self.backend.offset_store(store)
            while True:
                attempts += 1
                seen: tuple[bytes | None, bytes | None] | None = None
                if tid not in self._writers:  # a change that writes nothing needs no claim (e.g. a fresh heartbeat)
                    current = reader.get([key]).get(key)
                    seen = (current, update(current))
                    if seen[1] == current:
                        return current
                writer = self._writer(tid, store, deadline)
                try:
                    current = reader.get([key]).get(key)
                    # update is called again only when the entry changed between the two reads
                    new = seen[1] if seen is not None and seen[0] == current else update(current)
                    if new == current:
                        return new
                    writer.begin_transaction()
                    writer.commit_transaction([(key, new)], self._bound(deadline))
                except ProducerFencedError as exc:
                    # another writer claimed the entry after this one did (it may have written since): nothing of
                    # this attempt is visible; claim it again and update again
                    self._drop(tid)
                    if time.monotonic() + pause >= deadline:
                        raise WaitTimeoutError(
                            f"updating entry {key[:200]!r} of store {store!r} at {self.backend.bootstrap}: other "
                            f"writers claimed it {attempts} times in {timeout:g} s") from exc
                    log.debug("entry %r of store %r: claimed by another writer; updating again", key[:200], store)
                    time.sleep(random.uniform(pause / 2, pause))
                    pause = min(pause * 2, LONGEST_PAUSE_S)
                    continue
                except BaseException:  # an interrupt too: a writer in an unknown state is not kept
                    self._drop(tid)
                    raise
                _read_back(reader, store, key, current,
                           min(deadline, time.monotonic() + self.backend.read_timeout))
                return new

    def _writer(self, tid: str, store: str, deadline: float) -> KafkaTransactionalProducer:
        writer = self._writers.get(tid)
        if writer is None:
            writer = KafkaTransactionalProducer(self.backend, tid, store, False,
                                                transaction_timeout_ms=TRANSACTION_TIMEOUT_MS)
            try:
                writer.init_transactions(self._bound(deadline))
            except BaseException:  # not kept: closed whatever stopped the init, then re-raised
                writer.close()
                raise
            self._writers[tid] = writer
            while len(self._writers) > WRITERS_KEPT:
                self._drop(next(iter(self._writers)))
        return writer

    def _bound(self, deadline: float) -> float:
        """A wait on the cluster: what is left of the update's ``timeout``, at most ``connect.timeout.ms`` (a lost
        cluster fails the update as fast as it fails any client's request; the registry is bookkeeping)."""
        return max(0.001, min(deadline - time.monotonic(), self.backend.connect_timeout))

    def _drop(self, tid: str) -> None:
        writer = self._writers.pop(tid, None)
        if writer is not None:
            writer.close()

    def close(self) -> None:
        """Never under an update in flight: an update still inside closes the clients when it returns."""
        self._calls.close()

    def _release(self) -> None:
        writers, self._writers = self._writers, {}
        readers, self._readers = self._readers, {}
        for writer in writers.values():
            writer.close()
        for reader in readers.values():
            reader.close()


def _read_back(reader: KafkaOffsetStore, store: str, key: bytes, before: bytes | None, deadline: float) -> None:
    """Wait (until ``deadline``) until a reader sees the committed write: the entry no longer holds ``before`` (a
    later writer may have replaced this one's value already; it claimed the entry after this commit completed)."""
    while reader.get([key]).get(key) == before:
        if time.monotonic() >= deadline:
            log.warning("entry %r of store %r: the committed update was not visible to readers in time", key[:200],
                        store)
            return
        time.sleep(0.005)


__all__ = ["EntryWriters", "entry_transactional_id"]
