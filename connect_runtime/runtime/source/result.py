"""What a source run returns: :class:`SourceRunResult` (plain JSON through ``to_dict()``, for XCom and the CLI),
built from the run's state by :func:`build_result`, with the exact spans it committed (:func:`exact_spans`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connect_runtime import ranges as ranges_mod
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends.base import Backend
from connect_runtime.runtime.source.config import SourcePlan
from connect_runtime.runtime.source.empty import empty_reason
from connect_runtime.runtime.source.ledger import interval_ranges
from connect_runtime.runtime.source.state import SourceRunState


@dataclass
class SourceRunResult:
    """What one source run committed. ``to_dict()`` is plain JSON (for XCom and the CLI).

    ``ranges``: per topic, per partition (string key) exactly what this run committed, in the
    :mod:`connect_runtime.ranges` form: ``[from, to]`` when the run's records are one contiguous block
    (one writer), else the sorted list of ``[from, to]`` spans that excludes other writers' records (on
    Kafka a span may also hold transaction markers; read it with ``read_committed``).
    ``interval_ranges``: with a ``ledger_key``, everything committed under that key by every run so far
    (this one included), so a rerun that wrote nothing still says what its interval holds; else ``{}``. ``source_offsets``: the latest offset this run committed per
    source partition. ``transactions``: commit points (exactly-once: committed transactions;
    at-least-once: offset flushes). ``filtered``/``skipped``: records a transform dropped or error
    tolerance skipped (their offsets are committed, the records are not written). ``empty``: ``None`` when
    this run committed records, else why it committed none (``{"reason", "message", "looked_at"}``, reasons
    ``committed_before``, ``filtered``, ``no_input``, ``unknown``: :mod:`~connect_runtime.runtime.source.empty`).
    ``bytes``: the keys and values of the records this run committed, as converted (what the topics received).
    """

    connector: str
    records: int = 0
    ranges: dict[str, dict[str, Any]] = field(default_factory=dict)
    source_offsets: list[dict[str, Any]] = field(default_factory=list)
    transactions: int = 0
    filtered: int = 0
    skipped: int = 0
    seconds: float = 0.0
    interval_ranges: dict[str, dict[str, Any]] = field(default_factory=dict)
    generation: int | None = None
    empty: dict[str, Any] | None = None
    bytes: int = 0
    value_schemas: dict[str, Any] = field(default_factory=dict, compare=False)
    """Per topic, the Connect value schema of the last committed record that had one (not in ``to_dict()``: the
    provider's lineage reads it from the result object)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "connector": self.connector,
            "records": self.records,
            "ranges": ranges_mod.dump(ranges_mod.parse(self.ranges)),
            "source_offsets": [
                {"partition": dict(e["partition"]), "offset": None if e["offset"] is None else dict(e["offset"])}
                for e in self.source_offsets
            ],
            "transactions": self.transactions,
            "filtered": self.filtered,
            "skipped": self.skipped,
            "seconds": self.seconds,
            "interval_ranges": ranges_mod.dump(ranges_mod.parse(self.interval_ranges)),
            "generation": self.generation,
            "empty": None if self.empty is None else json.loads(json.dumps(self.empty)),
            "bytes": self.bytes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SourceRunResult:
        return cls(
            connector=data["connector"],
            records=int(data["records"]),
            ranges=ranges_mod.dump(ranges_mod.parse(data["ranges"])),
            interval_ranges=ranges_mod.dump(ranges_mod.parse(data.get("interval_ranges") or {})),
            generation=data.get("generation"),
            empty=data.get("empty"),
            source_offsets=[{"partition": dict(e["partition"]),
                             "offset": None if e["offset"] is None else dict(e["offset"])}
                            for e in data["source_offsets"]],
            transactions=int(data["transactions"]),
            filtered=int(data["filtered"]),
            skipped=int(data["skipped"]),
            seconds=float(data["seconds"]),
            bytes=int(data.get("bytes") or 0),
        )

    def topic_partitions(self) -> dict[TopicPartition, list[tuple[int, int]]]:
        """``ranges`` keyed by :class:`TopicPartition`: the exact spans to read with ``Backend.read_range``."""
        return {TopicPartition(t, p): spans for t, parts in ranges_mod.parse(self.ranges).items()
                for p, spans in parts.items()}


def exact_spans(run: SourceRunState, join_markers: bool) -> ranges_mod.SpanMap:
    """Per topic partition the spans this run committed. On a backend with transaction markers two spans of
    one writer (a task: one transactional id) separated by exactly one offset are joined: that offset is the
    writer's own commit marker, as its next transaction's records come after its previous one's marker. Spans of
    different writers (the tasks of one run) are never joined across a gap: the offset between them may be another
    writer's record, each task's own marker lying elsewhere."""
    out: ranges_mod.SpanMap = {}
    for tp in sorted(run.spans):
        spans: list[tuple[int, int]] = []
        for written in run.spans[tp].values():
            own = ranges_mod.normalize_spans(written)
            spans.extend(join_marker_gaps(own) if join_markers else own)
        out.setdefault(tp.topic, {})[tp.partition] = ranges_mod.normalize_spans(spans)
    return out


def join_marker_gaps(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted spans of ONE writer with each gap of exactly one offset (its commit marker) closed."""
    if len(spans) < 2:
        return spans
    joined = [spans[0]]
    for first, nxt in spans[1:]:
        if first - joined[-1][1] == 1:
            joined[-1] = (joined[-1][0], nxt)
        else:
            joined.append((first, nxt))
    return joined



def build_result(plan: SourcePlan, run: SourceRunState, seconds: float, be: Backend, exactly_once: bool) -> SourceRunResult:
    spans = exact_spans(run, join_markers=exactly_once and be.capabilities.transaction_markers)
    offsets = [{"partition": json.loads(json.dumps(p)), "offset": None if o is None else json.loads(json.dumps(o))}
               for _, (p, o) in sorted(run.offsets.items())]
    held: dict[str, Any] = {}
    if plan.ledger_key is not None:
        held, _ = interval_ranges(be, plan.name, plan.ledger_key)
    return SourceRunResult(connector=plan.name, records=run.records, ranges=ranges_mod.dump(spans),
                           source_offsets=offsets, transactions=run.transactions, filtered=run.filtered,
                           skipped=run.skipped, seconds=seconds, interval_ranges=held,
                           generation=None if plan.record is None else plan.record.generation,
                           empty=empty_reason(run.records, run.filtered, run.skipped, held, run.nothing_read),
                           bytes=run.bytes, value_schemas=dict(run.schemas))




__all__ = ["SourceRunResult", "build_result", "exact_spans", "join_marker_gaps"]
