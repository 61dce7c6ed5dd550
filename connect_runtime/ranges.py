"""Committed offset ranges: the one representation every reader and writer of a run's result uses.

A run's ``ranges`` say exactly which records it committed, per topic and partition (partition as a
string key, JSON-friendly)::

    {"orders": {"0": [0, 1000]}}                       # one writer: one span [from, to)
    {"orders": {"0": [[0, 400], [424, 1000]]}}         # spans: another writer committed 400..423

A partition's value is either one ``[from, to]`` pair (the run's records are the contiguous block
``from <= offset < to``; the common one-writer case, unchanged from earlier versions) or a sorted
list of disjoint ``[from, to]`` spans, when other writers committed records of the same partition
in between. Readers (the Spark data source, the sensor, the UI) read each span and nothing else, so
they never see another writer's records. On Kafka a span may also hold transaction markers and
aborted records, which a ``read_committed`` reader skips.

Functions here are pure: they never touch a backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Span = tuple[int, int]
SpanMap = dict[str, dict[int, list[Span]]]
"""``{topic: {partition: [(from, to), ...]}}``: sorted, disjoint, non-empty spans."""


class RangesFormatError(ValueError):
    """A ``ranges`` value that is not of the documented shape; the message names the part."""


def _is_pair(value: Any) -> bool:
    return (isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and len(value) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in value))


def normalize_spans(spans: Iterable[Sequence[int]]) -> list[Span]:
    """Sorted, with empty spans dropped and overlapping or touching spans joined."""
    out: list[Span] = []
    for first, nxt in sorted((int(a), int(b)) for a, b in spans):
        if nxt <= first:
            continue
        if out and first <= out[-1][1]:
            if nxt > out[-1][1]:
                out[-1] = (out[-1][0], nxt)
        else:
            out.append((first, nxt))
    return out


def parse(ranges: Mapping[str, Any]) -> SpanMap:
    """``ranges`` (either form per partition, or a whole run result holding ``"ranges"``) as a SpanMap.

    :raises RangesFormatError: naming the topic and partition that is malformed.
    """
    if isinstance(ranges, Mapping) and isinstance(ranges.get("ranges"), Mapping) and "connector" in ranges:
        ranges = ranges["ranges"]
    if not isinstance(ranges, Mapping):
        raise RangesFormatError(f"ranges: expected {{topic: {{partition: [from, to]}}}}, got {type(ranges).__name__}")
    out: SpanMap = {}
    for topic, parts in ranges.items():
        if not isinstance(parts, Mapping):
            raise RangesFormatError(f"ranges of topic {topic!r}: expected {{partition: [from, to]}}, got {parts!r}")
        for p, value in parts.items():
            try:
                partition = int(p)
            except (TypeError, ValueError):
                raise RangesFormatError(f"ranges of topic {topic!r}: partition {p!r} is not an integer") from None
            if _is_pair(value):
                spans = [value]
            elif (isinstance(value, Sequence) and not isinstance(value, (str, bytes))
                  and all(_is_pair(s) for s in value)):
                spans = list(value)
            else:
                raise RangesFormatError(f"ranges of topic {topic!r} partition {partition}: expected [from, to] or a "
                                        f"list of [from, to] spans, got {value!r}")
            for a, b in spans:
                if a < 0 or b < a:
                    raise RangesFormatError(f"ranges of topic {topic!r} partition {partition}: span [{a}, {b}] "
                                            f"is not 0 <= from <= to")
            norm = normalize_spans(spans)
            if norm:
                out.setdefault(str(topic), {}).setdefault(partition, []).extend(norm)
    for parts in out.values():
        for partition, spans in parts.items():
            parts[partition] = normalize_spans(spans)
    return out


def dump(spans: Mapping[str, Mapping[int, Sequence[Span]]]) -> dict[str, dict[str, Any]]:
    """A SpanMap as JSON-friendly ``ranges``: ``[from, to]`` for one span, a list of spans otherwise."""
    out: dict[str, dict[str, Any]] = {}
    for topic in sorted(spans):
        parts: dict[str, Any] = {}
        for partition in sorted(spans[topic]):
            norm = normalize_spans(spans[topic][partition])
            if not norm:
                continue
            parts[str(partition)] = list(norm[0]) if len(norm) == 1 else [list(s) for s in norm]
        if parts:
            out[topic] = parts
    return out


def merge(*all_ranges: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The union of several ``ranges`` values (never the envelope: a gap between spans stays a gap)."""
    acc: SpanMap = {}
    for ranges in all_ranges:
        for topic, parts in parse(ranges).items():
            for partition, spans in parts.items():
                acc.setdefault(topic, {}).setdefault(partition, []).extend(spans)
    return dump(acc)


def count(ranges: Mapping[str, Any]) -> int:
    """How many offsets the ranges span (on Kafka this includes transaction markers)."""
    return sum(b - a for parts in parse(ranges).values() for spans in parts.values() for a, b in spans)


def envelope(ranges: Mapping[str, Any]) -> dict[str, dict[str, list[int]]]:
    """Per partition ``[min from, max to]``: for display only, never for reading."""
    return {t: {str(p): [s[0][0], s[-1][1]] for p, s in sorted(parts.items())} for t, parts in parse(ranges).items()}


__all__ = ["RangesFormatError", "Span", "SpanMap", "count", "dump", "envelope", "merge", "normalize_spans", "parse"]
