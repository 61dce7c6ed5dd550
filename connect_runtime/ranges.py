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

Offset targets (what a bounded sink run, the sensor, the trigger and ``pyconnect run --until`` wait
for) are parsed here too, once: :func:`offset_targets` (per topic partition, the next offset) and
:func:`source_targets` (per source partition, the source offset), from every shape a user passes
(a source or sink run's result, its ``ranges``, a plain mapping, their JSON text).

Functions here are pure: they never touch a backend.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from connect_runtime.api.records import TopicPartition

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


def structured(value: Any, what: str) -> Any:
    """``value`` itself, or the JSON (or Python literal) a string holds: a rendered template or an
    XCom pulled as text, ``--until '{"orders": {"0": 100}}'``.

    :raises RangesFormatError: naming ``what``, for an empty string or text that is neither.
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        raise RangesFormatError(f"{what} is an empty string: expected a mapping (or its JSON)")
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise RangesFormatError(f"{what} is a string that is neither JSON nor a Python literal: {text[:200]!r}") from None


def _all_ranges(data: Mapping[Any, Any]) -> bool:
    return bool(data) and all(isinstance(parts, Mapping) and parts and all(
        isinstance(v, (list, tuple)) for v in parts.values()) for parts in data.values())


def _span_ends(ranges: Mapping[str, Any], what: str) -> dict[str, dict[int, int]]:
    try:
        spans = parse(ranges)
    except RangesFormatError as exc:
        raise RangesFormatError(f"{what}: {exc}") from None
    return {t: {p: s[-1][1] for p, s in parts.items() if s} for t, parts in spans.items()}


def offset_targets(value: Any, what: str = "target") -> dict[TopicPartition, int]:
    """Per topic partition, the next offset a sink must have consumed (``until_offsets``), from:

    - ``{topic: {partition: offset}}`` (partition as int or str);
    - a source run's result (``run_source(...)``, ``source.output``, or an object whose ``to_dict()``
      gives one): the end of the last span of its ``ranges`` merged with its ``interval_ranges`` (what
      its data interval holds, so a rerun that wrote nothing new still targets the interval's records);
    - a bare ``ranges`` mapping (``source.output["ranges"]``);
    - a sink run's result (its ``committed``, not its ``ranges``), or a sink fan-out's merged result;
    - the JSON text (or Python literal) of any of these.

    :raises RangesFormatError: one error naming ``what`` and every malformed topic and partition.
    """
    data = structured(value, what)
    if hasattr(data, "to_dict") and not isinstance(data, Mapping):
        data = data.to_dict()
    if not isinstance(data, Mapping):
        raise RangesFormatError(f"{what}: expected a mapping of topic to {{partition: offset}} or a run result, "
                                f"got {type(data).__name__}")
    source: Mapping[Any, Any]
    ranges = data.get("ranges")
    if isinstance(data.get("committed"), Mapping) and "connector" in data:
        source = data["committed"]  # a sink run's result: its ``ranges`` say what it read, not what it committed
    elif isinstance(ranges, Mapping) and (_all_ranges(ranges) or "connector" in data):
        interval = data.get("interval_ranges")
        try:
            merged = merge(ranges, interval) if isinstance(interval, Mapping) else ranges
        except RangesFormatError as exc:
            raise RangesFormatError(f"{what}: {exc}") from None
        source = _span_ends(merged, what)
    elif _all_ranges(data):
        source = _span_ends(data, what)
    else:
        source = data
    out: dict[TopicPartition, int] = {}
    bad: list[str] = []
    for topic, parts in source.items():
        if not isinstance(parts, Mapping):
            bad.append(f"{topic!r}: expected {{partition: offset}}, got {parts!r}")
            continue
        for partition, offset in parts.items():
            try:
                if isinstance(offset, bool) or isinstance(partition, bool):
                    raise TypeError
                p, o = int(partition), int(offset)
            except (TypeError, ValueError):
                bad.append(f"{topic!r} partition {partition!r}: expected an integer partition and offset, "
                           f"got {offset!r}")
                continue
            if p < 0 or o < 0:
                bad.append(f"{topic!r} partition {partition!r}: partition and offset must be >= 0, got {offset!r}")
                continue
            out[TopicPartition(str(topic), p)] = o
    if bad:
        raise RangesFormatError(f"{what}: " + "; ".join(bad))
    return out


def interval_spans(value: Any, what: str = "ranges") -> SpanMap:
    """The spans a reader of a run's data interval reads (``read_lake``, a Spark job), from:

    - a source run's result (or an object whose ``to_dict()`` gives one): its ``ranges`` merged with its
      ``interval_ranges`` (what its data interval holds, so a rerun that wrote nothing new still reads them);
    - any mapping holding such ``ranges`` (a Spark handoff: ``{"backend", "ranges", ...}``);
    - a bare ``ranges`` mapping in either form;
    - the JSON text (or Python literal) of any of these.

    :raises RangesFormatError: naming ``what``; a sink run's result is refused (its ``committed`` says where the
        run stopped, not where the interval starts): pass the source run's result or its ranges.
    """
    data = structured(value, what)
    if hasattr(data, "to_dict") and not isinstance(data, Mapping):
        data = data.to_dict()
    if not isinstance(data, Mapping):
        raise RangesFormatError(f"{what}: expected ranges or a source run result, got {type(data).__name__}")
    try:
        if isinstance(data.get("ranges"), Mapping) and not _all_ranges(data):
            interval = data.get("interval_ranges")
            return parse(merge(data["ranges"], interval) if isinstance(interval, Mapping) else data["ranges"])
        if isinstance(data.get("committed"), Mapping) and "connector" in data:
            raise RangesFormatError("a sink run's result says where the run stopped, not where the interval "
                                    "starts: pass the source run's result (or its ranges)")
        return parse(data)
    except RangesFormatError as exc:
        raise RangesFormatError(f"{what}: {exc}") from None


def offset_targets_json(targets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """:func:`offset_targets` as JSON-friendly ``{topic: {"<partition>": offset}}`` (XCom, CLI output)."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(targets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = targets[tp]
    return out


def source_targets(value: Any, what: str = "target") -> list[dict[str, Any]]:
    """Per source partition, the source offset a source connector must have committed:
    ``[{"partition": {...}, "offset": {...}}]``, from that list, a source run's result (its
    ``source_offsets``) or the JSON text of either.

    :raises RangesFormatError: naming ``what`` and the entry that is malformed.
    """
    data = structured(value, what)
    if hasattr(data, "to_dict") and not isinstance(data, Mapping):
        data = data.to_dict()
    if isinstance(data, Mapping):
        if "source_offsets" not in data:
            raise RangesFormatError(f"{what}: a mapping must be a source run result with 'source_offsets'")
        if data.get("source_offsets_truncated"):
            raise RangesFormatError(
                f"{what}: the source run result lists only {len(data['source_offsets'])} of its "
                f"{data.get('source_offsets_total')} source offsets (max_source_offsets): pass the full "
                "[{'partition': ..., 'offset': ...}] list as the target")
        data = data["source_offsets"]
    if not isinstance(data, list):
        raise RangesFormatError(f"{what}: expected a list of {{'partition': ..., 'offset': ...}}, "
                                f"got {type(data).__name__}")
    out: list[dict[str, Any]] = []
    for entry in data:
        if not (isinstance(entry, Mapping) and isinstance(entry.get("partition"), Mapping)
                and (entry.get("offset") is None or isinstance(entry.get("offset"), Mapping))):
            raise RangesFormatError(f"{what}: expected {{'partition': {{...}}, 'offset': {{...}}}}, got {entry!r}")
        out.append({"partition": dict(entry["partition"]),
                    "offset": None if entry["offset"] is None else dict(entry["offset"])})
    return out


__all__ = ["RangesFormatError", "Span", "SpanMap", "count", "dump", "envelope", "interval_spans", "merge",
           "normalize_spans", "offset_targets", "offset_targets_json", "parse", "source_targets", "structured"]
