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

The run's commit fence begins before the group's offsets are read. Each task keeps its positions and targets
(:class:`TaskPositions`): a rewind asked for with ``context.offset(...)`` takes effect before the next poll.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from connect_runtime import ranges as _ranges
from connect_runtime.api.errors import ConfigError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends.base import ConsumedRecord, Consumer

if TYPE_CHECKING:
    from connect_runtime.runtime.sink.contexts import TaskContext
    from connect_runtime.runtime.sink.run import Budget, SinkRunState

log = logging.getLogger(__name__)

_topic_of = itemgetter(0)
_partition_of = itemgetter(1)


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


def plan_task(run: SinkRunState, targets: Mapping[TopicPartition, int | None]) -> list[TopicPartition]:
    """One task of a fan-out plan (:mod:`connect_runtime.runtime.sink.fanout`): its partitions (sorted), fixed by
    the plan, with their start positions read now (after the task's commit fence began, so a retry starts where
    its fenced predecessor's last commit left them) and the plan's targets set on ``run``; a target ``None``
    (a partition ``until_offsets`` did not name) is the start: nothing to read."""
    partitions = sorted(targets)
    consumer = run.backend.consumer(run.group)
    try:
        run.fence.begin()  # before the group's offsets are read
        if not partitions:
            return []
        timeout = run.flush_timeout_s
        committed = consumer.committed(partitions, timeout)
        beginning = consumer.beginning_offsets(partitions, timeout)
    finally:
        consumer.close()
    for tp in partitions:
        c = committed.get(tp)
        run.group_committed[tp] = c
        start = c if c is not None else beginning[tp]
        run.start_positions[tp] = start
        target = targets[tp]
        run.targets[tp] = start if target is None else target
    return partitions


class TaskPositions:
    """One task's read positions (next offset to read) and targets per assigned partition, and the consumer's
    pauses: a partition is paused while the task paused it or it reached its target."""

    def __init__(self, assigned: list[TopicPartition], label: str) -> None:
        self.assigned = assigned
        self.assigned_set = set(assigned)
        self.label = label
        self.pos: dict[TopicPartition, int] = {}
        self.target: dict[TopicPartition, int] = {}
        self._consumer_paused: set[TopicPartition] = set()
        self.first: dict[TopicPartition, int] = {}
        """Where the task started reading each partition, after ``open()``'s rewinds (:meth:`begin`)."""

    def start(self, positions: Mapping[TopicPartition, int], targets: Mapping[TopicPartition, int]) -> None:
        for tp in self.assigned:
            self.pos[tp] = positions[tp]
            self.target[tp] = targets[tp]

    def begin(self, ctx: TaskContext, consumer: Consumer, last_committed: dict[TopicPartition, int]) -> None:
        """Before the loop: ``open()``'s rewinds applied, and where the task starts reading each partition kept."""
        self.apply(ctx, consumer, last_committed)
        self.first = dict(self.pos)

    def delivered(self) -> dict[TopicPartition, tuple[int, int]]:
        """Per partition read, ``(from, to)``: where the task started reading after ``open()`` and where it is now
        (a run's ranges)."""
        return {tp: (first, self.pos[tp]) for tp, first in self.first.items() if self.pos.get(tp, first) > first}

    def done(self, tp: TopicPartition) -> bool:
        return self.pos[tp] >= self.target[tp]

    def remaining(self) -> int:
        """Records left to read up to the targets (the progress lines read it from another thread: a snapshot)."""
        target = self.target
        return sum(max(0, target[tp] - off) for tp, off in list(self.pos.items()) if tp in target)

    def apply(self, ctx: TaskContext, consumer: Consumer, last_committed: dict[TopicPartition, int]) -> None:
        """Rewinds and pauses the task asked for since the last poll."""
        if ctx.rewinds:
            rewinds, ctx.rewinds = ctx.rewinds, {}
            for tp, off in rewinds.items():
                if tp not in self.assigned_set:
                    log.warning("%s: ignoring rewind of %s, a partition not assigned to it", self.label, tp)
                    continue
                consumer.seek(tp, off)
                self.pos[tp] = off
                last_committed[tp] = off  # as WorkerSinkTask.rewind()
            ctx.pause_changed = True
        if ctx.pause_changed:
            ctx.pause_changed = False
            want = {tp for tp in self.assigned if tp in ctx.paused or self.done(tp)}
            to_pause = sorted(want - self._consumer_paused)
            to_resume = sorted(self._consumer_paused - want)
            if to_pause:
                consumer.pause(to_pause)
            if to_resume:
                consumer.resume(to_resume)
            self._consumer_paused = want

    def bound(self, batch: list[ConsumedRecord], budget: Budget,
              ctx: TaskContext) -> tuple[list[ConsumedRecord], dict[tuple[str, int], int]]:
        """Drop records at or past their partition's target; take from the max_records budget.
        Also the last offset per partition of what is left (keys are plain tuples, which find the
        TopicPartition keys of the position dicts)."""
        last = last_offsets(batch)
        target = self.target
        changed = False
        if any(off >= target[k] for k, off in last.items()):  # type: ignore[index]
            ctx.pause_changed = True  # such a partition is done after this batch
            batch = [r for r in batch if r[2] < target[r[0], r[1]]]  # type: ignore[index]
            changed = True
        granted = budget.take(len(batch))
        if granted < len(batch):
            batch = batch[:granted]
            changed = True
        if changed:
            last = last_offsets(batch)
        return batch, last

    def check_ends(self, consumer: Consumer, remaining: list[TopicPartition], ctx: TaskContext,
                   timeout: float) -> None:
        """An empty poll: a partition whose end is now below our position has nothing more."""
        active = [tp for tp in remaining if tp not in ctx.paused]
        if not active:
            return
        ends = consumer.end_offsets(active, timeout)
        for tp in active:
            end = ends.get(tp)
            if end is not None and end <= self.pos[tp] < self.target[tp]:
                log.warning("%s: %s ends at %d, before its target %d: nothing more to read",
                            self.label, tp, end, self.target[tp])
                self.target[tp] = self.pos[tp]
                ctx.pause_changed = True


def last_offsets(batch: list[ConsumedRecord]) -> dict[tuple[str, int], int]:
    """The offset of the last record per partition of a batch; for a batch of one partition (the common
    case) without a step per record."""
    if not batch:
        return {}
    first, end = batch[0], batch[-1]
    if (first[1] == end[1] and first[0] == end[0] and len(set(map(_partition_of, batch))) == 1
            and len(set(map(_topic_of, batch))) == 1):
        return {(end[0], end[1]): end[2]}
    last: dict[tuple[str, int], int] = {}
    for rec in batch:
        last[rec[0], rec[1]] = rec[2]
    return last


__all__ = ["TaskPositions", "assign", "last_offsets", "plan", "plan_task", "until_targets"]
