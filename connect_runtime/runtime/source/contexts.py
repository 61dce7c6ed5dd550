"""The contexts a source run implements for its connector and tasks (Kafka Connect's
``WorkerSourceConnectorContext``, ``WorkerSourceTaskContext`` and ``WorkerTransactionContext``): narrow views
of the run, never the run itself."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from connect_runtime.api.connector import SourceConnectorContext
from connect_runtime.api.errors import ConnectError
from connect_runtime.api.records import SourceRecord
from connect_runtime.api.source import OffsetStorageReader, SourceTaskContext, TransactionContext
from connect_runtime.backends.base import Backend, OffsetStore
from connect_runtime.runtime.offsets import StoreOffsetReader
from connect_runtime.runtime.source.config import SourcePlan
from connect_runtime.runtime.source.state import SourceRunState

log = logging.getLogger(__name__)


class ConnectorContext(SourceConnectorContext):
    def __init__(self, reader: OffsetStorageReader, run: SourceRunState) -> None:
        self._reader = reader
        self._run = run
        self._reconfigure = threading.Event()

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self._reader

    def request_task_reconfiguration(self) -> None:
        """KIP-131: the running tasks commit at their next transaction boundary and stop; the runtime then
        asks for ``task_configs`` again and goes on within the same bounded run."""
        self._reconfigure.set()
        self._run.request_stop("task reconfiguration requested")

    def raise_error(self, exc: BaseException) -> None:
        log.error("connector %s raised an error through its context: %r", self._run.name, exc)
        self._run.fail(exc)

    def take_reconfiguration(self) -> bool:
        requested = self._reconfigure.is_set()
        self._reconfigure.clear()
        return requested


class SourceTransactionContext(TransactionContext):
    """Collects the task's boundary requests; the worker applies them after the batch is dispatched."""

    def __init__(self) -> None:
        self.batch_action: str | None = None
        self.record_actions: dict[int, tuple[str, SourceRecord]] = {}

    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        self._request("commit", record)

    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        self._request("abort", record)

    def _request(self, action: str, record: SourceRecord | None) -> None:
        if record is None:
            if self.batch_action not in (None, action):
                raise ConnectError("both commit_transaction() and abort_transaction() were requested for the "
                                   "current batch; request one of them")
            self.batch_action = action
            return
        have = self.record_actions.get(id(record))
        if have is not None and have[0] != action:
            raise ConnectError(f"both commit_transaction() and abort_transaction() were requested for record "
                               f"{record!r}; request one of them")
        self.record_actions[id(record)] = (action, record)

    def take(self, records: Sequence[SourceRecord]) -> tuple[list[tuple[int, str]], str | None]:
        """Requests that apply to this batch: ``[(index, action)]`` in order, and the batch action."""
        cuts: list[tuple[int, str]] = []
        if self.record_actions:
            wanted = self.record_actions
            for i, r in enumerate(records):
                hit = wanted.get(id(r))
                if hit is not None and hit[1] is r:
                    cuts.append((i, hit[0]))
                    del wanted[id(r)]
        action, self.batch_action = self.batch_action, None
        return cuts, action


class TaskContext(SourceTaskContext):
    def __init__(self, configs: dict[str, str], reader: OffsetStorageReader,
                 transactions: SourceTransactionContext | None) -> None:
        self._configs = configs
        self._reader = reader
        self._transactions = transactions

    @property
    def configs(self) -> dict[str, str]:
        return self._configs

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self._reader

    @property
    def transaction_context(self) -> TransactionContext | None:
        return self._transactions



def offset_reader(be: Backend, store: OffsetStore, plan: SourcePlan) -> StoreOffsetReader:
    """The reader a connector's and its tasks' contexts hand out (KIP-131): a connector-specific offsets store
    falls back to the global store for partitions it lacks (KIP-618)."""
    if plan.values["offsets.storage.topic"] is None:
        return StoreOffsetReader(store, plan.name)
    return StoreOffsetReader(store, plan.name, fallback=be.offset_store(None))


__all__ = ["ConnectorContext", "SourceTransactionContext", "TaskContext", "offset_reader"]
