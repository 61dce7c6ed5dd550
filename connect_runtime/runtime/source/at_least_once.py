"""The at-least-once source task (Kafka Connect's ``WorkerSourceTask``): records are flushed first, then the
offsets of flushed records are written to the offset store, so a failure between the two writes records again on
the next run, never loses one. Only its commit specifics live here (the steps are numbered in
:mod:`~connect_runtime.runtime.source.checkpoint`)."""

from __future__ import annotations

import time

from connect_runtime.backends.base import Producer
from connect_runtime.metrics import SOURCE_RECORD_WRITE_TOTAL, elapsed
from connect_runtime.runtime.source.checkpoint import Checkpoint
from connect_runtime.runtime.source.task import RunFailed, SourceWorkerTask


class AtLeastOnceTask(SourceWorkerTask):
    """Flush the records, then write the offsets of flushed records (every ``offset.flush.interval.ms``)."""

    exactly_once = False
    producer: Producer

    def setup(self) -> None:
        self.flushed = Checkpoint(self.plan.name)  # records whose flush succeeded, offsets not yet written
        self.producer = self.backend.producer(track_metadata=self.track)

    def producer_for_send(self) -> Producer:
        return self.producer

    def after_batch(self) -> None:
        if self.boundary.after_batch(time.monotonic()):
            self.commit()
        elif self.pending.records >= self.max_batch:
            self.flush()

    def flush(self) -> None:
        """Step 1 (and step 4 for the flushed records): the records sent so far are written."""
        written = self.producer.flush(self.commit_timeout) if self.pending.records else None
        cp = self.pending
        if written is not None:
            cp.spans.extend(written.ranges.items())
            self.report_records(cp, written.metadata)
        elif self.track:
            self.report_records(cp, [])
        cp.sent, cp.polled = [], []
        self.flushed.absorb(cp)

    def commit(self) -> None:
        self.boundary.committed(time.monotonic())
        if self.state.failed:
            raise RunFailed
        t0 = time.perf_counter()
        try:
            self.flush()
            cp = self.flushed
            if not cp:
                return
            entries, offsets = cp.offsets()  # step 2
            if entries:  # step 3: the offsets, then the ranges record
                assert self.store is not None
                # a broker restart is waited out as the flush waits for it (errors.retry.timeout), not failed after
                # offset.flush.timeout.ms: the records are already written, only their offsets are left
                self.store.put(entries, self.commit_timeout)
            self.ledger.put(cp.spans, cp.records, self.commit_timeout)
        except Exception:
            self.metrics.commit_failed()
            raise
        self.state.committed(cp.spans, cp.records, cp.filtered, cp.skipped, offsets, transaction=True,
                             writer=self.index, size=cp.bytes, schemas=cp.schemas)
        self.metrics.add_spans(SOURCE_RECORD_WRITE_TOTAL, cp.spans)
        self.metrics.commit_done(elapsed(t0))
        self.metrics.flush()
        cp.clear()
        assert self.task is not None
        self.task.commit()  # step 5

    def drop_final(self) -> None:  # pragma: no cover - at-least-once always commits its last flush
        self.commit()


__all__ = ["AtLeastOnceTask"]
