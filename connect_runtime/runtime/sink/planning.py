"""Planning a sink run (Kafka Connect's consumer-group assignment, bounded): which partitions are read, by
which task, from where and up to where.

- assignment: the partitions of ``topics`` (or ``topics.regex``, less the dead letter topic) sorted and dealt
  round-robin to the tasks (:func:`assign`);
- start positions: the group's committed offset, else the beginning of the partition (a task may still rewind
  with ``context.offset(...)`` in ``open()``);
- targets (:func:`until_targets`): ``until_offsets`` parsed by the one parser of offset targets
  (:func:`connect_runtime.ranges.offset_targets`); a partition it does not name has nothing to read, a target
  past the partition's end is lowered to it with a warning. Without ``until_offsets``: the end offsets as the
  run started (data committed while the run goes is left for the next run).

The run's commit fence begins before the group's offsets are read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from connect_runtime import ranges as _ranges
from connect_runtime.api.errors import ConfigError
from connect_runtime.api.records import TopicPartition

if TYPE_CHECKING:
    from connect_runtime.runtime.sink.run import SinkRunState

log = logging.getLogger(__name__)


def until_targets(until: Any, name: str) -> dict[TopicPartition, int]:
    """``{TopicPartition: target}`` from any shape :func:`connect_runtime.ranges.offset_targets` takes
    (the one parser of offset targets, shared with the CLI and the provider)."""
    try:
        return _ranges.offset_targets(until, "until_offsets")
    except _ranges.RangesFormatError as exc:
        raise ConfigError(f"invalid until_offsets for sink connector {name!r}: {exc}",
                          {"until_offsets": str(exc)}) from None


def assign(partitions: list[TopicPartition], tasks: int, task: int) -> list[TopicPartition]:
    """The partitions of task ``task`` of ``tasks``: the sorted partitions dealt round-robin."""
    return partitions[task::tasks]


def plan(run: SinkRunState, values: Mapping[str, Any],
          targets_given: dict[TopicPartition, int] | None) -> list[TopicPartition]:
    """Partitions to read (sorted), with their start positions and targets set on ``run``."""
    consumer = run.backend.consumer(run.group)
    try:
        run.fence.begin()  # before the group's offsets are read
        if values.get("topics"):
            partitions = consumer.partitions(list(values["topics"]))
        else:
            partitions = consumer.partitions(pattern=values["topics.regex"])
        if run.dlq_topic:
            partitions = [tp for tp in partitions if tp.topic != run.dlq_topic]
        partitions = sorted(set(partitions))
        if not partitions:
            return []
        timeout = run.flush_timeout_s
        committed = consumer.committed(partitions, timeout)
        beginning = consumer.beginning_offsets(partitions, timeout)
        ends = consumer.end_offsets(partitions, timeout)
    finally:
        consumer.close()
    if targets_given is not None:
        unknown = sorted(set(targets_given) - set(partitions))
        if unknown:
            log.warning("sink connector %r: until_offsets names partitions not consumed by this run: %s",
                        run.name, unknown)
    for tp in partitions:
        c = committed.get(tp)
        run.group_committed[tp] = c
        start = c if c is not None else beginning[tp]
        run.start_positions[tp] = start
        if targets_given is None:
            target = ends[tp]
        else:
            target = targets_given.get(tp, start)
            if target > ends[tp]:
                log.warning("sink connector %r: until_offsets target %d of %s is past its end %d: "
                            "reading to the end", run.name, target, tp, ends[tp])
                target = ends[tp]
        run.targets[tp] = target
    return partitions


__all__ = ["assign", "plan", "until_targets"]
