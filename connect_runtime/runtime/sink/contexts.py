"""The runtime side of the contexts a sink connector and its tasks get (Kafka Connect's
``WorkerSinkTaskContext``): narrow, each call from the task's own thread; what needs the consumer (rewinds,
pauses) is queued here and applied by the task loop before its next poll."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from connect_runtime.api.connector import SinkConnectorContext
from connect_runtime.api.errors import ConnectError
from connect_runtime.api.records import TopicPartition
from connect_runtime.api.sink import ErrantRecordReporter, SinkTaskContext

if TYPE_CHECKING:
    from connect_runtime.runtime.sink.run import SinkRunState
    from connect_runtime.runtime.sink.task import SinkWorkerTask

log = logging.getLogger(__name__)


class ConnectorContext(SinkConnectorContext):
    def __init__(self, run: SinkRunState) -> None:
        self._run = run

    def request_task_reconfiguration(self) -> None:
        log.info("sink connector %r asked for task reconfiguration: the next run plans its tasks again",
                 self._run.name)

    def raise_error(self, exc: BaseException) -> None:
        self._run.fail(ConnectError(f"sink connector {self._run.name!r} raised an error: {exc}"), exc)


class TaskContext(SinkTaskContext):
    """The runtime side of one task's context. Every call comes from the task's own thread; what
    needs the consumer is queued and applied before the next poll."""

    def __init__(self, worker: SinkWorkerTask, configs: dict[str, str], reporter: ErrantRecordReporter) -> None:
        self._worker = worker
        self._configs = configs
        self.rewinds: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()
        self.pause_changed = False
        self.commit_requested = False
        self.closing = False
        self.retry_timeout_s: float | None = None
        self._reporter = reporter

    @property
    def configs(self) -> dict[str, str]:
        return self._configs

    def offset(
        self, offsets: Mapping[TopicPartition, int] | TopicPartition, offset: int | None = None
    ) -> None:
        if isinstance(offsets, Mapping):
            items = list(offsets.items())
        else:
            if offset is None:
                raise ConnectError(f"offset({offsets!r}) needs the offset to rewind to")
            items = [(offsets, offset)]
        for tp, off in items:
            self.rewinds[TopicPartition(tp[0], int(tp[1]))] = int(off)

    def assignment(self) -> set[TopicPartition]:
        return set(self._worker.assigned)

    def _check(self, partitions: Sequence[TopicPartition], what: str) -> list[TopicPartition]:
        tps = [TopicPartition(tp[0], int(tp[1])) for tp in partitions]
        foreign = [tp for tp in tps if tp not in self._worker.assigned_set]
        if foreign:
            raise ConnectError(f"cannot {what} partitions not assigned to this task: {foreign}")
        return tps

    def pause(self, *partitions: TopicPartition) -> None:
        self.paused.update(self._check(partitions, "pause"))
        self.pause_changed = True

    def resume(self, *partitions: TopicPartition) -> None:
        self.paused.difference_update(self._check(partitions, "resume"))
        self.pause_changed = True

    def request_commit(self) -> None:
        self.commit_requested = True

    def is_closing(self) -> bool:
        return self.closing

    @property
    def generation(self) -> int:
        return self._worker.state.generation

    def timeout(self, timeout_ms: int) -> None:
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int):
            raise ConnectError(f"timeout(ms) needs an integer number of milliseconds, got {timeout_ms!r}")
        self.retry_timeout_s = timeout_ms / 1000 if timeout_ms > 0 else None

    def take_timeout(self) -> float | None:
        """The backoff the task asked for, once (Kafka Connect resets it after one use)."""
        t, self.retry_timeout_s = self.retry_timeout_s, None
        return t

    @property
    def errant_record_reporter(self) -> ErrantRecordReporter | None:
        return self._reporter


__all__ = ["ConnectorContext", "TaskContext"]
