"""Transaction boundaries as strategy objects (runtime/source/boundaries.py) and the fencing names
(runtime/fencing.py), without a backend."""

from __future__ import annotations

import pytest

from connect_runtime.api.errors import ConnectError
from connect_runtime.api.records import SourceRecord
from connect_runtime.backends.base import REGISTRY_STORE
from connect_runtime.runtime.fencing import generation_guard, transactional_id
from connect_runtime.runtime.registry import registry_key
from connect_runtime.runtime.source.boundaries import ConnectorBoundary, IntervalBoundary, PollBoundary


class Recorder:
    def __init__(self) -> None:
        self.calls: list[object] = []

    def send(self, records: list[SourceRecord]) -> None:
        self.calls.append([r.value for r in records])

    def after_batch(self) -> None:
        self.calls.append("after_batch")

    def commit(self) -> None:
        self.calls.append("commit")

    def abort(self) -> None:
        self.calls.append("abort")


def records(n: int) -> list[SourceRecord]:
    return [SourceRecord(topic="t", value=i, source_partition={"p": 0}, source_offset={"o": i}) for i in range(n)]


def test_poll_commits_after_every_batch() -> None:
    b = PollBoundary()
    assert b.after_batch(b.last_commit) and not b.due(b.last_commit + 3600) and b.commit_final
    task = Recorder()
    b.dispatch(records(2), task)
    assert task.calls == [[0, 1], "after_batch"] and b.transaction_context is None


def test_interval_commits_once_its_interval_passed_since_the_last_commit() -> None:
    b = IntervalBoundary(2.0)
    b.committed(100.0)
    assert not b.due(101.9) and not b.after_batch(101.9)
    assert b.due(102.0) and b.after_batch(102.0)
    b.committed(102.0)
    assert not b.due(103.0)


def test_connector_boundaries_cut_the_batch_where_the_task_asked() -> None:
    b = ConnectorBoundary()
    assert not b.commit_final and b.transaction_context is not None
    batch = records(5)
    b.transaction_context.commit_transaction(batch[1])
    b.transaction_context.abort_transaction(batch[3])
    task = Recorder()
    b.dispatch(batch, task)
    assert task.calls == [[0, 1], "commit", [2, 3], "abort", [4]]
    b.transaction_context.commit_transaction()
    task = Recorder()
    b.dispatch(records(2), task)
    assert task.calls == [[0, 1], "commit"]


def test_connector_boundaries_refuse_commit_and_abort_of_one_batch() -> None:
    b = ConnectorBoundary()
    assert b.transaction_context is not None
    b.transaction_context.commit_transaction()
    with pytest.raises(ConnectError, match="request one of them"):
        b.transaction_context.abort_transaction()


def test_transactional_ids_and_the_generation_guard() -> None:
    assert transactional_id("c", "", 3, None) == "c-3"
    assert transactional_id("c", "2024-01-01", 0, "cluster") == "cluster-c-2024-01-01-0"
    assert generation_guard("c", 7, "s") == (REGISTRY_STORE, registry_key("c", "s"), 7)
