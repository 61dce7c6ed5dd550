"""Offset targets and committed offsets, as plain JSON (shared by the operators, sensor and trigger).

Two kinds of target:

- ``"sink"``: per topic partition, the next offset the sink connector's group ``connect-<name>``
  must have committed: ``{topic: {"<partition>": offset}}``. Accepted inputs: that mapping
  (partition as int or str), a ``ranges`` mapping (``{topic: {"<p>": [from, to] or [[from, to],
  ...]}}``, as ``source.output["ranges"]`` gives; the target is the end of the last span), an
  upstream source run's result dict (its ``interval_ranges``, what the data interval holds, merged
  with its ``ranges``: a rerun that wrote nothing new still targets the interval's records), or a
  sink run's result dict (``{"committed": ...}``).
- ``"source"``: per source partition, the source offset a source connector must have committed:
  ``[{"partition": {...}, "offset": {...}}]``. Accepted inputs: that list or an upstream source run's
  result dict (its ``source_offsets``). A committed source offset *reaches* a target offset when,
  for every field of the target, a numeric field is at least the target's and any other field is
  equal (so ``{"position": 120, "done": true}`` reaches ``{"position": 100}``).

Operators take a target as an ``XComArg`` (``source.output``, ``source.output["ranges"]``: resolved
when the task runs, and the dependency is set by itself), a mapping, or a template. A template
renders to a string without ``render_template_as_native_obj``: :func:`structured` parses its JSON
(or Python literal). Nothing here imports a backend at module level.

A sink target can never be reached through the group offsets of a sink that keeps its offsets in
its destination (``FileSink``, ``SqlSink``: its ``pre_commit`` returns ``{}``, the group commits
nothing): :func:`read_committed` raises :class:`UnreachableTargetError` for it, as soon as the
runtime's registry says the connector owns its offsets.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from connect_runtime.backends.base import Backend

KINDS = ("sink", "source")


class UnreachableTargetError(ValueError):
    """The target can never be reached the way it is watched (the message says why and what to do)."""


def check_target_type(value: Any, what: str) -> None:
    """Parse-time check of an offsets target: ``None``, a mapping, a list, a string (template or
    JSON) or an ``XComArg`` (the public :class:`airflow.sdk.XComArg`; any other value Airflow resolves at run
    time, such as a mapped task group's argument, is recognised by the two methods Airflow resolves it with)."""
    if value is None or isinstance(value, (Mapping, list, str)):
        return
    from airflow.sdk import XComArg

    if isinstance(value, XComArg) or all(callable(getattr(value, m, None)) for m in ("resolve", "iter_references")):
        return
    raise TypeError(f"{what} must be an XComArg (task.output, task.output['ranges']), a mapping, a template "
                    f"or None, got {type(value).__name__}")

TopicTargets = dict[str, dict[str, int]]
SourceTargets = list[dict[str, Any]]


def topic_targets(value: Any, what: str = "target") -> TopicTargets:
    """``{topic: {"<partition>": offset}}`` from any accepted sink-target shape (see the module doc),
    parsed by the runtime's one parser (:func:`connect_runtime.ranges.offset_targets`)."""
    from connect_runtime import ranges

    return ranges.offset_targets_json(ranges.offset_targets(value, what))


def source_targets(value: Any, what: str = "target") -> SourceTargets:
    """``[{"partition": {...}, "offset": {...}}]`` from a list or a source run's result dict
    (:func:`connect_runtime.ranges.source_targets`)."""
    from connect_runtime import ranges

    return ranges.source_targets(value, what)


def structured(value: Any, what: str) -> Any:
    """``value`` itself, or the JSON / Python literal a string holds (e.g. a rendered XCom pull)."""
    from connect_runtime import ranges

    return ranges.structured(value, what)


def normalise_target(kind: str, value: Any) -> TopicTargets | SourceTargets:
    if kind == "sink":
        return topic_targets(value)
    if kind == "source":
        return source_targets(value)
    raise ValueError(f"connector_kind must be one of {', '.join(KINDS)}, got {kind!r}")


def _key(partition: Mapping[str, Any]) -> str:
    return json.dumps(partition, sort_keys=True, separators=(",", ":"))


def read_committed(backend: Backend, kind: str, connector: str, target: Any,
                   offsets_storage_topic: str | None = None, timeout: float = 30.0) -> Any:
    """What is committed now, as plain JSON, for the partitions the target names.

    sink: ``{topic: {"<p>": offset or None}}`` of the group ``connect-<connector>``;
    source: ``[{"partition", "offset"}]`` of every committed source partition of ``connector``.
    """
    if kind == "sink":
        from connect_runtime.admin import list_connectors, sink_group
        from connect_runtime.api.records import TopicPartition

        for entry in list_connectors(backend):
            if entry.get("name") == connector and entry.get("kind") == "sink" and entry.get("owns_offsets"):
                raise UnreachableTargetError(
                    f"sink connector {connector!r} ({entry.get('connector_class')}) keeps its offsets in its "
                    f"destination: its consumer group {sink_group(connector, backend)} never commits, so a group-offsets "
                    "target can never be reached. Wait on the source instead (connector_kind='source' with "
                    "the source run's XCom), or depend on the sink task itself")
        tps = [TopicPartition(t, int(p)) for t, parts in target.items() for p in parts]
        if not tps:
            return {}
        consumer = backend.consumer(sink_group(connector, backend))
        try:
            committed = consumer.committed(tps, timeout)
        finally:
            consumer.close()
        seen: dict[str, dict[str, int | None]] = {}
        for tp in tps:
            seen.setdefault(tp.topic, {})[str(tp.partition)] = committed.get(tp)
        return seen
    from connect_runtime.admin import store_offsets

    return store_offsets(backend, connector, offsets_storage_topic)


def _reaches(have: Mapping[str, Any] | None, want: Mapping[str, Any] | None) -> bool:
    if want is None:
        return have is None
    if have is None:
        return False
    for field, target in want.items():
        value = have.get(field)
        numbers = (int, float)
        if isinstance(target, numbers) and not isinstance(target, bool) and isinstance(value, numbers):
            if value < target:
                return False
        elif value != target:
            return False
    return True


def missing(kind: str, target: Any, seen: Any) -> list[str]:
    """Why ``seen`` does not reach ``target``, one line per partition short of it ([] = reached)."""
    out = []
    if kind == "sink":
        for topic, parts in target.items():
            for p, want in parts.items():
                have = seen.get(topic, {}).get(p)
                if have is None or have < want:
                    out.append(f"{topic}[{p}]: committed {have if have is not None else 'nothing'}, target {want}")
        return out
    have_by_key = {_key(e["partition"]): e["offset"] for e in seen}
    for entry in target:
        have = have_by_key.get(_key(entry["partition"]))
        if not _reaches(have, entry["offset"]):
            out.append(f"{_key(entry['partition'])}: committed {json.dumps(have)}, target {json.dumps(entry['offset'])}")
    return out


__all__ = ["KINDS", "UnreachableTargetError", "check_target_type", "missing", "normalise_target", "read_committed", "source_targets", "structured",
           "topic_targets"]
