"""The exactly-once source task (Kafka Connect's ``ExactlyOnceWorkerSourceTask``, KIP-618): records and source
offsets of a transaction become visible together or never. Only its commit specifics live here; the loop is
:class:`~connect_runtime.runtime.source.task.SourceWorkerTask`'s and the steps of a commit are numbered in
:mod:`~connect_runtime.runtime.source.checkpoint`."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from connect_runtime.api.errors import BackendUnavailableError
from connect_runtime.backends.base import Producer, TransactionalProducer, Written
from connect_runtime.metrics import SOURCE_RECORD_WRITE_TOTAL, elapsed
from connect_runtime.runtime.fencing import check_still_newest, generation_guard
from connect_runtime.runtime.source.checkpoint import Checkpoint, InFlight
from connect_runtime.runtime.source.task import RunFailed, SourceWorkerTask
from connect_runtime.secrets import mask_urls

log = logging.getLogger(__name__)

COMMIT_RESULT_MARGIN_S = 15.0
"""How much longer than its own bound a commit in flight is waited for (the client's close and abort after a
failure are bounded by the connect timeout, 10 s by default) before the run fails naming the store."""


class ExactlyOnceTask(SourceWorkerTask):
    """A transactional producer per task; offsets (and the ranges record) in the same transaction as the records.

    A transaction's commit runs on this task's committer thread while the task polls and converts its
    next batch (which is sent only after that commit completed: one open transaction per producer).
    The callbacks of a transaction (every ``commit_record``, then ``commit()``) run in the task's thread
    once its commit completed, before the task's next ``poll`` (Kafka Connect calls them right after
    ``commitTransaction``), and also when the run ends by another task's failure or fencing: a committed
    transaction is always reported. A task that overrides neither lets the commit overlap its next poll.
    """

    producer: TransactionalProducer
    txn_open = False
    inflight: InFlight | None = None
    committer: ThreadPoolExecutor | None = None
    abandoned = False  # a commit in flight did not return within its bound (its producer is never closed)

    def setup(self) -> None:
        tid = self.plan.transactional_id(self.index, self.backend.cluster_id)
        self.committer = ThreadPoolExecutor(1, thread_name_prefix=f"{self.plan.name}-task-{self.index}-commit")
        # overlapping pays where a commit waits on the network with the GIL released (Kafka); SQLite's
        # commit is CPU work under the GIL, so it stays in line with the task's loop
        self.overlap = self.backend.capabilities.commit_waits_on_io
        self.producer = self.backend.transactional_producer(tid, self.offsets_name, track_metadata=self.track)
        record = self.plan.record
        if record is not None:
            self.producer.generation_guard = generation_guard(self.plan.name, record.generation, self.plan.scope)
        # a broker that is restarting is waited for as a commit waits for it (errors.retry.timeout), not only
        # offset.flush.timeout.ms: init_transactions at a task's start is the first call that needs the coordinator
        self.producer.init_transactions(self.commit_timeout)
        if record is not None and not self.backend.capabilities.commits_check_generation:
            check_still_newest(self.backend, record, self.label)

    def producer_for_send(self) -> Producer:
        if not self.txn_open:
            self.settle()
            self.producer.begin_transaction()
            self.txn_open = True
        return self.producer

    def commit(self) -> None:
        self.boundary.committed(time.monotonic())
        if not self.txn_open and not self.pending.writer:
            return
        if self.state.failed:
            raise RunFailed
        self.settle()  # step 1
        cp = self.pending
        entries, offsets = cp.offsets()  # step 2
        if not self.txn_open:  # offsets only (every record of the batch was filtered, or it was aborted)
            self.producer.begin_transaction()
            self.txn_open = True
        records = cp.records
        extra = None if not self.ledger.active else (lambda w: self.ledger.entries(w.ranges.items(), records))
        self.pending = Checkpoint(self.plan.name)
        self.txn_open = False  # this transaction is committing; the next one begins after it completed
        took = [0.0]
        if self.overlap:  # step 3, on the committer thread
            assert self.committer is not None
            started = threading.Event()
            producer, timeout = self.producer, self.commit_timeout

            def commit_transaction() -> Written:
                started.set()
                t0 = time.perf_counter()
                written = producer.commit_transaction(entries, timeout, extra)
                took[0] = elapsed(t0)
                return written

            future = self.committer.submit(commit_transaction)
            # Wait (GIL released) until the committer runs: it then holds the GIL only until its commit enters
            # the client's C code. Without this wait it would start only when this thread next blocks or after
            # the interpreter's switch interval (5 ms), and the commit would hardly overlap the next poll.
            started.wait(timeout)
        else:  # step 3, in line
            future = Future()
            t0 = time.perf_counter()
            try:
                future.set_result(self.producer.commit_transaction(entries, self.commit_timeout, extra))
                took[0] = elapsed(t0)
            except BaseException as exc:  # handed over to settle() through the future, as from the committer
                future.set_exception(exc)
        self.inflight = InFlight(future, cp, offsets, took)
        if not self.overlap:
            self.settle()

    def settle(self) -> None:
        inflight, self.inflight = self.inflight, None
        if inflight is None:
            return
        try:
            written = self.commit_result(inflight)  # fenced, unavailable, ...: raised here, in the task's thread
        except Exception:
            self.metrics.commit_failed()
            raise
        self.completed(written, inflight)

    def commit_result(self, inflight: InFlight) -> Written:
        """The committer's answer, waited for no longer than the commit's own bound (plus the client's connect
        timeout): every call inside is bounded, and this bound makes sure of it, so a commit that never returns
        fails the run naming the cluster instead of holding it for ever."""
        bound = self.commit_timeout + COMMIT_RESULT_MARGIN_S
        try:
            return inflight.future.result(timeout=bound)
        except FutureTimeout:
            self.abandoned = True
            raise BackendUnavailableError(
                f"{self.label}: commit_transaction on {mask_urls(self.backend.url)} did not "
                f"return within {bound:g} s (errors.retry.timeout / offset.flush.timeout.ms bound the commit); "
                f"the transaction is abandoned and aborted by the cluster") from None

    def completed(self, written: Written, inflight: InFlight) -> None:
        """A transaction committed: account for it, then steps 4 and 5 in Kafka Connect's order
        (``ExactlyOnceWorkerSourceTask.commitTransaction``): every ``commit_record`` of it, then ``commit()``."""
        cp = inflight.checkpoint
        self.state.committed(written.ranges.items(), cp.records, cp.filtered, cp.skipped, inflight.offsets,
                             transaction=True, writer=self.index, size=cp.bytes, schemas=cp.schemas)
        metrics = self.metrics
        metrics.add_spans(SOURCE_RECORD_WRITE_TOTAL, written.ranges.items())
        metrics.transaction(cp.records)
        metrics.commit_done(inflight.took[0])
        metrics.flush()
        self.report_records(cp, written.metadata)
        assert self.task is not None
        self.task.commit()

    def abort(self) -> None:
        """``TransactionContext.abort_transaction()``: the records since the last boundary are dropped, but
        their source offsets are committed (in a transaction of their own), so the next poll, or the next
        run, does not see the same records again (Kafka Connect's connector-defined boundary manager)."""
        self.settle()
        if self.txn_open:
            self.producer.abort_transaction(self.timeout)
            self.txn_open = False
        cp = self.pending
        if cp.records:
            log.info("%s: aborted a transaction of %d records as requested by the connector", self.label, cp.records)
        if self.track:  # the aborted records were not written: KIP-416 reports them with None
            assert self.task is not None
            for r in cp.polled:
                self.task.commit_record(r, None)
            cp.polled, cp.sent = [], []
        cp.records = 0
        self.commit()

    def drop_final(self) -> None:
        # Connector-defined boundaries: the final transaction commits only if the connector asked for it;
        # what it dispatched after its last commit request is dropped and its offsets are not committed,
        # so the next run polls those records again (ExactlyOnceWorkerSourceTask.finalOffsetCommit).
        self.settle()
        if self.pending:
            log.info("%s: the run ends with %d records after the connector's last commit request; they are not "
                     "committed (transaction.boundary=connector) and will be polled again",
                     self.label, self.pending.records)
        if self.txn_open:
            self.producer.abort_transaction(self.timeout)
            self.txn_open = False
        self.pending.clear()

    def abort_quietly(self) -> None:
        inflight, self.inflight = self.inflight, None
        if inflight is not None:
            try:
                written = self.commit_result(inflight)
            except Exception as exc:  # already the run's failure, or a consequence of it
                log.debug("%s: the commit in flight ended with %r", self.label, exc)
            else:
                # the run fails (another task failed or was fenced), but this transaction DID commit: its records
                # and offsets are stored, so the task hears every commit_record and commit() for it all the same
                try:
                    if self.task is not None:
                        self.completed(written, inflight)
                except Exception as exc:
                    log.warning("%s: reporting a committed transaction after the run failed raised %r",
                                self.label, exc)
        if self.txn_open:
            try:
                self.producer.abort_transaction(self.timeout)
            except Exception as exc:  # fenced or broken: the transaction is never committed either way
                log.warning("%s: aborting the open transaction raised %r", self.label, exc)
            self.txn_open = False
        self.pending.clear()

    def close_clients(self) -> None:
        if self.committer is not None:
            # the commit in flight was waited for (bounded) by settle() or abort_quietly(); a committer thread
            # still inside a client call is not waited for again: it ends when that call's own bound runs out
            self.committer.shutdown(wait=False, cancel_futures=True)
        if self.abandoned:
            # never close a client under a call still in flight (it would free what that call uses): the
            # producer is left to its committer thread and the process's end
            log.warning("%s: the commit in flight never returned; its producer is left open", self.label)
            del self.producer
        super().close_clients()


__all__ = ["ExactlyOnceTask"]
