"""The ranges record: with a ``ledger_key`` (e.g. a data interval), every commit of a task also records, in the
same transaction as its records (exactly-once), everything committed under that key by that task
(:class:`TaskLedger`); :func:`interval_ranges` reads what a key holds over every task and run, so a rerun that
wrote nothing still says what its interval holds."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from connect_runtime import ranges as ranges_mod
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends.base import RANGES_STORE, Backend, OffsetEntry
from connect_runtime.runtime.offsets import offset_key, parse_key
from connect_runtime.runtime.source.config import SourcePlan, parse_ledger_key


class TaskLedger:
    """One task's entry in the ranges record under the run's ledger key (inactive without a key)."""

    def __init__(self, backend: Backend, plan: SourcePlan, index: int) -> None:
        self.backend = backend
        self.plan = plan
        self.index = index
        self.key: bytes | None = None
        self.spans: ranges_mod.SpanMap = {}
        self.records = 0

    @property
    def active(self) -> bool:
        return self.key is not None

    def load(self) -> None:
        """Read what this task's ledger entry holds (after the generation started: nobody older writes it)."""
        key = self.plan.ledger_key
        if key is None:
            return
        self.key = offset_key(self.plan.name, {**key, "task": self.index})
        store = self.backend.offset_store(RANGES_STORE)
        try:
            value = store.get([self.key]).get(self.key)
        finally:
            store.close()
        if value is not None:
            data = json.loads(value)
            self.spans = ranges_mod.parse(data.get("ranges") or {})
            self.records = int(data.get("records") or 0)

    def entries(self, spans: Iterable[tuple[TopicPartition, tuple[int, int]]],
                records: int) -> dict[str, list[OffsetEntry]]:
        """The ranges record entry after this commit, for writing in the same transaction."""
        spans = list(spans)
        if self.key is None or not spans:
            return {}
        for tp, span in spans:
            self.spans.setdefault(tp.topic, {}).setdefault(tp.partition, []).append(span)
        self.records += records
        assert self.plan.record is not None
        value = {"key": self.plan.ledger_key, "task": self.index, "ranges": ranges_mod.dump(self.spans),
                 "records": self.records, "generation": self.plan.record.generation,
                 "updated": int(time.time() * 1000)}
        return {RANGES_STORE: [(self.key, json.dumps(value, separators=(",", ":")).encode())]}

    def put(self, spans: Iterable[tuple[TopicPartition, tuple[int, int]]], records: int, timeout: float) -> None:
        """At-least-once: write the entry after this commit's records were flushed."""
        for store_name, entries in self.entries(spans, records).items():
            store = self.backend.offset_store(store_name)
            try:
                store.put(entries, timeout)
            finally:
                store.close()


def interval_ranges(backend: Backend, connector: str, ledger_key: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """What the ranges record holds for ``(connector, ledger_key)`` over every task and run: (ranges, records)."""
    want = parse_ledger_key(ledger_key)
    store = backend.offset_store(RANGES_STORE)
    try:
        values = store.read_all()
    finally:
        store.close()
    found: list[dict[str, Any]] = []
    records = 0
    for key, value in values.items():
        parsed = parse_key(key)
        if parsed is None or parsed[0] != connector:
            continue
        label = dict(parsed[1])
        label.pop("task", None)
        if label != want:
            continue
        data = json.loads(value)
        found.append(data.get("ranges") or {})
        records += int(data.get("records") or 0)
    return ranges_mod.merge(*found), records


__all__ = ["TaskLedger", "interval_ranges"]
